//! Keys: an entity's content key, the key-encryption keys that wrap it, and
//! the resolver that finds them by id.

use std::fmt;
use std::path::Path;

use aes_gcm::aead::OsRng;
use aes_gcm::aead::rand_core::RngCore;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

use tablekit_core::EncryptionError;

/// The wrap algorithm of a [`LocalKey`]: AES key wrap with a 256-bit key
/// (RFC 3394).
pub(crate) const LOCAL_WRAP: &str = "A256KW";

/// An entity's content key: 256 bits, drawn afresh for each write, zeroed
/// when dropped. Its `Debug` shows nothing of it.
#[derive(Clone)]
pub struct ContentKey(Zeroizing<[u8; 32]>);

impl ContentKey {
    /// A new key from the system's random number generator.
    pub fn generate() -> Result<ContentKey, EncryptionError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        OsRng
            .try_fill_bytes(bytes.as_mut())
            .map_err(|e| EncryptionError::Random {
                message: e.to_string(),
            })?;
        Ok(ContentKey(bytes))
    }

    /// A key of these bytes (an unwrapped key, say).
    pub fn from_bytes(bytes: [u8; 32]) -> ContentKey {
        ContentKey(Zeroizing::new(bytes))
    }

    /// The key's bytes, for a [`KeyResolver`] to wrap.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for ContentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ContentKey(..)")
    }
}

/// A content key wrapped by a key-encryption key, with the algorithm that
/// wrapped it (stored in the row, so a reader knows how to unwrap it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// The wrap algorithm (`A256KW` for a [`LocalKey`]; a key service
    /// names its own, such as `RSA-OAEP-256`).
    pub algorithm: String,
    /// The wrapped key.
    pub bytes: Vec<u8>,
}

/// Finds key-encryption keys by id, and wraps and unwraps content keys with
/// them. The application gives one: a [`LocalKey`], a [`LocalKeys`] ring,
/// or its own (a key service's keys).
///
/// A row records the id of the key its content key was wrapped with, so a
/// resolver that knows several keys reads rows of each while new writes
/// use [`current_key_id`](KeyResolver::current_key_id).
#[async_trait::async_trait]
pub trait KeyResolver: Send + Sync + fmt::Debug {
    /// The id of the key new writes wrap their content keys with.
    fn current_key_id(&self) -> &str;

    /// Wraps `key` with the key-encryption key `key_id`.
    async fn wrap(&self, key_id: &str, key: &ContentKey) -> Result<WrappedKey, EncryptionError>;

    /// Unwraps `wrapped` with the key-encryption key `key_id`. A key that is
    /// not the one it was wrapped with is [`EncryptionError::WrongKey`]; an
    /// id the resolver does not know is [`EncryptionError::UnknownKey`].
    async fn unwrap(
        &self,
        key_id: &str,
        wrapped: &WrappedKey,
    ) -> Result<ContentKey, EncryptionError>;

    /// The key that hashes the values of indexes on encrypted fields (see
    /// [`IndexKey`]). It must stay the same while key-encryption keys are
    /// rotated: a value hashed under another key is not found. None by
    /// default ([`EncryptionError::NoIndexKey`]).
    async fn index_key(&self) -> Result<IndexKey, EncryptionError> {
        Err(EncryptionError::NoIndexKey)
    }

    /// Whether a table given this resolver writes the old Azure Storage
    /// SDKs' format (see [`OldSdkFormat`](crate::OldSdkFormat)); not by
    /// default.
    fn writes_old_format(&self) -> bool {
        false
    }
}

/// The key of the keyed hashes (HMAC-SHA-256) that stand for encrypted
/// values in index RowKeys: an index row is found by the hash of the value
/// looked for, and holds no value. 256 bits, zeroed when dropped, never
/// shown by `Debug`.
///
/// Equal values hash equal: the store can tell which entities share a value
/// of an encrypted index, never the value.
#[derive(Clone)]
pub struct IndexKey(Zeroizing<[u8; 32]>);

impl IndexKey {
    /// The index key of these bytes.
    pub fn new(mut bytes: [u8; 32]) -> IndexKey {
        let key = IndexKey(Zeroizing::new(bytes));
        bytes.zeroize();
        key
    }

    /// The index key derived from a key-encryption key's bytes: the
    /// HMAC-SHA-256, under them, of a label of its own, so that neither key
    /// tells anything of the other.
    fn derived(from: &[u8; 32]) -> IndexKey {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(from).expect("HMAC takes any key");
        mac.update(b"tablekit-encrypt/index-key/1");
        IndexKey(Zeroizing::new(mac.finalize().into_bytes().into()))
    }

    /// The keyed hash of `text`, as 64 lowercase hexadecimal digits.
    pub fn hash(&self, text: &str) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(self.0.as_ref()).expect("HMAC takes any key");
        mac.update(text.as_bytes());
        let digest = mac.finalize().into_bytes();
        let mut out = String::with_capacity(64);
        for byte in digest {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 15)]));
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Debug for IndexKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexKey(..)")
    }
}

