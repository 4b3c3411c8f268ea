//! Sealing and opening properties: one value under a content key, and the
//! named properties of a row with its envelope.

use aes_gcm::aead::{AeadCore, AeadInPlace, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Nonce, Tag};
use tablekit_core::{DateTime, Entity, Value};
use zeroize::{Zeroize, Zeroizing};

use crate::envelope::{ENVELOPE_PROPERTY, Envelope};
use crate::keys::{ContentKey, KeyResolver};
use tablekit_core::EncryptionError;

/// The first byte of a sealed value: its format.
const FORMAT: u8 = 1;
const NONCE: usize = 12;
const TAG: usize = 16;

/// Where a value is stored: what its ciphertext is bound to.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The table's name.
    pub table: &'a str,
    /// The row's PartitionKey.
    pub partition_key: &'a str,
    /// The row's RowKey.
    pub row_key: &'a str,
    /// What the row's envelope lists ([`Envelope::bound`]): the names of
    /// the properties sealed together, and the RowKeys of its index rows;
    /// empty for a value sealed alone.
    pub sealed: &'a str,
}

impl Binding<'_> {
    /// The associated data of `property`: each part with its length, so no
    /// two places share it.
    fn associated(&self, property: &str) -> Vec<u8> {
        let parts = [
            self.table,
            self.partition_key,
            self.row_key,
            property,
            self.sealed,
        ];
        let mut out = Vec::with_capacity(24 + parts.iter().map(|p| p.len() + 4).sum::<usize>());
        out.extend_from_slice(b"tablekit-encrypt/1");
        for part in parts {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }

    fn tampered(&self, property: &str) -> EncryptionError {
        EncryptionError::Tampered {
            table: self.table.to_owned(),
            partition_key: self.partition_key.to_owned(),
            row_key: self.row_key.to_owned(),
            property: property.to_owned(),
        }
    }
}

/// Seals `value` as property `property` of the row `at` under `key`: an
/// `Edm.Binary` value that only [`open_value`] with the same key, row and
/// property opens.
pub fn seal_value(
    key: &ContentKey,
    at: &Binding<'_>,
    property: &str,
    value: &Value,
) -> Result<Value, EncryptionError> {
    seal_with(&cipher_of(key), at, property, value)
}

/// The cipher of `key`: its key schedule, made once per entity (zeroed
/// when dropped).
fn cipher_of(key: &ContentKey) -> Aes256Gcm {
    Aes256Gcm::new(key.as_bytes().into())
}

/// [`seal_value`] with the cipher of its content key. The value is written
/// once, into the buffer it is stored in, and encrypted there.
fn seal_with(
    cipher: &Aes256Gcm,
    at: &Binding<'_>,
    property: &str,
    value: &Value,
) -> Result<Value, EncryptionError> {
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let aad = at.associated(property);
    let mut out = Vec::with_capacity(1 + NONCE + 1 + plain_len(value) + TAG);
    out.push(FORMAT);
    out.extend_from_slice(&nonce);
    encode_into(value, &mut out);
    match cipher.encrypt_in_place_detached(&nonce, &aad, &mut out[1 + NONCE..]) {
        Ok(tag) => {
            out.extend_from_slice(&tag);
            Ok(Value::Binary(out))
        }
        Err(_) => {
            // Never for a value a row can hold; the plain text is wiped.
            out.zeroize();
            Err(EncryptionError::Random {
                message: "the cipher refused the value".into(),
            })
        }
    }
}

/// Opens a value [`seal_value`] sealed as `property` of the row `at`.
pub fn open_value(
    key: &ContentKey,
    at: &Binding<'_>,
    property: &str,
    stored: &Value,
) -> Result<Value, EncryptionError> {
    open_with(&cipher_of(key), at, property, stored)
}

