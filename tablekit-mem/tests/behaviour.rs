//! Behaviour of the in-memory backend beyond the shared conformance suite:
//! adversarial paging, the deleted-table window, fault injection, wire formats,
//! sharing between clones and threads.

use std::time::Duration;

use futures::TryStreamExt as _;
use tablekit::filter::Filter;
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::{
    BatchOperation, ContinuationToken, DateTime, Entity, Error, IfMatch, InvalidInput, Query,
    QueryOrder, TableBackend, TableBackendExt, UpdateMode,
};
use tablekit_mem::{Adversarial, MemBackend};

async fn table_with_rows(backend: &MemBackend, partitions: usize, rows: usize) -> String {
    backend.create_table("rows").await.expect("create");
    for p in 0..partitions {
        let ops: Vec<_> = (0..rows)
            .map(|r| {
                BatchOperation::Insert(
                    Entity::new(format!("p{p}"), format!("r{r:03}")).with("n", r as i32),
                )
            })
            .collect();
        backend
            .submit_transaction("rows", &ops)
            .await
            .expect("load");
    }
    "rows".into()
}

/// The unsorted mode returns every match once, across pages and partitions
/// in no key order, says so through every wrapper, and is the same for the
/// same seed; the untyped stream still hands rows out in key order.
#[tokio::test]
async fn unsorted_mode_returns_rows_in_no_key_order() {
    let backend = MemBackend::builder()
        .adversarial(Adversarial::unsorted())
        .build();
    assert_eq!(backend.query_order(), QueryOrder::Unspecified);
    let wrapped = FaultInjection::new(std::sync::Arc::new(backend.clone()));
    assert_eq!(wrapped.query_order(), QueryOrder::Unspecified);
    assert_eq!(MemBackend::new().query_order(), QueryOrder::Keys);

    let table = table_with_rows(&backend, 3, 40).await;
    let raw_pages = |backend: MemBackend| async move {
        let mut query = Query::new().filter(Filter::row_key().ge("r010"));
        let mut keys = Vec::new();
        loop {
            let page = backend.query_entities("rows", &query).await.expect("page");
            keys.extend(
                page.entities
                    .into_iter()
                    .map(|e| (e.partition_key, e.row_key)),
            );
            match page.continuation {
                Some(token) => query.continuation = Some(token),
                None => return keys,
            }
        }
    };
    let keys = raw_pages(backend.clone()).await;
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 90, "every match once");
    assert_ne!(keys, sorted, "rows come in no key order");
    let descents = keys.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(
        descents > 20,
        "the order is scrambled, not shifted: {descents}"
    );
    assert_eq!(
        raw_pages(backend.clone()).await,
        keys,
        "the same seed, the same order"
    );

    let streamed: Vec<_> = backend
        .query_stream(&table, Query::new().filter(Filter::row_key().ge("r010")))
        .map_ok(|e| (e.partition_key, e.row_key))
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(streamed, sorted, "the stream sorts on the client");
}

