//! Cursors: a query's place, kept as text a caller can hand back, and the pages read from one.

use super::*;

/// A position in a query's results, for a web API's "next page" link: the
/// keys of the last item a page handed out, and a fingerprint of the query
/// it came from. Its text ([`Display`](std::fmt::Display),
/// [`FromStr`](std::str::FromStr)) is URL-safe and opaque. It stays valid
/// after any item (not only where the store's own pages end), and a cursor
/// of another query (another filter, range, table or type) is refused with
/// [`InvalidInput::Cursor`](crate::InvalidInput::Cursor).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor {
    pub(super) fingerprint: u64,
    pub(super) partition_key: String,
    pub(super) row_key: String,
}

pub(super) const CURSOR_VERSION: &str = "tkc1";

impl Cursor {
    /// A cursor after the row `(partition_key, row_key)` of the query whose
    /// fingerprint is `fingerprint`.
    pub(crate) fn at(fingerprint: u64, partition_key: &str, row_key: &str) -> Cursor {
        Cursor {
            fingerprint,
            partition_key: partition_key.to_owned(),
            row_key: row_key.to_owned(),
        }
    }

    /// The fingerprint and the RowKey after which the next page starts.
    pub(crate) fn position(&self) -> (u64, &str) {
        (self.fingerprint, &self.row_key)
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use base64::Engine;
        // Keys never hold control characters, so a line feed separates them.
        let text = format!(
            "{CURSOR_VERSION}\n{:016x}\n{}\n{}",
            self.fingerprint, self.partition_key, self.row_key
        );
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text))
    }
}

impl std::str::FromStr for Cursor {
    type Err = crate::error::InvalidInput;
    fn from_str(text: &str) -> std::result::Result<Cursor, crate::error::InvalidInput> {
        use base64::Engine;
        let bad = |reason| crate::error::InvalidInput::Cursor { reason };
        // Two keys of at most 512 UTF-16 units (3 bytes each at most in
        // UTF-8), the header, in base64: no cursor this library writes is
        // longer. A longer text is refused before it is decoded.
        if text.len() > MAX_CURSOR_LEN {
            return Err(bad("longer than any cursor this library writes"));
        }
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| bad("not a cursor this library wrote"))?;
        let text = String::from_utf8(bytes).map_err(|_| bad("not a cursor this library wrote"))?;
        let mut parts = text.split('\n');
        let (Some(CURSOR_VERSION), Some(fingerprint), Some(pk), Some(rk), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad("not a cursor this library wrote"));
        };
        let fingerprint = u64::from_str_radix(fingerprint, 16)
            .ok()
            .filter(|_| fingerprint.len() == 16)
            .ok_or(bad("not a cursor this library wrote"))?;
        // Keys no store holds never came from a page.
        crate::validate::keys(pk, rk).map_err(|_| bad("its keys are not keys of a stored row"))?;
        Ok(Cursor {
            fingerprint,
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        })
    }
}

/// The longest text a [`Cursor`] is written as (see its `FromStr`).
pub(super) const MAX_CURSOR_LEN: usize =
    (CURSOR_VERSION.len() + 18 + 2 * 3 * 512 + 2).div_ceil(3) * 4;

/// One page of at most N items and the cursor after its last item:
/// [`TableQuery::page_of`].
#[derive(Debug)]
pub struct CursorPage<P> {
    /// The items, in key order.
    pub items: Vec<Loaded<P>>,
    /// Where the next page starts; `None` when no item follows.
    pub next: Option<Cursor>,
}

/// FNV-1a over the query's text: a fingerprint that ties a cursor to its
/// query (not a defence against forgery, which the store's own access rules
/// cover; written here, as it is five lines).
pub(crate) fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
