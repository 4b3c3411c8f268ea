//! The copy library's policies and the `tablekit` program's answers: conflict
//! policies, selection by name, prefix and filter, resumed imports, and
//! clear errors for a bad connection string, a missing table and a conflict.

mod program;
use program::run;

use std::process::Command;
use std::sync::Arc;

use tablekit::copy::{Checkpoint, Conflict, Copier, TableCheckpoint, import_table};
use tablekit::filter::prop;
use tablekit::{Entity, Error, TableBackend, TableBackendExt, Value};
use tablekit_mem::MemBackend;

async fn store_with(table: &str, rows: &[Entity]) -> Arc<MemBackend> {
    let store = Arc::new(MemBackend::new());
    store.create_table(table).await.unwrap();
    for row in rows {
        store.insert_entity(table, row).await.unwrap();
    }
    store
}

fn row(pk: &str, rk: &str, v: i64) -> Entity {
    Entity::new(pk, rk).with("V", v)
}

#[tokio::test]
async fn conflicts_follow_the_policy() {
    let source = store_with(
        "Things",
        &[row("p", "a", 1), row("p", "b", 2), row("p", "c", 3)],
    )
    .await;
    let target_of = || async { store_with("Things", &[row("p", "a", 1), row("p", "b", 99)]).await };

    let target = target_of().await;
    let err = Copier::new(source.clone(), target.clone())
        .unpaced()
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::EntityAlreadyExists { row_key, .. } if row_key == "b"),
        "fail names the row: {err:?}"
    );

    let target = target_of().await;
    let report = Copier::new(source.clone(), target.clone())
        .conflict(Conflict::Skip)
        .unpaced()
        .run()
        .await
        .unwrap();
    assert_eq!(
        (report.written, report.already_there, report.skipped),
        (1, 1, 1)
    );
    let b = target
        .get_entity("Things", "p", "b", &Default::default())
        .await
        .unwrap();
    assert_eq!(
        b.get("V"),
        Some(&Value::Int64(99)),
        "skip keeps the target's row"
    );

    let target = target_of().await;
    let report = Copier::new(source.clone(), target.clone())
        .conflict(Conflict::Overwrite)
        .unpaced()
        .run()
        .await
        .unwrap();
    assert_eq!(report.written, 3);
    let b = target
        .get_entity("Things", "p", "b", &Default::default())
        .await
        .unwrap();
    assert_eq!(b.get("V"), Some(&Value::Int64(2)), "overwrite replaces it");
}

#[tokio::test]
async fn tables_are_chosen_by_name_prefix_and_filter() {
    let source = Arc::new(MemBackend::new());
    for table in ["Audit1", "Audit2", "Orders"] {
        source.create_table(table).await.unwrap();
        for i in 0..5 {
            source
                .insert_entity(table, &row("p", &format!("r{i}"), i))
                .await
                .unwrap();
        }
    }
    let target = Arc::new(MemBackend::new());
    let report = Copier::new(source.clone(), target.clone())
        .prefix("Audit")
        .filter(prop("V").ge(3i64))
        .unpaced()
        .run()
        .await
        .unwrap();
    assert_eq!(report.tables, ["Audit1", "Audit2"]);
    assert_eq!(report.written, 4);
    assert!(
        target
            .get_entity("Orders", "p", "r0", &Default::default())
            .await
            .is_err()
    );

    let err = Copier::new(source.clone(), target.clone())
        .table("Missing")
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::TableNotFound { table } if table == "Missing"),
        "{err:?}"
    );

    // A finished table is not read again.
    let orders = Copier::new(source.clone(), target.clone()).table("Orders");
    let done = Checkpoint {
        job: Some(orders.job()),
        tables: [("Orders".to_owned(), TableCheckpoint::Done)].into(),
    };
    let report = orders.resume(done).run().await.unwrap();
    assert_eq!(report.read, 0);
}

