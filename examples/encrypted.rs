//! An employee directory that keeps personal data encrypted: the email and
//! the national id leave the process as ciphertext, the email stays unique
//! and an employee is found by it, and the key that protects them is
//! rotated while the directory keeps working.
//!
//! - The key-encryption key is read from a file (here one this example
//!   writes; yours comes from a vault or a secret store). It wraps a content
//!   key drawn for each write; the row stores the wrapped key, never a key.
//! - The email index's rows are keyed by an HMAC of the email under an index
//!   key of its own: the store never sees an email, yet `get` by email is
//!   one point read, and a taken email is refused in the write's own
//!   transaction.
//! - The rotation makes a new key current, wraps every row's content key
//!   again under it (the ciphertexts stay as they are), and retires the old
//!   key.
//!
//! Runs on the in-memory backend by default. With
//! `TABLEKIT_CONNECTION_STRING` set (`UseLocalStorage=./data`, or for
//! Azurite `UseDevelopmentStorage=true`), the same code runs there, in a
//! fresh table that it deletes at the end.

use std::sync::Arc;

use tablekit::encryption::{IndexKey, LocalKey, LocalKeys};
use tablekit::{Error, Table, TableBackendExt, TableEntity, Value};

/// An employee: the email (unique) and the national id encrypted, the rest
/// in plain text.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Employees", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted, unique = "email")]
    email: String,
    #[tablekit(encrypted)]
    national_id: String,
}

fn employee(id: u32, name: &str, email: &str, national_id: &str) -> Employee {
    Employee {
        department: "sales".into(),
        id,
        name: name.into(),
        email: email.into(),
        national_id: national_id.into(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tablekit_examples::Store {
        backend,
        table: name,
        remote,
        ..
    } = tablekit_examples::store("Employees")?;

    // The keys: a key-encryption key from a file, and the index key (which
    // stays the same through rotations of the other).
    let dir = std::env::temp_dir().join(format!("tablekit-encrypted-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let key_file = dir.join("staff-2026.key");
    std::fs::write(&key_file, random_key_hex())?;
    let first = LocalKey::from_file("staff-2026", &key_file)?;
    let index_key = IndexKey::new([7; 32]); // yours: 32 random bytes, kept like the other
    let keys = LocalKeys::new(first.clone()).with_index_key(index_key.clone());
    let staff: Table<Employee> =
        Table::from_arc(Arc::clone(&backend), &name).with_encryption(Arc::new(keys));
    staff.create_if_missing().await?;

    let ada = employee(1, "Ada", "ada@contoso.com", "123-45-6789");
    let grace = employee(2, "Grace", "grace@contoso.com", "987-65-4321");
    staff.insert(&ada).await?;
    staff.insert(&grace).await?;

    // Found by email: the email is hashed here, the store is asked for the hash.
    let by_email = staff.index(Employee::indexes().email);
    let found = by_email.get("sales", "grace@contoso.com").await?;
    println!("found by email: {:?}", found.as_ref().map(|e| &e.name));
    assert_eq!(found.as_ref(), Some(&grace));

    // What the store holds: ciphertext and hashes.
    let rows = backend.query_all(&name, Default::default()).await?;
    for row in &rows {
        let email = match row.get("email") {
            Some(Value::Binary(bytes)) => format!("{} bytes of ciphertext", bytes.len()),
            other => format!("{other:?}"),
        };
        println!("stored: {:<76} email: {email}", row.row_key);
    }
    let shown = format!("{rows:?}");
    assert!(!shown.contains("contoso") && !shown.contains("45-6789"));

    // A taken email is refused, with nothing written; the message holds
    // the hash, not the email.
    let copycat = employee(3, "Eve", "ada@contoso.com", "000-00-0000");
    match staff.insert(&copycat).await {
        Err(Error::UniqueViolation { index, held_by, .. }) => {
            println!("refused: index `{index}` already holds that email ({held_by})")
        }
        other => panic!("a taken email was not refused: {other:?}"),
    }
    assert!(staff.get("sales", 3u32).await?.is_none());

    // The email changes: its index row moves with it, in the same transaction.
    staff
        .update("sales", 1u32, |e: &mut Employee| {
            e.email = "ada.lovelace@contoso.com".into()
        })
        .await?;
    assert!(by_email.get("sales", "ada@contoso.com").await?.is_none());
    assert!(
        by_email
            .get("sales", "ada.lovelace@contoso.com")
            .await?
            .is_some()
    );

    // Rotation: the new key becomes current beside the old one, the
    // migration seals every row again under it, and the old key retires.
    let second = LocalKey::new("staff-2027", random_key());
    let both = LocalKeys::new(first)
        .with(second.clone(), true)
        .with_index_key(index_key.clone());
    let rotating = staff.clone().with_encryption(Arc::new(both));
    // (`migrate()` alone would seal every value again under new content
    // keys; `rewrap_only` wraps the content keys again and leaves the
    // ciphertexts as they are.)
    let report = rotating.migrate().rewrap_only().run().await?;
    println!(
        "rotation: {} rows read, {} content keys wrapped again under staff-2027",
        report.scanned, report.rewrapped
    );
    assert_eq!((report.rewrapped, report.failed), (2, 0));
    let rotated = staff
        .clone()
        .with_encryption(Arc::new(LocalKeys::new(second).with_index_key(index_key)));
    let after = rotated.index(Employee::indexes().email);
    let grace_again = after.get("sales", "grace@contoso.com").await?;
    assert_eq!(grace_again.as_ref(), Some(&grace));
    println!("after the rotation, the old key gone: still found by email");

    std::fs::remove_dir_all(&dir)?;
    if remote {
        backend.delete_table(&name).await?;
    }
    Ok(())
}

fn random_key() -> [u8; 32] {
    std::array::from_fn(|_| fastrand::u8(..))
}

/// A key as a key file holds it: 64 hexadecimal digits.
fn random_key_hex() -> String {
    random_key().iter().map(|b| format!("{b:02x}")).collect()
}
