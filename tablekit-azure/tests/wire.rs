//! The HTTP layer against a local mock server that records each request and
//! answers from a script: request lines and signing, key escaping,
//! continuation across empty pages, error mapping end to end, retries,
//! timeouts and batch responses. (Azurite covers behaviour; this covers
//! the bytes, and failures Azurite cannot be made to produce.)
//!
//! The mock server is in `mock/mod.rs`; the request span test has a binary
//! of its own (`wire_spans.rs`).

use std::time::Duration;

use tablekit::{
    BatchOperation, ContinuationToken, Entity, Error, GetOptions, IfMatch, Query, TableBackend,
    TableBackendExt, UpdateMode, filter::prop,
};
use tablekit_azure::AzureTables;
use tablekit_azure::auth;
use tablekit_azure::config::{Account, ClientOptions, ConfigError, DEV_KEY};
use tablekit_azure::policy::RetryPolicy;

mod mock;

use mock::{Answer, Mock, json_error, respond};

const ENTITY_JSON: &str = r#"{"odata.metadata":"x","odata.etag":"W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\"","PartitionKey":"O'Brien","RowKey":"a b&c+d","Timestamp":"2026-11-21T22:39:04.2843441Z","n@odata.type":"Edm.Int64","n":"7","s":"x"}"#;