#[tokio::test]
async fn a_copy_resumes_only_from_its_own_checkpoint() {
    let source = Arc::new(MemBackend::new());
    source.create_table("Things").await.unwrap();
    for i in 0..20 {
        source
            .insert_entity("Things", &row("p", &format!("r{i:02}"), i % 2))
            .await
            .unwrap();
    }
    let target = Arc::new(MemBackend::new());
    let kept = Arc::new(std::sync::Mutex::new(None));
    let seen = Arc::clone(&kept);
    Copier::new(source.clone(), target.clone())
        .filter(prop("V").eq(1i64))
        .stores("a", "b")
        .unpaced()
        .on_checkpoint(move |c| *seen.lock().unwrap() = Some(c.clone()))
        .run()
        .await
        .unwrap();
    let filtered: Checkpoint = kept.lock().unwrap().clone().unwrap();
    let job = filtered.job.clone().unwrap();
    assert_eq!((job.source.as_str(), job.target.as_str()), ("a", "b"));
    assert!(job.filter.as_deref().unwrap().contains("V eq 1"), "{job:?}");

    // An unfiltered copy given the filtered copy's checkpoint: refused,
    // saying what differs (it used to copy 10 of the 20 rows, and say Ok).
    let err = Copier::new(source.clone(), target.clone())
        .stores("a", "b")
        .resume(filtered.clone())
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Invalid(tablekit::InvalidInput::CheckpointMismatch {
                field: "filter",
                ..
            })
        ),
        "{err:?}"
    );
    // Other stores, or other tables: refused too.
    let other_stores = Copier::new(source.clone(), target.clone())
        .filter(prop("V").eq(1i64))
        .stores("a", "c")
        .resume(filtered.clone())
        .run()
        .await
        .unwrap_err();
    assert!(
        other_stores.to_string().contains("target"),
        "{other_stores}"
    );
    let other_tables = Copier::new(source.clone(), target.clone())
        .filter(prop("V").eq(1i64))
        .stores("a", "b")
        .table("Things")
        .resume(filtered.clone())
        .run()
        .await
        .unwrap_err();
    assert!(
        other_tables.to_string().contains("tables"),
        "{other_tables}"
    );
    // Tables but no copy named: refused.
    let nameless = Checkpoint {
        job: None,
        tables: filtered.tables.clone(),
    };
    assert!(
        Copier::new(source.clone(), target.clone())
            .resume(nameless)
            .run()
            .await
            .is_err()
    );
    // A member the checkpoint does not have is refused when read.
    let mut text: serde_json::Value = serde_json::to_value(&filtered).unwrap();
    text["extra"] = serde_json::json!(1);
    assert!(serde_json::from_value::<Checkpoint>(text).is_err());
    // Its own copy resumes from it: everything is done.
    let report = Copier::new(source, target)
        .filter(prop("V").eq(1i64))
        .stores("a", "b")
        .resume(filtered)
        .run()
        .await
        .unwrap();
    assert_eq!(report.read, 0);
}

