//! Client-side encryption of an entity's properties, before they leave the
//! process.
//!
//! A property is sealed with AES-256-GCM under a content key of its own
//! entity, drawn afresh for every write. The associated data binds the
//! ciphertext to its table, PartitionKey, RowKey and property name: a
//! ciphertext copied to another row, another property or another table does
//! not open, and is an error, never a value. The content key is wrapped by
//! a key-encryption key that the application keeps (a [`KeyResolver`]):
//! the row stores the wrapped key with the key's id and the algorithms, in
//! one property, [`ENVELOPE_PROPERTY`]. The store sees ciphertext, the
//! wrapped key and the key's id, never a value or a key.
//!
//! What is stored:
//! - each sealed property is `Edm.Binary`: a format byte, a 96-bit nonce,
//!   then the ciphertext of the value and its 128-bit tag. The value keeps
//!   its EDM type inside the ciphertext and comes back as it was written;
//! - [`ENVELOPE_PROPERTY`] is a short JSON document (a string): the format
//!   version, the content algorithm (`A256GCM`), the wrap algorithm (for a
//!   [`LocalKey`], `A256KW`: AES key wrap, RFC 3394), the key's id and the
//!   wrapped key in base64.
//!
//! Keys are zeroed when they are dropped and never shown: their `Debug`
//! prints the key's id alone, and no error carries key bytes.
//!
//! The values of indexes on encrypted fields stand in RowKeys as their
//! HMAC-SHA-256 under an [`IndexKey`] of their own.
//!
//! The cryptography is the RustCrypto project's (`aes-gcm`, `aes-kw`,
//! `hmac`, `sha2`, `zeroize`); none is written here.
//!
//! # Example
//!
//! ```
//! use tablekit_core::{Entity, Value};
//! use tablekit_encrypt::{LocalKey, open_entity, seal_entity};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let key = LocalKey::new("key-2026", [7u8; 32]);
//! let mut row = Entity::new("staff", "ada")
//!     .with("Email", "ada@example.com")
//!     .with("Team", "engines");
//!
//! seal_entity(&mut row, "Employees", &["Email"], &key).await?;
//! assert!(matches!(row.get("Email"), Some(Value::Binary(_))));
//! assert_eq!(row.get("Team"), Some(&Value::from("engines")));
//!
//! open_entity(&mut row, "Employees", &["Email"], &key).await?;
//! assert_eq!(row.get("Email"), Some(&Value::from("ada@example.com")));
//!
//! // Sealed for one row, the value does not open in another.
//! seal_entity(&mut row, "Employees", &["Email"], &key).await?;
//! row.row_key = "grace".into();
//! assert!(open_entity(&mut row, "Employees", &["Email"], &key).await.is_err());
//! # Ok::<(), tablekit_encrypt::EncryptionError>(())
//! # }).unwrap();
//! ```

mod column;
mod envelope;
#[cfg(feature = "azure-key-vault")]
mod key_vault;
mod keys;
mod legacy;
mod seal;

/// The attribute that implements [`KeyResolver`] (its methods are
/// `async`): `#[tablekit_encrypt::async_trait]` on the `impl`.
pub use async_trait::async_trait;
pub use column::{NoFilterOnCiphertext, SealedColumn};
pub use envelope::{CONTENT_ALGORITHM, ENVELOPE_PROPERTY, Envelope};
#[cfg(feature = "azure-key-vault")]
pub use key_vault::KeyVaultKeys;
pub use keys::{ContentKey, IndexKey, KeyResolver, LocalKey, LocalKeys, WrappedKey};
pub use legacy::{
    LEGACY_KEY_PREFIX, LEGACY_METADATA, LEGACY_PROPERTIES, OldSdkFormat, is_legacy, open_legacy,
    seal_legacy,
};
pub use seal::{
    Binding, open_entity, open_selected, open_value, seal_entity, seal_indexed, seal_value,
};
pub use tablekit_core::EncryptionError;
