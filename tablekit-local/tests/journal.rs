//! The journal: acknowledged writes that the engine's file does not hold
//! durably yet are applied again by the next open.
//!
//! A *crash image* is the store's files copied while it is open and idle:
//! what a killed process leaves (the engine's file at its last checkpoint,
//! or later, and the journal with every acknowledged record).

use std::path::Path;
use std::time::Duration;

use tablekit::queue::{PutMessageOptions, QueueStore};
use tablekit::{
    BatchOperation, BlobStore, Entity, Error, IfMatch, PutCondition, Query, StorageFailure,
    TableBackend, TableBackendExt, Value,
};
use tablekit_local::{FILE_NAME, LocalStorage};

const JOURNAL: &str = "tablekit.journal";

fn open(dir: &Path) -> LocalStorage {
    LocalStorage::builder()
        .table_deletion_delay(Duration::ZERO)
        .open(dir)
        .unwrap()
}

/// Copies the store's files in `from` to `to`, as a crash leaves them.
fn crash_image(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for name in [FILE_NAME, JOURNAL] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
}

/// Everything a store holds that a test can read: each table's rows
/// (keys, properties, ETags), the named containers' blobs, the named
/// queues' messages.
async fn contents(store: &LocalStorage, containers: &[&str], queues: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let tables = store.list_tables(&Default::default()).await.unwrap();
    out.push(format!("tables: {:?}", tables.tables));
    for table in &tables.tables {
        // Every table listed reads, the empty one too.
        let rows = store.query_entities(table, &Query::new()).await;
        out.push(format!(
            "{table}: {:?}",
            rows.map(|page| page.entities.len())
        ));
        for row in store.query_all(table, Query::new()).await.unwrap() {
            out.push(format!("{table}: {row:?}"));
        }
    }
    for container in containers {
        match store.list_blobs(container, &Default::default()).await {
            Ok(page) => {
                for blob in page.blobs {
                    let data = store.get_blob(container, &blob.name).await.unwrap().data;
                    out.push(format!("{container}: {blob:?} {data:?}"));
                }
            }
            Err(e) => out.push(format!("{container}: {e}")),
        }
    }
    for queue in queues {
        match store.peek_messages(queue, 32).await {
            Ok(messages) => out.extend(messages.iter().map(|m| format!("{queue}: {m:?}"))),
            Err(e) => out.push(format!("{queue}: {e}")),
        }
    }
    out
}

/// Writes of every kind the store records: inserts, replaces, merges and
/// deletes of rows, a transaction, a deleted table, a table left empty, blobs put and deleted,
/// a deleted container (a range of keys removed), messages put, taken,
/// deleted, and a deleted queue.
async fn write_every_kind(store: &LocalStorage) {
    store.create_table("Kept").await.unwrap();
    store.create_table("Dropped").await.unwrap();
    for i in 0..20 {
        let e = Entity::new("p", format!("r{i:02}")).with("N", i);
        store.insert_entity("Kept", &e).await.unwrap();
        store.insert_entity("Dropped", &e).await.unwrap();
    }
    store
        .upsert_entity(
            "Kept",
            &Entity::new("p", "r03").with("M", "merged"),
            tablekit::UpdateMode::Merge,
        )
        .await
        .unwrap();
    store
        .delete_entity("Kept", "p", "r05", &IfMatch::Any)
        .await
        .unwrap();
    let ops: Vec<_> = (0..10)
        .map(|i| BatchOperation::Insert(Entity::new("t", format!("x{i}")).with("B", true)))
        .collect();
    store.submit_transaction("Kept", &ops).await.unwrap();
    store.delete_table("Dropped").await.unwrap();
    store.create_table("Empty").await.unwrap();

    for container in ["files", "gone"] {
        store.create_container(container).await.unwrap();
        for name in ["a", "b/c", "d"] {
            let data = format!("{container}/{name}").into_bytes();
            store
                .put_blob(container, name, data, &PutCondition::None)
                .await
                .unwrap();
        }
    }
    store.delete_blob("files", "d", None).await.unwrap();
    store.delete_container("gone").await.unwrap();

    for queue in ["jobs", "old"] {
        store.create_queue(queue).await.unwrap();
        for i in 0..5 {
            store
                .put_message(queue, &format!("m{i}"), &PutMessageOptions::default())
                .await
                .unwrap();
        }
    }
    let taken = store
        .get_messages("jobs", 2, Duration::from_secs(600))
        .await
        .unwrap();
    store
        .delete_message("jobs", &taken[0].id, &taken[0].pop_receipt)
        .await
        .unwrap();
    store.delete_queue("old").await.unwrap();
}

