//! Compaction: the engine's file cut to its data, with nothing lost and the
//! store usable throughout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tablekit::{
    BatchOperation, Entity, Error, IfMatch, Query, StorageFailure, TableBackend, TableBackendExt,
};
use tablekit_local::{FILE_NAME, LocalStorage};

const TABLE: &str = "Things";

async fn load(store: &LocalStorage, rows: usize) {
    store.create_table(TABLE).await.unwrap();
    for start in (0..rows).step_by(100) {
        let ops: Vec<_> = (start..start + 100)
            .map(|i| {
                BatchOperation::Insert(
                    Entity::new(format!("p{}", i / 1000), format!("r{i:06}"))
                        .with("V", "v".repeat(200)),
                )
            })
            .collect();
        store.submit_transaction(TABLE, &ops).await.unwrap();
    }
}

async fn rows(store: &LocalStorage) -> Vec<Entity> {
    store.query_all(TABLE, Query::new()).await.unwrap()
}

#[tokio::test]
async fn compaction_shortens_the_file_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::open(dir.path()).unwrap();
    load(&store, 4_000).await;
    for i in (0..4_000).filter(|i| i % 4 != 0) {
        store
            .delete_entity(
                TABLE,
                &format!("p{}", i / 1000),
                &format!("r{i:06}"),
                &IfMatch::Any,
            )
            .await
            .unwrap();
    }
    let kept = rows(&store).await;
    assert_eq!(kept.len(), 1_000);
    let compaction = store.compact().await.unwrap();
    let length = std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len();
    assert_eq!(compaction.after, length);
    assert!(
        compaction.after * 2 < compaction.before,
        "{compaction:?}: three rows in four are gone"
    );
    assert_eq!(rows(&store).await, kept, "every row, with its ETag");
    // The store takes writes after, and keeps them across a reopen.
    store
        .insert_entity(TABLE, &Entity::new("p0", "after"))
        .await
        .unwrap();
    drop(store);
    let store = LocalStorage::open(dir.path()).unwrap();
    assert_eq!(rows(&store).await.len(), 1_001);
    assert_eq!(store.write_stats().replayed, 0);
}

#[tokio::test]
async fn a_crash_after_a_compaction_keeps_the_writes_since() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = LocalStorage::open(live.path()).unwrap();
    load(&store, 2_000).await;
    store.compact().await.unwrap();
    for i in 0..50 {
        store
            .insert_entity(TABLE, &Entity::new("late", format!("{i}")))
            .await
            .unwrap();
    }
    let expected = rows(&store).await;
    for name in [FILE_NAME, "tablekit.journal"] {
        std::fs::copy(live.path().join(name), image.path().join(name)).unwrap();
    }
    let recovered = LocalStorage::open(image.path()).unwrap();
    assert!(recovered.write_stats().replayed > 0);
    assert_eq!(rows(&recovered).await, expected);
}

/// Reads and writes go on while compactions run: each succeeds, and each
/// compaction either ends or says reads kept it waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_writes_go_on_beside_compactions() {
    let store = LocalStorage::temporary().unwrap();
    load(&store, 3_000).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..4 {
        let (store, stop) = (store.clone(), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("{t}-{n}");
                store
                    .upsert_entity(
                        TABLE,
                        &Entity::new("busy", &key).with("N", n),
                        tablekit::UpdateMode::Replace,
                    )
                    .await
                    .unwrap();
                let got = store
                    .get_entity(TABLE, "busy", &key, &Default::default())
                    .await
                    .unwrap();
                assert_eq!(got.get("N"), Some(&tablekit::Value::Int32(n)));
                n += 1;
            }
            n
        }));
    }
    let mut compacted = 0;
    for _ in 0..5 {
        match store.compact().await {
            Ok(_) => compacted += 1,
            Err(Error::Storage {
                failure: StorageFailure::Locked,
                ..
            }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut written = 0;
    for task in tasks {
        written += task.await.unwrap();
    }
    assert!(compacted > 0, "no compaction ended");
    let busy = store
        .query_all(
            TABLE,
            Query::new().filter(tablekit::filter::prop("PartitionKey").eq("busy")),
        )
        .await
        .unwrap();
    assert_eq!(busy.len(), written as usize);
}

#[tokio::test]
async fn a_read_only_store_is_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    drop(LocalStorage::open(dir.path()).unwrap());
    let store = LocalStorage::open_read_only(dir.path()).unwrap();
    match store.compact().await {
        Err(Error::Storage {
            failure: StorageFailure::ReadOnly,
            ..
        }) => {}
        other => panic!("expected a read-only refusal, got {other:?}"),
    }
}

/// A compaction whose caller stops waiting (its future dropped after its
/// first poll) still runs whole, between two groups: the writes sent after
/// it and every row are there.
#[tokio::test]
async fn a_dropped_compaction_leaves_the_store_whole() {
    let store = LocalStorage::temporary().unwrap();
    load(&store, 1_000).await;
    let before = rows(&store).await;
    {
        let mut compaction = Box::pin(store.compact());
        assert!(futures::poll!(compaction.as_mut()).is_pending());
    }
    store
        .insert_entity(TABLE, &Entity::new("p0", "after"))
        .await
        .unwrap();
    let after = rows(&store).await;
    assert_eq!(after.len(), before.len() + 1);
    assert!(before.iter().all(|e| after.contains(e)));
}
