//! A store's file that is damaged, cut short or caught half made: an
//! error that says so, never a panic and never a store that cannot open.
//!
//! - Creation killed at any moment: 1,000 kills of a process that is
//!   making a new store; after each, the store either does not exist or
//!   opens (`TABLEKIT_CREATION_KILLS` sets the number).
//! - A 0-byte or cut file is `Damaged`, not a new, empty store.
//! - Zeroed pages, flipped bytes and truncation at random offsets of a
//!   real store: an open (read-only or for writing) that checks the file's
//!   pages refuses the copy as `Damaged`, or passes it and every read is
//!   right. Read without that check, every read is the right value or an
//!   error; nothing panics (the engine's panics on a bad page are
//!   contained and reported as `Damaged`), nothing reads a wrong value
//!   (each row's, blob's and message's checksum, and each blob's MD5), and
//!   where a read failed or found less, the store's check names damage.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tablekit::queue::QueueStore;
use tablekit::{
    BlobStore, ETag, Entity, Error, PutCondition, Query, StorageFailure, TableBackend,
    TableBackendExt,
};
use tablekit_local::{FILE_NAME, LocalStorage};

const CHILD: &str = "TABLEKIT_DAMAGE_TEST_CREATE";

fn is_damaged(error: &Error) -> bool {
    matches!(
        error,
        Error::Storage {
            failure: StorageFailure::Damaged,
            ..
        }
    )
}

