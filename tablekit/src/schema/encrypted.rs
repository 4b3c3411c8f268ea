//! Which properties of a type are stored encrypted, and the refusal of a
//! reader that would take their ciphertext for a value. The sealing itself
//! is the typed client's (`table/sealed.rs`), with `tablekit-encrypt`.

use tablekit_encrypt::{ENVELOPE_PROPERTY, LEGACY_METADATA, LEGACY_PROPERTIES};

use super::{DescriptorPart, TableEntity};
use crate::error::{EncryptionError, Result};
use crate::props::PropertySource;

/// The properties of an entity type that are stored encrypted (its
/// `#[tablekit(encrypted)]` fields), as a part of its descriptor.
#[derive(Debug)]
pub struct Encrypted {
    /// The stored names of the encrypted properties.
    pub properties: &'static [&'static str],
}

impl DescriptorPart for Encrypted {
    /// A projection's write would keep the values it leaves out, sealed
    /// under the old content key, beside a new envelope: they would no
    /// longer open. A projection of an entity with encrypted fields reads.
    fn bars_partial_writes(&self) -> bool {
        true
    }
}

/// The encrypted properties of `T` (for a projection, of its entity), if
/// it has any.
pub(crate) fn encrypted<T: TableEntity>() -> Option<&'static [&'static str]> {
    T::DESCRIPTOR
        .part_or_base::<Encrypted>()
        .map(|part| part.properties)
}

/// Refuses a row read as `T` that still holds its envelope: its encrypted
/// properties were not opened (a reader without keys met it), and their
/// ciphertext is never read as a value.
pub(crate) fn refuse_sealed<T: TableEntity, S: PropertySource + ?Sized>(
    partition_key: &str,
    row_key: &str,
    props: &S,
) -> Result<()> {
    let sealed = |name| props.get(name).is_some();
    if encrypted::<T>().is_some()
        && (sealed(ENVELOPE_PROPERTY) || sealed(LEGACY_METADATA) || sealed(LEGACY_PROPERTIES))
    {
        return Err(EncryptionError::NotDecrypted {
            partition_key: partition_key.to_owned(),
            row_key: row_key.to_owned(),
            path: "a read that does not decrypt",
        }
        .into());
    }
    Ok(())
}