/// [`open_value`] with the cipher of its content key.
fn open_with(
    cipher: &Aes256Gcm,
    at: &Binding<'_>,
    property: &str,
    stored: &Value,
) -> Result<Value, EncryptionError> {
    let Value::Binary(bytes) = stored else {
        return Err(EncryptionError::not_ciphertext(
            property,
            Some(stored.edm_type()),
        ));
    };
    if bytes.len() < 1 + NONCE + TAG {
        return Err(EncryptionError::not_ciphertext(property, None));
    }
    if bytes[0] != FORMAT {
        return Err(at.tampered(property));
    }
    let (nonce, rest) = bytes[1..].split_at(NONCE);
    let (sealed, tag) = rest.split_at(rest.len() - TAG);
    let aad = at.associated(property);
    let mut plain = Zeroizing::new(sealed.to_vec());
    cipher
        .decrypt_in_place_detached(
            Nonce::from_slice(nonce),
            &aad,
            &mut plain,
            Tag::from_slice(tag),
        )
        .map_err(|_| at.tampered(property))?;
    decode(plain).ok_or_else(|| at.tampered(property))
}

/// Seals the properties of `row` named in `properties` (those it holds)
/// under a new content key wrapped by the resolver's current key, and
/// writes the envelope to [`ENVELOPE_PROPERTY`]. A row that holds none of
/// them is left as it is, without an envelope.
pub async fn seal_entity(
    row: &mut Entity,
    table: &str,
    properties: &[&str],
    keys: &dyn KeyResolver,
) -> Result<(), EncryptionError> {
    seal_indexed(row, table, properties, Vec::new(), keys).await
}

/// [`seal_entity`] of an entity with index rows, whose RowKeys (`indexed`,
/// see [`Envelope::indexed`]) the envelope records and the ciphertexts are
/// bound to.
pub async fn seal_indexed(
    row: &mut Entity,
    table: &str,
    properties: &[&str],
    indexed: Vec<String>,
    keys: &dyn KeyResolver,
) -> Result<(), EncryptionError> {
    row.properties.remove(ENVELOPE_PROPERTY);
    let held: Vec<String> = properties
        .iter()
        .filter(|p| row.properties.contains(p))
        .map(|p| (*p).to_owned())
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    let key = ContentKey::generate()?;
    let key_id = keys.current_key_id().to_owned();
    let wrapped = keys.wrap(&key_id, &key).await?;
    let cipher = cipher_of(&key);
    let bound = Envelope::bound(&held, &indexed);
    each_present(row, (table, &bound), properties, |at, name, value| {
        seal_with(&cipher, at, name, value)
    })?;
    let envelope = Envelope {
        key_id,
        wrapped,
        properties: held,
        indexed,
    };
    row.properties
        .insert(ENVELOPE_PROPERTY, Value::String(envelope.to_text()));
    Ok(())
}

/// Opens the properties of `row` named in `properties`, with the content
/// key its envelope wraps, and takes the envelope out: the id of the
/// key-encryption key that wrapped it. A row with no envelope must hold
/// none of them (`None`). A row with one must hold exactly the properties
/// it lists: one taken out, or one added, is [`EncryptionError::Tampered`];
/// and each must open.
pub async fn open_entity(
    row: &mut Entity,
    table: &str,
    properties: &[&str],
    keys: &dyn KeyResolver,
) -> Result<Option<String>, EncryptionError> {
    open_row(row, table, properties, keys, true).await
}

/// [`open_entity`] of a row read in part (a projection's `$select`, an
/// index row's copies): the properties its envelope lists that it does not
/// hold are not looked for; those it holds must open.
pub async fn open_selected(
    row: &mut Entity,
    table: &str,
    properties: &[&str],
    keys: &dyn KeyResolver,
) -> Result<Option<String>, EncryptionError> {
    open_row(row, table, properties, keys, false).await
}