#[tokio::test]
async fn point_reads_escape_keys_and_sign_the_request() {
    let mock = Mock::start(vec![respond(
        "200 OK",
        &[
            ("Content-Type", "application/json;odata=minimalmetadata"),
            ("ETag", "W/\"datetime'2026-11-21T22%3A39%3A04.2843441Z'\""),
        ],
        ENTITY_JSON,
    )])
    .await;
    let entity = mock
        .client
        .get_entity("people", "O'Brien", "a b&c+d", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(entity.partition_key, "O'Brien");
    assert_eq!(entity.row_key, "a b&c+d");
    assert_eq!(entity.properties.get("n"), Some(&tablekit::Value::Int64(7)));

    let seen = mock.seen();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(request.method, "GET");
    assert_eq!(
        request.target,
        "/people(PartitionKey='O%27%27Brien',RowKey='a%20b%26c%2Bd')"
    );
    assert_eq!(
        request.header("accept"),
        Some("application/json;odata=minimalmetadata")
    );
    assert_eq!(request.header("x-ms-version"), Some("2019-02-02"));
    // An id of our making, for the service's logs: a UUID.
    let id = request
        .header("x-ms-client-request-id")
        .expect("a client request id");
    assert!(tablekit::uuid::Uuid::parse_str(id).is_ok(), "{id}");
    // The signature covers the verb, the date and the encoded path.
    let date = request.header("x-ms-date").expect("x-ms-date");
    let resource = auth::table_resource("mockacct", &request.target, None);
    let text = auth::table_string_to_sign("GET", "", "", date, &resource);
    let key = match &mock.account.credentials {
        tablekit_azure::config::Credentials::SharedKey { key } => key.clone(),
        _ => unreachable!(),
    };
    assert_eq!(
        request.header("authorization"),
        Some(auth::shared_key_header("mockacct", &key, &text).as_str())
    );
    assert!(
        request
            .header("authorization")
            .unwrap()
            .starts_with("SharedKey mockacct:")
    );
}

fn page(entities: &[(&str, &str)], next: Option<(&str, &str)>) -> Answer {
    let value: Vec<String> = entities
        .iter()
        .map(|(pk, rk)| format!(r#"{{"PartitionKey":"{pk}","RowKey":"{rk}","v":1}}"#))
        .collect();
    let body = format!(r#"{{"odata.metadata":"x","value":[{}]}}"#, value.join(","));
    let mut headers = vec![("Content-Type", "application/json;odata=minimalmetadata")];
    if let Some((pk, rk)) = next {
        headers.push(("x-ms-continuation-NextPartitionKey", pk));
        headers.push(("x-ms-continuation-NextRowKey", rk));
    }
    respond("200 OK", &headers, &body)
}

#[tokio::test]
async fn queries_follow_continuations_through_empty_pages() {
    let mock = Mock::start(vec![
        page(&[("p", "1")], Some(("1!4!cA--", "1!4!Mg--"))),
        page(&[], Some(("1!4!cA--", "1!4!Mw--"))),
        page(&[], Some(("1!4!cQ--", "1!4!MQ--"))),
        page(&[("q", "1")], None),
    ])
    .await;
    let query = Query::new().filter(prop("v").eq(1)).top(5);
    let all = mock.client.query_all("tbl", query).await.unwrap();
    let keys: Vec<_> = all
        .iter()
        .map(|e| (e.partition_key.as_str(), e.row_key.as_str()))
        .collect();
    assert_eq!(keys, [("p", "1"), ("q", "1")]);

    let seen = mock.seen();
    assert_eq!(seen.len(), 4, "one request per page, empty pages included");
    assert_eq!(seen[0].target, "/tbl()?$filter=v%20eq%201&$top=5");
    assert_eq!(
        seen[1].target,
        "/tbl()?$filter=v%20eq%201&$top=5&NextPartitionKey=1%214%21cA--&NextRowKey=1%214%21Mg--"
    );
    assert!(seen[2].target.ends_with("NextRowKey=1%214%21Mw--"));
    assert!(
        seen[3]
            .target
            .ends_with("NextPartitionKey=1%214%21cQ--&NextRowKey=1%214%21MQ--")
    );

    // One page at a time, the token is handed back.
    let mock = Mock::start(vec![page(&[("p", "1")], Some(("np", "nr")))]).await;
    let first = mock
        .client
        .query_entities("tbl", &Query::new())
        .await
        .unwrap();
    assert_eq!(
        first.continuation,
        Some(ContinuationToken::new("np", Some("nr".to_owned())))
    );
}

/// A continuation header that is there but not text (bytes past ASCII)
/// is an error: read as absent, it would end the query or the listing
/// early, as if it were whole.
#[tokio::test]
async fn a_continuation_that_is_not_text_is_an_error() {
    let tables = respond(
        "200 OK",
        &[
            ("Content-Type", "application/json;odata=minimalmetadata"),
            ("x-ms-continuation-NextTableName", "t\u{e9}bles"),
        ],
        r#"{"odata.metadata":"x","value":[{"TableName":"tbl"}]}"#,
    );
    let mock = Mock::start(vec![
        page(&[("p", "1")], Some(("1!4!c\u{e9}--", "1!4!Mg--"))),
        page(&[("p", "1")], Some(("1!4!cA--", "1!4!\u{e9}--"))),
        tables,
    ])
    .await;
    for header in ["nextpartitionkey", "nextrowkey"] {
        match mock.client.query_all("tbl", Query::new()).await {
            Err(Error::Decode { message }) => assert!(
                message.contains(&format!("x-ms-continuation-{header}")),
                "{message}"
            ),
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
    match mock.client.list_tables(&Default::default()).await {
        Err(Error::Decode { message }) => {
            assert!(message.contains("nexttablename"), "{message}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    assert_eq!(
        mock.seen().len(),
        3,
        "no retry of a response that came whole"
    );
}

#[tokio::test]
async fn service_errors_become_typed_errors() {
    let mock = Mock::start(vec![
        json_error("409 Conflict", "EntityAlreadyExists"),
        json_error("404 Not Found", "ResourceNotFound"),
        json_error("412 Precondition Failed", "UpdateConditionNotSatisfied"),
        json_error("409 Conflict", "TableAlreadyExists"),
        json_error("404 Not Found", "TableNotFound"),
        json_error("403 Forbidden", "AuthenticationFailed"),
    ])
    .await;
    let client = &mock.client;
    let entity = Entity::new("p", "r").with("v", 1);
    match client.insert_entity("tbl", &entity).await {
        Err(Error::EntityAlreadyExists {
            table,
            partition_key,
            row_key,
        }) => assert_eq!(
            (table.as_str(), partition_key.as_str(), row_key.as_str()),
            ("tbl", "p", "r")
        ),
        other => panic!("expected EntityAlreadyExists, got {other:?}"),
    }
    assert!(matches!(
        client
            .get_entity("tbl", "p", "r", &GetOptions::default())
            .await,
        Err(Error::EntityNotFound { .. })
    ));
    let stale = IfMatch::ETag(tablekit::ETag::new("W/\"old\""));
    assert!(matches!(
        client
            .update_entity("tbl", &entity, UpdateMode::Replace, &stale)
            .await,
        Err(Error::PreconditionFailed { .. })
    ));
    assert!(matches!(
        client.create_table("tbl").await,
        Err(Error::TableAlreadyExists { .. })
    ));
    assert!(matches!(
        client.delete_table("tbl").await,
        Err(Error::TableNotFound { .. })
    ));
    match client
        .get_entity("tbl", "p", "r", &GetOptions::default())
        .await
    {
        Err(Error::Service { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (403, "AuthenticationFailed"));
        }
        other => panic!("expected a 403 service error, got {other:?}"),
    }
    let seen = mock.seen();
    assert_eq!(seen.len(), 6, "no error here is retried");
    assert_eq!(seen[2].method, "PUT");
    assert_eq!(seen[2].header("if-match"), Some("W/\"old\""));
}

#[tokio::test]
async fn invalid_input_is_refused_before_anything_is_sent() {
    let mock = Mock::start(vec![]).await;
    let bad = Entity::new("p/q", "r");
    let error = mock.client.insert_entity("tbl", &bad).await.unwrap_err();
    assert!(error.invalid_input().is_some(), "{error:?}");
    assert!(mock.seen().is_empty());
}

#[tokio::test]
async fn transient_failures_are_retried_only_when_repeating_is_safe() {
    let mock = Mock::start(vec![
        // An upsert is idempotent: a 500 is retried.
        json_error("500 Internal Server Error", "InternalError"),
        respond("204 No Content", &[("ETag", "W/\"e1\"")], ""),
        // An insert is not: the 500 (which may or may not have acted)
        // reaches the caller as an unknown outcome, sent once.
        json_error("500 Internal Server Error", "InternalError"),
        // Throttling says nothing was done: even an insert is retried.
        respond(
            "503 Server Busy",
            &[("x-ms-error-code", "ServerBusy"), ("Retry-After", "0")],
            "",
        ),
        respond("204 No Content", &[("ETag", "W/\"e2\"")], ""),
    ])
    .await;
    let client = &mock.client;
    let entity = Entity::new("p", "r").with("v", 1);
    let etag = client
        .upsert_entity("tbl", &entity, UpdateMode::Merge)
        .await
        .unwrap();
    assert_eq!(etag.as_str(), "W/\"e1\"");
    assert_eq!(mock.seen().len(), 2);

    assert!(matches!(
        client.insert_entity("tbl", &entity).await,
        Err(Error::OutcomeUnknown { .. })
    ));
    assert_eq!(mock.seen().len(), 3);

    let etag = client.insert_entity("tbl", &entity).await.unwrap();
    assert_eq!(etag.as_str(), "W/\"e2\"");
    let seen = mock.seen();
    assert_eq!(seen.len(), 5);
    assert_eq!(seen[0].method, "MERGE");
    assert_eq!(seen[3].method, "POST");
    assert_eq!(
        seen[3].body, seen[4].body,
        "the retry sends the same entity"
    );
    // Each attempt has an id of its own, for the service's logs.
    let ids: std::collections::BTreeSet<_> = seen
        .iter()
        .map(|r| {
            r.header("x-ms-client-request-id")
                .expect("an id")
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), seen.len(), "{ids:?}");
}

#[tokio::test]
async fn attempts_time_out_and_give_up_after_the_policy() {
    let options = ClientOptions::tables()
        .timeout(Duration::from_secs(1))
        .retry(RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        });
    let mock = Mock::start_with(vec![Answer::Hang, Answer::Hang], options).await;
    match mock
        .client
        .get_entity("tbl", "p", "r", &GetOptions::default())
        .await
    {
        Err(Error::Transient { message }) => assert!(message.contains("GET"), "{message}"),
        other => panic!("expected a transient error, got {other:?}"),
    }
    assert_eq!(mock.seen().len(), 2, "a read that times out is tried twice");

    // A write that times out after it was sent may have been applied: an
    // insert is sent once and its outcome is unknown; an idempotent upsert
    // is sent again, and its last outcome is unknown too.
    let options = ClientOptions::tables()
        .timeout(Duration::from_millis(300))
        .retry(RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        });
    let mock = Mock::start_with(vec![Answer::Hang, Answer::Hang, Answer::Hang], options).await;
    let entity = Entity::new("p", "r").with("v", 1);
    let insert = mock.client.insert_entity("tbl", &entity).await;
    assert!(
        matches!(insert, Err(Error::OutcomeUnknown { .. })),
        "{insert:?}"
    );
    assert!(!insert.unwrap_err().is_transient());
    assert_eq!(mock.seen().len(), 1, "an insert is not sent again");
    let upsert = mock
        .client
        .upsert_entity("tbl", &entity, UpdateMode::Replace)
        .await;
    assert!(
        matches!(upsert, Err(Error::OutcomeUnknown { .. })),
        "{upsert:?}"
    );
    assert_eq!(mock.seen().len(), 3, "an upsert is");
}

#[tokio::test]
async fn zero_timeouts_and_zero_attempts_are_refused() {
    let account = Account::with_key("mockacct", DEV_KEY).unwrap();
    let zero = ClientOptions::tables().timeout(Duration::ZERO);
    assert!(matches!(
        AzureTables::with_options(account.clone(), zero),
        Err(ConfigError::BadValue { .. })
    ));
    let never = ClientOptions::tables().retry(RetryPolicy {
        max_attempts: 0,
        ..RetryPolicy::default()
    });
    assert!(matches!(
        AzureTables::with_options(account, never),
        Err(ConfigError::BadValue { .. })
    ));
}

#[tokio::test]
async fn a_failed_batch_names_its_operation() {
    let body = "--batchresponse_B1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_C1\r\n\r\n--changesetresponse_C1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-ID: 2\r\nDataServiceVersion: 3.0;\r\nContent-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\"}}}\r\n--changesetresponse_C1--\r\n--batchresponse_B1--\r\n";
    let mock = Mock::start(vec![respond(
        "202 Accepted",
        &[("Content-Type", "multipart/mixed; boundary=batchresponse_B1")],
        body,
    )])
    .await;
    let operations = vec![
        BatchOperation::Insert(Entity::new("p", "1").with("v", 1)),
        BatchOperation::Insert(Entity::new("p", "2").with("v", 2)),
        BatchOperation::Delete {
            partition_key: "p".into(),
            row_key: "3".into(),
            if_match: IfMatch::Any,
        },
    ];
    match mock.client.submit_transaction("tbl", &operations).await {
        Err(Error::BatchFailed { index, source }) => {
            assert_eq!(index, 1);
            assert!(
                matches!(*source, Error::EntityAlreadyExists { ref row_key, .. } if row_key == "2"),
                "{source:?}"
            );
        }
        other => panic!("expected a failed batch, got {other:?}"),
    }
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "a batch is not retried after a failure");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].target, "/$batch");
    let content_type = seen[0].header("content-type").unwrap();
    let boundary = content_type
        .strip_prefix("multipart/mixed; boundary=")
        .expect("a multipart request");
    assert!(seen[0].body.starts_with(&format!("--{boundary}\r\n")));
    assert_eq!(
        seen[0]
            .body
            .matches("Content-Type: application/http")
            .count(),
        3
    );
    assert!(seen[0].body.contains("DELETE http://127.0.0.1:"));
    assert!(
        seen[0]
            .body
            .contains("/tbl(PartitionKey='p',RowKey='3') HTTP/1.1\r\n")
    );
}

/// Both clients read a failed response the same way: the code from
/// `x-ms-error-code`, and the wait the service asks for in `Retry-After`.
#[tokio::test]
async fn throttling_reports_the_wait_the_service_asks_for() {
    let busy = || {
        respond(
            "503 Server Unavailable",
            &[("x-ms-error-code", "ServerBusy"), ("Retry-After", "7")],
            "",
        )
    };
    let once = ClientOptions::tables().retry(RetryPolicy {
        max_attempts: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
    });
    let mock = Mock::start_with(vec![busy(), busy()], once).await;
    let throttled = |result: tablekit::Result<_>| match result {
        Err(Error::Throttled { retry_after }) => retry_after,
        other => panic!("expected Throttled, got {other:?}"),
    };
    assert_eq!(
        throttled(
            mock.client
                .get_entity("tbl", "p", "r", &GetOptions::default())
                .await
                .map(drop)
        ),
        Some(Duration::from_secs(7))
    );
    let blobs = tablekit_azure::AzureBlobs::with_options(
        mock.account.clone(),
        ClientOptions::blobs().retry(RetryPolicy {
            max_attempts: 1,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        }),
    )
    .unwrap();
    assert_eq!(
        throttled(
            tablekit::BlobStore::get_blob(&blobs, "box", "a.bin")
                .await
                .map(drop)
        ),
        Some(Duration::from_secs(7))
    );
    assert_eq!(mock.seen().len(), 2, "one attempt each");
}

/// No name that is not a property name reaches `$filter` or `$select`: the
/// request is never sent. Hostile values travel as escaped literals, shown by
/// the exact request target.
#[tokio::test]
async fn hostile_names_never_reach_the_request() {
    let mock = Mock::start(vec![page(&[], None)]).await;
    for name in [
        "Name ne 'q') or (Name",
        "x eq 0) or (Daily_y",
        "a b",
        "and",
        "",
    ] {
        let filter = tablekit::filter::Filter::partition_key().eq("t1") & prop(name).eq("x");
        let error = mock
            .client
            .query_entities("tbl", &Query::new().filter(filter))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::Invalid(tablekit::InvalidInput::FilterPropertyName { .. })
            ),
            "{name:?}: {error:?}"
        );
        let options = GetOptions::default().select([format!("{name},PartitionKey")]);
        let error = mock
            .client
            .get_entity("tbl", "p", "r", &options)
            .await
            .unwrap_err();
        assert!(error.invalid_input().is_some(), "{name:?}: {error:?}");
    }
    assert!(
        mock.seen().is_empty(),
        "nothing was sent: {:?}",
        mock.seen()
    );

    let filter = tablekit::filter::Filter::partition_key().eq("t1")
        & prop("Name").eq("x') or (PartitionKey ne '");
    mock.client
        .query_entities("tbl", &Query::new().filter(filter))
        .await
        .unwrap();
    assert_eq!(
        mock.seen()[0].target,
        "/tbl()?$filter=%28PartitionKey%20eq%20%27t1%27%29%20and%20%28Name%20eq%20%27x%27%27%29%20or%20%28PartitionKey%20ne%20%27%27%27%29"
    );
}

/// A row the emulator stored but that is no valid entity (a DateTime in the
/// year 1000) costs no other row: the page carries it apart, and a stream of
/// the query yields its error and goes on.
#[tokio::test]
async fn an_undecodable_row_costs_no_other_row() {
    let body = r#"{"value":[
        {"PartitionKey":"p","RowKey":"1","v":1},
        {"PartitionKey":"p","RowKey":"2","t":"1000-01-01T00:00:00Z","t@odata.type":"Edm.DateTime"},
        {"PartitionKey":"p","RowKey":"3","v":3}
    ]}"#;
    let answer = || respond("200 OK", &[("Content-Type", "application/json")], body);
    let mock = Mock::start(vec![answer(), answer()]).await;
    let page = mock
        .client
        .query_entities("tbl", &Query::new())
        .await
        .unwrap();
    let keys: Vec<&str> = page.entities.iter().map(|e| e.row_key.as_str()).collect();
    assert_eq!(keys, ["1", "3"]);
    assert_eq!(page.undecodable.len(), 1);
    assert_eq!(page.undecodable[0].row_key, "2");

    use futures::StreamExt;
    let rows: Vec<_> = mock
        .client
        .query_stream("tbl", Query::new())
        .collect()
        .await;
    let shape: Vec<Result<&str, ()>> = rows
        .iter()
        .map(|r| match r {
            Ok(e) => Ok(e.row_key.as_str()),
            Err(Error::UndecodableRow { row_key, .. }) if row_key == "2" => Err(()),
            Err(e) => panic!("{e}"),
        })
        .collect();
    assert_eq!(shape, [Ok("1"), Err(()), Ok("3")]);
}