#[tokio::test]
async fn an_import_resumes_after_the_lines_it_finished() {
    let lines: String = (0..10)
        .map(|i| tablekit::json::to_string(&row("p", &format!("r{i}"), i)) + "\n")
        .collect();
    let target = MemBackend::new();
    let counts = import_table(
        &target,
        "Things",
        &mut lines.as_bytes(),
        Conflict::Fail,
        4,
        &|_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(counts.written, 6);
    let rows = target
        .query_all("Things", tablekit::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.first().map(|r| r.row_key.as_str()), Some("r4"));

    // A line that is not a row, text that is not JSON, bytes that are not
    // text: each named by its line.
    let refused = |mut bad: &'static [u8]| {
        let target = target.clone();
        async move {
            import_table(&target, "Things", &mut bad, Conflict::Fail, 0, &|_, _| {})
                .await
                .unwrap_err()
        }
    };
    let err = refused(
        b"{\"PartitionKey\":\"p\",\"RowKey\":\"x\",\"N\":1,\"N@odata.type\":\"Edm.Nonsense\"}\n",
    )
    .await;
    assert!(
        matches!(&err, Error::ImportText { table, line: 1, .. } if table == "Things"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("line 1 of the import into `Things` is not a row: "),
        "{err}"
    );
    let err = refused(b"{\"PartitionKey\":\"p\",\"RowKey\":\"x\"}\n{\"PartitionKey\":").await;
    assert!(
        matches!(&err, Error::ImportText { line: 2, problem, .. }
            if problem.starts_with("is not a row: not a JSON object: ")),
        "{err:?}"
    );
    let err = refused(b"\xff\xfe{}\n").await;
    assert!(
        matches!(&err, Error::ImportText { line: 1, problem, .. }
            if problem.starts_with("cannot be read: ")),
        "{err:?}"
    );
}

/// Imports `lines` into a fresh table under `conflict`: the counts or the
/// error, the lines `progress` last said were done, and the rows stored.
async fn import_lines(
    lines: &str,
    conflict: Conflict,
) -> (
    tablekit::Result<tablekit::copy::WriteCounts>,
    u64,
    Vec<Entity>,
) {
    let target = MemBackend::new();
    let done = std::sync::Mutex::new(0);
    let result = import_table(
        &target,
        "Things",
        &mut lines.as_bytes(),
        conflict,
        0,
        &|lines, _| *done.lock().unwrap() = lines,
    )
    .await;
    let rows = target
        .query_all("Things", tablekit::Query::new())
        .await
        .unwrap();
    let done = *done.lock().unwrap();
    (result, done, rows)
}

#[tokio::test]
async fn an_import_follows_its_policy_for_a_row_given_twice() {
    let line = |v: i64| tablekit::json::to_string(&row("p", "r", v)) + "\n";
    let other = tablekit::json::to_string(&row("p", "s", 7)) + "\n";
    // The same row twice, and once more with another value.
    let lines = format!("{}{}{other}{}", line(1), line(1), line(2));

    let (counts, done, rows) = import_lines(&lines, Conflict::Overwrite).await;
    let counts = counts.unwrap();
    assert_eq!(done, 4);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0].get("V"),
        Some(&Value::Int64(2)),
        "the later line wins"
    );
    assert_eq!(counts.written, 4);

    let (counts, _, rows) = import_lines(&lines, Conflict::Skip).await;
    let counts = counts.unwrap();
    assert_eq!(
        rows[0].get("V"),
        Some(&Value::Int64(1)),
        "the first line stays"
    );
    assert_eq!(
        (counts.written, counts.already_there, counts.skipped),
        (2, 1, 1)
    );

    // Under Fail the same row again is already there; another value stops
    // the import at its line, the lines before it written.
    let (result, done, rows) = import_lines(&lines, Conflict::Fail).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, Error::ImportLine { line: 4, row_key, .. } if row_key == "r"),
        "{err:?}"
    );
    assert_eq!(done, 3, "lines 1 to 3 are done");
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Only the same row twice: no error at all (it used to store nothing).
    let (counts, _, rows) = import_lines(&format!("{}{}", line(1), line(1)), Conflict::Fail).await;
    assert_eq!(counts.unwrap().already_there, 1);
    assert_eq!(rows.len(), 1);
}

#[tokio::test]
async fn an_import_names_the_line_and_keys_of_a_refused_row() {
    let good: String = (0..5)
        .map(|i| tablekit::json::to_string(&row("p", &format!("r{i}"), i)) + "\n")
        .collect();
    let bad = "{\"PartitionKey\":\"p\",\"RowKey\":\"bad\",\"2x\":1}\n";
    let lines = format!("{good}{bad}{good}");
    let (result, done, rows) = import_lines(&lines, Conflict::Overwrite).await;
    let err = result.unwrap_err();
    assert!(
        matches!(&err, Error::ImportLine { line: 6, partition_key, row_key, .. }
            if partition_key == "p" && row_key == "bad"),
        "{err:?}"
    );
    assert!(err.to_string().contains("2x"), "{err}");
    assert_eq!(done, 5);
    assert_eq!(rows.len(), 5, "the good rows before it are written");
}

