//! Entity group transactions.

use super::{assert_invalid, fresh_table};
use tablekit::TableBackendExt;
use tablekit::Value;
use tablekit::backend::{BatchOperation, Query, TableBackend, UpdateMode};
use tablekit::{ETag, Entity, IfMatch};
use tablekit::{Error, InvalidInput};

fn insert(pk: &str, rk: &str) -> BatchOperation {
    BatchOperation::Insert(Entity::new(pk, rk).with("v", 1))
}

async fn row_keys(backend: &dyn TableBackend, table: &str) -> Vec<String> {
    let all = backend.query_all(table, Query::new()).await.expect("query");
    all.into_iter().map(|e| e.row_key).collect()
}

/// A batch applies every kind of write in order and returns one ETag per write;
/// 100 operations are allowed.
pub async fn batches_apply_all_operations(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "batch").await;
    let etag = backend
        .insert_entity(&table, &Entity::new("p", "upd").with("a", 1))
        .await
        .expect("insert");
    backend
        .insert_entity(&table, &Entity::new("p", "del").with("a", 1))
        .await
        .expect("insert");
    backend
        .insert_entity(&table, &Entity::new("p", "mrg").with("a", 1))
        .await
        .expect("insert");
    let ops = vec![
        insert("p", "new"),
        BatchOperation::Update {
            entity: Entity::new("p", "upd").with("b", 2),
            mode: UpdateMode::Replace,
            if_match: IfMatch::ETag(etag),
        },
        BatchOperation::Update {
            entity: Entity::new("p", "mrg").with("b", 2),
            mode: UpdateMode::Merge,
            if_match: IfMatch::Any,
        },
        BatchOperation::Upsert {
            entity: Entity::new("p", "ups").with("c", 3),
            mode: UpdateMode::Merge,
        },
        BatchOperation::Delete {
            partition_key: "p".into(),
            row_key: "del".into(),
            if_match: IfMatch::Any,
        },
    ];
    let etags = backend
        .submit_transaction(&table, &ops)
        .await
        .expect("batch");
    assert_eq!(etags.len(), ops.len(), "one result per operation");
    assert!(
        etags[..4].iter().all(Option::is_some),
        "writes return ETags: {etags:?}"
    );
    assert_eq!(etags[4], None, "deletes return no ETag");
    assert_eq!(
        row_keys(backend, &table).await,
        ["mrg", "new", "upd", "ups"]
    );
    let upd = backend
        .try_get_entity(&table, "p", "upd")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        (upd.get("a"), upd.get("b")),
        (None, Some(&Value::Int32(2))),
        "replace inside a batch"
    );
    let mrg = backend
        .try_get_entity(&table, "p", "mrg")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        (mrg.get("a"), mrg.get("b")),
        (Some(&Value::Int32(1)), Some(&Value::Int32(2))),
        "merge inside a batch"
    );
    assert_eq!(
        upd.etag.as_ref(),
        etags[1].as_ref(),
        "the returned ETag is the stored one"
    );

    let hundred: Vec<_> = (0..100).map(|i| insert("q", &format!("{i:03}"))).collect();
    backend
        .submit_transaction(&table, &hundred)
        .await
        .expect("100 operations");
    let count = backend
        .query_all(
            &table,
            Query::new().filter(tablekit::filter::Filter::partition_key().eq("q")),
        )
        .await
        .expect("query")
        .len();
    assert_eq!(count, 100);
    backend.delete_table(&table).await.expect("delete table");
}

/// A failing operation fails the whole batch: nothing is applied, and the
/// error names the operation's 0-based index and cause.
pub async fn batches_are_atomic(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "atomic").await;
    let stale: ETag = backend
        .insert_entity(&table, &Entity::new("p", "1"))
        .await
        .expect("insert");
    backend
        .insert_entity(&table, &Entity::new("p", "2"))
        .await
        .expect("insert");
    let fresh = backend
        .update_entity(
            &table,
            &Entity::new("p", "1"),
            UpdateMode::Replace,
            &IfMatch::Any,
        )
        .await
        .expect("update");

    let conflict = vec![
        insert("p", "5"),
        insert("p", "1"),
        BatchOperation::Delete {
            partition_key: "p".into(),
            row_key: "2".into(),
            if_match: IfMatch::Any,
        },
    ];
    match backend.submit_transaction(&table, &conflict).await {
        Err(Error::BatchFailed { index: 1, source }) => {
            assert!(
                matches!(*source, Error::EntityAlreadyExists { .. }),
                "cause: {source:?}"
            )
        }
        other => panic!("batch with a conflicting insert at index 1: {other:?}"),
    }
    assert_eq!(
        row_keys(backend, &table).await,
        ["1", "2"],
        "a failed batch applies nothing"
    );

    let precondition = vec![
        BatchOperation::Update {
            entity: Entity::new("p", "2").with("x", 1),
            mode: UpdateMode::Merge,
            if_match: IfMatch::Any,
        },
        BatchOperation::Delete {
            partition_key: "p".into(),
            row_key: "1".into(),
            if_match: IfMatch::ETag(stale),
        },
    ];
    match backend.submit_transaction(&table, &precondition).await {
        Err(Error::BatchFailed { index: 1, source }) => {
            assert!(
                matches!(*source, Error::PreconditionFailed { .. }),
                "cause: {source:?}"
            )
        }
        other => panic!("batch with a stale ETag at index 1: {other:?}"),
    }
    let two = backend
        .try_get_entity(&table, "p", "2")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        two.get("x"),
        None,
        "the merge before the failure was rolled back"
    );

    an_update_of_a_missing_row_fails_at_its_index(backend, &table).await;
    let ok = vec![BatchOperation::Delete {
        partition_key: "p".into(),
        row_key: "1".into(),
        if_match: IfMatch::ETag(fresh),
    }];
    backend
        .submit_transaction(&table, &ok)
        .await
        .expect("delete with the current ETag");
    assert_eq!(row_keys(backend, &table).await, ["2"]);
    backend.delete_table(&table).await.expect("delete table");
}

