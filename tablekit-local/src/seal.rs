//! The checksum every stored record carries: a CRC-32 of the record's
//! engine key and of its bytes, before them. Checked on every read, so that
//! a byte changed in the file, or a record found under another key, is
//! damage and never a value. Rows ([`crate::rows`]), property names
//! ([`crate::names`]), blobs' properties and queue messages are sealed so.

/// The length of a checksum.
pub(crate) const CHECKSUM_LEN: usize = 4;

/// The checksum of the record stored under `key` whose bytes after the
/// checksum are `rest`.
pub(crate) fn checksum(key: &[u8], rest: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key);
    hasher.update(rest);
    hasher.finalize().to_le_bytes()
}

/// The record stored under `key`, its checksum checked: the bytes after
/// the checksum; `None` when the checksum does not match (the file was
/// changed, or the record is not this key's).
pub(crate) fn checked<'a>(key: &[u8], stored: &'a [u8]) -> Option<&'a [u8]> {
    let (sum, rest) = stored.split_at_checked(CHECKSUM_LEN)?;
    (checksum(key, rest) == sum).then_some(rest)
}

/// `body` stored under `key`, its checksum first; [`checked`] reads it
/// back.
pub(crate) fn sealed(key: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHECKSUM_LEN + body.len());
    out.extend_from_slice(&checksum(key, body));
    out.extend_from_slice(body);
    out
}