fn tablekit(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_program_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let local = |name: &str| format!("UseLocalStorage={}", dir.path().join(name).display());

    let (ok, err) = tablekit(&[
        "copy",
        "--from",
        "AccountName=x;AccountKey=!!",
        "--to",
        &local("a"),
    ]);
    assert!(
        !ok && err.contains("--from") && err.contains("base64"),
        "{err}"
    );

    // A source that is not there is an error, and is not made.
    let (ok, err) = tablekit(&["copy", "--from", &local("a"), "--to", &local("b")]);
    assert!(!ok && err.contains("does not exist"), "{err}");
    assert!(!dir.path().join("a").exists(), "a typo made a store");
    // An import whose input is not there, or is not text, makes no store.
    let bytes = dir.path().join("Bytes.jsonl");
    std::fs::write(&bytes, b"\xff\xfe{}\n").unwrap();
    for input in [dir.path().join("Missing.jsonl"), bytes] {
        let (ok, err) = tablekit(&[
            "import",
            "--to",
            &local("i"),
            "--in",
            &input.display().to_string(),
        ]);
        assert!(!ok && err.contains(&*input.display().to_string()), "{err}");
        assert!(!dir.path().join("i").exists(), "{input:?} made a store");
    }
    // A misspelt key: what it was probably meant to be.
    let (ok, err) = tablekit(&["copy", "--from", "UseLocalStorag=./x", "--to", &local("b")]);
    assert!(
        !ok && err.contains("did you mean `UseLocalStorage`"),
        "{err}"
    );
    let (ok, err) = tablekit(&[
        "copy",
        "--from",
        "AccountNme=x;AccountKey=AA==",
        "--to",
        &local("b"),
    ]);
    assert!(!ok && err.contains("did you mean `AccountName`"), "{err}");

    {
        let stores = tablekit_stores::Stores::open(&local("a")).unwrap();
        stores.tables.create_table("Kept").await.unwrap();
        stores
            .tables
            .insert_entity("Kept", &row("p", "r", 1))
            .await
            .unwrap();
    }
    // Another copy's checkpoint file: refused, saying what differs.
    let checkpoint = dir.path().join("copy.json").display().to_string();
    let (ok, err) = tablekit(&[
        "copy",
        "--from",
        &local("a"),
        "--to",
        &local("b"),
        "--checkpoint",
        &checkpoint,
    ]);
    assert!(ok, "{err}");
    let (ok, err) = tablekit(&[
        "copy",
        "--from",
        &local("a"),
        "--to",
        &local("e"),
        "--checkpoint",
        &checkpoint,
    ]);
    assert!(
        !ok && err.contains("checkpoint is of another copy: its target"),
        "{err}"
    );
    let (ok, err) = tablekit(&[
        "copy",
        "--from",
        &local("a"),
        "--to",
        &local("b"),
        "--table",
        "Missing",
    ]);
    assert!(
        !ok && err.contains("table `Missing` does not exist"),
        "{err}"
    );

    let (ok, err) = tablekit(&[
        "copy",
        "--from",
        &local("a"),
        "--to",
        &local("b"),
        "--conflict",
        "maybe",
    ]);
    assert!(!ok && err.contains("maybe"), "{err}");

    // A conflict: the import stops naming the row, and `skip` goes on.
    {
        let stores = tablekit_stores::Stores::open(&local("c")).unwrap();
        stores.tables.create_table("Things").await.unwrap();
        stores
            .tables
            .insert_entity("Things", &row("p", "r1", 100))
            .await
            .unwrap();
    }
    let file = dir.path().join("Things.jsonl");
    let lines: String = (0..3)
        .map(|i| tablekit::json::to_string(&row("p", &format!("r{i}"), i)) + "\n")
        .collect();
    std::fs::write(&file, lines).unwrap();
    let input = file.display().to_string();
    let (ok, err) = tablekit(&["import", "--to", &local("c"), "--in", &input]);
    assert!(
        !ok && err.contains("already exists") && err.contains("r1"),
        "{err}"
    );
    let (ok, err) = tablekit(&[
        "import",
        "--to",
        &local("c"),
        "--in",
        &input,
        "--conflict",
        "skip",
    ]);
    assert!(ok, "{err}");
    let stores = tablekit_stores::Stores::open(&local("c")).unwrap();
    let rows = stores
        .tables
        .query_all("Things", tablekit::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1].get("V"), Some(&Value::Int64(100)));
}