/// A transaction whose first operation updates a row that is not there fails
/// at index 0, with the row's own error.
async fn an_update_of_a_missing_row_fails_at_its_index(backend: &dyn TableBackend, table: &str) {
    let missing = vec![BatchOperation::Update {
        entity: Entity::new("p", "nope"),
        mode: UpdateMode::Replace,
        if_match: IfMatch::Any,
    }];
    match backend.submit_transaction(table, &missing).await {
        Err(Error::BatchFailed { index: 0, source }) => {
            assert!(
                matches!(*source, Error::EntityNotFound { .. }),
                "cause: {source:?}"
            )
        }
        other => panic!("batch updating a missing entity: {other:?}"),
    }
}

/// Batch rules: 1–100 operations, one PartitionKey, each entity once, each
/// operation valid, at most 4 MiB; a failing batch changes nothing.
pub async fn batch_rules_are_enforced(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "rules").await;
    assert_invalid(
        backend.submit_transaction(&table, &[]).await,
        "empty batch",
        |e| matches!(e, InvalidInput::BatchEmpty),
    );
    let ops: Vec<_> = (0..101).map(|i| insert("p", &i.to_string())).collect();
    assert_invalid(
        backend.submit_transaction(&table, &ops).await,
        "101 operations",
        |e| {
            matches!(
                e,
                InvalidInput::BatchTooManyOperations {
                    count: 101,
                    max: 100
                }
            )
        },
    );
    let ops = vec![insert("p", "1"), insert("p", "2"), insert("q", "3")];
    assert_invalid(
        backend.submit_transaction(&table, &ops).await,
        "two partitions",
        |e| matches!(e, InvalidInput::BatchPartitionMismatch { index: 2, .. }),
    );
    let ops = vec![
        insert("p", "1"),
        insert("p", "2"),
        BatchOperation::Delete {
            partition_key: "p".into(),
            row_key: "1".into(),
            if_match: IfMatch::Any,
        },
    ];
    assert_invalid(
        backend.submit_transaction(&table, &ops).await,
        "entity twice",
        |e| {
            matches!(
                e,
                InvalidInput::BatchDuplicateEntity {
                    first: 0,
                    index: 2,
                    ..
                }
            )
        },
    );
    let ops = vec![insert("p", "1"), insert("p", "2"), insert("p", "bad/key")];
    match backend.submit_transaction(&table, &ops).await {
        Err(Error::BatchFailed { index: 2, source }) => assert!(
            matches!(
                *source,
                Error::Invalid(InvalidInput::KeyForbiddenCharacter { .. })
            ),
            "cause: {source:?}"
        ),
        other => panic!("batch with an invalid key at index 2: {other:?}"),
    }
    // Nine entities of about 480 KB of JSON each: every entity is valid, the
    // batch is over 4 MiB.
    let big = "x".repeat(32_000);
    let ops: Vec<_> = (0..9)
        .map(|i| {
            let mut e = Entity::new("p", i.to_string());
            for j in 0..15 {
                e.insert(format!("s{j}"), big.as_str());
            }
            BatchOperation::Insert(e)
        })
        .collect();
    assert_invalid(
        backend.submit_transaction(&table, &ops).await,
        "batch over 4 MiB",
        |e| matches!(e, InvalidInput::BatchTooLarge { .. }),
    );
    assert!(
        row_keys(backend, &table).await.is_empty(),
        "rejected batches apply nothing"
    );
    backend.delete_table(&table).await.expect("delete table");
}
