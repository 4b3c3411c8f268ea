//! The client's cost per request against a local Azurite (started by the
//! bench itself): tablekit (its backend, and a typed table over it) beside
//! raw clients sending the same signed requests (reqwest, hyper's pooled
//! client, and hyper on one kept connection with no pool at all), in
//! interleaved rounds. For a single upsert, a point read and a 1,000-row
//! query page it prints the client CPU time per request (the bench's one
//! thread's CPU time: Azurite runs in another process) as the median of
//! the rounds, and the ratios as the median of the rounds' ratios with
//! their spread. The spread is wide on a shared machine (on this
//! project's test machine a round's ratio has ranged from half the median
//! to twice it), which is why `request_instructions.rs` counts
//! instructions too.
//!
//! A second table does the same over HTTPS with a bearer token (Azurite
//! with `--oauth basic`): tablekit signing in with a token credential
//! beside hyper's pooled client over the same TLS sending the same token.
//!
//! `cargo bench -p tablekit-azure --bench request_path`
//!
//! The raw clients do only what a request needs: format the URL and the
//! date, sign, send, read the body whole, and parse the JSON of a point
//! read's row and of a page's rows (as a client that uses them must; until
//! November 2026 a raw point read left its row unparsed, and measured
//! 2–3 µs less). tablekit also validates the entity, writes its
//! JSON, maps errors, and decodes the response into entities (and typed
//! values); those are part of its cost here.

#[path = "../tests/azurite/mod.rs"]
mod azurite;
#[path = "support/raw.rs"]
mod raw;
#[path = "../tests/tls/mod.rs"]
mod tls;

use raw::{Auth, OneConnection, Raw, Use, raw_request};
use tablekit::TableBackendExt;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tablekit::{Entity, GetOptions, Query, Table, TableBackend, TableEntity, UpdateMode};
use tablekit_azure::AzureTables;
use tablekit_azure::auth::Signer;
use tablekit_azure::config::Credentials;

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

/// The typed twin of [`entity`]: the same properties, the same row.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Req", rename_all = "PascalCase")]
struct Item {
    #[tablekit(partition_key)]
    partition: String,
    #[tablekit(row_key)]
    row: String,
    name: String,
    amount: i64,
    price: f64,
    active: bool,
    note: String,
}

fn item(n: usize) -> Item {
    Item {
        partition: "typed".into(),
        row: format!("row{n:05}"),
        name: format!("item number {n}"),
        amount: n as i64 * 3,
        price: n as f64 / 7.0,
        active: n.is_multiple_of(2),
        note: "a few words of text".into(),
    }
}

fn entity(n: usize) -> Entity {
    Entity::new("bench", format!("row{n:05}"))
        .with("Name", format!("item number {n}"))
        .with("Amount", n as i64 * 3)
        .with("Price", n as f64 / 7.0)
        .with("Active", n.is_multiple_of(2))
        .with("Note", "a few words of text")
}

async fn send_reqwest(client: &reqwest::Client, raw: Raw, used: Use) -> usize {
    let method = reqwest::Method::from_bytes(raw.method.as_bytes()).expect("a method");
    let mut request = client.request(method, &raw.url);
    for (name, value) in raw.headers {
        request = request.header(name, value);
    }
    let response = request.body(raw.body).send().await.expect("sent");
    assert!(response.status().is_success(), "{}", response.status());
    used.of(&response.bytes().await.expect("a body"))
}

async fn send_hyper<C>(client: &HyperClient<C, Full<Bytes>>, raw: Raw, used: Use) -> usize
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    used.of(&raw::send_pooled(client, raw).await)
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

/// The clients measured, in the order of the table's columns.
const NAMES: [&str; 5] = [
    "tablekit",
    "tablekit typed",
    "raw reqwest",
    "raw hyper (pooled)",
    "raw hyper (one connection)",
];

async fn load(tablekit: &AzureTables, table: &str) {
    tablekit.create_table(table).await.expect("create");
    for chunk in (0..1000).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<_> = chunk
            .iter()
            .map(|&n| tablekit::BatchOperation::Insert(entity(n)))
            .collect();
        tablekit
            .submit_transaction(table, &ops)
            .await
            .expect("load");
    }
}

/// The CPU times per request of one round: a row per client, a column
/// per operation (`None` where the client does not do it).
type Round = Vec<[Option<Duration>; 3]>;

