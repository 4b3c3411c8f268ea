//! What only a store on disk must do: keep its data across a reopen, refuse
//! a second opener, never hand out an ETag twice, recover from a torn tail,
//! and take many writers at once.

use std::sync::Arc;

use tablekit::queue::{PutMessageOptions, QueueStore};
use tablekit::{
    BatchOperation, BlobStore, Entity, Error, PutCondition, StorageFailure, TableBackend,
    TableBackendExt, UpdateOptions, Value,
};
use tablekit_local::{FILE_NAME, LocalStorage};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

#[tokio::test]
async fn data_survives_a_reopen() {
    let dir = dir();
    let etag = {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("Orders").await.unwrap();
        let entity = Entity::new("p", "r")
            .with("Total", 12.5)
            .with("When", tablekit::DateTime::now())
            .with("Bytes", vec![0u8, 1, 2]);
        let etag = store.insert_entity("Orders", &entity).await.unwrap();
        store.create_container("blobs").await.unwrap();
        store
            .put_blob("blobs", "a/b", b"hello".to_vec(), &PutCondition::None)
            .await
            .unwrap();
        store.create_queue("jobs").await.unwrap();
        store
            .put_message("jobs", "work", &PutMessageOptions::default())
            .await
            .unwrap();
        etag
    };
    let store = LocalStorage::open(dir.path()).unwrap();
    let got = store
        .get_entity("orders", "p", "r", &Default::default())
        .await
        .unwrap();
    assert_eq!(got.etag.as_ref(), Some(&etag));
    assert_eq!(got.get("Total"), Some(&Value::Double(12.5)));
    assert_eq!(got.get("Bytes"), Some(&Value::Binary(vec![0, 1, 2])));
    let tables = store.list_tables(&Default::default()).await.unwrap();
    assert_eq!(tables.tables, ["Orders"], "the name as created is kept");
    assert_eq!(store.get_blob("blobs", "a/b").await.unwrap().data, b"hello");
    let messages = store
        .get_messages("jobs", 1, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(messages[0].text, "work");
}

#[tokio::test]
async fn a_second_opener_is_refused_with_a_clear_error() {
    let dir = dir();
    let store = LocalStorage::open(dir.path()).unwrap();
    let err = LocalStorage::open(dir.path()).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Storage {
                failure: StorageFailure::Locked,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("another handle, in this process or another, has it open"),
        "{err}"
    );
    drop(store);
    LocalStorage::open(dir.path()).expect("free again once closed");
}

#[tokio::test]
async fn etags_are_never_handed_out_twice_across_restarts() {
    let dir = dir();
    let mut seen = std::collections::HashSet::new();
    for round in 0..5 {
        let store = LocalStorage::open(dir.path()).unwrap();
        if round == 0 {
            store.create_table("things").await.unwrap();
        }
        for i in 0..20 {
            let entity = Entity::new("p", format!("r{i}")).with("Round", round);
            let etag = store
                .upsert_entity("things", &entity, tablekit::UpdateMode::Replace)
                .await
                .unwrap();
            assert!(seen.insert(etag.clone()), "{etag:?} handed out twice");
        }
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_store_is_refused() {
    let dir = dir();
    std::fs::write(
        dir.path().join(FILE_NAME),
        b"not a database at all, just text",
    )
    .unwrap();
    let err = LocalStorage::open(dir.path()).unwrap_err();
    assert!(matches!(&err, Error::Storage { .. }), "{err:?}");
}

/// A commit cut short by a crash (its last pages never written) loses that
/// commit only: the store reopens with every earlier write.
#[tokio::test]
async fn a_torn_tail_loses_only_the_unacknowledged_commit() {
    let dir = dir();
    let file = dir.path().join(FILE_NAME);
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("things").await.unwrap();
        for i in 0..50 {
            let e = Entity::new("p", format!("r{i:03}")).with("V", "x".repeat(2000));
            store.insert_entity("things", &e).await.unwrap();
        }
    }
    let acknowledged = std::fs::read(&file).unwrap();
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        let e = Entity::new("p", "late").with("V", "y".repeat(30_000));
        store.insert_entity("things", &e).await.unwrap();
    }
    let after = std::fs::read(&file).unwrap();
    // A crash mid-commit: the new commit's bytes written only in part,
    // over the file as it was when the earlier writes were acknowledged.
    for cut in [
        acknowledged.len() / 2,
        acknowledged.len() - 1,
        after.len() - 4096,
    ] {
        let mut torn = after.clone();
        let keep = cut.min(torn.len());
        torn[..keep.min(acknowledged.len())]
            .copy_from_slice(&acknowledged[..keep.min(acknowledged.len())]);
        std::fs::write(&file, &torn).unwrap();
        match LocalStorage::open(dir.path()) {
            Ok(store) => {
                for i in 0..50 {
                    let got = store
                        .get_entity("things", "p", &format!("r{i:03}"), &Default::default())
                        .await
                        .unwrap();
                    assert_eq!(got.get("V"), Some(&Value::String("x".repeat(2000))));
                }
            }
            Err(err) => assert!(
                matches!(
                    &err,
                    Error::Storage {
                        failure: StorageFailure::Damaged,
                        ..
                    }
                ),
                "a torn store either reopens whole or says it is damaged: {err:?}"
            ),
        }
    }
}

/// 32 tasks updating one row through `Table::update`-style read-modify-write
/// with ETags: every increment lands exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_writers_on_one_row_count_exactly() {
    let store = LocalStorage::temporary().unwrap();
    let run = tablekit_conformance::run_counter(
        Arc::new(store),
        32,
        50,
        0.0,
        0.0,
        UpdateOptions::default().attempts(400),
    )
    .await;
    println!("{run:?}");
    assert_eq!(run.applied, 1600, "{run:?}");
    assert_eq!(run.final_count, 1600, "{run:?}");
    assert_eq!(run.gave_up, 0, "{run:?}");
}

