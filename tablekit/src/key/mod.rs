//! Order-preserving, injective key encodings.
//!
//! Every key component type implements [`KeyPart`]: its encoding sorts, under
//! the store's order (UTF-16 code units), exactly as the values sort, and
//! decodes back. Compound keys ([`KeyTuple`]) join components so that tuple
//! order is preserved and the key can always be split again.
//!
//! | type | encoding | example |
//! | --- | --- | --- |
//! | `u8` `u16` `u32` `u64` | zero-padded decimal, 3/5/10/20 digits | `0000000123` |
//! | `i8` … `i64` | sign (`-` or `0`), then the value (or 10ⁿ + value when negative), 3/5/10/19 digits | `00000000123`, `-9999999877` |
//! | `bool` | `0` / `1` | `1` |
//! | [`DateTime`](crate::DateTime) | ISO 8601 with 7 fraction digits | `2020-01-02T03:04:05.1234567Z` |
//! | [`InvertedTime`] | `DateTime::MAX` ticks − ticks, 19 digits: newest first | `2518245695838765432` |
//! | `Uuid` | lower-case hyphenated | `c9da6455-213d-…` |
//! | `String` | the text as it is, but for the characters the store forbids (below) | `Ada Lovelace` |
//!
//! **Strings.** A string that ends the key is stored as it is: `Ada Lovelace`,
//! `O'Brien`, `jonesj@contoso.com`, `100%`, `café` read the same in a storage
//! browser and in any other client. Only the characters the store refuses
//! (`/ \ # ?` and the control characters) and U+FFFD–U+FFFF are escaped, never
//! dropped. An escape is three characters `B M X`: `M` is U+FFFD (shown as
//! `�`), `B` is the character just below the escaped one in the store's order
//! (so the escape sorts where the original did), and `X` tells which one it
//! was: `#` `/` `?` `\` become `"�0` `.�0` `>�0` `[�0`, U+0000–U+001F become
//! a space, `�` and U+0100–U+011F, U+007F–U+009F become `~`, `�` and
//! U+0100–U+0120, and U+FFFD–U+FFFF become U+FFFC, `�` and U+0100–U+0102.
//!
//! **Compound keys.** Components are joined by a separator that can always be
//! split again and that keeps tuple order: `_` after a fixed-width component
//! (`000123_2012`), a space after a string (`Sales 0000000123`). A string
//! that another component follows writes its own spaces as the escape
//! ` �Ġ` (space, U+FFFD, U+0120), so `("Ada Lovelace", 7u8)` is stored as
//! `Ada �ĠLovelace 007`; put strings with spaces last where you can.
//!
//! **Order.** Encoded keys sort, by the store's UTF-16 order, exactly as the
//! values and tuples sort, with one exception: in a string that ends the key,
//! a control character (which the store forbids) sorts after a space instead
//! of before it. A field of type [`Ordered`] keeps even that order, at the
//! cost of escaping its spaces everywhere.
//!
//! **Keys other clients wrote.** A field of type [`Verbatim`] holds its key
//! exactly as stored: any text the store accepts reads back and writes back
//! unchanged (a forbidden character is refused when written). It can only
//! be the last key field. A prefix query (`partition_prefix`, `row_prefix`) for `acme`
//! never reaches `acme2`, `acme corp` or `acme/eu`.
//!
//! ```
//! use tablekit::key::{KeyTuple, encode};
//! assert_eq!(encode(&(123u32, 2012u16)), "0000000123_02012");
//! assert_eq!(encode(&"a/b".to_string()), "a.\u{FFFD}0b");
//! assert_eq!(encode(&"Ada Lovelace".to_string()), "Ada Lovelace");
//! let key = encode(&("Sales".to_string(), 7u8));
//! assert_eq!(<(String, u8)>::decode(&key).unwrap(), ("Sales".to_string(), 7));
//! ```

mod parts;
#[cfg(test)]
mod tests;

use std::fmt;

pub use parts::{InvertedTime, Ordered, Padded, Verbatim, write_escaped};

/// The escape marker, the highest character the encodings use.
pub const ESCAPE_MARK: char = '\u{FFFD}';
/// What follows a variable-width (string) component in a compound key.
pub const VARIABLE_SEPARATOR: char = ' ';
/// What follows a fixed-width component in a compound key.
pub const FIXED_SEPARATOR: char = '_';

/// Why a key could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDecodeError {
    /// 0-based index of the component at fault.
    pub component: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for KeyDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key component {}: {}", self.component, self.reason)
    }
}

impl std::error::Error for KeyDecodeError {}