/// A key-encryption key kept by the application: 256 bits for AES key wrap
/// (RFC 3394), with its id. Its bytes are zeroed when it is dropped, and its
/// `Debug` shows its id alone.
#[derive(Clone)]
pub struct LocalKey {
    id: String,
    key: Zeroizing<[u8; 32]>,
}

impl LocalKey {
    /// The key `id` of these bytes.
    pub fn new(id: impl Into<String>, mut bytes: [u8; 32]) -> LocalKey {
        let key = LocalKey {
            id: id.into(),
            key: Zeroizing::new(bytes),
        };
        bytes.zeroize();
        key
    }

    /// The key `id` of `bytes`, which must be 32 bytes long.
    pub fn from_slice(id: impl Into<String>, bytes: &[u8]) -> Result<LocalKey, EncryptionError> {
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| EncryptionError::BadKey {
            reason: format!("a key is 32 bytes, not {}", bytes.len()),
        })?;
        Ok(LocalKey::new(id, bytes))
    }

    /// The key `id` read from a file: 32 bytes as they are, or written as 64
    /// hexadecimal digits or in base64 (surrounding whitespace is ignored).
    pub fn from_file(
        id: impl Into<String>,
        path: impl AsRef<Path>,
    ) -> Result<LocalKey, EncryptionError> {
        let path = path.as_ref();
        let read = Zeroizing::new(std::fs::read(path).map_err(|e| EncryptionError::BadKey {
            reason: format!("{} does not read: {e}", path.display()),
        })?);
        if read.len() == 32 {
            return LocalKey::from_slice(id, &read);
        }
        let text = std::str::from_utf8(&read).map(str::trim).unwrap_or("");
        let decoded = Zeroizing::new(decode_text(text).ok_or_else(|| EncryptionError::BadKey {
            reason: format!(
                "{} holds neither 32 bytes, 64 hexadecimal digits nor 32 bytes in base64",
                path.display()
            ),
        })?);
        LocalKey::from_slice(id, &decoded)
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn kek(&self) -> aes_kw::KekAes256 {
        aes_kw::KekAes256::from(*self.key)
    }

    fn wrap_key(&self, key: &ContentKey) -> Result<WrappedKey, EncryptionError> {
        let bytes = self
            .kek()
            .wrap_vec(key.as_bytes())
            .map_err(|e| EncryptionError::BadKey {
                reason: e.to_string(),
            })?;
        Ok(WrappedKey {
            algorithm: LOCAL_WRAP.to_owned(),
            bytes,
        })
    }

    fn unwrap_key(&self, wrapped: &WrappedKey) -> Result<ContentKey, EncryptionError> {
        if wrapped.algorithm != LOCAL_WRAP {
            return Err(EncryptionError::UnsupportedAlgorithm {
                algorithm: wrapped.algorithm.clone(),
            });
        }
        let wrong = || EncryptionError::WrongKey {
            key_id: self.id.clone(),
        };
        if wrapped.bytes.len() != 40 {
            return Err(wrong());
        }
        let mut out = Zeroizing::new([0u8; 32]);
        self.kek()
            .unwrap(&wrapped.bytes, out.as_mut())
            .map_err(|_| wrong())?;
        Ok(ContentKey(out))
    }
}

/// 64 hexadecimal digits, or base64 of 32 bytes.
fn decode_text(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
        return text
            .as_bytes()
            .chunks(2)
            .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
            .collect();
    }
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

impl fmt::Debug for LocalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl KeyResolver for LocalKey {
    fn current_key_id(&self) -> &str {
        &self.id
    }

    async fn wrap(&self, key_id: &str, key: &ContentKey) -> Result<WrappedKey, EncryptionError> {
        if key_id != self.id {
            return Err(EncryptionError::UnknownKey {
                key_id: key_id.to_owned(),
            });
        }
        self.wrap_key(key)
    }

    async fn unwrap(
        &self,
        key_id: &str,
        wrapped: &WrappedKey,
    ) -> Result<ContentKey, EncryptionError> {
        if key_id != self.id {
            return Err(EncryptionError::UnknownKey {
                key_id: key_id.to_owned(),
            });
        }
        self.unwrap_key(wrapped)
    }

    /// Derived from the key's bytes (see [`LocalKeys`] for rotations).
    async fn index_key(&self) -> Result<IndexKey, EncryptionError> {
        Ok(IndexKey::derived(&self.key))
    }
}

/// Several [`LocalKey`]s, one of them current: rows wrapped under any of
/// them read, and new writes use the current one (during a rotation, the
/// new key is current and the old one still reads).
///
/// The ring's [index key](IndexKey) is derived from its first key (the
/// one given to [`new`](LocalKeys::new)), as a lone [`LocalKey`] derives
/// its own: start the ring of a rotation from the key the data was first
/// written with, and indexes on encrypted fields keep finding their rows.
/// Or give it one with [`with_index_key`](LocalKeys::with_index_key).
#[derive(Debug, Clone)]
pub struct LocalKeys {
    keys: Vec<LocalKey>,
    current: usize,
    index: Option<IndexKey>,
}

