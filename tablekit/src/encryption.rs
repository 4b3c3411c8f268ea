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
//! never writes. An encrypted field may also be kept in the blob store
//! (`blob`, `offload`): it is sealed before it leaves, and its blob holds
//! ciphertext that opens only with its row. In a `wide` entity the values
//! are sealed before they are spread over the entity's rows. A
//! [`Transaction`](crate::table::Transaction) seals its writes with its
//! table's keys when it is submitted.
//!
//! Your key-encryption keys can live in Azure Key Vault or a Managed HSM,
//! where they never leave the vault: with the `azure-key-vault` feature,
//! `KeyVaultKeys` wraps and unwraps through the Azure SDK for Rust, signed
//! in with the same `azure_identity` credential as the REST backend.
//!
//! To rotate keys, make the new key current in the resolver (a
//! [`LocalKeys`] ring keeps the old one readable) and run the table's
//! migration. [`migrate().rewrap_only()`](crate::table::Migration::rewrap_only)
//! wraps each row's content key again under the current key and leaves its
//! ciphertexts as they are (`MigrationReport::rewrapped`); a plain
//! `migrate()` seals every row sealed under another key again, under a new
//! content key (`MigrationReport::resealed`). Both are resumable from their
//! checkpoints, and readers and writers go on meanwhile.
//!
//! # Rows the old Azure SDKs encrypted
//! The Azure Storage SDKs of before 2020 (`[EncryptProperty]` in .NET,
//! `TableEncryptionPolicy`, `azure-cosmosdb-table` for Python) stored
//! encrypted strings with AES-256-CBC and two properties of their own,
//! `_ClientEncryptionMetadata1` and `_ClientEncryptionMetadata2`. A table
//! with keys reads such rows too: give it a resolver that knows their
//! key-encryption key's id (a [`LocalKey`] for an AES key wrap, the id the
//! old program gave), mark the fields they encrypted `encrypted`, and each
//! reads as the string it was. Their format authenticates nothing (a
//! changed ciphertext can read as another string), so move them: the
//! table's migration seals every such row again in this format
//! (`MigrationReport::resealed`). While programs on those SDKs still read
//! the table, wrap the resolver in [`OldSdkFormat`]: the table then writes
//! that format (strings alone, no indexes), which they read back.
//!
//! # Finding rows by an encrypted value
//! An encrypted field may carry `unique = "…"` or `index = "…"`. Its index
//! rows are keyed by the index's tag and the HMAC-SHA-256 of the value
//! under the resolver's [`IndexKey`] (one of its own, never a
//! key-encryption key), so the store holds neither the value nor anything
//! that gives it back. The handle is an `Index<T, Sealed<V>, _>`:
//! [`find`](crate::IndexReader::find), `find_page`, and for a unique index
//! [`get`](crate::IndexReader::get) and `get_loaded` hash the value asked
//! for and read its rows; a prefix or a range does not compile (hashes
//! have no order). Unique values are refused when taken
//! ([`Error::UniqueViolation`](crate::Error::UniqueViolation) shows the
//! hash, not the value), and `verify_indexes` and `repair_indexes` see
//! these rows as any others.
//!
//! Each sealed row records the RowKeys of its index rows in its envelope
//! (the ciphertexts are bound to them), so a write over it finds its old
//! index rows without decrypting it. What the store can tell: which
//! entities share a value of such an index, never the value.
//!
//! The index key must stay the same through rotations of the
//! key-encryption keys: a [`LocalKey`] derives it from its bytes, a
//! [`LocalKeys`] ring from its first key (or takes one with
//! [`LocalKeys::with_index_key`]); a resolver of your own returns it from
//! [`KeyResolver::index_key`]. To change it, change the current
//! key-encryption key with it and run the migration: each row it seals
//! again moves its index rows to the new hashes (until it has passed, a
//! lookup misses the rows not yet moved). Indexes of a
//! type with encrypted fields live in its partition (not `partition` or
//! `table`), and one on an encrypted field is not a `list`.
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
    CONTENT_ALGORITHM, ContentKey, ENVELOPE_PROPERTY, Envelope, IndexKey, KeyResolver, LocalKey,
    LocalKeys, OldSdkFormat, WrappedKey, async_trait,
};

pub use crate::index::Sealed;
/// Key-encryption keys in Azure Key Vault (the `azure-key-vault` feature).
#[cfg(feature = "azure-key-vault")]
pub use tablekit_encrypt::KeyVaultKeys;

pub use crate::error::EncryptionError;
pub use crate::schema::Encrypted;