/// The median of `values` (not empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Prints each client's median CPU time per request over `rounds`, and the
/// median of the first client's per-round ratios to each other's, with
/// their spread (the lowest and highest round); then the same ratio for
/// each pair of clients in `pairs` (ours, theirs).
fn print_table(title: &str, names: &[&str], rounds: &[Round], pairs: &[(usize, usize)]) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("{title}");
    print!("| operation |");
    for name in names {
        print!(" {name} |");
    }
    let pairs: Vec<(usize, usize)> = (1..names.len())
        .map(|theirs| (0, theirs))
        .chain(pairs.iter().copied())
        .collect();
    for (ours, theirs) in &pairs {
        print!(" {} / {} |", names[*ours], names[*theirs]);
    }
    println!();
    println!("|{}", " --- |".repeat(1 + names.len() + pairs.len()));
    for (op, operation) in ["upsert", "point read", "1,000-row page"]
        .iter()
        .enumerate()
    {
        print!("| {operation} |");
        let times = |client: usize| -> Option<Vec<f64>> {
            rounds
                .iter()
                .map(|round| round[client][op].map(us))
                .collect()
        };
        for client in 0..names.len() {
            match times(client) {
                Some(times) => print!(" {:.1} µs |", median(times)),
                None => print!(" – |"),
            }
        }
        for (ours, theirs) in &pairs {
            match (times(*ours), times(*theirs)) {
                (Some(ours), Some(theirs)) => {
                    let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(a, b)| a / b).collect();
                    let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
                    let high = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    print!(" {:.2}× ({low:.2}–{high:.2}) |", median(ratios));
                }
                _ => print!(" – |"),
            }
        }
        println!();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    shared_key().await;
    bearer().await;
}

/// Over HTTP with Shared Key: tablekit, typed, and the three raw clients.
async fn shared_key() {
    let account = azurite::account();
    let Credentials::SharedKey { key } = &account.credentials else {
        unreachable!("the emulator's account has a key")
    };
    let signer = Signer::new(key);
    let auth = Auth::Key(&signer);
    let tablekit = AzureTables::new(account.clone()).expect("a client");
    let reqwest = reqwest::Client::new();
    let hyper: HyperClient<HttpConnector, Full<Bytes>> =
        HyperClient::builder(TokioExecutor::new()).build_http();
    let one = OneConnection::open(azurite::azurite().table_port).await;
    let table = format!("Req{}", std::process::id());
    load(&tablekit, &table).await;
    let typed: Table<Item> = Table::new(tablekit.clone()).named(&table);
    for n in 0..1000 {
        typed.upsert(&item(n)).await.expect("typed rows");
    }
    let row_path = |n: usize| format!("/{table}(PartitionKey='bench',RowKey='row{n:05}')");
    let page_query = "?$filter=PartitionKey%20eq%20'bench'&$top=1000";

    let mut rounds: Vec<Round> = Vec::new();
    let started = Instant::now();
    for _ in 0..ROUNDS {
        let mut cpu: Round = vec![[None; 3]; NAMES.len()];
        for (client, row) in cpu.iter_mut().enumerate() {
            let upsert = match client {
                0 => {
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
                    .await
                }
                1 => {
                    measure(UPSERTS, |i| {
                        let typed = &typed;
                        let value = item(i % 1000);
                        async move {
                            typed.upsert(&value).await.expect("typed upsert");
                            0
                        }
                    })
                    .await
                }
                _ => {
                    measure(UPSERTS, |i| {
                        let raw = raw_request(
                            &account,
                            &auth,
                            "PUT",
                            &row_path(i % 1000),
                            "",
                            Some(tablekit::json::to_string(&entity(i % 1000))),
                        );
                        let (reqwest, hyper, one) = (&reqwest, &hyper, &one);
                        async move {
                            match client {
                                2 => send_reqwest(reqwest, raw, Use::Bytes).await,
                                3 => send_hyper(hyper, raw, Use::Bytes).await,
                                _ => one.send(raw, Use::Bytes).await,
                            }
                        }
                    })
                    .await
                }
            };
            let read = match client {
                0 => {
                    measure(READS, |i| {
                        let (t, table) = (&tablekit, &table);
                        async move {
                            let row = format!("row{:05}", i % 1000);
                            let e = t
                                .get_entity(table, "bench", &row, &GetOptions::default())
                                .await
                                .expect("get");
                            e.properties.len()
                        }
                    })
                    .await
                }
                1 => {
                    measure(READS, |i| {
                        let typed = &typed;
                        async move {
                            let row = format!("row{:05}", i % 1000);
                            let got = typed.get("typed", row).await.expect("typed get");
                            usize::from(got.is_some())
                        }
                    })
                    .await
                }
                _ => {
                    measure(READS, |i| {
                        let raw =
                            raw_request(&account, &auth, "GET", &row_path(i % 1000), "", None);
                        let (reqwest, hyper, one) = (&reqwest, &hyper, &one);
                        async move {
                            match client {
                                2 => send_reqwest(reqwest, raw, Use::Row).await,
                                3 => send_hyper(hyper, raw, Use::Row).await,
                                _ => one.send(raw, Use::Row).await,
                            }
                        }
                    })
                    .await
                }
            };
            let page = match client {
                0 => {
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
                    .await
                }
                // The typed page reads other rows; only the backend's is compared.
                1 => (Duration::MAX, 0),
                _ => {
                    measure(PAGES, |_| {
                        let path = format!("/{table}()");
                        let raw = raw_request(&account, &auth, "GET", &path, page_query, None);
                        let (reqwest, hyper, one) = (&reqwest, &hyper, &one);
                        async move {
                            match client {
                                2 => send_reqwest(reqwest, raw, Use::Page).await,
                                3 => send_hyper(hyper, raw, Use::Page).await,
                                _ => one.send(raw, Use::Page).await,
                            }
                        }
                    })
                    .await
                }
            };
            for (op, (time, _)) in [upsert, read, page].into_iter().enumerate() {
                row[op] = (time != Duration::MAX).then_some(time);
            }
        }
        rounds.push(cpu);
    }
    print_table(
        &format!(
            "client CPU per request against Azurite {} over HTTP with Shared Key, medians of {ROUNDS} interleaved rounds, the ratios' spread in brackets ({:.0} s):",
            azurite::VERSION,
            started.elapsed().as_secs_f64()
        ),
        &NAMES,
        &rounds,
        // The typed table against the least a client can do.
        &[(1, 4)],
    );
    tablekit.delete_table(&table).await.expect("delete");
}