/// Many tasks writing and reading different rows and transactions at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_write_and_read_at_once() {
    let store = LocalStorage::temporary().unwrap();
    store.create_table("things").await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    let ops: Vec<_> = (0..5)
                        .map(|k| {
                            BatchOperation::Insert(
                                Entity::new(format!("p{task}"), format!("r{i:02}-{k}"))
                                    .with("K", k),
                            )
                        })
                        .collect();
                    store.submit_transaction("things", &ops).await.unwrap();
                    let rows = store
                        .query_all(
                            "things",
                            tablekit::Query::new().filter(
                                tablekit::filter::prop("PartitionKey").eq(format!("p{task}")),
                            ),
                        )
                        .await
                        .unwrap();
                    assert_eq!(rows.len(), (i + 1) * 5);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// Writes that arrive together share commits (one sync of the file for
/// many writes), and each is acknowledged with its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_commits() {
    let store = LocalStorage::temporary().unwrap();
    store.create_table("things").await.unwrap();
    let before = store.write_stats();
    let writes = (0..64).map(|i| {
        let store = store.clone();
        async move {
            let entity = Entity::new("p", format!("r{i:02}")).with("I", i);
            store.insert_entity("things", &entity).await
        }
    });
    let etags: Vec<_> = futures::future::join_all(writes)
        .await
        .into_iter()
        .map(|etag| etag.expect("an insert"))
        .collect();
    let unique: std::collections::HashSet<_> = etags.iter().map(|e| e.as_str()).collect();
    assert_eq!(unique.len(), 64, "every write has an ETag of its own");
    let after = store.write_stats();
    let (writes, commits) = (after.writes - before.writes, after.commits - before.commits);
    assert_eq!(writes, 64, "{after:?}");
    assert!(commits < writes, "64 writes at once took {commits} commits");
    let rows = store
        .query_all("things", tablekit::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.len(), 64);
}