#[tokio::test]
async fn adversarial_mode_returns_short_and_empty_pages_with_tokens() {
    let backend = MemBackend::builder()
        .adversarial(Adversarial::default())
        .build();
    let table = table_with_rows(&backend, 3, 40).await;
    let mut query = Query::new();
    let (mut empty_with_token, mut short_with_token, mut pages, mut rows) = (0, 0, 0, 0);
    loop {
        let page = backend.query_entities(&table, &query).await.expect("page");
        pages += 1;
        rows += page.entities.len();
        if page.continuation.is_some() {
            if page.entities.is_empty() {
                empty_with_token += 1;
            } else if page.entities.len() < 1000 {
                short_with_token += 1;
            }
        }
        match page.continuation {
            Some(token) => query.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(rows, 120);
    assert!(
        empty_with_token > 0,
        "expected empty pages that carry a token"
    );
    assert!(
        short_with_token > 0,
        "expected short pages that carry a token"
    );
    assert!(pages > 20, "adversarial pages are small: {pages} pages");
    // The stream hides all of this.
    assert_eq!(
        backend
            .query_all(&table, Query::new())
            .await
            .expect("all")
            .len(),
        120
    );
}

#[tokio::test]
async fn pages_hold_at_most_1000_and_tokens_are_opaque() {
    let backend = MemBackend::new();
    let table = table_with_rows(&backend, 1, 100).await;
    for extra in 1..=11 {
        let ops: Vec<_> = (0..100)
            .map(|r| BatchOperation::Insert(Entity::new("p0", format!("s{extra:02}{r:03}"))))
            .collect();
        backend
            .submit_transaction(&table, &ops)
            .await
            .expect("load");
    }
    let first = backend
        .query_entities(&table, &Query::new())
        .await
        .expect("page");
    assert_eq!(first.entities.len(), 1000);
    let token = first.continuation.expect("more follow");
    // The token reveals no key in plain text.
    assert!(!token.to_string().contains("p0"), "{token}");
    let second = backend
        .query_entities(&table, &Query::new().continuation(Some(token)))
        .await
        .expect("page");
    assert_eq!(second.entities.len(), 200);
    assert!(second.continuation.is_none());

    for bad in [
        ContinuationToken::new("garbage", None),
        ContinuationToken::new("1!4!YQ--", Some("1!9!x".into())),
    ] {
        let result = backend
            .query_entities(&table, &Query::new().continuation(Some(bad)))
            .await;
        assert!(
            matches!(
                result,
                Err(Error::Invalid(InvalidInput::ContinuationToken { .. }))
            ),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn deleted_table_name_is_unusable_for_a_while() {
    let backend = MemBackend::builder()
        .table_deletion_delay(Duration::from_millis(300))
        .build();
    backend.create_table("gone").await.expect("create");
    backend.delete_table("gone").await.expect("delete");
    assert!(matches!(
        backend.create_table("GONE").await,
        Err(Error::TableBeingDeleted { .. })
    ));
    assert!(matches!(
        backend.insert_entity("gone", &Entity::new("p", "r")).await,
        Err(Error::TableBeingDeleted { .. })
    ));
    tokio::time::sleep(Duration::from_millis(350)).await;
    backend
        .create_table("gone")
        .await
        .expect("the name is free again");

    let default = MemBackend::new();
    default.create_table("tbl").await.expect("create");
    default.delete_table("tbl").await.expect("delete");
    assert!(
        matches!(
            default.create_table("tbl").await,
            Err(Error::TableBeingDeleted { .. })
        ),
        "by default the name stays taken, as on the service"
    );
}

#[tokio::test]
async fn etags_and_timestamps_use_the_service_format() {
    let backend = MemBackend::new();
    backend.create_table("fmt").await.expect("create");
    let etag = backend
        .insert_entity("fmt", &Entity::new("p", "r"))
        .await
        .expect("insert");
    let text = etag.as_str();
    assert!(
        text.starts_with("W/\"datetime'") && text.ends_with("Z'\""),
        "{text}"
    );
    assert!(
        text.contains("%3A") && !text.contains(':'),
        "colons are percent-encoded: {text}"
    );
    let read = backend
        .try_get_entity("fmt", "p", "r")
        .await
        .expect("read")
        .expect("exists");
    let stamp = read.timestamp.expect("timestamp");
    assert_eq!(etag.timestamp(), Some(stamp));
    let age = DateTime::now().ticks() - stamp.ticks();
    assert!(
        (0..600_000_000).contains(&age),
        "the timestamp is the write time"
    );
}

#[tokio::test]
async fn a_batch_shares_one_timestamp() {
    let backend = MemBackend::new();
    backend.create_table("batch").await.expect("create");
    let ops: Vec<_> = (0..3)
        .map(|i| BatchOperation::Insert(Entity::new("p", i.to_string())))
        .collect();
    let etags = backend
        .submit_transaction("batch", &ops)
        .await
        .expect("batch");
    assert!(etags.windows(2).all(|w| w[0] == w[1]), "{etags:?}");
}

#[tokio::test]
async fn fault_injection_fails_chosen_calls_and_can_lose_responses() {
    let backend = MemBackend::new();
    let faulty = FaultInjection::new(backend.clone());
    let handle = faulty.handle();
    faulty.create_table("faults").await.expect("create");

    handle.inject(Injection::on(Operation::InsertEntity).skip(1).times(2));
    faulty
        .insert_entity("faults", &Entity::new("p", "1"))
        .await
        .expect("first insert passes");
    for _ in 0..2 {
        let failed = faulty.insert_entity("faults", &Entity::new("p", "2")).await;
        assert!(
            failed.as_ref().is_err_and(Error::is_transient),
            "{failed:?}"
        );
    }
    faulty
        .insert_entity("faults", &Entity::new("p", "2"))
        .await
        .expect("the rule is used up");
    assert_eq!(handle.calls(Operation::InsertEntity), 4);

    // A lost response: the write happened, the caller was told its outcome
    // is unknown (not that it failed), and a blind retry meets its own insert.
    handle.inject(Injection::on(Operation::InsertEntity).fault(Fault::LostResponse));
    let lost = faulty.insert_entity("faults", &Entity::new("p", "3")).await;
    assert!(
        lost.as_ref().is_err_and(Error::is_outcome_unknown),
        "{lost:?}"
    );
    assert!(!lost.as_ref().is_err_and(Error::is_transient));
    assert!(
        backend
            .try_get_entity("faults", "p", "3")
            .await
            .expect("read")
            .is_some(),
        "it was applied"
    );
    let retry = faulty.insert_entity("faults", &Entity::new("p", "3")).await;
    assert!(matches!(retry, Err(Error::EntityAlreadyExists { .. })));

    handle.inject(Injection::any().fault(Fault::Throttled).times(usize::MAX));
    let throttled = faulty
        .update_entity(
            "faults",
            &Entity::new("p", "1"),
            UpdateMode::Merge,
            &IfMatch::Any,
        )
        .await;
    assert!(matches!(throttled, Err(Error::Throttled { .. })));
    handle.clear();
    faulty
        .delete_entity("faults", "p", "1", &IfMatch::Any)
        .await
        .expect("cleared");

    // Probabilistic faults are reproducible from the seed.
    let outcomes = |seed| {
        let faulty = FaultInjection::new(backend.clone());
        faulty.handle().seed(seed);
        faulty.handle().inject(
            Injection::on(Operation::GetEntity)
                .probability(0.5)
                .times(usize::MAX),
        );
        async move {
            let mut v = Vec::new();
            for _ in 0..32 {
                v.push(faulty.try_get_entity("faults", "p", "2").await.is_ok());
            }
            v
        }
    };
    let a = outcomes(7).await;
    assert_eq!(a, outcomes(7).await);
    assert!(a.contains(&true) && a.contains(&false), "{a:?}");

    handle.set_latency(Some(Duration::from_millis(20)));
    let start = std::time::Instant::now();
    faulty
        .try_get_entity("faults", "p", "2")
        .await
        .expect("slow read");
    assert!(start.elapsed() >= Duration::from_millis(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_share_data_across_threads() {
    let backend = MemBackend::new();
    backend.create_table("shared").await.expect("create");
    let mut tasks = Vec::new();
    for t in 0..8 {
        let b = backend.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..200 {
                let e = Entity::new(format!("p{t}"), format!("{i:04}")).with("v", i);
                b.insert_entity("shared", &e).await.expect("insert");
                b.upsert_entity("shared", &e.clone().with("w", 1), UpdateMode::Merge)
                    .await
                    .expect("merge");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let all = backend
        .query_all("shared", Query::new())
        .await
        .expect("query");
    assert_eq!(all.len(), 1600);
    assert!(all.iter().all(|e| e.get("w").is_some()));
}
