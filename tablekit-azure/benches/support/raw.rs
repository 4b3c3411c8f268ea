//! The raw clients the request-path benches measure tablekit against: a
//! signed Table request as tablekit sends it, and hyper on one kept
//! connection (no pool, no checkout: the least a client can do per
//! request). Shared by `request_path.rs` and `request_instructions.rs`.
#![allow(dead_code)]

use std::cell::RefCell;
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tablekit_azure::auth::Signer;
use tablekit_azure::config::Account;

/// One signed request, as both raw clients send it.
pub(crate) struct Raw {
    pub(crate) method: &'static str,
    pub(crate) url: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Bytes,
}

/// How a raw request is authorized.
pub(crate) enum Auth<'a> {
    Key(&'a Signer),
    Bearer(&'a str),
}

/// A raw signed Table request: the headers tablekit sends, signed with
/// the account key or carrying a token.
pub(crate) fn raw_request(
    account: &Account,
    auth: &Auth<'_>,
    method: &'static str,
    path: &str,
    query: &str,
    body: Option<String>,
) -> Raw {
    let date = httpdate::fmt_http_date(SystemTime::now());
    let content_type = if body.is_some() {
        "application/json"
    } else {
        ""
    };
    let (prefix, _) = account
        .table_endpoint
        .split_once("//")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map_or(("", ""), |(_, p)| (p, ""));
    let resource = format!("/{}/{prefix}{path}", account.name);
    let text = format!("{method}\n\n{content_type}\n{date}\n{resource}");
    let mut headers = vec![
        ("x-ms-date", date),
        ("x-ms-version", "2019-02-02".to_owned()),
        ("DataServiceVersion", "3.0;NetFx".to_owned()),
        ("MaxDataServiceVersion", "3.0;NetFx".to_owned()),
        (
            "Accept",
            "application/json;odata=minimalmetadata".to_owned(),
        ),
        (
            "Authorization",
            match auth {
                Auth::Key(signer) => signer.shared_key_header(&account.name, &text),
                Auth::Bearer(token) => format!("Bearer {token}"),
            },
        ),
    ];
    if body.is_some() {
        headers.push(("Content-Type", content_type.to_owned()));
        headers.push(("Prefer", "return-no-content".to_owned()));
    }
    Raw {
        method,
        url: format!("{}{path}{query}", account.table_endpoint),
        headers,
        body: body.map(Bytes::from).unwrap_or_default(),
    }
}

/// What a raw client does with a query page's body: parses its JSON (a
/// client that uses the rows must), and says how many bytes it was.
pub(crate) fn parse_page(body: &[u8]) -> usize {
    let json: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    assert_eq!(json["value"].as_array().map(Vec::len), Some(1000));
    body.len()
}

/// hyper on one kept connection: no pool, no checkout; the least a
/// client can do per request.
pub(crate) struct OneConnection {
    sender: RefCell<Option<SendRequest<Full<Bytes>>>>,
    host: String,
}

impl OneConnection {
    pub(crate) async fn open(port: u16) -> OneConnection {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("a connection");
        stream.set_nodelay(true).expect("nodelay");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("a handshake");
        tokio::spawn(connection);
        OneConnection {
            sender: RefCell::new(Some(sender)),
            host: format!("127.0.0.1:{port}"),
        }
    }

    pub(crate) async fn send(&self, raw: Raw, page: bool) -> usize {
        let body = self.send_for_body(raw).await;
        if page { parse_page(&body) } else { body.len() }
    }

    /// Sends `raw` and reads the answer's body whole.
    pub(crate) async fn send_for_body(&self, raw: Raw) -> Bytes {
        let mut sender = self.sender.take().expect("one request at a time");
        let target = raw
            .url
            .split_once("//")
            .and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_owned()))
            .expect("a path");
        let mut request = hyper::Request::builder()
            .method(raw.method)
            .uri(target)
            .header("Host", &self.host);
        for (name, value) in raw.headers {
            request = request.header(name, value);
        }
        sender.ready().await.expect("ready");
        let response = sender
            .send_request(request.body(Full::new(raw.body)).expect("a request"))
            .await
            .expect("sent");
        self.sender.replace(Some(sender));
        assert!(response.status().is_success(), "{}", response.status());
        response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes()
    }
}

/// Sends `raw` through hyper-util's pooled client and reads the answer's
/// body whole.
pub(crate) async fn send_pooled<C>(
    client: &hyper_util::client::legacy::Client<C, Full<Bytes>>,
    raw: Raw,
) -> Bytes
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let mut request = hyper::Request::builder().method(raw.method).uri(&raw.url);
    for (name, value) in raw.headers {
        request = request.header(name, value);
    }
    let response = client
        .request(request.body(Full::new(raw.body)).expect("a request"))
        .await
        .expect("sent");
    assert!(response.status().is_success(), "{}", response.status());
    response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes()
}
