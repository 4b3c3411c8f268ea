//! A local mock server for the HTTP layer's tests: it records each request
//! and answers from a script.
//!
//! The server is a few lines over tokio's TCP listener, written here rather
//! than taken from a mock-server crate: it must record raw request targets,
//! hang on demand and close after each answer, and it keeps the build lean.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tablekit_azure::AzureTables;
use tablekit_azure::config::{Account, ClientOptions, DEV_KEY};
use tablekit_azure::policy::RetryPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server does with the next request.
pub(crate) enum Answer {
    /// Sends this raw response and closes the connection.
    Respond(String),
    /// Reads the request and never answers.
    Hang,
}

pub(crate) fn respond(status: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    Answer::Respond(text)
}

pub(crate) fn json_error(status: &str, code: &str) -> Answer {
    respond(
        status,
        &[
            ("Content-Type", "application/json;odata=minimalmetadata"),
            ("x-ms-error-code", code),
        ],
        &format!(
            r#"{{"odata.error":{{"code":"{code}","message":{{"lang":"en-US","value":"{code}"}}}}}}"#
        ),
    )
}

pub(crate) struct Mock {
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    pub(crate) client: AzureTables,
    pub(crate) account: Account,
}

impl Mock {
    pub(crate) async fn start(answers: Vec<Answer>) -> Mock {
        Mock::start_with(answers, fast_retries()).await
    }

    pub(crate) async fn start_with(answers: Vec<Answer>, options: ClientOptions) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(answers)));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let record = Arc::clone(&record);
                let script = Arc::clone(&script);
                tokio::spawn(serve(stream, record, script));
            }
        });
        let mut account = Account::with_key("mockacct", DEV_KEY).unwrap();
        account.table_endpoint = format!("http://127.0.0.1:{port}");
        account.blob_endpoint = format!("http://127.0.0.1:{port}");
        account.queue_endpoint = Some(format!("http://127.0.0.1:{port}"));
        let client = AzureTables::with_options(account.clone(), options).unwrap();
        Mock {
            seen,
            client,
            account,
        }
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

pub(crate) fn fast_retries() -> ClientOptions {
    ClientOptions::tables().retry(RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
    })
}

/// Reads one request from `stream`, records it, answers from the script.
pub(crate) async fn serve(
    mut stream: TcpStream,
    record: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    record.lock().unwrap().push(Seen {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let answer = script.lock().unwrap().pop_front();
    match answer {
        Some(Answer::Respond(text)) => {
            let _ = stream.write_all(text.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        Some(Answer::Hang) => tokio::time::sleep(Duration::from_secs(60)).await,
        None => {
            let text =
                "HTTP/1.1 599 Script Exhausted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(text.as_bytes()).await;
        }
    }
}