/// A listing by prefix sends a `TableName` range and keeps exact matches; a
/// prefix that is not letters and digits is refused before sending.
#[tokio::test]
async fn table_listings_by_prefix_send_a_name_range() {
    let body = r#"{"value":[{"TableName":"Audit1"},{"TableName":"audit2"}]}"#;
    let mock = Mock::start(vec![respond(
        "200 OK",
        &[("Content-Type", "application/json")],
        body,
    )])
    .await;
    let options = tablekit::ListTablesOptions::default().with_prefix("Audit");
    let page = mock.client.list_tables(&options).await.unwrap();
    assert_eq!(
        page.tables,
        ["Audit1"],
        "only names that start with it, case and all"
    );
    assert_eq!(
        mock.seen()[0].target,
        "/Tables?$filter=TableName%20ge%20%27Audit%27%20and%20TableName%20lt%20%27Audit%7B%27"
    );
    let hostile = tablekit::ListTablesOptions::default().with_prefix("a' or 1 eq 1");
    assert!(mock.client.list_tables(&hostile).await.is_err());
    assert_eq!(mock.seen().len(), 1, "nothing more was sent");
}

/// Cosmos DB for Table throttles with 429 and says how long to wait in
/// milliseconds (`x-ms-retry-after-ms`), which wins over `Retry-After`.
#[tokio::test]
async fn cosmos_throttling_reports_its_wait_in_milliseconds() {
    let busy = respond(
        "429 Too Many Requests",
        &[
            ("x-ms-error-code", "TooManyRequests"),
            ("x-ms-retry-after-ms", "250"),
            ("Retry-After", "9"),
        ],
        "",
    );
    let once = ClientOptions::tables().retry(RetryPolicy {
        max_attempts: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
    });
    let mock = Mock::start_with(vec![busy], once).await;
    match mock
        .client
        .get_entity("tbl", "p", "r", &GetOptions::default())
        .await
    {
        Err(Error::Throttled { retry_after }) => {
            assert_eq!(retry_after, Some(Duration::from_millis(250)));
        }
        other => panic!("expected Throttled, got {other:?}"),
    }
}

