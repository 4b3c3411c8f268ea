//! [`KeyPart`] for the supported component types.

use super::{ESCAPE_MARK, KeyPart, ORDERED_SEPARATOR, STRING_SEPARATOR};
use crate::datetime::DateTime;

/// Writes `value` as exactly `width` decimal digits.
fn write_digits(out: &mut String, value: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut v = value;
    for slot in buf[..width].iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
    for b in &buf[..width] {
        out.push(char::from(*b));
    }
}

fn read_digits(text: &str, width: usize) -> Result<u64, String> {
    let bytes = text.as_bytes();
    if bytes.len() != width {
        // Digits of another width: a key another client wrote, padded to
        // its own width.
        if !bytes.is_empty() && bytes.len() <= 20 && bytes.iter().all(u8::is_ascii_digit) {
            return Err(format!(
                "expected {width} digits, found {text:?}: for numbers stored with {} digits, declare the field `key::Padded<{}>`",
                bytes.len(),
                bytes.len()
            ));
        }
        return Err(format!("expected {width} digits, found {text:?}"));
    }
    // One pass that checks and accumulates: every key read decodes its
    // numbers, so this stays off `str::parse`'s second pass.
    let mut value = 0u64;
    for &b in bytes {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err(format!("expected {width} digits, found {text:?}"));
        }
        // Nineteen digits always fit in a u64; only u64's twenty may not.
        value = if width < 20 {
            value * 10 + u64::from(digit)
        } else {
            value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit)))
                .ok_or_else(|| format!("{text:?} is out of range"))?
        };
    }
    Ok(value)
}

macro_rules! unsigned_parts {
    ($($ty:ty => $width:literal),*) => {$(
        impl KeyPart for $ty {
            const WIDTH: usize = $width;
            fn write_key(&self, out: &mut String) {
                write_digits(out, u64::from(*self), $width);
            }
            fn read_key(text: &str) -> Result<Self, String> {
                let v = read_digits(text, $width)?;
                <$ty>::try_from(v).map_err(|_| format!("{v} is out of range for {}", stringify!($ty)))
            }
        }
    )*};
}

unsigned_parts!(u8 => 3, u16 => 5, u32 => 10, u64 => 20);

macro_rules! signed_parts {
    ($($ty:ty => $digits:literal),*) => {$(
        impl KeyPart for $ty {
            const WIDTH: usize = 1 + $digits;
            fn write_key(&self, out: &mut String) {
                // Negative values: `-` (below `0`) then 10^digits − |v|, so a
                // larger magnitude sorts first.
                let v = i64::from(*self);
                if v < 0 {
                    out.push('-');
                    write_digits(out, 10u64.pow($digits) - v.unsigned_abs(), $digits);
                } else {
                    out.push('0');
                    write_digits(out, v as u64, $digits);
                }
            }
            fn read_key(text: &str) -> Result<Self, String> {
                let (sign, digits) = text.split_at_checked(1).ok_or_else(|| "empty signed number".to_owned())?;
                let magnitude = read_digits(digits, $digits)?;
                let v = match sign {
                    "0" => i128::from(magnitude),
                    "-" => i128::from(magnitude) - i128::from(10u64.pow($digits)),
                    _ => return Err(format!("bad sign in {text:?}")),
                };
                if sign == "-" && v >= 0 {
                    return Err(format!("{text:?} is not a negative number"));
                }
                <$ty>::try_from(v).map_err(|_| format!("{v} is out of range for {}", stringify!($ty)))
            }
        }
    )*};
}

signed_parts!(i8 => 3, i16 => 5, i32 => 10, i64 => 19);

impl KeyPart for bool {
    const WIDTH: usize = 1;
    fn write_key(&self, out: &mut String) {
        out.push(if *self { '1' } else { '0' });
    }
    fn read_key(text: &str) -> Result<Self, String> {
        match text {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!("expected 0 or 1, found {text:?}")),
        }
    }
}

impl KeyPart for DateTime {
    const WIDTH: usize = 28;
    fn write_key(&self, out: &mut String) {
        self.write_iso(out, ":", false);
    }
    fn read_key(text: &str) -> Result<Self, String> {
        // Exactly the form `write_key` writes, `YYYY-MM-DDThh:mm:ss.fffffffZ`:
        // `DateTime::parse` also takes offsets and shorter fractions, which
        // would let two stored keys decode to one value.
        const SHAPE: &[u8; 28] = b"0000-00-00T00:00:00.0000000Z";
        let canonical = text.len() == Self::WIDTH
            && text.bytes().zip(SHAPE).all(|(b, &s)| {
                if s == b'0' {
                    b.is_ascii_digit()
                } else {
                    b == s
                }
            });
        if !canonical {
            return Err(format!(
                "expected a timestamp of the form 2020-01-02T03:04:05.0000000Z, found {text:?}"
            ));
        }
        DateTime::parse(text).map_err(|e| e.to_string())
    }
}

