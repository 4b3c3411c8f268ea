//! The example service end to end on the REST backend: served on loopback
//! over Azurite's tables, blobs and queues (started by the tests; they fail,
//! never skip, if it cannot start), driven over HTTP, with the outbox worker
//! running in the background as in the binary.

#[path = "../../tablekit-azure/tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tablekit_examples::service::{App, Names, Stores};

async fn get_json(http: &reqwest::Client, url: String) -> Value {
    let response = http.get(url).send().await.expect("send");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("json")
}

/// The service's stores on this process's Azurite.
fn azurite_stores() -> Stores {
    let account = azurite::account();
    Stores {
        tables: Arc::new(tablekit_azure::AzureTables::new(account.clone()).expect("tables")),
        blobs: Arc::new(tablekit_azure::AzureBlobs::new(account.clone()).expect("blobs")),
        queues: Arc::new(tablekit_azure::AzureQueues::new(account).expect("queues")),
    }
}

/// Serves `app` on a free loopback port: its base URL, and the server's task.
async fn serve(app: &App) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let server = tokio::spawn(axum::serve(listener, app.router()).into_future());
    (base, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_runs_on_azurite() {
    let stores = azurite_stores();
    let app = App::open(stores, Names::unique("E2e")).await.expect("open");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = app.worker();
    let worker = tokio::spawn(async move {
        let mut stopped = stopped;
        worker
            .run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
    });
    let (base, server) = serve(&app).await;
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{base}/tenants/acme{path}");

    // Customers, their ETags and their unique emails.
    let created = http
        .post(url("/customers"))
        .json(&json!({ "id": "c1", "name": "Ann", "email": "ann@example.com", "city": "Oslo" }))
        .send()
        .await
        .expect("send");
    assert_eq!(created.status(), StatusCode::CREATED);
    let etag = created.headers()["etag"].to_str().unwrap().to_owned();
    let taken = http
        .post(url("/customers"))
        .json(&json!({ "id": "c2", "name": "Bob", "email": "ann@example.com", "city": "Oslo" }))
        .send()
        .await
        .expect("send");
    assert_eq!(taken.status(), StatusCode::CONFLICT);
    let renamed = json!({ "name": "Ann B", "email": "ann@example.com", "city": "Bergen" });
    let put = http
        .put(url("/customers/c1"))
        .header("if-match", &etag)
        .json(&renamed)
        .send()
        .await
        .expect("send");
    assert_eq!(put.status(), StatusCode::OK);
    let stale = http
        .put(url("/customers/c1"))
        .header("if-match", &etag)
        .json(&renamed)
        .send()
        .await
        .expect("send");
    assert_eq!(stale.status(), StatusCode::PRECONDITION_FAILED);
    let by_email: Value = get_json(&http, url("/customers/by-email/ann@example.com")).await;
    assert_eq!(by_email["name"], "Ann B");
    // The city index follows the move, through the outbox.
    let mut bergen = Value::Null;
    for _ in 0..50 {
        bergen = get_json(&http, url("/customers/by-city/Bergen")).await;
        if bergen["items"].as_array().is_some_and(|i| i.len() == 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(bergen["items"][0]["id"], "c1");

    // An order and its lines, one transaction; read back with one range.
    let order = http
        .post(url("/customers/c1/orders"))
        .json(&json!({ "number": 1, "lines": [
            { "sku": "apple", "quantity": 2, "price_cents": 30 },
            { "sku": "fig", "quantity": 1, "price_cents": 90 },
        ]}))
        .send()
        .await
        .expect("send");
    assert_eq!(order.status(), StatusCode::CREATED);
    let read: Value = get_json(&http, url("/customers/c1/orders/1")).await;
    assert_eq!(read["total_cents"], 150);
    assert_eq!(read["lines"].as_array().unwrap().len(), 2);

    // An attachment larger than a row, through the blob service.
    let content: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let stored = http
        .put(url("/customers/c1/attachments/scan.bin"))
        .header("content-type", "application/octet-stream")
        .body(content.clone())
        .send()
        .await
        .expect("send");
    assert_eq!(stored.status(), StatusCode::OK);
    let back = http
        .get(url("/customers/c1/attachments/scan.bin"))
        .send()
        .await
        .expect("send")
        .bytes()
        .await
        .expect("bytes");
    assert!(back[..] == content[..], "the attachment comes back whole");

    // The activity feed of a user, newest first, a page at a time.
    let user = http
        .put(url("/users/ann"))
        .json(&json!({ "name": "Ann" }))
        .send()
        .await
        .expect("send");
    assert_eq!(user.status(), StatusCode::OK);
    for i in 0..3 {
        let posted = http
            .post(url("/users/ann/activity"))
            .json(&json!({ "text": format!("event {i}") }))
            .send()
            .await
            .expect("send");
        assert_eq!(posted.status(), StatusCode::CREATED);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first: Value = get_json(&http, url("/users/ann/activity?limit=2")).await;
    assert_eq!(first["items"][0]["text"], "event 2");
    let cursor = first["next"].as_str().expect("a cursor");
    let second: Value = get_json(
        &http,
        url(&format!("/users/ann/activity?limit=2&cursor={cursor}")),
    )
    .await;
    assert_eq!(second["items"][0]["text"], "event 0");
    assert!(second["next"].is_null());

    // Every write so far is in today's audit table.
    let audit: Value = get_json(&http, url("/audit")).await;
    let statuses: Vec<u64> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 409, 200, 412, 201, 200, 200, 201, 201, 201]);

    server.abort();
    let _ = stop.send(true);
    worker.await.expect("worker task").expect("worker");
    app.destroy().await.expect("clean up");
}

/// The customers of tenant `tenant` and the city index's view of them, as
/// sorted ids.
async fn customers_and_city_index(
    http: &reqwest::Client,
    base: &str,
    tenant: &str,
) -> (Vec<String>, Vec<String>) {
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|c| c["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let listed = get_json(
        http,
        format!("{base}/tenants/{tenant}/customers?limit=1000"),
    )
    .await;
    assert!(listed["next"].is_null(), "one page holds them all");
    let mut customers = ids(&listed);
    let mut indexed = Vec::new();
    for city in ["Oslo", "Rome"] {
        let page = get_json(
            http,
            format!("{base}/tenants/{tenant}/customers/by-city/{city}?limit=1000"),
        )
        .await;
        indexed.extend(ids(&page));
    }
    customers.sort();
    indexed.sort();
    (customers, indexed)
}

/// 300 POSTs and 300 DELETEs of customers whose clients hang up at random
/// moments (the request's future is dropped wherever it stands): within one
/// round of the library's upkeep, the city index (kept in another
/// partition through the outbox) lists exactly the customers there are,
/// with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_leave_the_index_in_step() {
    let stores = azurite_stores();
    let app = App::open(stores, Names::unique("Hang"))
        .await
        .expect("open");
    let interval = Duration::from_secs(3);
    let config = tablekit::upkeep::UpkeepConfig::default()
        .interval(interval)
        .record_age(Duration::from_secs(1));
    let upkeep = app.upkeep(config).spawn();
    let (base, server) = serve(&app).await;
    let http = reqwest::Client::new();
    let tenant = "hang";
    // A small fixed generator: the hang-up moments, 0–150 ms after sending.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next_delay = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        Duration::from_millis(seed % 150)
    };
    let mut hung_up = 0;
    for round in 0..2 {
        let delays: Vec<Duration> = (0..300).map(|_| next_delay()).collect();
        for chunk in (0..300usize).collect::<Vec<_>>().chunks(25) {
            let requests = chunk.iter().map(|&i| {
                let (http, base, delay) = (http.clone(), base.clone(), delays[i]);
                async move {
                    let url = format!("{base}/tenants/{tenant}/customers");
                    let request = if round == 0 {
                        let city = ["Oslo", "Rome"][i % 2];
                        let body = json!({ "id": format!("c{i}"), "name": "N", "email": format!("c{i}@x"), "city": city });
                        http.post(url).json(&body)
                    } else {
                        http.delete(format!("{url}/c{}", (i * 7) % 300))
                    };
                    request.timeout(delay).send().await.is_err()
                }
            });
            hung_up += futures::future::join_all(requests)
                .await
                .into_iter()
                .filter(|&gone| gone)
                .count();
        }
    }
    assert!(hung_up > 30, "clients hung up: {hung_up}");
    // Within one upkeep interval (after the records' age), nothing missing
    // and nothing extra.
    // Each write's record (its index step and its audit entry) is finished
    // then too.
    let deadline = tokio::time::Instant::now() + interval + Duration::from_secs(2);
    let (customers, indexed) = loop {
        let (customers, indexed) = customers_and_city_index(&http, &base, tenant).await;
        let pending = upkeep.upkeep().pending().await.expect("pending");
        let settled = pending.values().all(|&n| n == 0);
        if (customers == indexed && settled) || tokio::time::Instant::now() > deadline {
            break (customers, indexed);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let missing: Vec<_> = customers.iter().filter(|c| !indexed.contains(c)).collect();
    let extra: Vec<_> = indexed.iter().filter(|c| !customers.contains(c)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{} customers; missing from the index: {missing:?}; extra: {extra:?}",
        customers.len()
    );
    let pending = upkeep.upkeep().pending().await.expect("pending");
    assert!(pending.values().all(|&n| n == 0), "{pending:?}");
    eprintln!(
        "{hung_up} of 600 clients hung up; {} customers; upkeep {:?}",
        customers.len(),
        upkeep.stats()
    );
    server.abort();
    upkeep.shutdown().await;
    app.destroy().await.expect("clean up");
}

/// An attachment written while its customer is deleted is never served as
/// the attachment of the next customer of that id, on Azurite: 30 rounds of
/// the race, 0 leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachment_never_outlives_its_customer() {
    let app = App::open(azurite_stores(), Names::unique("Att"))
        .await
        .expect("open");
    let (base, server) = serve(&app).await;
    let http = reqwest::Client::new();
    let customers = format!("{base}/tenants/acme/customers");
    let uri = format!("{customers}/c/attachments/f.txt");
    let body = |email: &str| json!({ "id": "c", "name": "n", "email": email, "city": "X" });
    for round in 0..30 {
        let made = http
            .post(&customers)
            .json(&body("c@x"))
            .send()
            .await
            .expect("post");
        assert_eq!(made.status(), StatusCode::CREATED, "round {round}");
        let delete = http.delete(format!("{customers}/c")).send();
        let put = http
            .put(&uri)
            .header("content-type", "text/plain")
            .body("secret of the old c")
            .send();
        let (deleted, _) = tokio::join!(delete, put);
        assert_eq!(deleted.expect("delete").status(), StatusCode::NO_CONTENT);
        let again = http
            .post(&customers)
            .json(&body("n@x"))
            .send()
            .await
            .expect("post");
        assert_eq!(again.status(), StatusCode::CREATED, "round {round}");
        let served = http.get(&uri).send().await.expect("get");
        assert_eq!(
            served.status(),
            StatusCode::NOT_FOUND,
            "round {round}: leaked"
        );
        let gone = http
            .delete(format!("{customers}/c"))
            .send()
            .await
            .expect("delete");
        assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    }
    server.abort();
}
