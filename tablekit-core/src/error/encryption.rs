//! What goes wrong when a property is sealed or opened (`tablekit-encrypt`).
//! No error carries a key's bytes or a value.

use crate::value::EdmType;

/// An error of encryption: a key missing or wrong, or a stored value that
/// does not open. Nothing is returned or stored when one occurs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncryptionError {
    /// The resolver has no key of this id.
    #[error("no key-encryption key has the id `{key_id}`")]
    UnknownKey {
        /// The key's id, as the row names it.
        key_id: String,
    },
    /// The wrapped content key did not unwrap under the key of this id: the
    /// key is not the one it was wrapped with, or the wrapped key changed.
    #[error(
        "the content key does not unwrap under key-encryption key `{key_id}`: another key, or a changed row"
    )]
    WrongKey {
        /// The key's id.
        key_id: String,
    },
    /// A sealed property did not open: its ciphertext changed, was copied
    /// from another row, property or table, or was sealed under another
    /// content key.
    #[error(
        "property `{property}` of row ({partition_key:?}, {row_key:?}) in table `{table}` does not decrypt: \
         it changed, was copied from another row, property or table, or was sealed under another key"
    )]
    Tampered {
        /// The table.
        table: String,
        /// The row's PartitionKey.
        partition_key: String,
        /// The row's RowKey.
        row_key: String,
        /// The property.
        property: String,
    },
    /// A property that is encrypted holds a value that is not ciphertext
    /// (a plain value, or too short to be one).
    #[error("property `{property}` should hold ciphertext (Edm.Binary) but holds {found}")]
    NotCiphertext {
        /// The property.
        property: String,
        /// What it holds: its EDM type, or `a truncated ciphertext`.
        found: String,
    },
    /// A row holds a sealed property but no envelope (or the envelope was
    /// removed), so its content key is unknown.
    #[error(
        "property `{property}` is encrypted but the row has no `_Encryption` property with its key"
    )]
    MissingEnvelope {
        /// The first sealed property found.
        property: String,
    },
    /// The envelope property does not read.
    #[error("the row's `_Encryption` property does not read: {reason}")]
    BadEnvelope {
        /// What is wrong with it.
        reason: String,
    },
    /// The row names an algorithm this version does not know.
    #[error(
        "the row is encrypted with `{algorithm}`, which this version of tablekit does not read"
    )]
    UnsupportedAlgorithm {
        /// The algorithm named.
        algorithm: String,
    },
    /// Key material given to make a key is not a key.
    #[error("not a key-encryption key: {reason}")]
    BadKey {
        /// What is wrong with it.
        reason: String,
    },
    /// The resolver failed (a key service refused, or could not be reached).
    #[error("the key resolver failed: {message}")]
    Resolver {
        /// What it said.
        message: String,
    },
    /// A type with encrypted fields, on a table given no keys.
    #[error(
        "the entities of table `{table}` have encrypted fields, and the table has no keys: give it a key resolver (`Table::with_encryption`)"
    )]
    NoKeys {
        /// The table.
        table: String,
    },
    /// A row with encrypted properties met a reader or writer that does not
    /// encrypt: nothing was read as a value, and nothing was written.
    #[error(
        "row ({partition_key:?}, {row_key:?}) has encrypted properties, and {path} does not decrypt or encrypt them: use a `Table` given keys"
    )]
    NotDecrypted {
        /// The row's PartitionKey.
        partition_key: String,
        /// The row's RowKey.
        row_key: String,
        /// What met it.
        path: &'static str,
    },
    /// An index on an encrypted field needs the key its values are hashed
    /// with, and the resolver has none.
    #[error(
        "an index on an encrypted field hashes its values with an index key, and the key resolver gives none (`KeyResolver::index_key`)"
    )]
    NoIndexKey,
    /// A stored row of a type with encrypted fields and indexes does not
    /// record the RowKeys of its index rows as its type now declares them
    /// (it was written before they were declared): they cannot be known
    /// without decrypting it, which a write does not do.
    #[error(
        "row ({partition_key:?}, {row_key:?}) does not record the index rows its type now declares (it was written before they were): run a migration of the type, which seals every row again with its index rows"
    )]
    IndexRowsUnknown {
        /// The row's PartitionKey.
        partition_key: String,
        /// The row's RowKey.
        row_key: String,
    },
    /// The old SDKs' format encrypts strings alone.
    #[error(
        "the old SDKs' format encrypts strings alone, and `{property}` is not one: write this type in the current format"
    )]
    OldFormatNotString {
        /// The property.
        property: String,
    },
    /// The system's random number generator failed.
    #[error("no random bytes for a content key or nonce: {message}")]
    Random {
        /// What it said.
        message: String,
    },
}

impl EncryptionError {
    /// A property holding `found` where ciphertext belongs.
    #[doc(hidden)]
    pub fn not_ciphertext(property: &str, found: Option<EdmType>) -> EncryptionError {
        EncryptionError::NotCiphertext {
            property: property.to_owned(),
            found: match found {
                Some(edm) => edm.to_string(),
                None => "a truncated ciphertext".to_owned(),
            },
        }
    }
}