/// A timestamp that sorts newest first in a key (the log-tail pattern): its
/// encoding is the 19-digit tick count of [`DateTime::MAX`] minus the time's
/// ticks, and it converts back to the time.
///
/// ```
/// use tablekit::{DateTime, key::{InvertedTime, encode}};
/// let older = InvertedTime(DateTime::parse("2020-01-01T00:00:00Z")?);
/// let newer = InvertedTime(DateTime::parse("2021-01-01T00:00:00Z")?);
/// assert!(encode(&newer) < encode(&older));
/// # Ok::<(), tablekit::InvalidInput>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InvertedTime(pub DateTime);

impl PartialOrd for InvertedTime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Newest first: the order of the keys.
impl Ord for InvertedTime {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.cmp(&self.0)
    }
}

impl KeyPart for InvertedTime {
    const WIDTH: usize = 19;
    fn write_key(&self, out: &mut String) {
        write_digits(out, (DateTime::MAX.ticks() - self.0.ticks()) as u64, 19);
    }
    fn read_key(text: &str) -> Result<Self, String> {
        let inverted = read_digits(text, 19)?;
        let ticks = DateTime::MAX
            .ticks()
            .checked_sub(inverted as i64)
            .ok_or("out of range")?;
        DateTime::from_ticks(ticks)
            .map(InvertedTime)
            .map_err(|e| e.to_string())
    }
}

impl KeyPart for uuid::Uuid {
    const WIDTH: usize = 36;
    fn write_key(&self, out: &mut String) {
        let mut buf = [0u8; 36];
        out.push_str(self.hyphenated().encode_lower(&mut buf));
    }
    fn read_key(text: &str) -> Result<Self, String> {
        if text.len() != Self::WIDTH || text.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(format!(
                "expected a lower-case hyphenated UUID, found {text:?}"
            ));
        }
        uuid::Uuid::try_parse(text).map_err(|e| e.to_string())
    }
}

/// The base character and the selector of an escaped character, or `None`
/// for characters written as they are.
fn escape(c: char) -> Option<(char, char)> {
    let code = c as u32;
    let offset = |base: u32| char::from_u32(0x100 + code - base);
    match c {
        '\u{0}'..='\u{1F}' => Some((' ', offset(0)?)),
        '#' => Some(('"', '0')),
        '/' => Some(('.', '0')),
        '?' => Some(('>', '0')),
        '\\' => Some(('[', '0')),
        '\u{7F}'..='\u{9F}' => Some(('~', offset(0x7F)?)),
        '\u{FFFD}'..='\u{FFFF}' => Some(('\u{FFFC}', offset(0xFFFD)?)),
        _ => None,
    }
}

fn unescape(base: char, selector: char) -> Option<char> {
    let index = (selector as u32).checked_sub(0x100);
    let shifted = |start: u32, count: u32| {
        index
            .filter(|i| *i < count)
            .and_then(|i| char::from_u32(start + i))
    };
    match (base, selector) {
        (' ', _) => shifted(0, 0x20),
        ('"', '0') => Some('#'),
        ('.', '0') => Some('/'),
        ('>', '0') => Some('?'),
        ('[', '0') => Some('\\'),
        ('~', _) => shifted(0x7F, 0x21),
        ('\u{FFFC}', _) => shifted(0xFFFD, 3),
        _ => None,
    }
}

/// The character that starts an escape of the separator (and of itself) in
/// a string that another component follows.
const PERCENT: char = '%';
/// The escape of [`STRING_SEPARATOR`] inside a string that another
/// component follows (as in a URL).
const ESCAPED_SEPARATOR: &str = "%7C";
/// The escape of [`PERCENT`] inside a string that another component follows.
const ESCAPED_PERCENT: &str = "%25";

/// Appends `text` as a string component that another component follows:
/// the escapes of [`write_escaped`], and `|` and `%` written `%7C` and `%25`
/// (as in a URL), so the first `|` is where the component ends.
pub(super) fn write_inner_text(text: &str, out: &mut String) {
    if !text.contains([STRING_SEPARATOR, PERCENT]) {
        write_escaped(text, out);
        return;
    }
    let mut rest = text;
    while let Some(at) = rest.find([STRING_SEPARATOR, PERCENT]) {
        write_escaped(&rest[..at], out);
        out.push_str(if rest[at..].starts_with(PERCENT) {
            ESCAPED_PERCENT
        } else {
            ESCAPED_SEPARATOR
        });
        rest = &rest[at + 1..];
    }
    write_escaped(rest, out);
}

