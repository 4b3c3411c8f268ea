//! Copies and exports carry encrypted values as they are stored: the
//! copier needs no keys, the copy holds ciphertext alone, and a table of
//! the same name in the other store reads it with the same keys (and with
//! no other).

use std::sync::Arc;

use tablekit::copy::{Copier, export_table};
use tablekit::encryption::{EncryptionError, LocalKey};
use tablekit::{Error, Table, TableBackend, TableEntity, Value};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted)]
    email: String,
}

fn employee(id: u32) -> Employee {
    Employee {
        team: "eng".into(),
        id,
        name: format!("person {id}"),
        email: format!("person{id}@example.com"),
    }
}

#[tokio::test]
async fn a_copy_holds_ciphertext_and_reads_with_the_same_keys() {
    let key = || Arc::new(LocalKey::new("staff-1", [9; 32]));
    let source: Arc<dyn TableBackend> = Arc::new(MemBackend::new());
    let target: Arc<dyn TableBackend> = Arc::new(MemBackend::new());
    let staff: Table<Employee> =
        Table::from_arc(Arc::clone(&source), "Staff").with_encryption(key());
    staff.create_if_missing().await.expect("the table");
    for id in 1..=5 {
        staff.insert(&employee(id)).await.expect("insert");
    }
    let report = Copier::new(Arc::clone(&source), Arc::clone(&target))
        .table("Staff")
        .unpaced()
        .run()
        .await
        .expect("a copy");
    assert_eq!(report.written, 5, "{report:?}");

    let copied: Table<Employee> =
        Table::from_arc(Arc::clone(&target), "Staff").with_encryption(key());
    for id in 1..=5 {
        let read = copied.get("eng", id).await.expect("get").expect("copied");
        assert_eq!(*read, employee(id));
    }
    let mut export = Vec::new();
    export_table(&*target, "Staff", None, &mut export, &|_| {})
        .await
        .expect("an export");
    let text = String::from_utf8(export).expect("text");
    assert!(text.contains("person 1"), "the plain name is exported");
    assert!(
        !text.contains("@example.com"),
        "no email in plain text: {text}"
    );

    let rk = tablekit::schema::row_key_of(&employee(1)).expect("a key");
    let row = target
        .get_entity("Staff", "eng", &rk, &Default::default())
        .await
        .expect("the copied row");
    assert!(matches!(row.get("email"), Some(Value::Binary(_))));
    let other = Table::<Employee>::from_arc(target, "Staff")
        .with_encryption(Arc::new(LocalKey::new("staff-1", [8; 32])));
    assert!(matches!(
        other.get("eng", 1u32).await,
        Err(Error::Encryption(EncryptionError::WrongKey { .. }))
    ));
}