#[tokio::test]
async fn a_queue_copy_keeps_every_message_at_both_ends() {
    use std::time::Duration;
    use tablekit::queue::{MessageTtl, PutMessageOptions, QueueStore};
    let source = tablekit_mem::MemQueueStore::new();
    let target = tablekit_mem::MemQueueStore::new();
    source.create_queue("jobs").await.unwrap();
    for i in 0..70 {
        let ttl = if i % 2 == 0 {
            MessageTtl::Never
        } else {
            MessageTtl::Default
        };
        source
            .put_message(
                "jobs",
                &format!("job {i}"),
                &PutMessageOptions::default().ttl(ttl),
            )
            .await
            .unwrap();
    }
    let copied = tablekit::copy::copy_queue(&source, &target, "jobs", Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(copied, 70);
    let drain = |store: tablekit_mem::MemQueueStore| async move {
        let mut texts = Vec::new();
        loop {
            let got = store
                .get_messages("jobs", 32, Duration::from_secs(600))
                .await
                .unwrap();
            if got.is_empty() {
                return texts;
            }
            texts.extend(got.into_iter().map(|m| (m.text, m.dequeue_count)));
        }
    };
    let mut at_target = drain(target).await;
    let mut at_source = drain(source).await;
    at_target.sort();
    at_source.sort();
    let texts = |v: &[(String, u32)]| v.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(
        texts(&at_target),
        texts(&at_source),
        "the same messages at both ends"
    );
    assert_eq!(at_target.len(), 70);
    // At the source each was delivered once by the copy, and is visible again.
    assert!(
        at_source.iter().all(|(_, count)| *count == 2),
        "{at_source:?}"
    );
    assert!(at_target.iter().all(|(_, count)| *count == 1));
}

/// With its output redirected (a script, cron, CI), the program still says
/// what it did: the summary goes to standard output.
#[tokio::test]
async fn a_script_gets_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let local = |name: &str| format!("UseLocalStorage={}", dir.path().join(name).display());
    {
        let stores = tablekit_stores::Stores::open(&local("from")).unwrap();
        stores.tables.create_table("Things").await.unwrap();
        stores
            .tables
            .insert_entity("Things", &row("p", "r1", 1))
            .await
            .unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(["copy", "--from", &local("from"), "--to", &local("to")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The time it took, and the rate.
    assert!(
        stdout.contains("copied 1 table(s) in ") && stdout.contains(" s: 1 rows read ("),
        "{stdout:?}"
    );
    assert!(stdout.contains("rows/s), 1 written"), "{stdout:?}");
    // An export and an import say their rows and rate too; the import its
    // lines.
    let file = dir.path().join("Things.jsonl");
    let file = file.display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args([
            "export",
            "--from",
            &local("to"),
            "--table",
            "Things",
            "--out",
            &file,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("exported Things: 1 rows ("), "{stdout:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(["import", "--to", &local("again"), "--in", &file])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("imported Things: 1 lines (") && stdout.contains("lines/s), 1 written"),
        "{stdout:?}"
    );
}

/// `--version` says the program's version; a store that cannot be reached
/// is named by its host and port.
#[test]
fn the_program_says_its_version_and_whom_it_could_not_reach() {
    let (code, out, err) = run(&["--version"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out.trim(),
        format!("tablekit {}", env!("CARGO_PKG_VERSION"))
    );
    // Nothing listens on port 1.
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("export");
    let (code, out, err) = run(&[
        "export",
        "--from",
        "UseDevelopmentStorage=true;TablePort=1;BlobPort=2;QueuePort=3",
        "--out",
        &target.display().to_string(),
    ]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("127.0.0.1:1"), "{err}");
    assert!(!target.exists(), "a failed export made its directory");
}

/// `tablekit check` reads a whole local store: clean, it says so and exits
/// 0, changing nothing; with a row's bytes changed in the file, it names
/// the row and exits 1. A store that is not local, or not there, is an
/// error that makes nothing.
#[tokio::test]
async fn check_names_the_damaged_row() {
    use tablekit::BlobStore as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = tablekit_local::LocalStorage::open(&path).unwrap();
        store.create_table("Orders").await.unwrap();
        for n in 0..50 {
            let row = Entity::new("p", format!("r{n:02}"))
                .with("Note", format!("marker-{n:02}-abcdefghijklmnop"));
            store.insert_entity("Orders", &row).await.unwrap();
        }
        store.create_container("files").await.unwrap();
        store
            .put_blob(
                "files",
                "a",
                b"bytes".to_vec(),
                &tablekit::PutCondition::None,
            )
            .await
            .unwrap();
    }
    let connection = format!("UseLocalStorage={}", path.display());
    let file = path.join(tablekit_local::FILE_NAME);
    let before = std::fs::read(&file).unwrap();
    let (code, out, err) = run(&["check", "--store", &connection]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("50 rows") && out.contains("1 blobs") && out.contains("no damage found"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "a check changed the file"
    );

    // One byte of row r17's value changed in the file.
    let mut bytes = before.clone();
    let marker = b"marker-17-abcdefghijklmnop";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the row's value in the file");
    bytes[at + 12] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let (code, out, err) = run(&["check", "--store", &connection]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("damaged: table `Orders`, row (\"p\", \"r17\")"),
        "{out}"
    );
    assert!(err.contains("1 damaged"), "{err}");
    // What to do about it is said, and it works: the row deleted by its
    // keys, the store is clean.
    assert!(err.contains("unconditional delete"), "{err}");
    assert!(err.contains("VerifyOnOpen=false"), "{err}");
    {
        let store = tablekit_local::LocalStorage::builder()
            .verify_on_open(false)
            .open(&path)
            .unwrap();
        store
            .delete_entity("Orders", "p", "r17", &tablekit::IfMatch::Any)
            .await
            .unwrap();
    }
    let (code, out, err) = run(&["check", "--store", &connection]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("49 rows") && out.contains("no damage found"),
        "{out}"
    );

    for (store, says) in [
        ("UseMemoryStorage=true", "local store"),
        (
            &*format!("UseLocalStorage={}", dir.path().join("none").display()),
            "no store",
        ),
    ] {
        let (code, out, err) = run(&["check", "--store", store]);
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(err.contains(says), "{err}");
    }
    assert!(
        !dir.path().join("none").exists(),
        "a check made a directory"
    );
}

/// `tablekit compact` cuts a local store's file to its data and says by how
/// much, keeping every row; a store that is not local, not there, or named
/// read-only is an error that makes and changes nothing.
#[tokio::test]
async fn compact_shortens_a_store_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = tablekit_local::LocalStorage::open(&path).unwrap();
        store.create_table("Orders").await.unwrap();
        for n in 0..400 {
            let row = Entity::new("p", format!("r{n:03}")).with("Note", "x".repeat(500));
            store.insert_entity("Orders", &row).await.unwrap();
        }
        for n in 0..350 {
            store
                .delete_entity("Orders", "p", &format!("r{n:03}"), &tablekit::IfMatch::Any)
                .await
                .unwrap();
        }
    }
    let file = path.join(tablekit_local::FILE_NAME);
    let before = std::fs::metadata(&file).unwrap().len();
    let connection = format!("UseLocalStorage={}", path.display());
    let (code, out, err) = run(&["compact", "--store", &connection]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("compacted ") && out.contains(" MiB, from "),
        "{out}"
    );
    let after = std::fs::metadata(&file).unwrap().len();
    assert!(after < before, "{after} of {before} bytes");
    let store = tablekit_local::LocalStorage::open(&path).unwrap();
    let rows = store
        .query_all("Orders", tablekit::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.len(), 50);
    drop(store);

    let none = format!("UseLocalStorage={}", dir.path().join("none").display());
    let read_only = format!("{connection};ReadOnly=true");
    for (store, says) in [
        ("UseMemoryStorage=true", "local store"),
        (none.as_str(), "no store"),
        (read_only.as_str(), "ReadOnly"),
    ] {
        let (code, out, err) = run(&["compact", "--store", store]);
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(err.contains(says), "{err}");
    }
    assert!(
        !dir.path().join("none").exists(),
        "a compaction made a directory"
    );
}

/// `--verbose` says each operation on the stores, with its outcome, on
/// standard error; the summary stays on standard output, and without the
/// flag standard error says nothing of them.
#[tokio::test]
async fn verbose_says_each_operation_on_standard_error() {
    let dir = tempfile::tempdir().unwrap();
    let local = |name: &str| format!("UseLocalStorage={}", dir.path().join(name).display());
    {
        let stores = tablekit_stores::Stores::open(&local("from")).unwrap();
        stores.tables.create_table("Things").await.unwrap();
        stores
            .tables
            .insert_entity("Things", &row("p", "r1", 1))
            .await
            .unwrap();
    }
    let copy = |verbose: bool, to: &str| {
        let mut args = vec!["copy".to_owned(), "--from".into(), local("from")];
        args.extend(["--to".into(), local(to)]);
        if verbose {
            args.insert(0, "--verbose".into());
        }
        Command::new(env!("CARGO_BIN_EXE_tablekit"))
            .args(&args)
            .output()
            .unwrap()
    };
    let out = copy(true, "to");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("copied 1 table(s) in "), "{stdout:?}");
    for op in ["query_entities", "submit_transaction"] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("db.operation.name=\"{op}\"")) && l.contains("close"))
            .unwrap_or_else(|| panic!("no {op} in {stderr}"));
        assert!(line.contains("tablekit.outcome=\"ok\""), "{line}");
        assert!(line.contains("db.system.name=\"tablekit.local\""), "{line}");
    }
    let quiet = copy(false, "quiet");
    assert!(quiet.status.success());
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(!stderr.contains("db.operation.name"), "{stderr}");
}