const CONTAINERS: [&str; 2] = ["files", "gone"];
const QUEUES: [&str; 2] = ["jobs", "old"];

#[tokio::test]
async fn a_crash_keeps_every_acknowledged_write_of_every_kind() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path());
    write_every_kind(&store).await;
    let expected = contents(&store, &CONTAINERS, &QUEUES).await;
    assert!(expected.len() > 30, "{expected:#?}");
    crash_image(live.path(), image.path());

    let recovered = open(image.path());
    assert!(
        recovered.write_stats().replayed > 0,
        "the image's engine file lacks the writes: the journal brings them back"
    );
    assert_eq!(contents(&recovered, &CONTAINERS, &QUEUES).await, expected);
    // Applied and checkpointed once: a clean close leaves nothing to replay.
    drop(recovered);
    let again = open(image.path());
    assert_eq!(again.write_stats().replayed, 0);
    assert_eq!(contents(&again, &CONTAINERS, &QUEUES).await, expected);
    // And the recovered store takes writes, with ETags later than before.
    again
        .insert_entity("Kept", &Entity::new("p", "after"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_record_cut_short_by_a_crash_loses_only_its_own_write() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path());
    store.create_table("Things").await.unwrap();
    for i in 0..10 {
        let e = Entity::new("p", format!("r{i}")).with("V", "v".repeat(100));
        store.insert_entity("Things", &e).await.unwrap();
    }
    crash_image(live.path(), image.path());
    // The last record (the last insert) written only in part: its block
    // holds its start, and then the zeros the journal grew by.
    let journal = image.path().join(JOURNAL);
    let mut bytes = std::fs::read(&journal).unwrap();
    let last = bytes
        .chunks(4096)
        .rposition(|block| block.starts_with(b"TKJ1"))
        .unwrap();
    bytes[last * 4096 + 96..(last + 1) * 4096].fill(0);
    std::fs::write(&journal, &bytes).unwrap();
    let recovered = open(image.path());
    let keys: Vec<_> = recovered
        .query_all("Things", Query::new())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.row_key)
        .collect();
    assert_eq!(keys, (0..9).map(|i| format!("r{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn writes_past_a_full_journal_are_checkpointed_and_kept() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path());
    store.create_table("Things").await.unwrap();
    // Each write is a record of about 3 KB, in a block of 4 KiB: a
    // checkpoint comes after 512 of them (the changes the engine holds
    // without one), before the 4 MiB journal fills after about 1,000.
    let writes = 1_500;
    for i in 0..writes {
        let e = Entity::new("p", format!("r{i:05}")).with("V", "v".repeat(3_000));
        store.insert_entity("Things", &e).await.unwrap();
    }
    let stats = store.write_stats();
    assert!(stats.checkpoints >= 1, "{stats:?}");
    crash_image(live.path(), image.path());
    let recovered = open(image.path());
    let replayed = recovered.write_stats().replayed;
    assert!(replayed > 0 && replayed < writes, "{replayed}");
    let rows = recovered.query_all("Things", Query::new()).await.unwrap();
    assert_eq!(rows.len() as u64, writes);
    assert!(rows.iter().all(|e| e.get("V").is_some()));
}

/// Writes one row each (every one a change to a page of its own, as far as
/// the store can tell) are checkpointed once the engine holds 512 changes,
/// though the journal has room for many more: so that writes all over a
/// large store do not leave its file full of pages the engine could not
/// free. A transaction of rows in key order counts once, so loads of
/// ordered rows checkpoint no more often than the journal's room asks.
#[tokio::test]
async fn the_engine_holds_at_most_512_changes_between_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_table("Things").await.unwrap();
    let checkpoints = |store: &LocalStorage| store.write_stats().checkpoints;
    // Ordered rows, 100 a transaction: 1,000 rows, 10 small records.
    let before = checkpoints(&store);
    for t in 0..10 {
        let ops: Vec<_> = (0..100)
            .map(|i| BatchOperation::Insert(Entity::new("p", format!("a{t:02}{i:03}"))))
            .collect();
        store.submit_transaction("Things", &ops).await.unwrap();
    }
    assert_eq!(checkpoints(&store), before, "ordered loads count once");
    // The same rows in reverse key order count one each.
    for t in 0..10 {
        let ops: Vec<_> = (0..100)
            .rev()
            .map(|i| BatchOperation::Insert(Entity::new("p", format!("b{t:02}{i:03}"))))
            .collect();
        store.submit_transaction("Things", &ops).await.unwrap();
    }
    let after_reversed = checkpoints(&store);
    assert!(
        after_reversed > before,
        "1,000 changes held: {after_reversed}"
    );
    // Single writes, one change each: 600 small records, far from a full
    // journal.
    for i in 0..600 {
        let e = Entity::new("q", format!("r{i:04}")).with("V", 1i64);
        store.insert_entity("Things", &e).await.unwrap();
    }
    assert!(checkpoints(&store) > after_reversed, "600 changes held");
    // Nothing is lost by the checkpoints: a crash image reads every row.
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    let recovered = open(image.path());
    let rows = recovered.query_all("Things", Query::new()).await.unwrap();
    assert_eq!(rows.len(), 2_600);
}

/// Each file of a directory, with its bytes.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// A store left by a killed process opens read-only: it is recovered in
/// memory (the engine's repair and the journal's records applied), reads
/// all it acknowledged as a writable open would, is checked clean, refuses
/// writes, and its files are left byte for byte as they were.
#[tokio::test]
async fn a_crashed_store_opens_read_only_recovered_in_memory() {
    let (live, image, twin) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let store = open(live.path());
    write_every_kind(&store).await;
    crash_image(live.path(), image.path());
    crash_image(live.path(), twin.path());
    let before = files_of(image.path());
    let read_only = LocalStorage::open_read_only(image.path()).expect("a read-only open");
    let seen = contents(&read_only, &CONTAINERS, &QUEUES).await;
    assert!(
        read_only
            .try_get_entity("Kept", "p", "r03")
            .await
            .unwrap()
            .is_some()
    );
    let report = read_only.check().await.expect("a check");
    assert!(report.is_clean(), "{report:?}");
    let refused = read_only
        .insert_entity("Kept", &Entity::new("p", "new"))
        .await
        .expect_err("read-only");
    assert!(
        matches!(
            refused,
            Error::Storage {
                failure: StorageFailure::ReadOnly,
                ..
            }
        ),
        "{refused:?}"
    );
    drop(read_only);
    assert!(files_of(image.path()) == before, "the files were changed");
    // What a writable open recovers, from the same files.
    let recovered = open(twin.path());
    assert_eq!(seen, contents(&recovered, &CONTAINERS, &QUEUES).await);
}

/// A clean close leaves an empty journal: a closed store takes no room for
/// it, and a copy of its engine file alone is the whole store.
#[tokio::test]
async fn a_clean_close_empties_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        write_every_kind(&store).await;
    }
    assert_eq!(
        std::fs::metadata(dir.path().join(JOURNAL)).unwrap().len(),
        0
    );
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join(FILE_NAME), copy.path().join(FILE_NAME)).unwrap();
    let store = open(dir.path());
    let from_copy = open(copy.path());
    assert_eq!(
        contents(&from_copy, &CONTAINERS, &QUEUES).await,
        contents(&store, &CONTAINERS, &QUEUES).await
    );
}

