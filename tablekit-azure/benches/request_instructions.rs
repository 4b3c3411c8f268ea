//! The client's instructions per request, for comparisons finer than the
//! CPU-time bench (`request_path.rs`) can make on a noisy machine: run it
//! under callgrind, which counts the instructions of `measured` alone.
//!
//! ```text
//! cargo bench -p tablekit-azure --bench request_instructions --no-run
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='request_instructions::measured' \
//!     target/release/deps/request_instructions-* typed_upsert 2000
//! ```
//!
//! The modes: `upsert` and `get` (the backend), `typed_upsert` and
//! `typed_get` (a typed table over it), `raw_upsert` and `raw_get` (the
//! same signed requests from hyper on one kept connection, the least a
//! client can do), `raw_get_parsed` (that, with the row's JSON parsed, as
//! a client that uses the row must), and `pooled_upsert` and
//! `pooled_get_parsed` (hyper-util's pooled client); over HTTPS with a
//! bearer token, `bearer_upsert` and `bearer_get` (tablekit) beside
//! `bearer_pooled_upsert` and `bearer_pooled_get_parsed`. Instructions per request are the collected total over
//! the count. Without valgrind it simply runs.

use std::hint::black_box;

use tablekit::TableBackendExt;
use tablekit::{Entity, Table, TableBackend, TableEntity, UpdateMode};
use tablekit_azure::AzureTables;

#[path = "../tests/azurite/mod.rs"]
mod azurite;
#[path = "support/raw.rs"]
mod raw;
#[path = "../tests/tls/mod.rs"]
mod tls;

use raw::{Auth, OneConnection, parse_row, raw_request};
use tablekit_azure::auth::Signer;
use tablekit_azure::config::{Account, Credentials};

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
        row: format!("row{:05}", n % 100),
        name: format!("item number {n}"),
        amount: n as i64 * 3,
        price: n as f64 / 7.0,
        active: n.is_multiple_of(2),
        note: "a few words of text".into(),
    }
}

fn entity(n: usize) -> Entity {
    Entity::new("bench", format!("row{:05}", n % 100))
        .with("Name", format!("item number {n}"))
        .with("Amount", n as i64 * 3)
        .with("Price", n as f64 / 7.0)
        .with("Active", n.is_multiple_of(2))
        .with("Note", "a few words of text")
}

/// hyper-util's pooled client, as `request_path.rs` measures it.
type Pooled = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<bytes::Bytes>,
>;

/// What the modes send with.
struct Clients {
    tablekit: AzureTables,
    typed: Table<Item>,
    one: OneConnection,
    pooled: Pooled,
    /// Over HTTPS with a token, for the `bearer_` modes.
    bearer: Option<(raw::Bearer, String)>,
    account: Account,
    signer: Signer,
    table: String,
}

/// The requests whose instructions are counted.
#[inline(never)]
fn measured(runtime: &tokio::runtime::Runtime, mode: &str, count: usize, clients: &Clients) {
    let (client, typed, table) = (&clients.tablekit, &clients.typed, clients.table.as_str());
    let auth = Auth::Key(&clients.signer);
    let row_path = |n: usize| format!("/{table}(PartitionKey='bench',RowKey='row{:05}')", n % 100);
    runtime.block_on(async {
        for n in 0..count {
            match mode {
                "upsert" => {
                    let e = entity(n);
                    black_box(client.upsert_entity(table, &e, UpdateMode::Replace).await)
                        .expect("upsert");
                }
                "get" => {
                    let row = format!("row{:05}", n % 100);
                    let options = tablekit::GetOptions::default();
                    black_box(client.get_entity(table, "bench", &row, &options).await)
                        .expect("get");
                }
                "typed_upsert" => {
                    black_box(typed.upsert(&item(n)).await).expect("typed upsert");
                }
                "typed_get" => {
                    let row = format!("row{:05}", n % 100);
                    black_box(typed.get("typed", row).await).expect("typed get");
                }
                "raw_upsert" => {
                    let body = tablekit::json::to_string(&entity(n));
                    let raw =
                        raw_request(&clients.account, &auth, "PUT", &row_path(n), "", Some(body));
                    black_box(clients.one.send(raw, raw::Use::Bytes).await);
                }
                "raw_get" => {
                    let raw = raw_request(&clients.account, &auth, "GET", &row_path(n), "", None);
                    black_box(clients.one.send(raw, raw::Use::Bytes).await);
                }
                // A client that uses the row parses its JSON, as the pages
                // of `request_path.rs` are parsed.
                "raw_get_parsed" => {
                    let raw = raw_request(&clients.account, &auth, "GET", &row_path(n), "", None);
                    let body = clients.one.send_for_body(raw).await;
                    black_box(parse_row(&body));
                }
                "pooled_upsert" => {
                    let body = tablekit::json::to_string(&entity(n));
                    let raw = raw_request(&clients.account, &auth, "PUT", &row_path(n), "", Some(body));
                    black_box(raw::send_pooled(&clients.pooled, raw).await);
                }
                "bearer_upsert" | "bearer_get" | "bearer_pooled_upsert" | "bearer_pooled_get_parsed" => {
                    bearer(clients, mode, n).await;
                }
                "pooled_get_parsed" => {
                    let raw = raw_request(&clients.account, &auth, "GET", &row_path(n), "", None);
                    let body = raw::send_pooled(&clients.pooled, raw).await;
                    black_box(parse_row(&body));
                }
                other => panic!(
                    "no mode {other}: upsert, get, typed_upsert, typed_get, raw_upsert, raw_get, raw_get_parsed, pooled_upsert, pooled_get_parsed"
                ),
            }
        }
    });
}

