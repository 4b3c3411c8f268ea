//! The format of the old Azure Storage SDKs' client-side encryption of
//! table entities (`[EncryptProperty]`, `TableEncryptionPolicy`; the .NET,
//! Java and Python SDKs of before 2020), read so that their rows can be
//! moved to this crate's format:
//!
//! - `_ClientEncryptionMetadata1`: a JSON string with the content key
//!   wrapped by the key-encryption key (its id and wrap algorithm), the
//!   content algorithm (`AES_CBC_256`) and the entity's 16-byte IV;
//! - `_ClientEncryptionMetadata2`: `Edm.Binary`, the JSON list of the
//!   encrypted property names, encrypted;
//! - each encrypted property: `Edm.Binary`, its UTF-8 string encrypted with
//!   AES-256-CBC and PKCS #7 padding, under an IV of its own: the first 16
//!   bytes of SHA-256 of the entity IV, then the RowKey, the PartitionKey
//!   and the property's name (the PartitionKey first for the Java SDK's
//!   first protocol).
//!
//! That format authenticates nothing: a ciphertext changed or moved reads
//! as garbage or fails its padding, and nothing ties it to its row. Read
//! it to migrate away from it.

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::Pkcs7};
use aes_gcm::aead::OsRng;
use aes_gcm::aead::rand_core::RngCore;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tablekit_core::{Entity, Value};
use zeroize::Zeroizing;

use crate::keys::{KeyResolver, WrappedKey};
use tablekit_core::EncryptionError;

/// The property that holds the old format's metadata (a JSON string).
pub const LEGACY_METADATA: &str = "_ClientEncryptionMetadata1";
/// The property that holds the old format's list of encrypted properties,
/// encrypted (`Edm.Binary`).
pub const LEGACY_PROPERTIES: &str = "_ClientEncryptionMetadata2";

/// The id under which a row of the old format was read: its key's id with
/// this prefix, which no key of the new format has (so a migration seals
/// every such row again).
pub const LEGACY_KEY_PREFIX: &str = "legacy:";