/// A write that changes nothing (a read of an empty queue takes no
/// message) commits nothing and syncs nothing; one that changes something
/// does.
#[tokio::test]
async fn a_write_that_changes_nothing_is_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_queue("empty").await.unwrap();
    let before = store.write_stats();
    for _ in 0..10 {
        let taken = store
            .get_messages("empty", 1, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(taken.is_empty());
    }
    let after = store.write_stats();
    assert_eq!(after.writes, before.writes + 10);
    assert_eq!(after.commits, before.commits, "{after:?}");
    store
        .put_message("empty", "m", &PutMessageOptions::default())
        .await
        .unwrap();
    let taken = store
        .get_messages("empty", 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(store.write_stats().commits, after.commits + 2);
}

/// A record changed in the middle of the journal (whole records after it)
/// is damage: the open says so, naming the record, and applies nothing out
/// of order. With the journal moved away the store opens, without the
/// writes it held.
#[tokio::test]
async fn a_damaged_record_before_whole_ones_is_refused() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path());
    store.create_table("Things").await.unwrap();
    for i in 0..5 {
        store
            .insert_entity("Things", &Entity::new("p", format!("r{i}")))
            .await
            .unwrap();
    }
    crash_image(live.path(), image.path());
    let journal = image.path().join(JOURNAL);
    let mut bytes = std::fs::read(&journal).unwrap();
    // The third record (one block each), a byte of its changes.
    bytes[2 * 4096 + 30] ^= 0x40;
    std::fs::write(&journal, &bytes).unwrap();
    match LocalStorage::open(image.path()) {
        Err(Error::Storage {
            failure: StorageFailure::Damaged,
            message,
            ..
        }) => assert!(
            message.contains("of the journal is damaged") && message.contains(JOURNAL),
            "{message}"
        ),
        other => panic!("expected damage, got {other:?}"),
    }
    assert!(
        message_of(LocalStorage::open(image.path())).contains("accept_lost_journal"),
        "the way out is named"
    );
    // Moved away, the journal's writes are lost: said, then taken when
    // the loss is accepted.
    std::fs::rename(&journal, image.path().join("journal.damaged")).unwrap();
    refused_as_damaged(LocalStorage::open(image.path()), "journal");
    let store = LocalStorage::builder()
        .table_deletion_delay(Duration::ZERO)
        .accept_lost_journal(true)
        .open(image.path())
        .unwrap();
    assert!(store.write_stats().replayed == 0);
}

