//! The example service, in process: every endpoint and every status it
//! answers with, through `tower::ServiceExt::oneshot` on the in-memory
//! stores (the store wrapped in the fault-injection layer, to throttle it).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tablekit::layer::{Fault, FaultHandle, FaultInjection, Injection, Operation};
use tablekit_examples::service::{App, Names, Stores};
use tower::ServiceExt as _;

async fn service() -> (Router, FaultHandle) {
    let tables = FaultInjection::new(tablekit_mem::MemBackend::new());
    let faults = tables.handle();
    let stores = Stores {
        tables: Arc::new(tables),
        ..Stores::in_memory()
    };
    let app = App::open(stores, Names::default()).await.expect("open");
    (app.router(), faults)
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    bytes: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.bytes)))
    }

    fn etag(&self) -> String {
        self.headers
            .get(header::ETAG)
            .expect("an ETag")
            .to_str()
            .expect("text")
            .to_owned()
    }

    /// The error code of an error answer.
    fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .expect("an error code")
            .to_owned()
    }
}

async fn call(
    router: &Router,
    method: Method,
    uri: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(json) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    let response = router
        .clone()
        .oneshot(request.body(body).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body")
        .to_vec();
    Answer {
        status,
        headers,
        bytes,
    }
}

async fn get(router: &Router, uri: &str) -> Answer {
    call(router, Method::GET, uri, None, &[]).await
}

async fn post(router: &Router, uri: &str, body: Value) -> Answer {
    call(router, Method::POST, uri, Some(body), &[]).await
}

fn customer(id: &str, email: &str) -> Value {
    json!({ "id": id, "name": format!("Customer {id}"), "email": email, "city": "Oslo" })
}

#[tokio::test]
async fn health_and_request_ids() {
    let (router, _) = service().await;
    let answer = get(&router, "/healthz").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(answer.headers.contains_key("x-request-id"));
    let answer = call(
        &router,
        Method::GET,
        "/healthz",
        None,
        &[("x-request-id", "mine")],
    )
    .await;
    assert_eq!(answer.headers["x-request-id"], "mine", "a given id is kept");
    assert_eq!(get(&router, "/nowhere").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn customers_are_guarded_by_their_etags() {
    let (router, _) = service().await;
    let created = post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(
        created.headers[header::LOCATION],
        "/tenants/acme/customers/c1"
    );
    let first = created.etag();

    let read = get(&router, "/tenants/acme/customers/c1").await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.etag(), first, "the entity's ETag is the HTTP ETag");
    assert_eq!(read.json()["email"], "ann@example.com");

    // A write with the current ETag goes; one with an old ETag is refused.
    let mut renamed = customer("c1", "ann@example.com");
    renamed["name"] = json!("Ann");
    let put = call(
        &router,
        Method::PUT,
        "/tenants/acme/customers/c1",
        Some(renamed.clone()),
        &[("if-match", &first)],
    )
    .await;
    assert_eq!(put.status, StatusCode::OK);
    let second = put.etag();
    assert_ne!(second, first);
    let stale = call(
        &router,
        Method::PUT,
        "/tenants/acme/customers/c1",
        Some(renamed.clone()),
        &[("if-match", &first)],
    )
    .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(stale.error(), "etag_mismatch");
    assert_eq!(
        get(&router, "/tenants/acme/customers/c1").await.json()["name"],
        "Ann"
    );
    // Without If-Match, the version read by the service guards the write.
    let unguarded = call(
        &router,
        Method::PUT,
        "/tenants/acme/customers/c1",
        Some(customer("c1", "ann@example.com")),
        &[],
    )
    .await;
    assert_eq!(unguarded.status, StatusCode::OK);
    let third = unguarded.etag();

    let stale_delete = call(
        &router,
        Method::DELETE,
        "/tenants/acme/customers/c1",
        None,
        &[("if-match", &second)],
    )
    .await;
    assert_eq!(stale_delete.status, StatusCode::PRECONDITION_FAILED);
    let delete = call(
        &router,
        Method::DELETE,
        "/tenants/acme/customers/c1",
        None,
        &[("if-match", &third)],
    )
    .await;
    assert_eq!(delete.status, StatusCode::NO_CONTENT);
    let gone = get(&router, "/tenants/acme/customers/c1").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(gone.error(), "not_found");
    for method in [Method::DELETE, Method::PUT] {
        let missing = call(
            &router,
            method,
            "/tenants/acme/customers/c1",
            Some(customer("c1", "ann@example.com")),
            &[],
        )
        .await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
    }
    // Its email is free again: the index row went with it.
    let again = post(
        &router,
        "/tenants/acme/customers",
        customer("c9", "ann@example.com"),
    )
    .await;
    assert_eq!(again.status, StatusCode::CREATED);
}

#[tokio::test]
async fn unique_emails_and_ids_conflict() {
    let (router, _) = service().await;
    let uri = "/tenants/acme/customers";
    assert_eq!(
        post(&router, uri, customer("c1", "ann@example.com"))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        post(&router, uri, customer("c2", "bob@example.com"))
            .await
            .status,
        StatusCode::CREATED
    );
    let taken = post(&router, uri, customer("c3", "ann@example.com")).await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert_eq!(taken.error(), "unique_violation");
    // The answer does not say who holds the address, nor how it is stored.
    let message = taken.json()["message"].as_str().unwrap().to_owned();
    for leak in ["c1", "Shop", "email_", "~tk"] {
        assert!(!message.contains(leak), "{message}");
    }
    // Addresses differing in case only are one address.
    let upper = post(&router, uri, customer("c4", "ANN@Example.com")).await;
    assert_eq!(upper.status, StatusCode::CONFLICT);
    assert_eq!(upper.error(), "unique_violation");
    let found = get(&router, "/tenants/acme/customers/by-email/Ann@EXAMPLE.com").await;
    assert_eq!(found.status, StatusCode::OK);
    assert_eq!(found.json()["id"], "c1");
    assert_eq!(found.json()["email"], "ann@example.com", "stored as given");
    let same_id = post(&router, uri, customer("c1", "new@example.com")).await;
    assert_eq!(same_id.status, StatusCode::CONFLICT);
    assert_eq!(same_id.error(), "already_exists");
    // Changing an email to a taken one is refused, and changes nothing.
    let steal = call(
        &router,
        Method::PUT,
        "/tenants/acme/customers/c2",
        Some(customer("c2", "ann@example.com")),
        &[],
    )
    .await;
    assert_eq!(steal.status, StatusCode::CONFLICT);
    assert_eq!(
        get(&router, "/tenants/acme/customers/c2").await.json()["email"],
        "bob@example.com"
    );
    // Another tenant has emails of its own.
    assert_eq!(
        post(
            &router,
            "/tenants/globex/customers",
            customer("c3", "ann@example.com")
        )
        .await
        .status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn invalid_input_is_a_400_with_the_reason() {
    let (router, _) = service().await;
    let uri = "/tenants/acme/customers";
    let cases = [
        (
            json!({ "id": "c1", "name": "", "email": "a@x", "city": "Oslo" }),
            "name",
        ),
        (
            json!({ "id": "c1", "name": "A", "email": "nope", "city": "Oslo" }),
            "email",
        ),
        (json!({ "name": "A", "email": "a@x", "city": "Oslo" }), "id"),
        (json!({ "id": "c1", "name": "A" }), "email"),
        // Longer than the store takes: the validator's message comes back.
        (
            json!({ "id": "c1", "name": "n".repeat(40_000), "email": "a@x", "city": "Oslo" }),
            "name",
        ),
        (
            json!({ "id": "x".repeat(2000), "name": "A", "email": "a@x", "city": "Oslo" }),
            "`id` is too long",
        ),
    ];
    for (body, needle) in cases {
        let answer = post(&router, uri, body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer.error(), "invalid_input");
        let message = answer.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains(needle), "{body}: {message}");
    }
    let garbage = call(
        &router,
        Method::POST,
        uri,
        None,
        &[("content-type", "application/json")],
    )
    .await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    for bad in [
        "/tenants/acme/customers?cursor=garbage",
        "/tenants/acme/customers?limit=0",
        "/tenants/acme/customers?limit=5000",
        "/tenants/acme/customers?limit=many",
        "/tenants/acme/audit?from=yesterday",
    ] {
        let answer = get(&router, bad).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(answer.error(), "invalid_input", "{bad}");
    }
    // Keys may hold any character: '/' and control characters are escaped
    // in the stored key, and the Location is percent-encoded.
    let odd = post(
        &router,
        uri,
        json!({ "id": "a/b\u{7}", "name": "A", "email": "odd@x", "city": "Oslo" }),
    )
    .await;
    assert_eq!(odd.status, StatusCode::CREATED);
    let location = odd.headers[header::LOCATION].to_str().unwrap().to_owned();
    assert_eq!(location, "/tenants/acme/customers/a%2Fb%07");
    assert_eq!(get(&router, &location).await.json()["id"], "a/b\u{7}");
    // A cursor of another list is refused too.
    for i in 0..3 {
        post(&router, uri, customer(&format!("c{i}"), &format!("{i}@x"))).await;
    }
    let page = get(&router, "/tenants/acme/customers?limit=1").await.json();
    let cursor = page["next"].as_str().expect("a cursor").to_owned();
    let foreign = get(
        &router,
        &format!("/tenants/acme/users/u1/activity?cursor={cursor}"),
    )
    .await;
    assert_eq!(foreign.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn lists_page_with_opaque_cursors() {
    let (router, _) = service().await;
    for i in 0..7 {
        let created = post(
            &router,
            "/tenants/acme/customers",
            customer(&format!("c{i}"), &format!("c{i}@example.com")),
        )
        .await;
        assert_eq!(created.status, StatusCode::CREATED);
    }
    let mut seen = Vec::new();
    let mut uri = "/tenants/acme/customers?limit=3".to_owned();
    let mut pages = 0;
    loop {
        let page = get(&router, &uri).await;
        assert_eq!(page.status, StatusCode::OK);
        let page = page.json();
        pages += 1;
        for item in page["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match page["next"].as_str() {
            Some(cursor) => uri = format!("/tenants/acme/customers?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
}

#[tokio::test]
async fn indexes_find_customers() {
    let (router, _) = service().await;
    post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    let mut bergen = customer("c2", "bob@example.com");
    bergen["city"] = json!("Bergen");
    post(&router, "/tenants/acme/customers", bergen).await;

    let found = get(&router, "/tenants/acme/customers/by-email/ann@example.com").await;
    assert_eq!(found.status, StatusCode::OK);
    assert_eq!(found.json()["id"], "c1");
    let missing = get(&router, "/tenants/acme/customers/by-email/zed@example.com").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // The city index lives in another partition, kept through the outbox.
    let oslo = get(&router, "/tenants/acme/customers/by-city/Oslo").await;
    assert_eq!(oslo.status, StatusCode::OK);
    let ids: Vec<_> = oslo.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["c1"]);
    // A move to Bergen moves the index row.
    let mut moved = customer("c1", "ann@example.com");
    moved["city"] = json!("Bergen");
    let put = call(
        &router,
        Method::PUT,
        "/tenants/acme/customers/c1",
        Some(moved),
        &[],
    )
    .await;
    assert_eq!(put.status, StatusCode::OK);
    let bergen = get(&router, "/tenants/acme/customers/by-city/Bergen")
        .await
        .json();
    assert_eq!(bergen["items"].as_array().unwrap().len(), 2);
    let oslo = get(&router, "/tenants/acme/customers/by-city/Oslo")
        .await
        .json();
    assert_eq!(oslo["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn orders_and_lines_are_one_collection() {
    let (router, _) = service().await;
    let order = json!({ "number": 7, "lines": [
        { "sku": "apple", "quantity": 3, "price_cents": 50 },
        { "sku": "pear", "quantity": 1, "price_cents": 120 },
    ]});
    let no_customer = post(&router, "/tenants/acme/customers/c1/orders", order.clone()).await;
    assert_eq!(no_customer.status, StatusCode::NOT_FOUND);
    post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    let created = post(&router, "/tenants/acme/customers/c1/orders", order.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.json()["total_cents"], 270);
    let again = post(&router, "/tenants/acme/customers/c1/orders", order).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "order 7 exists");

    let read = get(&router, "/tenants/acme/customers/c1/orders/7").await;
    assert_eq!(read.status, StatusCode::OK);
    let read = read.json();
    assert_eq!(read["number"], 7);
    let skus: Vec<_> = read["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["sku"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(skus, ["apple", "pear"]);
    assert_eq!(
        get(&router, "/tenants/acme/customers/c1/orders/8")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    post(
        &router,
        "/tenants/acme/customers/c1/orders",
        json!({ "number": 8, "lines": [{ "sku": "fig", "quantity": 2, "price_cents": 10 }] }),
    )
    .await;
    let list = get(&router, "/tenants/acme/customers/c1/orders")
        .await
        .json();
    let numbers: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [7, 8], "orders only, not their lines");

    for bad in [
        json!({ "number": 9, "lines": [] }),
        json!({ "number": 9, "lines": [{ "sku": "x", "quantity": 0, "price_cents": 1 }] }),
        json!({ "number": 9, "lines": (0..100).map(|_| json!({ "sku": "x", "quantity": 1, "price_cents": 1 })).collect::<Vec<_>>() }),
        json!({ "number": -1, "lines": [{ "sku": "x", "quantity": 1, "price_cents": 1 }] }),
    ] {
        let answer = post(&router, "/tenants/acme/customers/c1/orders", bad).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    }
}

#[tokio::test]
async fn users_and_their_feed_newest_first() {
    let (router, _) = service().await;
    let put = call(
        &router,
        Method::PUT,
        "/tenants/acme/users/ann",
        Some(json!({ "name": "Ann" })),
        &[],
    )
    .await;
    assert_eq!(put.status, StatusCode::OK);
    let read = get(&router, "/tenants/acme/users/ann").await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.json()["name"], "Ann");
    assert_eq!(read.etag(), put.etag());
    assert_eq!(
        get(&router, "/tenants/acme/users/bob").await.status,
        StatusCode::NOT_FOUND
    );
    // The tenant's users: the partitions under `acme|`, not `acme2|`'s.
    for (tenant, user) in [("acme", "bob"), ("acme", "cat"), ("acme2", "dan")] {
        let put = call(
            &router,
            Method::PUT,
            &format!("/tenants/{tenant}/users/{user}"),
            Some(json!({ "name": user })),
            &[],
        )
        .await;
        assert_eq!(put.status, StatusCode::OK);
    }
    let first = get(&router, "/tenants/acme/users?limit=2").await.json();
    let cursor = first["next"].as_str().expect("a cursor").to_owned();
    let second = get(
        &router,
        &format!("/tenants/acme/users?limit=2&cursor={cursor}"),
    )
    .await
    .json();
    let users: Vec<_> = [first, second]
        .iter()
        .flat_map(|page| page["items"].as_array().unwrap().clone())
        .map(|u| u["user"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users, ["ann", "bob", "cat"]);
    for i in 0..5 {
        let posted = post(
            &router,
            "/tenants/acme/users/ann/activity",
            json!({ "text": format!("event {i}") }),
        )
        .await;
        assert_eq!(posted.status, StatusCode::CREATED);
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let mut texts = Vec::new();
    let mut uri = "/tenants/acme/users/ann/activity?limit=2".to_owned();
    loop {
        let page = get(&router, &uri).await.json();
        for item in page["items"].as_array().unwrap() {
            texts.push(item["text"].as_str().unwrap().to_owned());
        }
        match page["next"].as_str() {
            Some(cursor) => {
                uri = format!("/tenants/acme/users/ann/activity?limit=2&cursor={cursor}")
            }
            None => break,
        }
    }
    assert_eq!(
        texts,
        ["event 4", "event 3", "event 2", "event 1", "event 0"]
    );
    // Ann's activity shares her partition; the users list skips it.
    let users = get(&router, "/tenants/acme/users?limit=10").await.json();
    assert_eq!(users["items"].as_array().unwrap().len(), 3);
    let empty = post(
        &router,
        "/tenants/acme/users/ann/activity",
        json!({ "text": "" }),
    )
    .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn attachments_live_in_blobs() {
    let (router, _) = service().await;
    let uri = "/tenants/acme/customers/c1/attachments/contract.pdf";
    let put = |bytes: Vec<u8>| {
        let router = router.clone();
        async move {
            let request = Request::put(uri)
                .header(header::CONTENT_TYPE, "application/pdf")
                .body(Body::from(bytes))
                .unwrap();
            router.oneshot(request).await.unwrap().status()
        }
    };
    assert_eq!(
        put(vec![1, 2, 3]).await,
        StatusCode::NOT_FOUND,
        "no customer"
    );
    post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    // Larger than a row can hold: its bytes are in the blob store.
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(put(content.clone()).await, StatusCode::OK);
    let read = get(&router, uri).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.headers[header::CONTENT_TYPE], "application/pdf");
    assert!(read.bytes == content, "the bytes come back whole");
    assert_eq!(
        get(&router, "/tenants/acme/customers/c1/attachments/other.pdf")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn writes_go_to_the_audit_log() {
    let (router, _) = service().await;
    post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    post(
        &router,
        "/tenants/acme/customers",
        customer("c2", "ann@example.com"),
    )
    .await;
    get(&router, "/tenants/acme/customers/c1").await;
    let audit = get(&router, "/tenants/acme/audit").await;
    assert_eq!(audit.status, StatusCode::OK);
    let statuses: Vec<_> = audit.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("POST /tenants/acme/customers".to_owned(), 201),
            ("POST /tenants/acme/customers".to_owned(), 409),
        ],
        "writes only, with their answers"
    );
    let other = get(&router, "/tenants/globex/audit").await.json();
    assert_eq!(other["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn old_audit_days_are_dropped_whole() {
    let stores = Stores::in_memory();
    let app = App::open(stores, Names::default()).await.expect("open");
    let router = app.router();
    post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    let old = tablekit::DateTime::now()
        .checked_sub(std::time::Duration::from_secs(3 * 24 * 3600))
        .unwrap();
    app.audit_log()
        .insert(&tablekit_examples::service::model::AuditEntry {
            tenant: "acme".into(),
            at: old,
            request: "old".into(),
            action: "POST /tenants/acme/customers".into(),
            status: 201,
        })
        .await
        .expect("an old entry");
    assert_eq!(app.audit_log().tables().await.expect("tables").len(), 2);
    let dropped = app
        .expire_audit(std::time::Duration::from_secs(24 * 3600))
        .await
        .expect("expire");
    assert_eq!(dropped.len(), 1, "the day of three days ago: {dropped:?}");
    let left = app.audit_log().tables().await.expect("tables");
    assert_eq!(left.len(), 1, "today's table stays");
    let today = get(&router, "/tenants/acme/audit").await.json();
    assert_eq!(today["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_throttled_store_is_a_503_with_retry_after() {
    let (router, faults) = service().await;
    post(
        &router,
        "/tenants/acme/customers",
        customer("c1", "ann@example.com"),
    )
    .await;
    faults.inject(Injection::on(Operation::GetEntity).fault(Fault::Throttled));
    let answer = get(&router, "/tenants/acme/customers/c1").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.error(), "throttled");
    assert_eq!(answer.headers[header::RETRY_AFTER], "1");
    assert_eq!(
        get(&router, "/tenants/acme/customers/c1").await.status,
        StatusCode::OK,
        "the next request goes through"
    );
    faults.inject(Injection::on(Operation::QueryEntities).fault(Fault::Throttled));
    let list = get(&router, "/tenants/acme/customers").await;
    assert_eq!(list.status, StatusCode::SERVICE_UNAVAILABLE);
}
