//! The `tablekit` program never decrypts: it has no keys. A table of
//! encrypted entities (index rows, an offloaded sealed blob) goes through
//! `export`, `copy` and `import` as ciphertext, with no value in plain text
//! in any file, row, blob or line the program prints; and what it wrote
//! into another store under the same table name reads back equal there
//! with the same keys, index lookups and blobs included.

use std::process::Command;
use std::sync::Arc;

use tablekit::encryption::{ENVELOPE_PROPERTY, EncryptionError, LocalKey};
use tablekit::{BlobStore, Error, Table, TableBackendExt, TableEntity};
use tablekit_local::LocalStorage;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Patients", kind = "PAT")]
struct Patient {
    #[tablekit(partition_key)]
    ward: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted, unique = "email")]
    email: String,
    #[tablekit(encrypted, blob)]
    scan: Vec<u8>,
}

/// What must never appear outside the process that holds the keys.
const MARKS: [&str; 2] = ["secret-mail-", "SECRET-SCAN-"];

fn patient(id: u32) -> Patient {
    Patient {
        ward: "w".into(),
        id,
        name: format!("patient {id}"),
        email: format!("secret-mail-{id}@example.com"),
        scan: format!("SECRET-SCAN-{id}").repeat(50).into_bytes(),
    }
}

fn key() -> Arc<LocalKey> {
    Arc::new(LocalKey::new("k1", [5; 32]))
}

fn table(store: &Arc<LocalStorage>) -> Table<Patient> {
    Table::from_arc(
        Arc::clone(store) as Arc<dyn tablekit::TableBackend>,
        "Patients",
    )
    .with_blob_store(Arc::clone(store) as Arc<dyn tablekit::BlobStore>, "scans")
    .with_encryption(key())
}

fn tablekit(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(args)
        .arg("--verbose")
        .output()
        .expect("the program runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "tablekit {args:?}: {said}");
    said
}

fn plain(text: &str) -> bool {
    MARKS.iter().any(|m| text.contains(m))
}

/// Every file under `dir`, read as bytes and shown lossily.
fn files_under(dir: &std::path::Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).expect("a directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            all.push_str(&files_under(&path));
        } else {
            all.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).expect("a file"),
            ));
        }
    }
    all
}

async fn reads_back(store: &Arc<LocalStorage>) {
    let t = table(store);
    for id in 1..=3 {
        let read = t.get("w", id).await.expect("get").expect("stored");
        assert_eq!(*read, patient(id));
    }
    let by_email = t.index(Patient::indexes().email);
    let found = by_email
        .get("w", "secret-mail-2@example.com")
        .await
        .expect("get");
    assert_eq!(found.as_ref(), Some(&patient(2)));
    let report = t.verify_indexes("w").await.expect("verify");
    assert!(report.is_clean(), "{report:?}");
}

#[tokio::test]
async fn the_program_carries_ciphertext_and_copies_stay_readable() {
    let dir = tempfile::tempdir().expect("a directory");
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    {
        let source = Arc::new(LocalStorage::open(&a).expect("a store"));
        source.create_container("scans").await.expect("a container");
        let t = table(&source);
        t.create_if_missing().await.expect("the table");
        for id in 1..=3 {
            t.insert(&patient(id)).await.expect("insert");
        }
    }
    let store = |path: &std::path::Path| format!("UseLocalStorage={}", path.display());
    let out = dir.path().join("out");
    let mut said = tablekit(&[
        "export",
        "--from",
        &store(&a),
        "--out",
        &out.to_string_lossy(),
    ]);
    let exported = std::fs::read_to_string(out.join("Patients.jsonl")).expect("the export");
    assert!(exported.contains(ENVELOPE_PROPERTY), "{exported}");
    assert!(!plain(&exported), "the export holds a value in plain text");

    said += &tablekit(&[
        "copy",
        "--from",
        &store(&a),
        "--to",
        &store(&b),
        "--container",
        "scans",
    ]);
    said += &tablekit(&["import", "--to", &store(&c), "--in", &out.to_string_lossy()]);
    said += &tablekit(&["check", "--store", &store(&a)]);
    assert!(!plain(&said), "the program printed a value: {said}");
    for path in [&a, &b, &c] {
        let files = files_under(path);
        // The check can fail: a field that is not encrypted shows.
        assert!(
            files.contains("patient 2"),
            "{} is not read",
            path.display()
        );
        assert!(!plain(&files), "{} holds plain text", path.display());
    }

    let copied = Arc::new(LocalStorage::open(&b).expect("the copy"));
    reads_back(&copied).await;
    // Without the keys, the copy is refused, never read.
    let keyless: Table<Patient> = Table::from_arc(
        Arc::clone(&copied) as Arc<dyn tablekit::TableBackend>,
        "Patients",
    )
    .with_blob_store(Arc::clone(&copied) as Arc<dyn BlobStore>, "scans");
    assert!(matches!(
        keyless.get("w", 1u32).await,
        Err(Error::Encryption(EncryptionError::NoKeys { .. }))
    ));
    // The import holds the rows (the blobs stay behind: an export is of
    // tables), sealed as they were.
    let imported = Arc::new(LocalStorage::open(&c).expect("the import"));
    let rows = imported
        .query_all("Patients", tablekit::Query::new())
        .await
        .expect("rows");
    let source = Arc::new(LocalStorage::open(&a).expect("the source"));
    let original = source
        .query_all("Patients", tablekit::Query::new())
        .await
        .expect("rows");
    let strip = |rows: Vec<tablekit::Entity>| -> Vec<_> {
        rows.into_iter()
            .map(|r| (r.partition_key, r.row_key, r.properties))
            .collect()
    };
    assert_eq!(strip(rows), strip(original));
}