impl KeyPart for String {
    const WIDTH: usize = 0;
    fn write_key(&self, out: &mut String) {
        write_escaped(self, out);
    }
    fn write_inner_key(&self, out: &mut String) {
        write_inner_text(self, out);
    }
    fn read_inner_key(text: &str) -> Result<Self, String> {
        if text.contains(STRING_SEPARATOR) {
            return Err(format!("an unescaped `|` in {text:?}"));
        }
        if !text.contains(PERCENT) {
            return String::read_key(text);
        }
        let mut plain = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(PERCENT) {
            plain.push_str(&rest[..at]);
            let escape = rest.get(at..at + 3);
            if escape == Some(ESCAPED_PERCENT) {
                plain.push(PERCENT);
            } else if escape == Some(ESCAPED_SEPARATOR) {
                plain.push(STRING_SEPARATOR);
            } else {
                return Err(format!("`%` starts no escape (`%7C` or `%25`) in {text:?}"));
            }
            rest = &rest[at + 3..];
        }
        plain.push_str(rest);
        String::read_key(&plain)
    }
    fn read_key(text: &str) -> Result<Self, String> {
        // Most key strings are ASCII that needs no escape (and so holds no
        // escape mark, which is not ASCII): copied whole. A plain byte is
        // exactly an ASCII character `escape` leaves alone (checked by
        // `plain_bytes_are_the_unescaped_ones`).
        if text.bytes().all(crate::keyorder::is_plain_key_byte) {
            return Ok(text.to_owned());
        }
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if chars.peek() == Some(&ESCAPE_MARK) {
                chars.next();
                let selector = chars.next().ok_or("truncated escape")?;
                out.push(
                    unescape(c, selector)
                        .ok_or_else(|| format!("bad escape {c:?} {selector:?}"))?,
                );
            } else if c == ESCAPE_MARK || escape(c).is_some() {
                return Err(format!("unescaped {c:?} in a string component"));
            } else {
                out.push(c);
            }
        }
        Ok(out)
    }
}

/// The escape of a space inside an [`Ordered`] part, whose separator is a
/// space.
const ESCAPED_SPACE: &str = " \u{FFFD}\u{120}";

/// Rewrites the [`Ordered`] text written from `start` on: each space (not
/// the base of an escape) becomes [`ESCAPED_SPACE`].
fn escape_spaces_from(out: &mut String, start: usize) {
    let part = &out[start..];
    let is_literal_space =
        |i: usize| part.as_bytes()[i] == b' ' && !part[i + 1..].starts_with(ESCAPE_MARK);
    if !(0..part.len()).any(is_literal_space) {
        return;
    }
    let mut rewritten = String::with_capacity(part.len() + 8);
    for (i, c) in part.char_indices() {
        if c == ' ' && is_literal_space(i) {
            rewritten.push_str(ESCAPED_SPACE);
        } else {
            rewritten.push(c);
        }
    }
    out.truncate(start);
    out.push_str(&rewritten);
}

/// The inverse of [`escape_spaces_from`]: each [`ESCAPED_SPACE`] back to a
/// space. `None` if that would make a space the base of another escape
/// (an escape mark right after an escaped space is never written).
fn unescape_spaces(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(ESCAPED_SPACE) {
        out.push_str(&rest[..at]);
        out.push(' ');
        rest = &rest[at + ESCAPED_SPACE.len()..];
        if rest.starts_with(ESCAPE_MARK) {
            return None;
        }
    }
    out.push_str(rest);
    Some(out)
}

/// Appends `text` with the escapes of the string encoding (what a `String`
/// key part writes): the characters the store forbids, and U+FFFD–U+FFFF.
pub fn write_escaped(text: &str, out: &mut String) {
    // Most key strings are ASCII with nothing to escape, which a look at
    // the bytes tells; they are copied whole.
    let plain = |b: u8| (0x20..0x7F).contains(&b) && !matches!(b, b'#' | b'/' | b'?' | b'\\');
    if text.bytes().all(plain) || !text.chars().any(|c| escape(c).is_some()) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match escape(c) {
            Some((base, selector)) => {
                out.push(base);
                out.push(ESCAPE_MARK);
                out.push(selector);
            }
            None => out.push(c),
        }
    }
}