/// The message of a refused open.
fn message_of(opened: tablekit::Result<LocalStorage>) -> String {
    match opened {
        Err(error) => error.to_string(),
        Ok(_) => panic!("the open was not refused"),
    }
}

/// Runs in a child with a file-size limit (`ulimit -f`): see
/// [`a_journal_that_cannot_grow_ahead_still_takes_records`].
const NO_ROOM_CHILD: &str = "TABLEKIT_JOURNAL_NO_ROOM_DIR";

/// On a disk with too little room for the journal to grow ahead (here a
/// limit on the size of a file, which fails a write past it as a full disk
/// does), records are still written, each alone, until even they do not
/// fit; then a write fails with an error and loses nothing acknowledged.
#[test]
fn a_journal_that_cannot_grow_ahead_still_takes_records() {
    if let Some(dir) = std::env::var_os(NO_ROOM_CHILD) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(no_room_child(Path::new(&dir)));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 1,536 KiB: room for the journal's first growth (1 MiB), not for its
    // second, and for the engine's small file.
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1536; exec \"$0\" \"$@\"")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_journal_that_cannot_grow_ahead_still_takes_records",
            "--nocapture",
        ])
        .env(NO_ROOM_CHILD, dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "the child failed: {status}");
    // The child's acknowledged writes are all there, in a store without the
    // limit.
    let written: usize = std::fs::read_to_string(dir.path().join("written"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(written > 256, "past the first growth: {written}");
    let store = open(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let rows = runtime
        .block_on(store.query_all("Things", Query::new()))
        .unwrap();
    assert_eq!(rows.len(), written);
}

async fn no_room_child(dir: &Path) {
    let journal = dir.join(JOURNAL);
    let store = open(dir);
    store.create_table("Things").await.unwrap();
    let mut written = 0;
    let error = loop {
        let e = Entity::new("p", format!("r{written:05}")).with("V", "v".repeat(100));
        match store.insert_entity("Things", &e).await {
            Ok(_) => written += 1,
            Err(error) => break error,
        }
        assert!(written < 1_000, "the limit never stopped a write");
    };
    // Every record takes a block of 4 KiB: the journal went past its first
    // growth one record at a time, and stopped at the limit.
    let length = std::fs::metadata(&journal).unwrap().len();
    assert!(length > 1 << 20, "{length}");
    assert!(length <= 1536 << 10, "{length}");
    assert!(
        matches!(&error, Error::Storage { .. }),
        "a typed error: {error:?}"
    );
    std::fs::write(dir.join("written"), written.to_string()).unwrap();
    // The refused write is not in the store, and it takes writes again
    // (a delete frees no room in the journal, but needs none either once
    // the engine is opened again on its file and the journal's records).
    let rows = store.query_all("Things", Query::new()).await.unwrap();
    assert_eq!(rows.len(), written);
    // Closed cleanly: the engine, opened again without the refused write,
    // never writes it to its file (the parent checks).
    drop(store);
}

/// Random damage to a crash image's journal: bits flipped, ranges zeroed
/// or overwritten with random bytes, the file cut short, at random places
/// of its records. Every open either fails as `Damaged` or holds the writes
/// of the journal's first records, each with its value: never a panic,
/// never a value other than the one written. Damage that leaves the last
/// record and the file's length whole loses no write silently: the store
/// holds all of them, or the open fails. (A file cut short cannot be told
/// from a crash's end, so it may hold fewer.)
#[tokio::test]
async fn random_damage_to_the_journal_is_refused_or_an_earlier_state() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path());
    store.create_table("Things").await.unwrap();
    const WRITES: usize = 10;
    let value = |i: usize| format!("value {i}, ").repeat(10 + i);
    for i in 0..WRITES {
        let e = Entity::new("p", format!("r{i}")).with("V", value(i));
        store.insert_entity("Things", &e).await.unwrap();
    }
    crash_image(live.path(), image.path());
    let journal = std::fs::read(image.path().join(JOURNAL)).unwrap();
    let used = journal.iter().rposition(|&b| b != 0).unwrap() + 1;
    let last = 4096
        * journal
            .chunks(4096)
            .rposition(|block| block.starts_with(b"TKJ1"))
            .unwrap();
    let mut rng = fastrand::Rng::with_seed(0x70A1);
    let (mut whole, mut fewer, mut damaged) = (0, 0, 0);
    for round in 0..400 {
        let mut bytes = journal.clone();
        // The first and the last byte damaged; whether the length changed.
        let at = rng.usize(..used);
        let (end, cut) = match round % 4 {
            0 => {
                bytes[at] ^= 1 << rng.u8(0..8);
                (at, false)
            }
            1 => {
                let end = (at + rng.usize(1..200)).min(bytes.len());
                bytes[at..end].fill(0);
                (end - 1, false)
            }
            2 => {
                let end = (at + rng.usize(1..64)).min(bytes.len());
                rng.fill(&mut bytes[at..end]);
                (end - 1, false)
            }
            _ => {
                bytes.truncate(at);
                (at, true)
            }
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(image.path().join(FILE_NAME), dir.path().join(FILE_NAME)).unwrap();
        std::fs::write(dir.path().join(JOURNAL), &bytes).unwrap();
        let store = match LocalStorage::open(dir.path()) {
            Ok(store) => store,
            Err(Error::Storage {
                failure: StorageFailure::Damaged,
                ..
            }) => {
                damaged += 1;
                continue;
            }
            Err(e) => panic!("round {round}: {e}"),
        };
        let rows = match store.query_all("Things", Query::new()).await {
            Ok(rows) => rows,
            Err(Error::TableNotFound { .. }) => Vec::new(),
            Err(e) => panic!("round {round}: {e}"),
        };
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(
                row.row_key,
                format!("r{i}"),
                "round {round}: a write skipped"
            );
            assert_eq!(
                row.get("V"),
                Some(&Value::String(value(i))),
                "round {round}: another value"
            );
        }
        if rows.len() == WRITES {
            whole += 1;
        } else {
            assert!(
                cut || end >= last,
                "round {round}: damage at {at}..={end}, before the last record at {last}, lost \
                 writes {}.. silently",
                rows.len()
            );
            fewer += 1;
        }
    }
    println!("{whole} opens held every write, {fewer} fewer, {damaged} were refused as damaged");
    assert!(whole > 0 && fewer > 0 && damaged > 0);
}

