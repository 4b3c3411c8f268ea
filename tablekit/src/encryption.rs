//! Encrypted properties: fields marked `#[tablekit(encrypted)]` are stored
//! as ciphertext, sealed in the process before a write and opened after a
//! read. The store, and whoever reads it, sees ciphertext.
//!
//! Give the table a key resolver with [`Table::with_encryption`]. Each
//! write draws a content key for the entity, seals each encrypted property
//! with AES-256-GCM under it, and stores the key wrapped by your
//! key-encryption key in the row's [`ENVELOPE_PROPERTY`]. A ciphertext is
//! bound to its table, PartitionKey, RowKey and property name: moved to
//! another row, property or table, it is an error
//! ([`EncryptionError::Tampered`]), never a value. A wrong or unknown key,
//! a plain value where ciphertext belongs, a missing envelope: each is a
//! typed [`EncryptionError`], and nothing is read or written.
//!
//! An encrypted field's column is a [`SealedColumn`](crate::schema::SealedColumn):
//! it names the property, and a filter on it does not compile (the store
//! cannot compare ciphertext). The field's type is any property type
//! (`json` and `with` fields too); a key field cannot be encrypted. A
//! projection marks the encrypted fields it reads `encrypted` too, and
//! never writes.
//!
//! To rotate keys, make the new key current in the resolver (a
//! [`LocalKeys`] ring keeps the old one readable) and run the table's
//! migration: it seals again, under the current key, every row sealed
//! under another (`MigrationReport::resealed`).
//!
//! ```
//! use std::sync::Arc;
//! use tablekit::encryption::LocalKey;
//! use tablekit::{Table, TableEntity, Value};
//!
//! #[derive(TableEntity, Debug, PartialEq)]
//! #[tablekit(table = "Staff")]
//! struct Employee {
//!     #[tablekit(partition_key)]
//!     team: String,
//!     #[tablekit(row_key)]
//!     id: u32,
//!     #[tablekit(encrypted)]
//!     email: String,
//!     name: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
//! let key = LocalKey::new("staff-key-1", [42; 32]); // keep yours in a vault or a file
//! let staff: Table<Employee> =
//!     Table::new(tablekit_mem::MemBackend::new()).with_encryption(Arc::new(key));
//! staff.create_if_missing().await?;
//! let ada = Employee { team: "eng".into(), id: 1, email: "ada@example.com".into(), name: "Ada".into() };
//! staff.insert(&ada).await?;
//!
//! // Read back as it was written...
//! assert_eq!(*staff.get("eng", 1u32).await?.unwrap(), ada);
//! // ...while the row holds ciphertext.
//! let rk = tablekit::schema::row_key_of(&ada)?;
//! let row = staff.backend().get_entity("Staff", "eng", &rk, &Default::default()).await?;
//! assert!(matches!(row.get("email"), Some(Value::Binary(_))));
//! # Ok(()) }
//! ```
//!
//! [`Table::with_encryption`]: crate::Table::with_encryption

pub use tablekit_encrypt::{
    CONTENT_ALGORITHM, ContentKey, ENVELOPE_PROPERTY, Envelope, KeyResolver, LocalKey, LocalKeys,
    WrappedKey,
};

pub use crate::error::EncryptionError;
pub use crate::schema::Encrypted;