/// A type usable as one component of a PartitionKey or RowKey.
///
/// # Contract
/// - `a < b` implies `encode(a) < encode(b)` in UTF-16 code-unit order, and
///   `decode(encode(x)) == x`;
/// - encodings hold none of the store's forbidden characters, and no
///   [`VARIABLE_SEPARATOR`] or [`ESCAPE_MARK`] outside escapes;
/// - a fixed-width part ([`KeyPart::WIDTH`] > 0) writes exactly that many ASCII
///   characters.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a PartitionKey or RowKey",
    label = "unsupported key field type",
    note = "key fields may be integers, bool, String, tablekit::DateTime, tablekit::key::InvertedTime or uuid::Uuid"
)]
pub trait KeyPart: Sized + Clone {
    /// The width of every encoding in ASCII characters, or 0 if it varies.
    const WIDTH: usize;
    /// Whether the part can only end a key (its text has no end of its own,
    /// as [`Verbatim`]'s).
    const LAST_ONLY: bool = false;
    /// Whether a variable-width part escapes every space itself (as
    /// [`Ordered`] does), so that it needs no escaping when another
    /// component follows it.
    const SPACES_ESCAPED: bool = false;
    /// Appends the encoding.
    fn write_key(&self, out: &mut String);
    /// Reads a value back from exactly its encoding.
    fn read_key(text: &str) -> Result<Self, String>;
}

/// A whole key: one [`KeyPart`] or a tuple of up to four.
pub trait KeyTuple: Sized {
    /// How many components.
    const ARITY: usize;
    /// Appends the encoding, components joined by their separators.
    fn write_key(&self, out: &mut String);
    /// Reads the components back.
    fn decode(text: &str) -> Result<Self, KeyDecodeError>;
}

/// The encoding of a whole key.
pub fn encode<K: KeyTuple>(key: &K) -> String {
    let mut out = String::new();
    key.write_key(&mut out);
    out
}

/// A separator to write after a component of width `width`.
pub fn separator_after(width: usize) -> char {
    if width > 0 {
        FIXED_SEPARATOR
    } else {
        VARIABLE_SEPARATOR
    }
}

/// [`write_component`] for a `String` part given as borrowed text.
pub fn write_text_component(text: &str, out: &mut String, last: bool) {
    let start = out.len();
    write_escaped(text, out);
    if !last {
        parts::escape_spaces_from(out, start);
        out.push(VARIABLE_SEPARATOR);
    }
}

/// Appends one component of a key: as it is when it is the `last`, else
/// followed by its separator (and, for a string, with its spaces escaped, as
/// a space is the separator after it).
pub fn write_component<P: KeyPart>(part: &P, out: &mut String, last: bool) {
    let start = out.len();
    part.write_key(out);
    if !last {
        if P::WIDTH == 0 && !P::SPACES_ESCAPED {
            parts::escape_spaces_from(out, start);
        }
        out.push(separator_after(P::WIDTH));
    }
}

/// Splits a compound key into its components, one at a time.
#[derive(Debug)]
pub struct KeyReader<'a> {
    rest: &'a str,
    component: usize,
}

impl<'a> KeyReader<'a> {
    /// Reads `text`.
    pub fn new(text: &'a str) -> KeyReader<'a> {
        KeyReader {
            rest: text,
            component: 0,
        }
    }

    fn error(&self, reason: impl Into<String>) -> KeyDecodeError {
        KeyDecodeError {
            component: self.component,
            reason: reason.into(),
        }
    }

    /// The next component of a part of width `width`; `last` when no
    /// separator follows it.
    pub fn component(&mut self, width: usize, last: bool) -> Result<&'a str, KeyDecodeError> {
        let (part, rest) = if last {
            (self.rest, "")
        } else if width > 0 {
            if self.rest.len() <= width || !self.rest.is_char_boundary(width) {
                return Err(self.error("key is too short"));
            }
            let (part, rest) = self.rest.split_at(width);
            let Some(rest) = rest.strip_prefix(FIXED_SEPARATOR) else {
                return Err(self.error(format!(
                    "expected `{FIXED_SEPARATOR}` after a fixed-width component"
                )));
            };
            (part, rest)
        } else {
            // The first separator that does not start an escape.
            let mut found = None;
            let mut chars = self.rest.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if c == VARIABLE_SEPARATOR
                    && chars.peek().is_none_or(|(_, next)| *next != ESCAPE_MARK)
                {
                    found = Some(i);
                    break;
                }
            }
            let Some(i) = found else {
                return Err(self.error("missing separator after a string component"));
            };
            (
                &self.rest[..i],
                &self.rest[i + VARIABLE_SEPARATOR.len_utf8()..],
            )
        };
        self.rest = rest;
        self.component += 1;
        Ok(part)
    }

    /// Reads the next component as `P`.
    pub fn read<P: KeyPart>(&mut self, last: bool) -> Result<P, KeyDecodeError> {
        let text = self.component(P::WIDTH, last)?;
        let error = |reason| KeyDecodeError {
            component: self.component - 1,
            reason,
        };
        if P::WIDTH > 0 || P::SPACES_ESCAPED || last || !text.contains(ESCAPE_MARK) {
            return P::read_key(text).map_err(error);
        }
        // A string component that another one follows has its spaces
        // escaped: read it as the last component would be written.
        let unescaped = parts::unescape_spaces(text)
            .ok_or_else(|| error(format!("a stray escape mark in {text:?}")))?;
        P::read_key(&unescaped).map_err(error)
    }
}