/// One request of a `bearer_` mode: tablekit with a token credential, or
/// hyper-util's pooled client over the same TLS with the same token.
async fn bearer(clients: &Clients, mode: &str, n: usize) {
    let (bearer, table) = clients.bearer.as_ref().expect("the bearer side");
    let auth = Auth::Bearer(&bearer.token);
    let path = format!("/{table}(PartitionKey='bench',RowKey='row{:05}')", n % 100);
    let row = format!("row{:05}", n % 100);
    match mode {
        "bearer_upsert" => {
            black_box(
                bearer
                    .tablekit
                    .upsert_entity(table, &entity(n), UpdateMode::Replace)
                    .await,
            )
            .expect("upsert");
        }
        "bearer_get" => {
            let options = tablekit::GetOptions::default();
            black_box(
                bearer
                    .tablekit
                    .get_entity(table, "bench", &row, &options)
                    .await,
            )
            .expect("get");
        }
        "bearer_pooled_upsert" => {
            let body = tablekit::json::to_string(&entity(n));
            let raw = raw_request(&bearer.account, &auth, "PUT", &path, "", Some(body));
            black_box(raw::send_pooled(&bearer.hyper, raw).await);
        }
        _ => {
            let raw = raw_request(&bearer.account, &auth, "GET", &path, "", None);
            let body = raw::send_pooled(&bearer.hyper, raw).await;
            black_box(parse_row(&body));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`: run every mode briefly.
    let (modes, count): (Vec<&str>, usize) = match args.as_slice() {
        [mode, count] if !mode.starts_with('-') => (vec![mode], count.parse().expect("a count")),
        _ => (
            vec![
                "upsert",
                "get",
                "typed_upsert",
                "typed_get",
                "raw_upsert",
                "raw_get",
                "raw_get_parsed",
                "pooled_upsert",
                "pooled_get_parsed",
            ],
            100,
        ),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let account = azurite::account();
    let Credentials::SharedKey { key } = &account.credentials else {
        unreachable!("the emulator's account has a key")
    };
    let signer = Signer::new(key);
    let client = AzureTables::new(account.clone()).expect("a client");
    let table = format!("Ins{}", std::process::id());
    let typed: Table<Item> = Table::new(client.clone()).named(&table);
    let one = runtime.block_on(OneConnection::open(azurite::azurite().table_port));
    runtime.block_on(async {
        client.create_table(&table).await.expect("create the table");
        // Every row read is there, and the connection is warm.
        for n in 0..100 {
            client
                .upsert_entity(&table, &entity(n), UpdateMode::Replace)
                .await
                .expect("rows");
            typed.upsert(&item(n)).await.expect("typed rows");
        }
    });
    let mut clients = Clients {
        tablekit: client,
        typed,
        one,
        bearer: None,
        pooled: hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http(),
        account,
        signer,
        table,
    };
    if modes.iter().any(|m| m.starts_with("bearer_")) {
        let bearer = runtime.block_on(raw::bearer());
        let table = format!("Tok{}", std::process::id());
        runtime.block_on(async {
            bearer.tablekit.create_table(&table).await.expect("create");
            for n in 0..100 {
                bearer
                    .tablekit
                    .upsert_entity(&table, &entity(n), UpdateMode::Replace)
                    .await
                    .expect("rows");
            }
        });
        clients.bearer = Some((bearer, table));
    }
    for mode in modes {
        let started = std::time::Instant::now();
        measured(&runtime, mode, count, &clients);
        println!("{mode}: {count} requests in {:?}", started.elapsed());
    }
    runtime
        .block_on(clients.tablekit.delete_table(&clients.table))
        .expect("delete the table");
}