/// Over HTTPS with a bearer token: tablekit with a token credential
/// beside hyper's pooled client over the same TLS, sending the same token.
async fn bearer() {
    let raw::Bearer {
        tablekit,
        hyper,
        account,
        token,
    } = raw::bearer().await;
    let table = format!("Tok{}", std::process::id());
    load(&tablekit, &table).await;
    let auth = Auth::Bearer(&token);
    let row_path = |n: usize| format!("/{table}(PartitionKey='bench',RowKey='row{n:05}')");
    let page_query = "?$filter=PartitionKey%20eq%20'bench'&$top=1000";
    let mut rounds: Vec<Round> = Vec::new();
    let started = Instant::now();
    for _ in 0..ROUNDS {
        let mut cpu: Round = vec![[None; 3]; 2];
        for (client, row) in cpu.iter_mut().enumerate() {
            // Only the raw client builds and signs a raw request: tablekit
            // builds its own, and is measured with nothing else.
            let upsert = measure(UPSERTS, |i| {
                let e = entity(i % 1000);
                let raw = (client != 0).then(|| {
                    let body = tablekit::json::to_string(&e);
                    raw_request(&account, &auth, "PUT", &row_path(i % 1000), "", Some(body))
                });
                let (t, table, hyper) = (&tablekit, &table, &hyper);
                async move {
                    match raw {
                        None => {
                            t.upsert_entity(table, &e, UpdateMode::Replace)
                                .await
                                .expect("upsert");
                            0
                        }
                        Some(raw) => send_hyper(hyper, raw, Use::Bytes).await,
                    }
                }
            })
            .await;
            let read = measure(READS, |i| {
                let raw = (client != 0)
                    .then(|| raw_request(&account, &auth, "GET", &row_path(i % 1000), "", None));
                let (t, table, hyper) = (&tablekit, &table, &hyper);
                async move {
                    match raw {
                        None => {
                            let row = format!("row{:05}", i % 1000);
                            t.get_entity(table, "bench", &row, &GetOptions::default())
                                .await
                                .expect("get")
                                .properties
                                .len()
                        }
                        Some(raw) => send_hyper(hyper, raw, Use::Row).await,
                    }
                }
            })
            .await;
            let page = measure(PAGES, |_| {
                let path = format!("/{table}()");
                let raw = (client != 0)
                    .then(|| raw_request(&account, &auth, "GET", &path, page_query, None));
                let (t, table, hyper) = (&tablekit, &table, &hyper);
                async move {
                    match raw {
                        None => {
                            let q = Query::new()
                                .filter(tablekit::filter::prop("PartitionKey").eq("bench"))
                                .top(1000);
                            t.query_entities(table, &q)
                                .await
                                .expect("page")
                                .entities
                                .len()
                        }
                        Some(raw) => send_hyper(hyper, raw, Use::Page).await,
                    }
                }
            })
            .await;
            for (op, (time, _)) in [upsert, read, page].into_iter().enumerate() {
                row[op] = (time != Duration::MAX).then_some(time);
            }
        }
        rounds.push(cpu);
    }
    print_table(
        &format!(
            "client CPU per request over HTTPS with a bearer token (Azurite --oauth basic), medians of {ROUNDS} interleaved rounds, the ratios' spread in brackets ({:.0} s):",
            started.elapsed().as_secs_f64()
        ),
        &["tablekit (token)", "raw hyper (pooled, TLS, same token)"],
        &rounds,
        &[],
    );
}
