//! The client's cost per request against a local Azurite (started by the
//! bench itself): tablekit beside a raw reqwest client and a raw hyper
//! client sending the same signed requests, in interleaved rounds. For a
//! single upsert, a point read and a 1,000-row query page it prints the
//! client CPU time per request (the bench's one thread's CPU time: Azurite
//! runs in another process), the ratio to each raw client, and the response body bytes.
//!
//! `cargo bench -p tablekit-azure --bench request_path`
//!
//! The raw clients do only what a request needs: format the URL and the
//! date, sign, send, read the body whole (and parse a page's JSON, as a
//! client that uses the rows must). tablekit also validates the entity,
//! writes its JSON, maps errors, and decodes the response into entities;
//! those are part of its cost here.

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tablekit::{Entity, GetOptions, Query, TableBackend, UpdateMode};
use tablekit_azure::AzureTables;
use tablekit_azure::auth::Signer;
use tablekit_azure::config::{Account, Credentials};

const ROUNDS: usize = 7;
const UPSERTS: usize = 600;
const READS: usize = 600;
const PAGES: usize = 20;

/// This thread's CPU time, in nanoseconds, from
/// `/proc/thread-self/schedstat`. The bench runs on one thread (a
/// current-thread runtime), so that is the client's CPU time.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let nanos = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(nanos)
}

fn entity(n: usize) -> Entity {
    Entity::new("bench", format!("row{n:05}"))
        .with("Name", format!("item number {n}"))
        .with("Amount", n as i64 * 3)
        .with("Price", n as f64 / 7.0)
        .with("Active", n.is_multiple_of(2))
        .with("Note", "a few words of text")
}

/// One signed request, as both raw clients send it.
struct Raw {
    method: &'static str,
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

/// A raw signed Table request: the headers tablekit sends, signed with
/// the account key.
fn raw_request(
    account: &Account,
    signer: &Signer,
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
            signer.shared_key_header(&account.name, &text),
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
fn parse_page(body: &[u8]) -> usize {
    let json: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    assert_eq!(json["value"].as_array().map(Vec::len), Some(1000));
    body.len()
}

async fn send_reqwest(client: &reqwest::Client, raw: Raw) -> usize {
    let method = reqwest::Method::from_bytes(raw.method.as_bytes()).expect("a method");
    let mut request = client.request(method, &raw.url);
    for (name, value) in raw.headers {
        request = request.header(name, value);
    }
    let response = request.body(raw.body).send().await.expect("sent");
    assert!(response.status().is_success(), "{}", response.status());
    response.bytes().await.expect("a body").len()
}

async fn send_hyper(client: &HyperClient<HttpConnector, Full<Bytes>>, raw: Raw) -> usize {
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
        .len()
}

async fn send_page_reqwest(client: &reqwest::Client, raw: Raw) -> usize {
    let method = reqwest::Method::from_bytes(raw.method.as_bytes()).expect("a method");
    let mut request = client.request(method, &raw.url);
    for (name, value) in raw.headers {
        request = request.header(name, value);
    }
    let response = request.send().await.expect("sent");
    parse_page(&response.bytes().await.expect("a body"))
}

async fn send_page_hyper(client: &HyperClient<HttpConnector, Full<Bytes>>, raw: Raw) -> usize {
    let mut request = hyper::Request::builder().method(raw.method).uri(&raw.url);
    for (name, value) in raw.headers {
        request = request.header(name, value);
    }
    let response = client
        .request(request.body(Full::new(raw.body)).expect("a request"))
        .await
        .expect("sent");
    parse_page(
        &response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes(),
    )
}

/// CPU time per request and response bytes per request of `n` runs of `op`.
async fn measure<F, Fut>(n: usize, mut op: F) -> (Duration, usize)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let cpu = cpu_time();
    let mut bytes = 0;
    for i in 0..n {
        bytes += op(i).await;
    }
    ((cpu_time() - cpu) / n as u32, bytes / n)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let account = azurite::account();
    let Credentials::SharedKey { key } = &account.credentials else {
        unreachable!("the emulator's account has a key")
    };
    let signer = Signer::new(key);
    let tablekit = AzureTables::new(account.clone()).expect("a client");
    let reqwest = reqwest::Client::new();
    let hyper: HyperClient<HttpConnector, Full<Bytes>> =
        HyperClient::builder(TokioExecutor::new()).build_http();
    let table = format!("Req{}", std::process::id());
    tablekit.create_table(&table).await.expect("create");
    for chunk in (0..1000).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<_> = chunk
            .iter()
            .map(|&n| tablekit::BatchOperation::Insert(entity(n)))
            .collect();
        tablekit
            .submit_transaction(&table, &ops)
            .await
            .expect("load");
    }
    let row_path = |n: usize| format!("/{table}(PartitionKey='bench',RowKey='row{n:05}')");
    let page_query = "?$filter=PartitionKey%20eq%20'bench'&$top=1000";

