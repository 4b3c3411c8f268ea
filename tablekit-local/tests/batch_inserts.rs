//! Transactions of many inserts, which the store checks in one pass over
//! the range of their keys instead of a lookup each, decide as the
//! in-memory store does: the same refusal at the same operation, or the
//! same rows after.

use tablekit::{BatchOperation, Entity, Error, IfMatch, Query, TableBackend, UpdateMode};
use tablekit_local::LocalStorage;
use tablekit_mem::MemBackend;

/// What a store made of a transaction: the failing operation and the
/// kind of its error, or nothing for a commit.
fn outcome(result: &tablekit::Result<Vec<Option<tablekit::ETag>>>) -> Option<(usize, String)> {
    let error = result.as_ref().err()?;
    let kind = |e: &Error| format!("{:?}", std::mem::discriminant(e));
    Some(match error {
        Error::BatchFailed { index, source } => (*index, kind(source)),
        other => (usize::MAX, kind(other)),
    })
}

/// A transaction of 8 to 40 operations on one partition, mostly inserts,
/// over 200 keys of which `held` hold rows: in every other round a key
/// held is deleted and a free one inserted (which commits), in the others
/// any key is written any way; now and then a key named twice (which both
/// stores refuse at their door).
fn transaction(
    rng: &mut fastrand::Rng,
    round: usize,
    held: &std::collections::BTreeSet<String>,
) -> Vec<BatchOperation> {
    let n = rng.usize(8..=40);
    let clean = round.is_multiple_of(2);
    let mut keys: Vec<String> = (0..200).map(|k| format!("{k:03}")).collect();
    if rng.bool() {
        // A window of keys in order, as a load writes them.
        let start = rng.usize(..200 - n);
        keys = keys[start..start + n].to_vec();
    } else {
        rng.shuffle(&mut keys);
        keys.truncate(n);
    }
    if keys.len() > 1 && rng.usize(..10) == 0 {
        keys[0] = keys[1].clone();
    }
    keys.into_iter()
        .map(|k| {
            let entity = Entity::new("p", k.clone()).with("Round", round as i64);
            let delete = |entity: Entity| BatchOperation::Delete {
                partition_key: entity.partition_key,
                row_key: entity.row_key,
                if_match: IfMatch::Any,
            };
            match rng.usize(..10) {
                // A clean round deletes what is held, and inserts the rest.
                _ if clean && held.contains(&k) => delete(entity),
                0 if !clean => BatchOperation::Upsert {
                    entity,
                    mode: UpdateMode::Replace,
                },
                1 if !clean => delete(entity),
                _ => BatchOperation::Insert(entity),
            }
        })
        .collect()
}

/// The rows of the table, keys and properties.
async fn rows(store: &dyn TableBackend) -> Vec<(String, String, tablekit::Properties)> {
    let rows = tablekit::TableBackendExt::query_all(store, "Things", Query::new())
        .await
        .unwrap();
    rows.into_iter()
        .map(|e| (e.partition_key, e.row_key, e.properties))
        .collect()
}

#[tokio::test]
async fn many_inserts_decide_as_the_memory_store_does() {
    let local = LocalStorage::temporary().unwrap();
    let memory = MemBackend::new();
    let stores: [&dyn TableBackend; 2] = [&local, &memory];
    for store in stores {
        store.create_table("Things").await.unwrap();
    }
    let mut rng = fastrand::Rng::with_seed(66);
    let (mut committed, mut refused) = (0, 0);
    for round in 0..300 {
        let held = rows(&memory)
            .await
            .into_iter()
            .map(|(_, rk, _)| rk)
            .collect();
        let operations = transaction(&mut rng, round, &held);
        let on_local = local.submit_transaction("Things", &operations).await;
        let on_memory = memory.submit_transaction("Things", &operations).await;
        assert_eq!(
            outcome(&on_local),
            outcome(&on_memory),
            "round {round}: local {on_local:?}, memory {on_memory:?}"
        );
        match on_local {
            Ok(_) => committed += 1,
            Err(_) => refused += 1,
        }
        assert_eq!(rows(&local).await, rows(&memory).await, "round {round}");
    }
    assert_eq!(rows(&local).await, rows(&memory).await);
    // Both ways were taken many times.
    assert!(
        committed > 30 && refused > 30,
        "{committed} committed, {refused} refused"
    );
}