async fn open_row(
    row: &mut Entity,
    table: &str,
    properties: &[&str],
    keys: &dyn KeyResolver,
    whole: bool,
) -> Result<Option<String>, EncryptionError> {
    let envelope = match row.properties.remove(ENVELOPE_PROPERTY) {
        Some(Value::String(text)) => Envelope::from_text(&text)?,
        Some(other) => {
            return Err(EncryptionError::BadEnvelope {
                reason: format!("it is {}, not a string", other.edm_type()),
            });
        }
        None => {
            return match properties.iter().find(|p| row.properties.contains(p)) {
                Some(first) => Err(EncryptionError::MissingEnvelope {
                    property: (*first).to_owned(),
                }),
                None => Ok(None),
            };
        }
    };
    let listed = |name: &str| envelope.properties.iter().any(|p| p == name);
    let at = Binding {
        table,
        partition_key: &row.partition_key,
        row_key: &row.row_key,
        sealed: "",
    };
    let unknown = (envelope.properties.iter()).find(|p| !properties.contains(&p.as_str()));
    if let Some(name) = unknown.filter(|_| whole) {
        return Err(EncryptionError::BadEnvelope {
            reason: format!("it lists `{name}`, which the type does not encrypt"),
        });
    }
    let taken_out = (envelope.properties.iter()).find(|p| whole && !row.properties.contains(p));
    let added = properties
        .iter()
        .find(|p| !listed(p) && row.properties.contains(p));
    if let Some(name) = taken_out.map(String::as_str).or(added.copied()) {
        return Err(at.tampered(name));
    }
    let key = keys.unwrap(&envelope.key_id, &envelope.wrapped).await?;
    let cipher = cipher_of(&key);
    let bound = Envelope::bound(&envelope.properties, &envelope.indexed);
    each_present(row, (table, &bound), properties, |at, name, stored| {
        open_with(&cipher, at, name, stored)
    })?;
    Ok(Some(envelope.key_id))
}

/// Replaces each property of `row` named in `properties` that it holds by
/// `change` of it; the row is left as it was when one fails.
fn each_present(
    row: &mut Entity,
    (table, sealed): (&str, &str),
    properties: &[&str],
    mut change: impl FnMut(&Binding<'_>, &str, &Value) -> Result<Value, EncryptionError>,
) -> Result<(), EncryptionError> {
    let at = Binding {
        table,
        partition_key: &row.partition_key,
        row_key: &row.row_key,
        sealed,
    };
    let mut changed = Vec::with_capacity(properties.len());
    for &name in properties {
        if let Some(value) = row.properties.get(name) {
            changed.push((name, change(&at, name, value)?));
        }
    }
    for (name, value) in changed {
        row.properties.insert(name.to_owned(), value);
    }
    Ok(())
}

/// The length of a value's bytes in its plain text.
fn plain_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Binary(v) => v.len(),
        _ => 16,
    }
}

/// Appends a value's plain text: its EDM type's tag, then its bytes.
fn encode_into(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(s) => {
            out.push(0);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Int32(v) => {
            out.push(1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Int64(v) => {
            out.push(2);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::Double(v) => {
            out.push(3);
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        Value::Boolean(v) => {
            out.push(4);
            out.push(u8::from(*v));
        }
        Value::DateTime(v) => {
            out.push(5);
            out.extend_from_slice(&v.ticks().to_le_bytes());
        }
        Value::Guid(v) => {
            out.push(6);
            out.extend_from_slice(v.as_bytes());
        }
        Value::Binary(v) => {
            out.push(7);
            out.extend_from_slice(v);
        }
    }
}

/// Reads a plain text [`encode_into`] wrote; `None` if it did not. Text
/// and bytes are moved out of it, not copied; what is not kept is wiped.
fn decode(mut plain: Zeroizing<Vec<u8>>) -> Option<Value> {
    let (&tag, rest) = plain.split_first()?;
    let fixed = |n: usize| (rest.len() == n).then_some(rest);
    Some(match tag {
        0 | 7 => {
            let mut bytes = std::mem::take(&mut *plain);
            bytes.remove(0);
            if tag == 7 {
                return Some(Value::Binary(bytes));
            }
            match String::from_utf8(bytes) {
                Ok(text) => Value::String(text),
                Err(e) => {
                    e.into_bytes().zeroize();
                    return None;
                }
            }
        }
        1 => Value::Int32(i32::from_le_bytes(fixed(4)?.try_into().ok()?)),
        2 => Value::Int64(i64::from_le_bytes(fixed(8)?.try_into().ok()?)),
        3 => Value::Double(f64::from_bits(u64::from_le_bytes(
            fixed(8)?.try_into().ok()?,
        ))),
        4 => match fixed(1)? {
            [0] => Value::Boolean(false),
            [1] => Value::Boolean(true),
            _ => return None,
        },
        5 => Value::DateTime(
            DateTime::from_ticks(i64::from_le_bytes(fixed(8)?.try_into().ok()?)).ok()?,
        ),
        6 => Value::Guid(tablekit_core::uuid::Uuid::from_slice(fixed(16)?).ok()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
