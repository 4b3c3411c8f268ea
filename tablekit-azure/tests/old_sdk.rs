//! Rows encrypted by the old Azure Storage SDK (`azure-cosmosdb-table`
//! 1.0.6 for Python, the last with client-side encryption of table
//! entities) in Azurite: tablekit reads every one as written, and a
//! migration moves them to its own format, after which they still read
//! equal and hold none of the old metadata. And the other way: rows
//! tablekit writes in the old format, that SDK reads.
//!
//! The SDK is installed with pip into `target/python-sdk-…` on first use,
//! like Azurite with npm; without Python or the SDK the test fails with
//! the reason, never skips.

mod azurite;
mod python_sdk;

use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use tablekit::encryption::{ENVELOPE_PROPERTY, LocalKey, OldSdkFormat};
use tablekit::{Table, TableBackend, TableBackendExt, TableEntity, Value};
use tablekit_azure::AzureTables;

/// An employee as the old SDK's program wrote it: the email and the notes
/// encrypted (the old SDK encrypts strings alone), the name not.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: String,
    name: String,
    #[tablekit(encrypted)]
    email: String,
    #[tablekit(encrypted)]
    notes: Option<String>,
}

fn staff() -> Vec<Employee> {
    let notes = [
        Some("short".to_owned()),
        Some("h\u{e9}llo w\u{f6}rld, a note of more than one block of sixteen".to_owned()),
        Some(String::new()),
        None,
        Some("\u{4e2d}\u{6587} \u{1f600}".to_owned()),
    ];
    notes
        .into_iter()
        .enumerate()
        .map(|(i, notes)| Employee {
            department: if i % 2 == 0 { "sales" } else { "r&d 'x'" }.to_owned(),
            id: format!("emp{i:03}"),
            name: format!("Employee {i}"),
            email: format!("e{i}@contoso.com"),
            notes,
        })
        .collect()
}

/// Writes `staff` into `table` with the old SDK (`mode` `write`),
/// encrypting each one's email and notes, or reads them (`read`),
/// decrypting; fails unless every one reads as given.
fn old_sdk(mode: &str, table: &str, staff: &[Employee]) {
    let sdk = python_sdk::install(&["azure-cosmosdb-table==1.0.6"], "azure/cosmosdb/table");
    let spec: Vec<_> = staff
        .iter()
        .map(|e| {
            let mut row = json!({
                "PartitionKey": e.department, "RowKey": e.id, "name": e.name,
                "email": e.email, "encrypt": ["email", "notes"],
            });
            if let Some(notes) = &e.notes {
                row["notes"] = json!(notes);
            }
            row
        })
        .collect();
    // One file per call: the tests of this file run at once in one process.
    let file = std::env::temp_dir().join(format!("tablekit-old-sdk-{mode}-{table}.json"));
    std::fs::write(&file, serde_json::to_string(&spec).unwrap()).expect("write the spec");
    let a = azurite::azurite();
    let output = Command::new("python3")
        .arg(python_sdk::workspace().join("tablekit-azure/tests/old_sdk/old_sdk.py"))
        .args([mode, table])
        .env("PYTHONPATH", &sdk)
        .env("SPEC", &file)
        .env(
            "TABLE_ENDPOINT",
            format!("http://{}:{}/devstoreaccount1", a.host, a.table_port),
        )
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}"));
    let _ = std::fs::remove_file(&file);
    assert!(
        output.status.success(),
        "the old SDK, {mode}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn rows_the_old_sdk_encrypted_read_equal_and_migrate_to_the_new_format() {
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a client"));
    let name = format!("oldsdk{}", std::process::id());
    let staff = staff();
    old_sdk("write", &name, &staff);
    let raw = backend
        .query_all(&name, Default::default())
        .await
        .expect("rows");
    assert_eq!(raw.len(), staff.len());
    assert!(
        raw.iter()
            .all(|r| r.get("_ClientEncryptionMetadata1").is_some())
    );
    assert!(
        raw.iter()
            .all(|r| matches!(r.get("email"), Some(Value::Binary(_))))
    );

    let t: Table<Employee> = Table::from_arc(Arc::clone(&backend), &name)
        .with_encryption(Arc::new(LocalKey::new("k1", [11; 32])));
    reads_equal(&t, &staff).await;
    let all = t.query().collect().await.expect("a query");
    assert_eq!(all.len(), staff.len());
    // Without keys, a typed read refuses them.
    let keyless: Table<Employee> = Table::from_arc(Arc::clone(&backend), &name);
    assert!(keyless.get("sales", "emp000").await.is_err());

    // The migration moves every row to the new format.
    let report = t.migrate().run().await.expect("a migration");
    assert_eq!(
        (report.resealed, report.failed),
        (staff.len(), 0),
        "{report:?}"
    );
    let raw = backend
        .query_all(&name, Default::default())
        .await
        .expect("rows");
    for row in &raw {
        assert!(row.get("_ClientEncryptionMetadata1").is_none(), "{row:?}");
        assert!(row.get("_ClientEncryptionMetadata2").is_none(), "{row:?}");
        assert!(row.get(ENVELOPE_PROPERTY).is_some(), "{row:?}");
        assert!(!format!("{row:?}").contains("contoso"), "{row:?}");
    }
    reads_equal(&t, &staff).await;
    let again = t.migrate().run().await.expect("a migration");
    assert_eq!(again.resealed, 0, "{again:?}");
    backend.delete_table(&name).await.expect("drop");
}

/// Rows tablekit writes in the old format (through `OldSdkFormat`), the old
/// SDK reads as written; tablekit reads them too.
#[tokio::test]
async fn rows_written_in_the_old_format_read_back_through_the_old_sdk() {
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a client"));
    let name = format!("oldformat{}", std::process::id());
    let old = OldSdkFormat(LocalKey::new("k1", [11; 32]));
    let t: Table<Employee> =
        Table::from_arc(Arc::clone(&backend), &name).with_encryption(Arc::new(old));
    t.create_if_missing().await.expect("the table");
    let staff = staff();
    for e in &staff {
        t.insert(e).await.expect("insert");
    }
    let raw = backend
        .query_all(&name, Default::default())
        .await
        .expect("rows");
    assert!(
        raw.iter()
            .all(|r| r.get("_ClientEncryptionMetadata1").is_some())
    );
    assert!(!format!("{raw:?}").contains("contoso"));
    old_sdk("read", &name, &staff);
    reads_equal(&t, &staff).await;
    backend.delete_table(&name).await.expect("drop");
}

/// Each of `staff` reads through `t` as it was written.
async fn reads_equal(t: &Table<Employee>, staff: &[Employee]) {
    for e in staff {
        let read = t.get(&*e.department, &*e.id).await.expect("get");
        assert_eq!(read.as_deref(), Some(e));
    }
}