impl LocalKeys {
    /// A ring of `current` alone.
    pub fn new(current: LocalKey) -> LocalKeys {
        LocalKeys {
            keys: vec![current],
            current: 0,
            index: None,
        }
    }

    /// The ring with `key` as its index key.
    pub fn with_index_key(mut self, key: IndexKey) -> LocalKeys {
        self.index = Some(key);
        self
    }

    /// Adds `key`, which reads rows wrapped under it; `current` makes it the
    /// key new writes use. A key of an id already in the ring replaces it.
    pub fn with(mut self, key: LocalKey, current: bool) -> LocalKeys {
        let at = match self.keys.iter().position(|k| k.id == key.id) {
            Some(at) => {
                self.keys[at] = key;
                at
            }
            None => {
                self.keys.push(key);
                self.keys.len() - 1
            }
        };
        if current {
            self.current = at;
        }
        self
    }

    fn key(&self, key_id: &str) -> Result<&LocalKey, EncryptionError> {
        self.keys
            .iter()
            .find(|k| k.id == key_id)
            .ok_or_else(|| EncryptionError::UnknownKey {
                key_id: key_id.to_owned(),
            })
    }
}

#[async_trait::async_trait]
impl KeyResolver for LocalKeys {
    fn current_key_id(&self) -> &str {
        &self.keys[self.current].id
    }

    async fn wrap(&self, key_id: &str, key: &ContentKey) -> Result<WrappedKey, EncryptionError> {
        self.key(key_id)?.wrap_key(key)
    }

    async fn unwrap(
        &self,
        key_id: &str,
        wrapped: &WrappedKey,
    ) -> Result<ContentKey, EncryptionError> {
        self.key(key_id)?.unwrap_key(wrapped)
    }

    async fn index_key(&self) -> Result<IndexKey, EncryptionError> {
        Ok(match &self.index {
            Some(key) => key.clone(),
            None => IndexKey::derived(&self.keys[0].key),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_key_bytes() {
        let key = LocalKey::new("k1", [0xAB; 32]);
        let shown = format!("{key:?} {:?}", LocalKeys::new(key.clone()));
        assert!(shown.contains("k1"));
        assert!(!shown.to_lowercase().contains("ab, ") && !shown.contains("171"));
        let content = ContentKey::from_bytes([0xAB; 32]);
        assert_eq!(format!("{content:?}"), "ContentKey(..)");
    }

    #[test]
    fn keys_read_from_files_in_three_forms() {
        let dir = std::env::temp_dir().join(format!("tablekit-encrypt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes: [u8; 32] = std::array::from_fn(|i| i as u8 * 7);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let b64 = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(bytes)
        };
        let content = ContentKey::from_bytes([9; 32]);
        let wrapped = LocalKey::new("k", bytes).wrap_key(&content).unwrap();
        for (name, data) in [
            ("raw", bytes.to_vec()),
            ("hex", format!("{hex}\n").into_bytes()),
            ("b64", format!("  {b64}\n").into_bytes()),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, data).unwrap();
            let key = LocalKey::from_file("k", &path).unwrap();
            let opened = key.unwrap_key(&wrapped).unwrap();
            assert_eq!(opened.as_bytes(), content.as_bytes(), "{name}");
        }
        let short = dir.join("short");
        std::fs::write(&short, b"0123").unwrap();
        assert!(matches!(
            LocalKey::from_file("k", &short),
            Err(EncryptionError::BadKey { .. })
        ));
        let missing = LocalKey::from_file("k", dir.join("none"));
        assert!(matches!(missing, Err(EncryptionError::BadKey { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_ring_reads_every_key_and_writes_with_the_current() {
        let old = LocalKey::new("old", [1; 32]);
        let new = LocalKey::new("new", [2; 32]);
        let content = ContentKey::generate().unwrap();
        let under_old = old.wrap("old", &content).await.unwrap();
        let ring = LocalKeys::new(old.clone()).with(new.clone(), true);
        assert_eq!(ring.current_key_id(), "new");
        let opened = ring.unwrap("old", &under_old).await.unwrap();
        assert_eq!(opened.as_bytes(), content.as_bytes());
        // Under the wrong id: the integrity check of the wrap refuses it.
        assert_eq!(
            ring.unwrap("new", &under_old).await.unwrap_err(),
            EncryptionError::WrongKey {
                key_id: "new".into()
            }
        );
        assert_eq!(
            ring.unwrap("gone", &under_old).await.unwrap_err(),
            EncryptionError::UnknownKey {
                key_id: "gone".into()
            }
        );
        assert!(matches!(
            new.wrap("old", &content).await,
            Err(EncryptionError::UnknownKey { .. })
        ));
    }
}