/// In a group of writes, a write that is refused (a condition not met, a
/// transaction whose second operation fails) changes nothing, and the
/// writes beside it are applied as if each had its own commit: of 32
/// updates under one ETag exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_in_a_group_changes_nothing() {
    let store = LocalStorage::temporary().unwrap();
    store.create_table("things").await.unwrap();
    let etag = store
        .insert_entity("things", &Entity::new("p", "contested").with("N", 0))
        .await
        .unwrap();
    store
        .insert_entity("things", &Entity::new("p", "taken"))
        .await
        .unwrap();
    for round in 0..5 {
        let updates = (0..32).map(|n| {
            let (store, etag) = (store.clone(), etag.clone());
            async move {
                let entity = Entity::new("p", "contested").with("N", n);
                let if_match = tablekit::IfMatch::ETag(etag);
                store
                    .update_entity("things", &entity, tablekit::UpdateMode::Replace, &if_match)
                    .await
            }
        });
        // A transaction whose first insert is new and whose second meets a
        // row that exists: none of it may land.
        let doomed = async {
            let ops = [
                BatchOperation::Insert(Entity::new("p", format!("half-{round}"))),
                BatchOperation::Insert(Entity::new("p", "taken")),
            ];
            store.submit_transaction("things", &ops).await
        };
        let fresh = (0..8).map(|n| {
            let store = store.clone();
            async move {
                let entity = Entity::new("p", format!("fresh-{round}-{n}"));
                store.insert_entity("things", &entity).await
            }
        });
        let (updates, doomed, fresh) = futures::join!(
            futures::future::join_all(updates),
            doomed,
            futures::future::join_all(fresh)
        );
        let won = updates.iter().filter(|u| u.is_ok()).count();
        let expected = usize::from(round == 0);
        assert_eq!(won, expected, "round {round}: {updates:?}");
        assert!(
            updates
                .iter()
                .filter_map(|u| u.as_ref().err())
                .all(|e| matches!(e, Error::PreconditionFailed { .. })),
            "{updates:?}"
        );
        assert!(
            matches!(&doomed, Err(Error::BatchFailed { index: 1, source }) if matches!(**source, Error::EntityAlreadyExists { .. })),
            "{doomed:?}"
        );
        assert!(fresh.iter().all(Result::is_ok), "{fresh:?}");
        let half = store
            .try_get_entity("things", "p", &format!("half-{round}"))
            .await
            .unwrap();
        assert!(half.is_none(), "a refused transaction left a row");
    }
    let rows = store
        .query_all("things", tablekit::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.len(), 2 + 5 * 8);
    eprintln!("{:?}", store.write_stats());
}

/// A full disk (here the store's size cap, which fails writes the same
/// way) gives a typed error; the write that met it is not applied and every
/// acknowledged write is kept.
#[tokio::test]
async fn a_full_disk_is_a_typed_error_and_loses_nothing() {
    let dir = dir();
    let mut acknowledged = Vec::new();
    let refused = {
        let store = LocalStorage::builder()
            .max_size(4 << 20)
            .open(dir.path())
            .unwrap();
        store.create_table("things").await.unwrap();
        let (taken, refused) = insert_until_refused(&store, "r", 10_000).await;
        acknowledged.extend(taken);
        let (refused, err) = refused.expect("the cap is reached");
        assert!(
            matches!(
                &err,
                Error::Storage {
                    failure: StorageFailure::DiskFull,
                    ..
                }
            ),
            "{err:?}"
        );
        // While there is no room, large writes are refused, typed too. The
        // refusal opens the engine again, whose pages may then be laid out
        // with a little more room: a few writes may still fit first.
        let (taken, refused_again) = insert_until_refused(&store, "after", 50).await;
        acknowledged.extend(taken);
        let (_, err) = refused_again.expect("the cap let 50 more large writes in");
        assert!(matches!(&err, Error::Storage { .. }), "{err:?}");
        // Reads go on.
        assert!(
            store
                .try_get_entity("things", "p", "r00000")
                .await
                .unwrap()
                .is_some()
        );
        // Once there is room, the same handle takes writes again: nothing
        // needs to drop it (every clone of it would have to).
        store.set_max_size(64 << 20).expect("a capped store");
        let healed = Entity::new("p", "healed").with("V", 1);
        store.insert_entity("things", &healed).await.unwrap();
        acknowledged.push(healed.row_key);
        store
            .delete_entity("things", "p", "healed", &tablekit::IfMatch::Any)
            .await
            .unwrap();
        acknowledged.pop();
        refused
    };
    assert!(acknowledged.len() > 10);
    let store = LocalStorage::open(dir.path()).unwrap();
    let rows = store
        .query_all("things", tablekit::Query::new())
        .await
        .unwrap();
    let keys: Vec<_> = rows.iter().map(|r| r.row_key.clone()).collect();
    acknowledged.sort();
    assert_eq!(
        keys, acknowledged,
        "exactly the acknowledged writes, {refused} not applied"
    );
    // And the store takes writes again once it has room.
    store
        .insert_entity("things", &Entity::new("p", "again"))
        .await
        .unwrap();
}

