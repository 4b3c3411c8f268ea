//! The store's string order: ordinal by UTF-16 code unit.
//!
//! Rust's `str` order is by code point (equal to UTF-8 byte order). The two
//! differ only when a character in U+E000..=U+FFFF meets a supplementary
//! character (U+10000 and above): in UTF-16 the supplementary character starts
//! with a surrogate (0xD800..=0xDBFF), which sorts *before* U+E000.

use std::cmp::Ordering;

/// Length of `s` in UTF-16 code units, the unit of the store's length limits.
#[inline]
pub fn utf16_len(s: &str) -> usize {
    // ASCII is the common case, and one vectorised check decides it.
    if s.is_ascii() {
        return s.len();
    }
    s.chars().map(char::len_utf16).sum()
}

/// Compares two strings by UTF-16 code units, as the store orders keys.
///
/// ```
/// use std::cmp::Ordering;
/// use tablekit::keyorder::cmp_utf16;
/// assert_eq!(cmp_utf16("B", "a"), Ordering::Less); // case-sensitive, upper first
/// // U+10000 sorts before U+E000 in UTF-16, after it by code point.
/// assert_eq!(cmp_utf16("\u{10000}", "\u{E000}"), Ordering::Less);
/// ```
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let Some(first_diff) = ab.iter().zip(bb).position(|(x, y)| x != y) else {
        return ab.len().cmp(&bb.len());
    };
    // Back up to the start of the character that differs (a shared prefix, so
    // the boundary is the same in both strings).
    let start = (0..=first_diff)
        .rev()
        .find(|&i| a.is_char_boundary(i))
        .unwrap_or(0);
    let ca = a[start..].chars().next().map_or(0, sort_weight);
    let cb = b[start..].chars().next().map_or(0, sort_weight);
    ca.cmp(&cb)
}

/// Maps a character to a number whose order is the UTF-16 order of the
/// character's first differing code unit: U+E000..=U+FFFF move above every
/// supplementary character.
fn sort_weight(c: char) -> u32 {
    let c = c as u32;
    if (0xE000..=0xFFFF).contains(&c) {
        c + 0x10_0000
    } else {
        c
    }
}

/// Thirty keys in the order Azurite returned them (AZURE_TABLE.md §3): mixed
/// case, Latin-1, the private-use area and supplementary characters, sorted
/// by UTF-16 code units.
pub const VERIFIED_ORDER: [&str; 30] = [
    " ",
    "!",
    "0",
    "9",
    "A",
    "B",
    "Z",
    "_",
    "a",
    "a b",
    "a-",
    "a.",
    "aa",
    "ab",
    "b",
    "o'k",
    "ss",
    "z",
    "~",
    "\u{A0}",
    "É",
    "ß",
    "ä",
    "é",
    "ÿ",
    "Ā",
    "\u{10000}",
    "\u{1F600}",
    "\u{E000}",
    "\u{FF21}",
];

/// A string ordered by UTF-16 code units, for use as a map key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Utf16Key(pub Box<str>);

impl Utf16Key {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Ord for Utf16Key {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_utf16(&self.0, &other.0)
    }
}

impl PartialOrd for Utf16Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::borrow::Borrow<str> for Utf16Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Utf16Key {
    fn from(s: &str) -> Utf16Key {
        Utf16Key(s.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utf16_order(a: &str, b: &str) -> Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    #[test]
    fn azurite_verified_order() {
        let mut keys: Vec<&str> = VERIFIED_ORDER.iter().rev().copied().collect();
        keys.sort_by(|a, b| cmp_utf16(a, b));
        assert_eq!(keys, VERIFIED_ORDER);
    }

    #[test]
    fn utf16_len_counts_surrogates() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("\u{1F600}"), 2);
        assert_eq!(utf16_len("a\u{1F600}\u{E000}"), 4);
    }

    proptest! {
        #[test]
        fn matches_utf16_code_unit_order(a in "\\PC{0,8}", b in "\\PC{0,8}") {
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
        }

        #[test]
        fn matches_on_tricky_alphabet(a in "[a\u{E000}\u{FFFF}\u{10000}\u{1F600}\u{D7FF}]{0,5}",
                                      b in "[a\u{E000}\u{FFFF}\u{10000}\u{1F600}\u{D7FF}]{0,5}") {
            prop_assert_eq!(cmp_utf16(&a, &b), utf16_order(&a, &b));
            prop_assert_eq!(utf16_len(&a), a.encode_utf16().count());
        }
    }
}
