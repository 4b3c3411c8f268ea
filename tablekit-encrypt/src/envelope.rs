//! The envelope: the property of a row that holds its wrapped content key,
//! the key's id and the algorithms.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::keys::WrappedKey;
use tablekit_core::EncryptionError;

/// The property that holds a row's [`Envelope`], as a string.
pub const ENVELOPE_PROPERTY: &str = "_Encryption";

/// The algorithm that seals properties: AES-256-GCM.
pub const CONTENT_ALGORITHM: &str = "A256GCM";

/// The format version written.
const VERSION: u32 = 1;

/// What a row says of its encryption: the content algorithm, the id of the
/// key-encryption key and the content key it wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The id of the key-encryption key.
    pub key_id: String,
    /// The content key, wrapped.
    pub wrapped: WrappedKey,
    /// The properties sealed under it, in the order sealed: each one's
    /// ciphertext is bound to the list, so a property taken out of the row
    /// (or the list changed) is found.
    pub properties: Vec<String>,
    /// The RowKeys of the entity's index rows in its partition, in the
    /// order its type declares its indexes (empty for an index it has no
    /// row in); none for a type without indexes. Those of an index on an
    /// encrypted field hold a keyed hash, never the value. Recorded so that
    /// a write over the row finds its index rows without decrypting it; the
    /// ciphertexts are bound to them, like to the properties.
    pub indexed: Vec<String>,
}

impl Envelope {
    /// What each ciphertext of the row is bound to besides its place: the
    /// properties sealed together, then the index RowKeys, one per line.
    pub fn bound(properties: &[String], indexed: &[String]) -> String {
        let mut out = properties.join(",");
        for key in indexed {
            out.push('\n');
            out.push_str(key);
        }
        out
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    v: u32,
    alg: String,
    wrap: String,
    kid: String,
    key: String,
    props: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    idx: Vec<String>,
}

impl Envelope {
    /// The envelope as stored in [`ENVELOPE_PROPERTY`].
    pub fn to_text(&self) -> String {
        let stored = Stored {
            v: VERSION,
            alg: CONTENT_ALGORITHM.to_owned(),
            wrap: self.wrapped.algorithm.clone(),
            kid: self.key_id.clone(),
            key: STANDARD.encode(&self.wrapped.bytes),
            props: self.properties.clone(),
            idx: self.indexed.clone(),
        };
        serde_json::to_string(&stored).expect("an envelope always serializes")
    }

    /// Reads an envelope as stored.
    pub fn from_text(text: &str) -> Result<Envelope, EncryptionError> {
        let bad = |reason: String| EncryptionError::BadEnvelope { reason };
        let stored: Stored = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if stored.v != VERSION {
            return Err(bad(format!("format version {} is not known", stored.v)));
        }
        if stored.alg != CONTENT_ALGORITHM {
            return Err(EncryptionError::UnsupportedAlgorithm {
                algorithm: stored.alg,
            });
        }
        let bytes = STANDARD
            .decode(&stored.key)
            .map_err(|e| bad(format!("the wrapped key is not base64: {e}")))?;
        Ok(Envelope {
            key_id: stored.kid,
            wrapped: WrappedKey {
                algorithm: stored.wrap,
                bytes,
            },
            properties: stored.props,
            indexed: stored.idx,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_reads_back_and_refuses_what_it_did_not_write() {
        let envelope = Envelope {
            key_id: "https://vault/keys/k/1".into(),
            wrapped: WrappedKey {
                algorithm: "A256KW".into(),
                bytes: vec![1, 2, 3],
            },
            properties: vec!["Email".into()],
            indexed: Vec::new(),
        };
        let indexed = Envelope {
            indexed: vec!["EMP.email_0f".into(), String::new()],
            ..envelope.clone()
        };
        assert_eq!(Envelope::from_text(&indexed.to_text()).unwrap(), indexed);
        let text = envelope.to_text();
        assert_eq!(Envelope::from_text(&text).unwrap(), envelope);
        for bad in [
            "",
            "{}",
            &text.replace("\"v\":1", "\"v\":2"),
            &text.replace("AQID", "***"),
            &text.replace("}", ",\"x\":1}"),
        ] {
            assert!(
                matches!(
                    Envelope::from_text(bad),
                    Err(EncryptionError::BadEnvelope { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            Envelope::from_text(&text.replace("A256GCM", "A128CBC")),
            Err(EncryptionError::UnsupportedAlgorithm { .. })
        ));
    }
}