/// What the size cap guarantees, held through writes and refusals of
/// every size: the engine's file never grows past the cap; a refused write
/// (a transaction of several rows too) leaves nothing of itself; every
/// acknowledged write is kept; a delete frees room that later writes take.
#[tokio::test]
async fn the_size_cap_holds_the_file_and_refuses_whole_writes() {
    let dir = dir();
    let cap = 3 << 20;
    let file = dir.path().join(tablekit_local::FILE_NAME);
    let mut rng = fastrand::Rng::with_seed(15);
    let mut kept = std::collections::BTreeSet::new();
    let (mut refusals, mut taken_after_refusal) = (0, 0);
    {
        let store = LocalStorage::builder()
            .max_size(cap)
            .open(dir.path())
            .unwrap();
        store.create_table("things").await.unwrap();
        let mut refused_last = false;
        for n in 0..300 {
            let size = [100, 5_000, 30_000][rng.usize(..3)];
            let rows: Vec<Entity> = (0..rng.usize(1..=4))
                .map(|i| Entity::new("p", format!("r{n:04}-{i}")).with("V", "v".repeat(size)))
                .collect();
            let written = if rows.len() == 1 {
                store.insert_entity("things", &rows[0]).await.map(drop)
            } else {
                let ops: Vec<_> = rows.iter().cloned().map(BatchOperation::Insert).collect();
                store.submit_transaction("things", &ops).await.map(drop)
            };
            match written {
                Ok(()) => {
                    kept.extend(rows.iter().map(|r| r.row_key.clone()));
                    taken_after_refusal += usize::from(refused_last);
                    refused_last = false;
                }
                Err(Error::Storage {
                    failure: StorageFailure::DiskFull,
                    ..
                }) => {
                    refusals += 1;
                    refused_last = true;
                }
                Err(e) => panic!("write {n}: {e:?}"),
            }
            let length = std::fs::metadata(&file).unwrap().len();
            assert!(
                length <= cap,
                "write {n}: the file is {length} bytes, past {cap}"
            );
            // Now and then, room made by deletes (which a full file may
            // refuse too: a delete writes pages anew as any write does).
            if n % 50 == 49 {
                let gone: Vec<String> = kept.iter().take(kept.len() / 2).cloned().collect();
                for key in gone {
                    match store
                        .delete_entity("things", "p", &key, &tablekit::IfMatch::Any)
                        .await
                    {
                        Ok(()) => {
                            kept.remove(&key);
                        }
                        Err(Error::Storage {
                            failure: StorageFailure::DiskFull,
                            ..
                        }) => refusals += 1,
                        Err(e) => panic!("delete {key}: {e:?}"),
                    }
                }
            }
        }
        let stored: std::collections::BTreeSet<String> = store
            .query_all("things", tablekit::Query::new())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.row_key)
            .collect();
        assert_eq!(
            stored, kept,
            "exactly the acknowledged writes, no part of a refused one"
        );
    }
    assert!(refusals > 0, "the cap was never reached");
    assert!(
        taken_after_refusal > 0,
        "no write was taken after a refusal"
    );
    let reopened = LocalStorage::open(dir.path()).unwrap();
    let stored: std::collections::BTreeSet<String> = reopened
        .query_all("things", tablekit::Query::new())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.row_key)
        .collect();
    assert_eq!(stored, kept);
}