/// `--skip-damaged` copies and exports what a damaged local store still
/// holds: each damaged row is passed over and named, where without it the
/// damaged source is refused at its open. A source that is not local is
/// refused.
#[tokio::test]
async fn skip_damaged_passes_over_and_names_damaged_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = tablekit_local::LocalStorage::open(&path).unwrap();
        store.create_table("Orders").await.unwrap();
        for n in 0..30 {
            let row = Entity::new("p", format!("r{n:02}"))
                .with("Note", format!("marker-{n:02}-abcdefghijklmnop"));
            store.insert_entity("Orders", &row).await.unwrap();
        }
    }
    let file = path.join(tablekit_local::FILE_NAME);
    let mut bytes = std::fs::read(&file).unwrap();
    let marker = b"marker-11-abcdefghijklmnop";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the row's value in the file");
    bytes[at + 12] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let source = format!("UseLocalStorage={}", path.display());
    let out = dir.path().join("out");
    let out_text = out.display().to_string();

    // Without --skip-damaged, the damaged source is refused at its open,
    // and the way to what it still holds is said.
    let (code, stdout, err) = run(&["export", "--from", &source, "--out", &out_text]);
    assert_eq!(code, Some(1), "{stdout}{err}");
    assert!(
        err.contains("damaged") && err.contains("--skip-damaged"),
        "{err}"
    );

    // An --out whose parent is missing (a typo in it) is refused, and makes
    // nothing.
    let typo = dir.path().join("no-such").join("out");
    let typo_text = typo.display().to_string();
    let (code, stdout, err) = run(&[
        "export",
        "--from",
        &source,
        "--out",
        &typo_text,
        "--skip-damaged",
    ]);
    assert_eq!(code, Some(1), "{stdout}{err}");
    assert!(err.contains("its parent directory does not exist"), "{err}");
    assert!(
        !dir.path().join("no-such").exists(),
        "a typo made directories"
    );

    let (code, stdout, err) = run(&[
        "export",
        "--from",
        &source,
        "--out",
        &out_text,
        "--skip-damaged",
    ]);
    assert_eq!(code, Some(0), "{stdout}{err}");
    assert!(
        err.contains("passed over a damaged row: table `Orders`, row (\"p\", \"r11\")"),
        "{err}"
    );
    let exported = std::fs::read_to_string(out.join("Orders.jsonl")).unwrap();
    assert_eq!(exported.lines().count(), 29);
    assert!(!exported.contains("marker-11"));

    let target = dir.path().join("copy");
    let to = format!("UseLocalStorage={}", target.display());
    let (code, stdout, err) = run(&["copy", "--from", &source, "--to", &to, "--skip-damaged"]);
    assert_eq!(code, Some(0), "{stdout}{err}");
    assert!(err.contains("1 damaged row(s) passed over"), "{err}");
    let copied = tablekit_local::LocalStorage::open_read_only(&target).unwrap();
    let rows = copied
        .query_all("Orders", tablekit::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.len(), 29);

    let (code, stdout, err) = run(&[
        "export",
        "--from",
        "UseMemoryStorage=true",
        "--out",
        &out_text,
        "--skip-damaged",
    ]);
    assert_eq!(code, Some(1), "{stdout}{err}");
    assert!(err.contains("--skip-damaged"), "{err}");
}