impl<P: KeyPart> KeyTuple for P {
    const ARITY: usize = 1;
    fn write_key(&self, out: &mut String) {
        KeyPart::write_key(self, out);
    }
    fn decode(text: &str) -> Result<Self, KeyDecodeError> {
        KeyReader::new(text).read(true)
    }
}

/// An entity without RowKey fields: the RowKey is empty (or only the kind prefix).
impl KeyTuple for () {
    const ARITY: usize = 0;
    fn write_key(&self, _: &mut String) {}
    fn decode(text: &str) -> Result<Self, KeyDecodeError> {
        if text.is_empty() {
            Ok(())
        } else {
            Err(KeyDecodeError {
                component: 0,
                reason: format!("expected an empty key, found {text:?}"),
            })
        }
    }
}

macro_rules! tuple_keys {
    ($($arity:literal => ($($name:ident $index:tt),+; $last_name:ident $last:tt)),* $(,)?) => {$(
        impl<$($name: KeyPart,)+ $last_name: KeyPart> KeyTuple for ($($name,)+ $last_name) {
            const ARITY: usize = $arity;
            fn write_key(&self, out: &mut String) {
                $(
                    const { assert!(!$name::LAST_ONLY, "this key part can only be the last component of a key") };
                    write_component(&self.$index, out, false);
                )+
                write_component(&self.$last, out, true);
            }
            fn decode(text: &str) -> Result<Self, KeyDecodeError> {
                let mut reader = KeyReader::new(text);
                Ok(($(reader.read::<$name>(false)?,)+ reader.read::<$last_name>(true)?))
            }
        }
    )*};
}

tuple_keys! {
    2 => (A 0; B 1),
    3 => (A 0, B 1; C 2),
    4 => (A 0, B 1, C 2; D 3),
}

/// A leading part of a compound key, for prefix queries: `P` is a prefix of
/// the key type `Self`.
pub trait KeyPrefix<P> {
    /// Appends the prefix's components, each followed by its separator.
    fn write_prefix(prefix: &P, out: &mut String);
    /// The separator after the prefix's last component.
    fn last_separator() -> char;
}

/// One component of a key argument: the part itself, a reference to it, or
/// `&str` for a `String` (or [`Verbatim`]) part.
pub trait KeyPartArg<P: KeyPart> {
    /// Appends the component, as [`write_component`] does.
    fn write_part_arg(&self, out: &mut String, last: bool);
}

impl<P: KeyPart> KeyPartArg<P> for P {
    fn write_part_arg(&self, out: &mut String, last: bool) {
        write_component(self, out, last);
    }
}

impl<P: KeyPart> KeyPartArg<P> for &P {
    fn write_part_arg(&self, out: &mut String, last: bool) {
        write_component(*self, out, last);
    }
}

impl KeyPartArg<String> for &str {
    fn write_part_arg(&self, out: &mut String, last: bool) {
        // The borrowed text is written as the owned one would be.
        write_text_component(self, out, last);
    }
}

impl KeyPartArg<Verbatim> for &str {
    fn write_part_arg(&self, out: &mut String, _last: bool) {
        out.push_str(self);
    }
}

macro_rules! key_prefix {
    ([$($full:ident),+] [$($p:ident $q:ident $i:tt),+]) => {
        impl<$($full: KeyPart,)+ $($q: KeyPartArg<$p>,)+> KeyPrefix<($($q,)+)> for ($($full),+) {
            fn write_prefix(prefix: &($($q,)+), out: &mut String) {
                $(
                    const { assert!(!$p::LAST_ONLY, "this key part can only be the last component of a key") };
                    prefix.$i.write_part_arg(out, false);
                )+
            }
            fn last_separator() -> char {
                let widths = [$($p::WIDTH),+];
                separator_after(widths[widths.len() - 1])
            }
        }
    };
}

key_prefix!([A, B] [A QA 0]);
key_prefix!([A, B, C] [A QA 0]);
key_prefix!([A, B, C] [A QA 0, B QB 1]);
key_prefix!([A, B, C, D] [A QA 0]);
key_prefix!([A, B, C, D] [A QA 0, B QB 1]);
key_prefix!([A, B, C, D] [A QA 0, B QB 1, C QC 2]);

/// The half-open range `[start, end)` of every key that starts with the
/// encoded prefix `prefix`, whose last component is followed by `separator`.
pub fn prefix_range(prefix: String, separator: char) -> (String, String) {
    let mut end = prefix.clone();
    if separator == VARIABLE_SEPARATOR {
        // A separator followed by the escape mark is an escaped character of
        // the same component, not the end of it: stop before it.
        end.push(ESCAPE_MARK);
    } else {
        // Replace the separator by the next character.
        end.pop();
        end.push(char::from_u32(separator as u32 + 1).unwrap_or(ESCAPE_MARK));
    }
    (prefix, end)
}