/// Inserts rows of 20 KB, keyed `{prefix}{n:05}`, until one is refused or
/// `most` are taken: the keys acknowledged, and the key refused with its
/// error.
async fn insert_until_refused(
    store: &LocalStorage,
    prefix: &str,
    most: usize,
) -> (Vec<String>, Option<(String, Error)>) {
    let mut acknowledged = Vec::new();
    for n in 0..most {
        let e = Entity::new("p", format!("{prefix}{n:05}")).with("V", "v".repeat(20_000));
        match store.insert_entity("things", &e).await {
            Ok(_) => acknowledged.push(e.row_key),
            Err(err) => return (acknowledged, Some((e.row_key, err))),
        }
    }
    (acknowledged, None)
}

/// A store closed while its engine waits to be opened again (a write was
/// just refused for the file, and nothing ran since) closes: the close
/// opens the engine again, applies the journal and checkpoints, and keeps
/// every acknowledged write. It once waited forever for a lock of its own.
#[test]
fn a_store_closed_right_after_a_full_disk_closes_and_keeps_its_writes() {
    let dir = dir();
    let path = dir.path().to_owned();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let acknowledged = runtime.block_on(async {
            let store = LocalStorage::builder()
                .max_size(2 << 20)
                .open(&path)
                .unwrap();
            store.create_table("things").await.unwrap();
            let (acknowledged, refused) = insert_until_refused(&store, "r", 10_000).await;
            assert!(refused.is_some(), "the cap was never reached");
            acknowledged
        });
        // The store was dropped right after the refusal.
        done.send(acknowledged).unwrap();
    });
    let acknowledged = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the store closed");
    assert!(acknowledged.len() > 10);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let store = LocalStorage::open(dir.path()).unwrap();
    let rows = runtime
        .block_on(store.query_all("things", tablekit::Query::new()))
        .unwrap();
    let keys: Vec<_> = rows.into_iter().map(|r| r.row_key).collect();
    assert_eq!(keys, acknowledged);
}