/// `From<&str>`, `From<String>` and `Deref<Target = str>` for a key part
/// that wraps a `String`.
macro_rules! text_newtype {
    ($name:ident) => {
        impl From<&str> for $name {
            fn from(text: &str) -> $name {
                $name(text.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> $name {
                $name(text)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
    };
}

/// A key component stored exactly as its text, for tables whose keys other
/// clients wrote: any key the store accepts reads back, and writes the same
/// key again. Nothing is escaped, so a key with a character the store
/// forbids (`/ \ # ?`, control characters) is refused with
/// [`InvalidInput::KeyForbiddenCharacter`](crate::InvalidInput::KeyForbiddenCharacter)
/// when it is written.
///
/// Nothing marks where verbatim text ends, so it can only be the last (or
/// only) component of a key; elsewhere it is a compile error.
///
/// ```
/// use tablekit::key::{KeyTuple, Verbatim, encode};
/// let key = Verbatim::from("user\u{FFFD}42 (imported)");
/// assert_eq!(encode(&key), "user\u{FFFD}42 (imported)");
/// assert_eq!(Verbatim::decode("anything at all")?, Verbatim::from("anything at all"));
/// # Ok::<(), tablekit::key::KeyDecodeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Verbatim(pub String);

text_newtype!(Verbatim);

impl std::fmt::Display for Verbatim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl KeyPart for Verbatim {
    const WIDTH: usize = 0;
    const LAST_ONLY: bool = true;
    fn write_key(&self, out: &mut String) {
        out.push_str(&self.0);
    }
    fn read_key(text: &str) -> Result<Self, String> {
        Ok(Verbatim(text.to_owned()))
    }
}

/// Text whose index rows ignore case: a field of this type is stored as
/// given, and an index over it (`#[tablekit(unique = "email")]`) is keyed on
/// its Unicode case folding (the full folding of the Unicode Character
/// Database, as [`folded`](CaseInsensitive::folded) gives it). So
/// `Ann@Example.com` and `ann@example.com` hold one unique value, and so do
/// `straße` and `STRASSE`, or `ΣΑΣ` and `σας`; a lookup finds the entity
/// whichever way it is asked.
///
/// Folding is not normalization: text whose characters are composed
/// differently (`é` as one character, or as `e` and a combining accent)
/// folds to different keys. Normalize such text before it is stored if it
/// can come both ways.
///
/// Only an index's value: read back from a key it is folded, so an
/// entity's own key field of this type is a compile error. A typed filter on
/// the field compares the stored text as given.
///
/// ```
/// use tablekit::key::{CaseInsensitive, encode};
/// let email = CaseInsensitive::from("Ann@Example.com");
/// assert_eq!(email.as_str(), "Ann@Example.com");
/// assert_eq!(encode(&email), encode(&CaseInsensitive::from("ann@EXAMPLE.com")));
/// let street = CaseInsensitive::from("Hauptstraße");
/// assert_eq!(street.folded(), "hauptstrasse");
/// assert_eq!(encode(&street), encode(&CaseInsensitive::from("HAUPTSTRASSE")));
/// ```
///
/// Index rows written before this type folded fully (it lower-cased, which
/// differs for `ß`, final `ς`, ligatures such as `ﬁ`, Cherokee and a few
/// more) are found stale by `tablekit::Table::verify_indexes`
/// and rewritten by `tablekit::Table::repair_all_indexes`.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct CaseInsensitive(pub String);

text_newtype!(CaseInsensitive);

impl CaseInsensitive {
    /// The text as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text as the index holds it: case-folded.
    pub fn folded(&self) -> String {
        fold_case(&self.0)
    }
}

/// `text`'s full Unicode case folding (`ß` → `ss`, `ς` → `σ`, `ﬁ` → `fi`):
/// the key a [`CaseInsensitive`] value has in an index.
pub(super) fn fold_case(text: &str) -> String {
    unicase::UniCase::new(text).to_folded_case()
}

impl std::fmt::Display for CaseInsensitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl KeyPart for CaseInsensitive {
    const WIDTH: usize = 0;
    const FOLDED: bool = true;
    fn write_key(&self, out: &mut String) {
        write_escaped(&self.folded(), out);
    }
    fn write_inner_key(&self, out: &mut String) {
        write_inner_text(&self.folded(), out);
    }
    fn read_key(text: &str) -> Result<Self, String> {
        String::read_key(text).map(CaseInsensitive)
    }
    fn read_inner_key(text: &str) -> Result<Self, String> {
        String::read_inner_key(text).map(CaseInsensitive)
    }
}

/// A string key component whose encoding keeps the full order of its text
/// wherever it stands, control characters and `|` included: a space (the
/// lowest character a key may hold) follows it in a compound key, and its
/// own spaces are escaped as ` �Ġ`, so the key is harder to read than a
/// plain `String`'s. For strings that lead a compound key and must sort
/// exactly as text (a range over them, say).
///
/// A [`Verbatim`] part cannot follow it (a compile error).
///
/// ```
/// use tablekit::key::{Ordered, encode};
/// assert_eq!(encode(&Ordered::from("a b")), "a \u{FFFD}\u{120}b");
/// assert!(encode(&Ordered::from("a\u{1}")) < encode(&Ordered::from("a b")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ordered(pub String);

text_newtype!(Ordered);

impl KeyPart for Ordered {
    const WIDTH: usize = 0;
    const SEPARATOR: char = ORDERED_SEPARATOR;
    fn write_key(&self, out: &mut String) {
        let start = out.len();
        write_escaped(&self.0, out);
        escape_spaces_from(out, start);
    }
    fn read_key(text: &str) -> Result<Self, String> {
        if text.contains(' ')
            && text
                .split(' ')
                .skip(1)
                .any(|after| !after.starts_with(ESCAPE_MARK))
        {
            return Err(format!("an unescaped space in {text:?}"));
        }
        let plain =
            unescape_spaces(text).ok_or_else(|| format!("a stray escape mark in {text:?}"))?;
        String::read_key(&plain).map(Ordered)
    }
}

/// A whole number written with exactly `W` decimal digits (1 to 19), for
/// keys laid out before: `empid_000223` is kind `empid` (see
/// `kind_properties = false`) and an `id: Padded<6>`; `000123_2012` is a
/// `(Padded<6>, Padded<4>)`. Like every fixed-width part it sorts as the
/// numbers do. A number with more digits than `W` cannot be made.
///
/// ```
/// use tablekit::key::{KeyTuple, Padded, encode};
/// let id = Padded::<6>::new(223)?;
/// assert_eq!(encode(&id), "000223");
/// assert_eq!(encode(&(Padded::<6>::new(123)?, Padded::<4>::new(2012)?)), "000123_2012");
/// assert_eq!(*Padded::<6>::decode("000223").unwrap(), 223);
/// let err = Padded::<2>::new(100).unwrap_err();
/// assert_eq!(err, tablekit::InvalidInput::TooManyDigits { value: 100, digits: 2 });
/// assert_eq!(err.to_string(), "100 has more than 2 digits, the width of its zero-padded key part");
/// # Ok::<(), tablekit::InvalidInput>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Padded<const W: usize>(u64);

impl<const W: usize> Padded<W> {
    /// `value`, if it has at most `W` digits.
    pub fn new(value: u64) -> Result<Padded<W>, crate::error::InvalidInput> {
        const { assert!(W >= 1 && W <= 19, "Padded takes 1 to 19 digits") };
        if value >= 10u64.pow(W as u32) {
            return Err(crate::error::InvalidInput::TooManyDigits {
                value,
                digits: W as u32,
            });
        }
        Ok(Padded(value))
    }

    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl<const W: usize> TryFrom<u64> for Padded<W> {
    type Error = crate::error::InvalidInput;
    fn try_from(value: u64) -> Result<Padded<W>, crate::error::InvalidInput> {
        Padded::new(value)
    }
}

impl<const W: usize> std::ops::Deref for Padded<W> {
    type Target = u64;
    fn deref(&self) -> &u64 {
        &self.0
    }
}

impl<const W: usize> std::fmt::Display for Padded<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:0width$}", self.0, width = W)
    }
}

impl<const W: usize> KeyPart for Padded<W> {
    const WIDTH: usize = W;
    fn write_key(&self, out: &mut String) {
        write_digits(out, self.0, W);
    }
    fn read_key(text: &str) -> Result<Self, String> {
        const { assert!(W >= 1 && W <= 19, "Padded takes 1 to 19 digits") };
        read_digits(text, W).map(Padded)
    }
}

#[cfg(test)]
mod plain_bytes {
    #[test]
    fn plain_bytes_are_the_unescaped_ones() {
        for b in 0..=u8::MAX {
            let plain = crate::keyorder::is_plain_key_byte(b);
            assert_eq!(
                plain,
                b.is_ascii() && super::escape(char::from(b)).is_none(),
                "{b:#x}"
            );
        }
    }
}