    // [tablekit, reqwest, hyper] × [upsert, read, page]: CPU and bytes.
    let mut cpu = [[Duration::MAX; 3]; 3];
    let mut bytes = [[0usize; 3]; 3];
    let started = Instant::now();
    for _ in 0..ROUNDS {
        for client in 0..3 {
            let results = match client {
                0 => [
                    measure(UPSERTS, |i| {
                        let e = entity(i % 1000);
                        let (t, table) = (&tablekit, &table);
                        async move {
                            t.upsert_entity(table, &e, UpdateMode::Replace)
                                .await
                                .expect("upsert");
                            0
                        }
                    })
                    .await,
                    measure(READS, |i| {
                        let (t, table) = (&tablekit, &table);
                        async move {
                            let e = t
                                .get_entity(
                                    table,
                                    "bench",
                                    &format!("row{:05}", i % 1000),
                                    &GetOptions::default(),
                                )
                                .await
                                .expect("get");
                            e.properties.len()
                        }
                    })
                    .await,
                    measure(PAGES, |_| {
                        let (t, table) = (&tablekit, &table);
                        async move {
                            let q = Query::new()
                                .filter(tablekit::filter::prop("PartitionKey").eq("bench"))
                                .top(1000);
                            let page = t.query_entities(table, &q).await.expect("page");
                            assert_eq!(page.entities.len(), 1000);
                            page.entities.len()
                        }
                    })
                    .await,
                ],
                _ => {
                    let send = |raw: Raw| {
                        let (reqwest, hyper) = (&reqwest, &hyper);
                        async move {
                            if client == 1 {
                                send_reqwest(reqwest, raw).await
                            } else {
                                send_hyper(hyper, raw).await
                            }
                        }
                    };
                    [
                        measure(UPSERTS, |i| {
                            let body = tablekit::json::to_string(&entity(i % 1000));
                            send(raw_request(
                                &account,
                                &signer,
                                "PUT",
                                &row_path(i % 1000),
                                "",
                                Some(body),
                            ))
                        })
                        .await,
                        measure(READS, |i| {
                            send(raw_request(
                                &account,
                                &signer,
                                "GET",
                                &row_path(i % 1000),
                                "",
                                None,
                            ))
                        })
                        .await,
                        measure(PAGES, |_| {
                            let (reqwest, hyper, account, signer, table) =
                                (&reqwest, &hyper, &account, &signer, &table);
                            async move {
                                let path = format!("/{table}()");
                                let raw =
                                    raw_request(account, signer, "GET", &path, page_query, None);
                                if client == 1 {
                                    send_page_reqwest(reqwest, raw).await
                                } else {
                                    send_page_hyper(hyper, raw).await
                                }
                            }
                        })
                        .await,
                    ]
                }
            };
            for (op, (time, size)) in results.into_iter().enumerate() {
                cpu[client][op] = cpu[client][op].min(time);
                bytes[client][op] = size;
            }
        }
    }
    println!(
        "client CPU per request against Azurite {}, best of {ROUNDS} interleaved rounds ({:.0} s):",
        azurite::VERSION,
        started.elapsed().as_secs_f64()
    );
    println!(
        "| operation | tablekit | raw reqwest | raw hyper | tablekit / reqwest | tablekit / hyper | response body bytes |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (op, name) in ["upsert", "point read", "1,000-row page"]
        .iter()
        .enumerate()
    {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "| {name} | {:.0} µs | {:.0} µs | {:.0} µs | {:.2}× | {:.2}× | {} |",
            us(cpu[0][op]),
            us(cpu[1][op]),
            us(cpu[2][op]),
            us(cpu[0][op]) / us(cpu[1][op]),
            us(cpu[0][op]) / us(cpu[2][op]),
            bytes[1][op],
        );
    }
    tablekit.delete_table(&table).await.expect("delete");
}