/// A store open for writing is not read by a read-only open meanwhile (its
/// files change under it): the open is refused as locked.
#[tokio::test]
async fn a_store_open_for_writing_is_locked_to_a_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.create_table("Things").await.unwrap();
    store
        .insert_entity("Things", &Entity::new("p", "r"))
        .await
        .unwrap();
    match LocalStorage::open_read_only(dir.path()) {
        Err(Error::Storage {
            failure: StorageFailure::Locked,
            ..
        }) => {}
        other => panic!("expected a refusal as locked, got {other:?}"),
    }
    drop(store);
    let read_only = LocalStorage::open_read_only(dir.path()).unwrap();
    assert!(
        read_only
            .try_get_entity("Things", "p", "r")
            .await
            .unwrap()
            .is_some()
    );
}

/// Asserts that `opened` is a refusal as damage whose message says `says`.
fn refused_as_damaged(opened: tablekit::Result<LocalStorage>, says: &str) {
    match opened {
        Err(Error::Storage {
            failure: StorageFailure::Damaged,
            message,
            ..
        }) => assert!(message.contains(says), "{message}"),
        other => panic!("expected a refusal as damaged, got {other:?}"),
    }
}

/// A store whose own files disagree is refused, never opened as another:
/// its journal removed after a crash (the acknowledged writes since the
/// last checkpoint would be lost), unless the loss is accepted; its
/// engine's file removed while its journal remains (an empty store would
/// take its place). A store closed cleanly is whole without its journal.
#[tokio::test]
async fn a_store_whose_files_disagree_is_refused() {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path());
    store.create_table("Things").await.unwrap();
    for n in 0..10 {
        store
            .insert_entity("Things", &Entity::new("p", format!("r{n}")))
            .await
            .unwrap();
    }
    crash_image(live.path(), image.path());
    std::fs::remove_file(image.path().join(JOURNAL)).unwrap();
    refused_as_damaged(LocalStorage::open(image.path()), "journal");
    refused_as_damaged(LocalStorage::open_read_only(image.path()), "journal");
    assert!(
        !image.path().join(JOURNAL).exists(),
        "a refused open made a journal"
    );
    let accepted = LocalStorage::builder()
        .accept_lost_journal(true)
        .open(image.path())
        .expect("the loss accepted");
    drop(accepted);

    // Closed cleanly, the engine's file is the whole store.
    drop(store);
    std::fs::remove_file(live.path().join(JOURNAL)).unwrap();
    let reopened = open(live.path());
    let rows = reopened.query_all("Things", Query::new()).await.unwrap();
    assert_eq!(rows.len(), 10);
    drop(reopened);

    // The engine's file removed, the journal left: refused, nothing made.
    std::fs::remove_file(live.path().join(FILE_NAME)).unwrap();
    refused_as_damaged(LocalStorage::open(live.path()), FILE_NAME);
    assert!(
        !live.path().join(FILE_NAME).exists(),
        "an empty store took the lost one's place"
    );
}