/// A child makes a store in the directory it is given, then waits to be
/// killed; the parent kills it at a random moment of the making.
#[test]
fn creation_killed_at_any_moment_leaves_no_store_that_cannot_open() {
    if let Ok(dir) = std::env::var(CHILD) {
        let _store = LocalStorage::open(&dir).expect("the child makes the store");
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let kills: u32 = std::env::var("TABLEKIT_CREATION_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let mut rng = fastrand::Rng::with_seed(41);
    let root = tempfile::tempdir().expect("a directory");
    let (mut made, mut absent) = (0, 0);
    for round in 0..kills {
        let dir = root.path().join(format!("store{round}"));
        let mut child = Command::new(std::env::current_exe().expect("this test"))
            .args([
                "--exact",
                "creation_killed_at_any_moment_leaves_no_store_that_cannot_open",
                "--test-threads=1",
            ])
            .env(CHILD, &dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a child");
        // From before the child's first step to after its last.
        std::thread::sleep(Duration::from_micros(rng.u64(0..25_000)));
        child.kill().expect("kill the child");
        child.wait().expect("reap the child");
        if dir.join(FILE_NAME).exists() {
            made += 1;
        } else {
            absent += 1;
        }
        let store = LocalStorage::open(&dir)
            .unwrap_or_else(|e| panic!("round {round}: the store does not open: {e}"));
        drop(store);
    }
    println!(
        "{kills} kills during creation: {made} stores whole, {absent} not yet there; every one opened"
    );
    assert!(
        made > 0 && absent > 0,
        "the kills missed the creation: {made} made, {absent} absent"
    );
}

/// A store is made in a directory that exists: a path whose parent is
/// missing (a typo in it) is refused, and nothing is created; a missing
/// store directory in an existing one is made.
#[test]
fn a_store_under_a_missing_directory_is_refused_and_nothing_is_made() {
    let dir = tempfile::tempdir().expect("a directory");
    let typo = dir.path().join("dta").join("store");
    let error = LocalStorage::open(&typo).expect_err("a missing parent");
    assert!(
        matches!(
            error,
            Error::Storage {
                failure: StorageFailure::Io,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("does not exist"), "{error}");
    assert!(!dir.path().join("dta").exists(), "nothing made");
    let made = dir.path().join("store");
    drop(LocalStorage::open(&made).expect("a store in an existing directory"));
    assert!(made.join(FILE_NAME).is_file());
    drop(LocalStorage::open(&made).expect("opened again"));
}

#[test]
fn an_empty_or_cut_file_is_damaged_not_a_new_store() {
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::write(dir.path().join(FILE_NAME), b"").expect("an empty file");
    let error = LocalStorage::open(dir.path()).expect_err("an empty file");
    assert!(is_damaged(&error), "{error}");
    assert!(error.to_string().contains("0 bytes"), "{error}");

    let whole = tempfile::tempdir().expect("a directory");
    drop(LocalStorage::open(whole.path()).expect("a store"));
    let file = whole.path().join(FILE_NAME);
    let bytes = std::fs::read(&file).expect("the file");
    std::fs::write(&file, &bytes[..100]).expect("cut it");
    let error = LocalStorage::open(whole.path()).expect_err("a cut file");
    assert!(is_damaged(&error), "{error}");

    // Cut after its header: damage too, when opened or when read.
    let whole = tempfile::tempdir().expect("a directory");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store = LocalStorage::open(whole.path()).expect("a store");
        store.create_table("damage").await.expect("a table");
        for n in 0..ROWS {
            store.insert_entity("damage", &row(n)).await.expect("a row");
        }
    });
    let file = whole.path().join(FILE_NAME);
    let bytes = std::fs::read(&file).expect("the file");
    std::fs::write(&file, &bytes[..bytes.len() / 2]).expect("cut it");
    let error = match LocalStorage::open(whole.path()) {
        Err(error) => error,
        Ok(store) => runtime
            .block_on(store.query_all("damage", Query::new()))
            .expect_err("half the pages are gone"),
    };
    assert!(is_damaged(&error), "{error}");

    let not_a_dir = dir.path().join("plain");
    std::fs::write(&not_a_dir, b"x").expect("a file");
    let error = LocalStorage::open(&not_a_dir).expect_err("a file for a directory");
    assert!(error.to_string().contains("is a file"), "{error}");
}

const ROWS: usize = 1_000;

fn row(n: usize) -> Entity {
    Entity::new(format!("p{}", n % 7), format!("r{n:05}"))
        .with("Text", format!("value {n} {}", "abcdefghij".repeat(n % 13)))
}

const BLOBS: usize = 60;
const MESSAGES: usize = 30;

fn blob(n: usize) -> Vec<u8> {
    format!("blob {n} {}", "0123456789".repeat(n % 17)).into_bytes()
}

fn message(n: usize) -> String {
    format!("message {n} {}", "xyz".repeat(n % 11))
}

/// Reads every row, blob and message of a damaged store: each read is the
/// right value (a blob's properties as they were put: `etags`), an error, or
/// a wrong value, counted. A panic fails the test.
async fn read_all(dir: &Path, etags: &[ETag]) -> (usize, usize, usize) {
    let (mut right, mut refused, mut wrong) = (0, 0, 0);
    // An open checks the whole file and refuses a damaged one; what it
    // still holds is read through a read-only open without that check
    // (each row, blob and message is still checked as it is read).
    let opened = LocalStorage::open(dir).or_else(|e| {
        note(&e);
        assert!(is_damaged(&e), "{e}");
        LocalStorage::builder()
            .read_only(true)
            .verify_on_open(false)
            .open(dir)
    });
    let store = match opened {
        Ok(store) => store,
        Err(e) => {
            note(&e);
            return (0, ROWS, 0);
        }
    };
    for n in 0..ROWS {
        let expected = row(n);
        match store
            .get_entity(
                "damage",
                &expected.partition_key,
                &expected.row_key,
                &Default::default(),
            )
            .await
        {
            Ok(got) if got.properties.get("Text") == expected.properties.get("Text") => right += 1,
            Ok(_) => wrong += 1,
            Err(e) => {
                note(&e);
                refused += 1;
            }
        }
    }
    // A scan touches every page of the table.
    if let Ok(rows) = store.query_all("damage", Query::new()).await {
        for got in rows {
            let n: usize = got.row_key[1..].parse().unwrap_or(usize::MAX);
            if n < ROWS && got.properties.get("Text") != row(n).properties.get("Text") {
                wrong += 1;
            }
        }
    }
    for (n, etag) in etags.iter().enumerate() {
        match store.get_blob("blobs", &format!("b{n}")).await {
            Ok(got)
                if got.data == blob(n)
                    && got.properties.etag == *etag
                    && got.properties.content_length == blob(n).len() as u64 =>
            {
                right += 1
            }
            Ok(_) => wrong += 1,
            Err(e) => {
                note(&e);
                refused += 1;
            }
        }
    }
    if let Ok(page) = store.list_blobs("blobs", &Default::default()).await {
        for got in page.blobs {
            let n: usize = got.name[1..].parse().unwrap_or(usize::MAX);
            if etags.get(n) != Some(&got.etag) || got.content_length != blob(n).len() as u64 {
                wrong += 1;
            }
        }
    }
    match store.peek_messages("jobs", 32).await {
        Ok(peeked) => {
            // Each message read is one put, in the order put; read without
            // the check of the file's pages, a damaged page may hide some.
            let mut next = 0;
            for got in &peeked {
                let number = got
                    .text
                    .strip_prefix("message ")
                    .and_then(|rest| rest.split(' ').next())
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n >= next && n < MESSAGES);
                match number {
                    Some(n) if got.text == message(n) && got.dequeue_count == 0 => {
                        right += 1;
                        next = n + 1;
                    }
                    _ => wrong += 1,
                }
            }
            refused += MESSAGES - peeked.len();
        }
        Err(e) => {
            note(&e);
            refused += MESSAGES;
        }
    }
    (right, refused, wrong)
}

/// How many errors said the engine panicked (and the store contained it).
static CONTAINED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts `error` in [`CONTAINED`] if it is a contained panic of the engine.
fn note(error: &Error) {
    if error
        .to_string()
        .contains("the storage engine failed on the file")
    {
        CONTAINED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

const QUIET_CHILD: &str = "TABLEKIT_DAMAGE_TEST_QUIET";

/// A panic of the engine that the store contains is reported as damage
/// and never printed: the damage trials, run in a child process, meet such
/// panics and leave its standard error without a `panicked at` line.
#[test]
fn contained_panics_are_not_printed() {
    if std::env::var(QUIET_CHILD).is_ok() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(damaged_pages_are_errors());
        println!(
            "contained: {}",
            CONTAINED.load(std::sync::atomic::Ordering::Relaxed)
        );
        return;
    }
    let child = Command::new(std::env::current_exe().expect("this test"))
        .args([
            "--exact",
            "contained_panics_are_not_printed",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(QUIET_CHILD, "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the child");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr),
    );
    assert!(child.status.success(), "{stdout}\n{stderr}");
    let contained: usize = stdout
        .lines()
        .find_map(|line| line.strip_prefix("contained: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {stdout}"));
    assert!(contained > 0, "no panic of the engine was met: {stdout}");
    assert!(
        !stderr.contains("panicked at") && !stdout.contains("panicked at"),
        "{contained} contained panics, printed:\n{stderr}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn damaged_pages_never_panic() {
    damaged_pages_are_errors().await;
}

/// The damage trials of [`damaged_pages_never_panic`].
async fn damaged_pages_are_errors() {
    let original = tempfile::tempdir().expect("a directory");
    let mut etags = Vec::new();
    {
        let store = LocalStorage::open(original.path()).expect("a store");
        store.create_table("damage").await.expect("a table");
        for n in 0..ROWS {
            store.insert_entity("damage", &row(n)).await.expect("a row");
        }
        store.create_container("blobs").await.expect("a container");
        for n in 0..BLOBS {
            let put = store
                .put_blob("blobs", &format!("b{n}"), blob(n), &PutCondition::None)
                .await
                .expect("a blob");
            etags.push(put.etag);
        }
        store.create_queue("jobs").await.expect("a queue");
        for n in 0..MESSAGES {
            store
                .put_message("jobs", &message(n), &Default::default())
                .await
                .expect("a message");
        }
    }
    // The whole store, checked: clean, every piece counted.
    let report = LocalStorage::open_read_only(original.path())
        .expect("open read-only")
        .check()
        .await
        .expect("check");
    assert!(report.is_clean(), "{report}: {:?}", report.damaged);
    assert_eq!(
        (report.tables, report.rows, report.blobs, report.messages),
        (1, ROWS as u64, BLOBS as u64, MESSAGES as u64),
        "{report}"
    );
    let bytes = std::fs::read(original.path().join(FILE_NAME)).expect("the file");
    let mut rng = fastrand::Rng::with_seed(4141);
    let trials = 90;
    let (mut right, mut refused, mut wrong) = (0, 0, 0);
    let mut checked_damage = 0;
    let mut passed_check = 0;
    for trial in 0..trials {
        let mut damaged = bytes.clone();
        match trial % 3 {
            // A page zeroed.
            0 => {
                let page = rng.usize(0..damaged.len() / 4096) * 4096;
                damaged[page..(page + 4096).min(bytes.len())].fill(0);
            }
            // A few bytes flipped.
            1 => {
                for _ in 0..8 {
                    let at = rng.usize(0..damaged.len());
                    damaged[at] ^= 0x5a;
                }
            }
            // Cut at a random length.
            _ => damaged.truncate(rng.usize(0..damaged.len())),
        }
        let dir = tempfile::tempdir().expect("a directory");
        std::fs::write(dir.path().join(FILE_NAME), &damaged).expect("the damaged file");
        // An open checks every page of the file, read-only as for
        // writing: a file that passes reads whole.
        let verified = match LocalStorage::open_read_only(dir.path()) {
            Ok(_) => true,
            Err(e) => {
                assert!(is_damaged(&e), "trial {trial}: {e}");
                false
            }
        };
        let writable = LocalStorage::open(dir.path());
        assert_eq!(writable.is_ok(), verified, "trial {trial}: {writable:?}");
        drop(writable);
        let (r, x, w) = read_all(dir.path(), &etags).await;
        if verified {
            assert_eq!(
                (r, x, w),
                (ROWS + BLOBS + MESSAGES, 0, 0),
                "trial {trial}: the file passed the check of its pages, yet reads failed"
            );
            passed_check += 1;
        }
        right += r;
        refused += x;
        wrong += w;
        // A check of the same copy names damage wherever a read refused
        // (or refuses to run): it never calls a damaged store clean.
        let unchecked = LocalStorage::builder()
            .read_only(true)
            .verify_on_open(false)
            .open(dir.path());
        if let Ok(store) = unchecked {
            match store.check().await {
                Ok(report) if x > 0 => {
                    assert!(
                        !report.is_clean(),
                        "trial {trial}: {x} reads refused, check clean"
                    );
                    checked_damage += report.damaged.len();
                }
                Ok(_) | Err(_) => {}
            }
        }
    }
    println!(
        "{trials} damaged copies x {} reads: {right} right, {refused} refused, {wrong} wrong; \
         {passed_check} copies passed the check of an open for writing",
        ROWS + BLOBS + MESSAGES
    );
    assert!(
        passed_check < trials,
        "the open for writing refused no damaged copy"
    );
    assert_eq!(
        wrong, 0,
        "a damaged row, blob or message was read as a value"
    );
    assert!(checked_damage > 0, "the check named no damage in any copy");
    assert!(right > 0, "the damage hit everything: {right} right");
}

/// A damaged row: an open for writing refuses the file; read-only, queries
/// can pass over the row; opened for writing without the check, the row is
/// got rid of by its keys (an unconditional delete removes it unread; a
/// conditional one cannot be checked, and is refused), and the store is
/// then checked clean, its other rows intact, and opens checked again.
#[tokio::test]
async fn a_damaged_row_is_deleted_by_its_keys() {
    let dir = tempfile::tempdir().expect("a directory");
    {
        let store = LocalStorage::open(dir.path()).expect("a store");
        store.create_table("things").await.expect("a table");
        for n in 0..20 {
            let text = if n == 7 {
                "DAMAGE-ME-PLEASE".to_owned()
            } else {
                format!("fine {n}")
            };
            store
                .insert_entity(
                    "things",
                    &Entity::new("p", format!("r{n:02}")).with("Text", text),
                )
                .await
                .expect("a row");
        }
    }
    let file = dir.path().join(FILE_NAME);
    let mut bytes = std::fs::read(&file).expect("the file");
    let marker = b"DAMAGE-ME-PLEASE";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the row's text in the file");
    bytes[at] ^= 0x20;
    std::fs::write(&file, &bytes).expect("damaged");
    // An open for writing checks the file's pages first, and refuses it.
    let refused = LocalStorage::open(dir.path()).expect_err("a damaged file");
    assert!(is_damaged(&refused), "{refused}");
    assert!(refused.to_string().contains("read-only"), "{refused}");
    // Opened read-only without the check, to pass over damaged rows, its
    // queries read the rest and name the row.
    {
        let skipping = LocalStorage::builder()
            .read_only(true)
            .verify_on_open(false)
            .skip_damaged_rows(true)
            .open(dir.path())
            .expect("the store opens");
        let rows = skipping
            .query_all("things", Query::new())
            .await
            .expect("the rest");
        assert_eq!(rows.len(), 19);
        let skipped = skipping.skipped_rows();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(
            (
                skipped[0].table.as_str(),
                skipped[0].partition_key.as_str(),
                skipped[0].row_key.as_str()
            ),
            ("things", "p", "r07")
        );
        assert!(
            skipping
                .get_entity("things", "p", "r07", &Default::default())
                .await
                .is_err()
        );
    }
    // Opened for writing without the check, by choice, to delete the row.
    let store = LocalStorage::builder()
        .verify_on_open(false)
        .open(dir.path())
        .expect("the store opens");
    assert!(store.query_all("things", Query::new()).await.is_err());
    assert!(store.skipped_rows().is_empty());
    let read = store
        .get_entity("things", "p", "r07", &Default::default())
        .await;
    assert!(matches!(&read, Err(e) if is_damaged(e)), "{read:?}");
    let etag = ETag::new("W/\"datetime'2020-01-01T00%3A00%3A00Z'\"");
    let conditional = store
        .delete_entity("things", "p", "r07", &tablekit::IfMatch::ETag(etag))
        .await;
    assert!(
        matches!(&conditional, Err(e) if is_damaged(e)),
        "{conditional:?}"
    );
    // An insert and a replacing upsert, which write without reading the
    // row first, are refused as damage too, and leave the row as it was.
    let over = Entity::new("p", "r07").with("Text", "new");
    let insert = store.insert_entity("things", &over).await;
    assert!(matches!(&insert, Err(e) if is_damaged(e)), "{insert:?}");
    let upsert = store
        .upsert_entity("things", &over, tablekit::UpdateMode::Replace)
        .await;
    assert!(matches!(&upsert, Err(e) if is_damaged(e)), "{upsert:?}");
    let read = store
        .get_entity("things", "p", "r07", &Default::default())
        .await;
    assert!(matches!(&read, Err(e) if is_damaged(e)), "{read:?}");
    let report = store.check().await.expect("a check");
    assert!(!report.is_clean());
    store
        .delete_entity("things", "p", "r07", &tablekit::IfMatch::Any)
        .await
        .expect("an unconditional delete of the damaged row");
    assert!(
        store
            .try_get_entity("things", "p", "r07")
            .await
            .expect("a read")
            .is_none()
    );
    let report = store.check().await.expect("a check");
    assert!(report.is_clean(), "{report}");
    let rows = store
        .query_all("things", Query::new())
        .await
        .expect("the rest");
    assert_eq!(rows.len(), 19);
    // The damaged page is gone with the row: the file passes the check of
    // an open for writing again.
    drop(store);
    let store = LocalStorage::open(dir.path()).expect("the store opens, checked");
    let rows = store
        .query_all("things", Query::new())
        .await
        .expect("the rest");
    assert_eq!(rows.len(), 19);
}

/// The check compares the engine's list of its tables with the store's:
/// a table the store does not keep, and a catalogued table whose rows the
/// engine has no table for, are damage (a damaged page of that list could
/// rename a table, and its rows would seem gone with no error).
#[tokio::test(flavor = "current_thread")]
async fn the_check_names_tables_the_engine_lists_wrongly() {
    use redb::TableDefinition;
    let dir = tempfile::tempdir().expect("a directory");
    {
        let store = LocalStorage::open(dir.path()).expect("a store");
        for table in ["kept", "lost"] {
            store.create_table(table).await.expect("a table");
            store
                .insert_entity(table, &Entity::new("p", "r").with("V", 1))
                .await
                .expect("a row");
        }
        let report = store.check().await.expect("a check");
        assert!(report.is_clean(), "{report}: {:?}", report.damaged);
    }
    {
        // What a damaged list of tables could read as: the rows of `lost`
        // under a name the store never made.
        let db = redb::Database::open(dir.path().join(FILE_NAME)).expect("the engine");
        let txn = db.begin_write().expect("a write");
        let rows: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("rows/lost");
        txn.rename_table(rows, TableDefinition::<'_, &[u8], &[u8]>::new("rows/lozt"))
            .expect("renamed");
        txn.commit().expect("committed");
    }
    let store = LocalStorage::open_read_only(dir.path()).expect("the store opens");
    let read = store
        .get_entity("lost", "p", "r", &Default::default())
        .await;
    assert!(matches!(&read, Err(e) if is_damaged(e)), "{read:?}");
    let report = store.check().await.expect("a check");
    let named: Vec<String> = report.damaged.iter().map(|d| d.to_string()).collect();
    assert_eq!(named.len(), 2, "{named:?}");
    assert!(
        named
            .iter()
            .any(|d| d.starts_with("table `lost`") && d.contains("no table for it")),
        "{named:?}"
    );
    assert!(
        named
            .iter()
            .any(|d| d.contains("a table no store keeps (\"rows/lozt\")")),
        "{named:?}"
    );
}