type Decryptor = cbc::Decryptor<aes::Aes256>;
type Encryptor = cbc::Encryptor<aes::Aes256>;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Metadata {
    wrapped_content_key: WrappedContentKey,
    encryption_agent: Agent,
    #[serde(rename = "ContentEncryptionIV")]
    content_encryption_iv: String,
    key_wrapping_metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct WrappedContentKey {
    key_id: String,
    encrypted_key: String,
    algorithm: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Agent {
    protocol: String,
    encryption_algorithm: String,
}

fn bad(reason: impl Into<String>) -> EncryptionError {
    EncryptionError::BadEnvelope {
        reason: format!("the old SDKs' metadata: {}", reason.into()),
    }
}

/// Whether `row` holds the old SDKs' encryption metadata.
pub fn is_legacy(row: &Entity) -> bool {
    row.properties.contains(LEGACY_METADATA) || row.properties.contains(LEGACY_PROPERTIES)
}

/// Opens a row the old SDKs encrypted: each property its metadata lists
/// becomes the string it was, and the metadata is taken out. The id it was
/// read under ([`LEGACY_KEY_PREFIX`] and its key's id); `None` for a row
/// without the old metadata. A property of `properties` (the type's
/// encrypted ones) that the row holds but the metadata does not list is
/// refused: it would be read as given, never decrypted.
pub async fn open_legacy(
    row: &mut Entity,
    table: &str,
    properties: &[&str],
    keys: &dyn KeyResolver,
) -> Result<Option<String>, EncryptionError> {
    if !is_legacy(row) {
        return Ok(None);
    }
    let (metadata, listed) = metadata_of(row)?;
    let entity_iv = STANDARD
        .decode(&metadata.content_encryption_iv)
        .map_err(|_| bad("the IV is not base64"))?;
    let wrapped = &metadata.wrapped_content_key;
    let wrapped_key = WrappedKey {
        algorithm: wrapped.algorithm.clone(),
        bytes: STANDARD
            .decode(&wrapped.encrypted_key)
            .map_err(|_| bad("the wrapped key is not base64"))?,
    };
    let key = keys.unwrap(&wrapped.key_id, &wrapped_key).await?;
    // The Java SDK's first protocol put the PartitionKey first.
    let java_v1 = metadata.key_wrapping_metadata.as_ref().is_none_or(|m| {
        m.get("EncryptionLibrary")
            .and_then(|l| l.as_str())
            .is_some_and(|l| l.contains("Java"))
    });
    let at = Place {
        key: key.as_bytes(),
        entity_iv: &entity_iv,
        partition_key: &row.partition_key,
        row_key: &row.row_key,
        java_v1,
    };
    let tampered = |property: &str| EncryptionError::Tampered {
        table: table.to_owned(),
        partition_key: row.partition_key.clone(),
        row_key: row.row_key.clone(),
        property: property.to_owned(),
    };
    let names = at
        .decrypt(LEGACY_PROPERTIES, listed)
        .ok_or_else(|| tampered(LEGACY_PROPERTIES))?;
    let names: Vec<String> = if java_v1 {
        let inner = names.trim_start_matches('[').trim_end_matches(']');
        inner
            .split(", ")
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        serde_json::from_str(&names).map_err(|_| tampered(LEGACY_PROPERTIES))?
    };
    if let Some(plain) = properties
        .iter()
        .find(|p| row.properties.contains(p) && !names.iter().any(|n| n == *p))
    {
        return Err(tampered(plain));
    }
    let mut opened = Vec::with_capacity(names.len());
    for name in &names {
        match row.properties.get(name) {
            Some(Value::Binary(bytes)) => {
                let text = at.decrypt(name, bytes).ok_or_else(|| tampered(name))?;
                opened.push((name.clone(), Value::String(text)));
            }
            Some(other) => {
                return Err(EncryptionError::not_ciphertext(
                    name,
                    Some(other.edm_type()),
                ));
            }
            None => {}
        }
    }
    for (name, value) in opened {
        row.properties.insert(name, value);
    }
    row.properties.remove(LEGACY_METADATA);
    row.properties.remove(LEGACY_PROPERTIES);
    Ok(Some(format!("{LEGACY_KEY_PREFIX}{}", wrapped.key_id)))
}

/// The old metadata of `row`, checked, and its encrypted list of
/// encrypted properties.
fn metadata_of(row: &Entity) -> Result<(Metadata, &Vec<u8>), EncryptionError> {
    let metadata = match row.properties.get(LEGACY_METADATA) {
        Some(Value::String(text)) => {
            serde_json::from_str::<Metadata>(text).map_err(|e| bad(e.to_string()))?
        }
        _ => {
            return Err(bad(format!(
                "`{LEGACY_METADATA}` is missing or not a string"
            )));
        }
    };
    let Some(Value::Binary(listed)) = row.properties.get(LEGACY_PROPERTIES) else {
        return Err(bad(format!(
            "`{LEGACY_PROPERTIES}` is missing or not binary"
        )));
    };
    let agent = &metadata.encryption_agent;
    if agent.protocol != "1.0" {
        return Err(bad(format!("protocol {} is not known", agent.protocol)));
    }
    if agent.encryption_algorithm != "AES_CBC_256" {
        return Err(EncryptionError::UnsupportedAlgorithm {
            algorithm: agent.encryption_algorithm.clone(),
        });
    }
    Ok((metadata, listed))
}

/// A [`KeyResolver`] whose table writes the old SDKs' format, for programs
/// that still read with those SDKs while they move: the same keys as the
/// resolver it wraps, and every write of an entity with encrypted fields
/// seals its strings as those SDKs did (the reads of either format go on).
/// Its rows authenticate nothing, and a type with indexes, or with an
/// encrypted field that is not a string, is refused.
#[derive(Debug)]
pub struct OldSdkFormat<K>(pub K);

#[async_trait::async_trait]
impl<K: KeyResolver> KeyResolver for OldSdkFormat<K> {
    fn current_key_id(&self) -> &str {
        self.0.current_key_id()
    }

    async fn wrap(
        &self,
        key_id: &str,
        key: &crate::ContentKey,
    ) -> Result<WrappedKey, EncryptionError> {
        self.0.wrap(key_id, key).await
    }

    async fn unwrap(
        &self,
        key_id: &str,
        wrapped: &WrappedKey,
    ) -> Result<crate::ContentKey, EncryptionError> {
        self.0.unwrap(key_id, wrapped).await
    }

    async fn index_key(&self) -> Result<crate::IndexKey, EncryptionError> {
        self.0.index_key().await
    }

    fn writes_old_format(&self) -> bool {
        true
    }
}

/// Seals the properties of `row` named in `properties` (strings alone) as
/// the old SDKs did, under a new content key and entity IV, wrapped by the
/// resolver's current key; writes both metadata properties.
pub async fn seal_legacy(
    row: &mut Entity,
    properties: &[&str],
    keys: &dyn KeyResolver,
) -> Result<(), EncryptionError> {
    let mut names = Vec::new();
    for &name in properties {
        match row.properties.get(name) {
            Some(Value::String(_)) => names.push(name.to_owned()),
            Some(_) => {
                return Err(EncryptionError::OldFormatNotString {
                    property: name.to_owned(),
                });
            }
            None => {}
        }
    }
    let key = crate::ContentKey::generate()?;
    let mut entity_iv = [0u8; 16];
    OsRng
        .try_fill_bytes(&mut entity_iv)
        .map_err(|e| EncryptionError::Random {
            message: e.to_string(),
        })?;
    let key_id = keys.current_key_id().to_owned();
    let wrapped = keys.wrap(&key_id, &key).await?;
    let at = Place {
        key: key.as_bytes(),
        entity_iv: &entity_iv,
        partition_key: &row.partition_key,
        row_key: &row.row_key,
        java_v1: false,
    };
    let mut sealed = Vec::with_capacity(names.len() + 2);
    for name in &names {
        if let Some(Value::String(text)) = row.properties.get(name) {
            sealed.push((name.clone(), Value::Binary(at.encrypt(name, text))));
        }
    }
    let listed = serde_json::to_string(&names).expect("names serialize");
    let listed = at.encrypt(LEGACY_PROPERTIES, &listed);
    let metadata = serde_json::json!({
        "WrappedContentKey": {
            "KeyId": key_id,
            "EncryptedKey": STANDARD.encode(&wrapped.bytes),
            "Algorithm": wrapped.algorithm,
        },
        "EncryptionAgent": { "Protocol": "1.0", "EncryptionAlgorithm": "AES_CBC_256" },
        "ContentEncryptionIV": STANDARD.encode(entity_iv),
        "KeyWrappingMetadata": {
            "EncryptionLibrary": concat!("tablekit ", env!("CARGO_PKG_VERSION")),
        },
    });
    for (name, value) in sealed {
        row.properties.insert(name, value);
    }
    row.properties
        .insert(LEGACY_PROPERTIES, Value::Binary(listed));
    row.properties
        .insert(LEGACY_METADATA, Value::String(metadata.to_string()));
    Ok(())
}

/// Where the old format's values of one row are decrypted.
struct Place<'a> {
    key: &'a [u8; 32],
    entity_iv: &'a [u8],
    partition_key: &'a str,
    row_key: &'a str,
    java_v1: bool,
}

impl Place<'_> {
    /// The IV of `property`: SHA-256 of the entity IV and the keys and
    /// name, cut to 16 bytes.
    fn iv(&self, property: &str) -> [u8; 16] {
        let mut digest = Sha256::new();
        digest.update(self.entity_iv);
        let (first, second) = match self.java_v1 {
            true => (self.partition_key, self.row_key),
            false => (self.row_key, self.partition_key),
        };
        digest.update(first.as_bytes());
        digest.update(second.as_bytes());
        digest.update(property.as_bytes());
        let mut iv = [0; 16];
        iv.copy_from_slice(&digest.finalize()[..16]);
        iv
    }

    /// `text` encrypted as `property`.
    fn encrypt(&self, property: &str, text: &str) -> Vec<u8> {
        let encryptor = Encryptor::new(self.key.into(), &self.iv(property).into());
        encryptor.encrypt_padded_vec_mut::<Pkcs7>(text.as_bytes())
    }

    /// The UTF-8 text `property` encrypted as `bytes`; `None` when it does
    /// not decrypt (wrong padding) or is not text.
    fn decrypt(&self, property: &str, bytes: &[u8]) -> Option<String> {
        let decryptor = Decryptor::new(self.key.into(), &self.iv(property).into());
        let plain = Zeroizing::new(decryptor.decrypt_padded_vec_mut::<Pkcs7>(bytes).ok()?);
        String::from_utf8(plain.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests;