/// Every file of a directory with its length and bytes' checksum, to see
/// that nothing in it changed.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// A store opened read-only reads its tables, blobs and queues, refuses
/// every write with `StorageFailure::ReadOnly`, and changes nothing in its
/// directory; a missing store is an error that creates nothing.
#[tokio::test]
async fn a_read_only_store_reads_and_changes_nothing() {
    let dir = dir();
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("Orders").await.unwrap();
        store
            .insert_entity("Orders", &Entity::new("p", "r").with("Total", 12.5))
            .await
            .unwrap();
        store.create_container("blobs").await.unwrap();
        store
            .put_blob("blobs", "a", b"hello".to_vec(), &PutCondition::None)
            .await
            .unwrap();
        store.create_queue("jobs").await.unwrap();
        store
            .put_message("jobs", "work", &PutMessageOptions::default())
            .await
            .unwrap();
    }
    let before = snapshot(dir.path());
    {
        let store = LocalStorage::open_read_only(dir.path()).unwrap();
        let row = store
            .get_entity("Orders", "p", "r", &Default::default())
            .await
            .unwrap();
        assert_eq!(row.get("Total"), Some(&Value::Double(12.5)));
        assert_eq!(store.get_blob("blobs", "a").await.unwrap().data, b"hello");
        assert_eq!(store.peek_messages("jobs", 1).await.unwrap().len(), 1);
        let refused = |result: tablekit::Result<_>| match result {
            Err(Error::Storage {
                failure: StorageFailure::ReadOnly,
                ..
            }) => {}
            other => panic!("expected a read-only refusal, got {other:?}"),
        };
        refused(
            store
                .insert_entity("Orders", &Entity::new("p", "s"))
                .await
                .map(drop),
        );
        refused(store.create_table("Other").await.map(drop));
        // What exists is answered as existing, so "create if missing" works.
        assert!(matches!(
            store.create_table("Orders").await,
            Err(Error::TableAlreadyExists { .. })
        ));
        assert!(matches!(
            store.create_container("blobs").await,
            Err(Error::ContainerAlreadyExists { .. })
        ));
        assert!(!store.create_queue("jobs").await.unwrap());
        refused(
            store
                .delete_entity("Orders", "p", "r", &tablekit::IfMatch::Any)
                .await
                .map(drop),
        );
        refused(
            store
                .put_blob("blobs", "b", b"x".to_vec(), &PutCondition::None)
                .await
                .map(drop),
        );
        refused(
            store
                .get_messages("jobs", 1, std::time::Duration::from_secs(30))
                .await
                .map(drop),
        );
    }
    assert_eq!(snapshot(dir.path()), before, "the directory changed");
    // Written again afterwards, as ever.
    let store = LocalStorage::open(dir.path()).unwrap();
    store
        .insert_entity("Orders", &Entity::new("p", "s"))
        .await
        .unwrap();
    drop(store);

    let missing = dir.path().join("none");
    match LocalStorage::open_read_only(&missing) {
        Err(Error::Storage {
            failure: StorageFailure::Io,
            message,
            ..
        }) => assert!(message.contains("no store"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(!missing.exists(), "a read-only open made a directory");
}

/// A write the store refuses (a delete of no row, an insert over a row, a
/// condition not met, a transaction whose first operation is refused)
/// changes nothing, so it leaves the engine's file untouched: it grows, shrinks
/// and syncs nothing either. (Taking the write's time first once made the
/// engine grow its file, sync it and cut it back for each refusal.)
#[tokio::test]
async fn refused_writes_leave_the_file_untouched() {
    use tablekit::{IfMatch, UpdateMode};
    let dir = dir();
    let store = LocalStorage::open(dir.path()).unwrap();
    store.create_table("Refusals").await.unwrap();
    let file = dir.path().join(FILE_NAME);
    let refuse = |row: Entity, etag: Option<tablekit::ETag>| {
        let store = store.clone();
        async move {
            let missing = store
                .delete_entity("Refusals", "p", "none", &IfMatch::Any)
                .await;
            assert!(
                matches!(missing, Err(Error::EntityNotFound { .. })),
                "{missing:?}"
            );
            if let Some(etag) = etag {
                let taken = store.insert_entity("Refusals", &row).await;
                assert!(
                    matches!(taken, Err(Error::EntityAlreadyExists { .. })),
                    "{taken:?}"
                );
                let stale = store
                    .update_entity("Refusals", &row, UpdateMode::Replace, &IfMatch::ETag(etag))
                    .await;
                assert!(
                    matches!(stale, Err(Error::PreconditionFailed { .. })),
                    "{stale:?}"
                );
            }
            let operations = [
                BatchOperation::Delete {
                    partition_key: "p".into(),
                    row_key: "none".into(),
                    if_match: IfMatch::Any,
                },
                BatchOperation::Insert(row.clone()),
            ];
            let batch = store.submit_transaction("Refusals", &operations).await;
            assert!(batch.is_err(), "{batch:?}");
        }
    };
    let row = Entity::new("p", "r").with("N", 1);
    for stored in [false, true] {
        let etag = if stored {
            let etag = store.insert_entity("Refusals", &row).await.unwrap();
            let replaced = row.clone().with("N", 2);
            store
                .upsert_entity("Refusals", &replaced, UpdateMode::Replace)
                .await
                .unwrap();
            Some(etag)
        } else {
            None
        };
        let before = std::fs::metadata(&file).unwrap();
        // Past the store's bound on the times it gave (100 ms after the
        // last write), where taking a time changes a row.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        for _ in 0..20 {
            refuse(row.clone(), etag.clone()).await;
        }
        let after = std::fs::metadata(&file).unwrap();
        assert_eq!(after.len(), before.len());
        assert_eq!(after.modified().unwrap(), before.modified().unwrap());
    }
}