/// The service gets an entity's text as UTF-8, as it is; with ASCII bodies
/// (the emulator's default), every other character is a JSON escape, in
/// inserts and in updates alike, and the keys in the URL are unchanged.
#[tokio::test]
async fn entity_bodies_are_ascii_only_when_asked() {
    let etag = || respond("204 No Content", &[("ETag", "W/\"e\"")], "");
    let mock = Mock::start(vec![etag(), etag(), etag()]).await;
    let entity = Entity::new("p\u{e9}", "r").with("T\u{e9}xt", "\u{e9}\u{1f600}");
    mock.client.insert_entity("tbl", &entity).await.unwrap();
    let ascii = mock.client.clone().with_ascii_bodies(true);
    ascii.insert_entity("tbl", &entity).await.unwrap();
    ascii
        .update_entity("tbl", &entity, UpdateMode::Replace, &IfMatch::Any)
        .await
        .unwrap();
    let seen = mock.seen();
    assert!(
        seen[0].body.contains("\"T\u{e9}xt\":\"\u{e9}\u{1f600}\""),
        "{}",
        seen[0].body
    );
    for escaped in &seen[1..] {
        assert!(escaped.body.is_ascii(), "{}", escaped.body);
        assert!(
            escaped.body.contains(r#""T\u00e9xt":"\u00e9\ud83d\ude00""#),
            "{}",
            escaped.body
        );
        assert!(escaped.body.contains(r#""PartitionKey":"p\u00e9""#));
    }
    assert_eq!(seen[2].method, "PUT");
    assert!(
        seen[2]
            .target
            .contains("(PartitionKey='p%C3%A9',RowKey='r')"),
        "{}",
        seen[2].target
    );
}
