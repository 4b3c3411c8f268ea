//! Order-preserving, injective key encodings.
//!
//! Every key component type implements [`KeyPart`]: its encoding reads as
//! the value does, sorts under the store's order (UTF-16 code units) as the
//! values sort (with the exceptions under **Order** below), and decodes
//! back. Compound keys ([`KeyTuple`]) join components so that the key can
//! always be split again.
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
//! **Compound keys.** Components are joined by a separator that a person
//! reads as one and that can always be split again: `_` after a fixed-width
//! component (`000123_2012`, `EMP_0000000007`), `|` after a string
//! (`Sales|0000000123`, `acme|alice`). In a string that another component
//! follows, `|` and `%` are written `%7C` and `%25`, as in a URL, so the
//! first `|` ends the string.
//!
//! | key | stored as (what a storage browser shows) |
//! | --- | --- |
//! | `"Ada Lovelace"` | `Ada Lovelace` |
//! | `"jonesj@contoso.com"` | `jonesj@contoso.com` |
//! | `"R&D / Labs #1?"` | `R&D .�0 Labs "�01>�0` |
//! | `7u32` | `0000000007` |
//! | `(123u32, 2012u16)` | `0000000123_02012` |
//! | `("Sales", 7u32)` | `Sales\|0000000007` |
//! | `("Ada Lovelace", 7u8)` | `Ada Lovelace\|007` |
//! | `("acme", "alice")` | `acme\|alice` |
//! | `("a\|b", "100%")` | `a%7Cb\|100%` |
//! | `Padded::<6>` 123 and `Padded::<4>` 2012 | `000123_2012` |
//! | kind `EMP`, row key `7u32` | `EMP_0000000007` |
//! | kind `REV` nested under kind `EMP` (`collection`), row key `(223u32, 2012u16)` | `EMP_0000000223_REV_02012` |
//! | kind `C` heading a `collection`, row key `"acme"` | `C_acme\|` |
//! | kind `ORD` nested under `C`, row key `("acme", 7u32)` | `C_acme\|ORD_0000000007` |
//!
//! **Order.** Encoded keys sort, by the store's UTF-16 order, as the values
//! and tuples sort, with these exceptions, all in strings:
//! - a control character (which the store forbids) sorts after a space
//!   instead of before it;
//! - a string that another component follows sorts as its text followed by
//!   `|`, so it sorts after the longer strings that start with it and go on
//!   with a character below `|` (`("Adam", 1)` before `("Ada", 1)`), and a
//!   `|` in it sorts as `%`.
//!
//! Keys that share their leading strings always sort by the components
//! after them, so prefix queries and ranges over a later component are
//! exact. A field of type [`Ordered`] keeps the full order of its text
//! wherever it stands, at the cost of escaping its spaces (` �Ġ`): use it
//! for a string that leads a compound key when you query ranges of it.
//!
//! **Keys other clients wrote.** A field of type [`Verbatim`] holds its key
//! exactly as stored: any text the store accepts reads back and writes back
//! unchanged (a forbidden character is refused when written). It can only
//! be the last key field. A RowKey template (`#[tablekit(row_key =
//! "empid_{id}")]`, see [`RowKeyLayout::template`]) lays a key out exactly
//! as a table made before has it: `empid_000223` from a [`Padded`]`<6>`,
//! `2012-Q3` from `{year}-Q{quarter}`, `doc:Plan.json` from
//! `doc:{title}.json`. A prefix query (`partition_prefix`, `row_prefix`)
//! for `acme` never reaches `acme2`, `acme corp` or `acme/eu`.
//!
//! ```
//! use tablekit::key::{KeyTuple, encode};
//! assert_eq!(encode(&(123u32, 2012u16)), "0000000123_02012");
//! assert_eq!(encode(&"a/b".to_string()), "a.\u{FFFD}0b");
//! assert_eq!(encode(&"Ada Lovelace".to_string()), "Ada Lovelace");
//! let key = encode(&("Ada Lovelace".to_string(), 7u8));
//! assert_eq!(key, "Ada Lovelace|007");
//! assert_eq!(<(String, u8)>::decode(&key).unwrap(), ("Ada Lovelace".to_string(), 7));
//! ```

mod args;
mod layout;
mod parts;
#[cfg(test)]
mod tests;

use std::fmt;

pub use args::{KeyArg, UnknownKey};
pub use layout::{MAX_KIND_DEPTH, RowKeyLayout, TAG_SEPARATOR};
pub use parts::{CaseInsensitive, InvertedTime, Ordered, Padded, Verbatim, write_escaped};

/// The escape marker, the highest character the encodings use.
pub const ESCAPE_MARK: char = '\u{FFFD}';
/// What follows a string component that another component follows.
pub const STRING_SEPARATOR: char = '|';
/// What follows a fixed-width component that another component follows.
pub const FIXED_SEPARATOR: char = '_';
/// What follows an [`Ordered`] component that another component follows:
/// the lowest character a key may hold, so that tuple order is kept.
pub const ORDERED_SEPARATOR: char = ' ';

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
/// - encodings hold none of the store's forbidden characters;
/// - the inner encoding ([`KeyPart::write_inner_key`]) holds no
///   [`KeyPart::SEPARATOR`] but as the base of an escape (a separator
///   followed by [`ESCAPE_MARK`]);
/// - a fixed-width part ([`KeyPart::WIDTH`] > 0) writes exactly that many ASCII
///   characters.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a PartitionKey or RowKey",
    label = "unsupported key field type",
    note = "key fields (and indexed fields) may be integers, bool, String, tablekit::DateTime, uuid::Uuid, the types of `tablekit::key` (InvertedTime, Padded, Verbatim, Ordered, CaseInsensitive for an index), or an enum deriving `TableValue`"
)]
pub trait KeyPart: Sized + Clone {
    /// The width of every encoding in ASCII characters, or 0 if it varies.
    const WIDTH: usize;
    /// Whether the part can only end a key (its text has no end of its own,
    /// as [`Verbatim`]'s).
    const LAST_ONLY: bool = false;
    /// Whether the encoding loses part of the value (as
    /// [`CaseInsensitive`]'s case folding does): such a part can be an index's
    /// value, never an entity's key.
    const FOLDED: bool = false;
    /// The character that follows the part when another component follows
    /// it: [`FIXED_SEPARATOR`] after a fixed-width part, else
    /// [`STRING_SEPARATOR`].
    const SEPARATOR: char = if Self::WIDTH > 0 {
        FIXED_SEPARATOR
    } else {
        STRING_SEPARATOR
    };
    /// Appends the encoding the part has as the last (or only) component.
    fn write_key(&self, out: &mut String);
    /// Reads a value back from exactly its [`write_key`](KeyPart::write_key) encoding.
    fn read_key(text: &str) -> Result<Self, String>;
    /// Appends the encoding the part has when another component follows it
    /// (and so [`SEPARATOR`](KeyPart::SEPARATOR) after it); the same as
    /// [`write_key`](KeyPart::write_key) unless the part's text may hold the
    /// separator.
    fn write_inner_key(&self, out: &mut String) {
        self.write_key(out);
    }
    /// Reads a value back from exactly its
    /// [`write_inner_key`](KeyPart::write_inner_key) encoding.
    fn read_inner_key(text: &str) -> Result<Self, String> {
        Self::read_key(text)
    }
}

/// A whole key: one [`KeyPart`] or a tuple of up to four.
pub trait KeyTuple: Sized {
    /// How many components.
    const ARITY: usize;
    /// Appends the encoding with the kind tags of `layout` (a RowKey), the
    /// components joined by their separators.
    fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String);
    /// Reads the components back from a key laid out as `layout` says.
    fn decode_laid_out(text: &str, layout: &RowKeyLayout) -> Result<Self, KeyDecodeError>;
    /// Appends the encoding, components joined by their separators.
    fn write_key(&self, out: &mut String) {
        self.write_laid_out(&RowKeyLayout::NONE, out);
    }
    /// Reads the components back.
    fn decode(text: &str) -> Result<Self, KeyDecodeError> {
        Self::decode_laid_out(text, &RowKeyLayout::NONE)
    }
}

/// The encoding of a whole key.
pub fn encode<K: KeyTuple>(key: &K) -> String {
    let mut out = String::new();
    key.write_key(&mut out);
    out
}

/// [`write_component`] for a `String` part given as borrowed text.
pub fn write_text_component(text: &str, out: &mut String, last: bool) {
    if last {
        write_escaped(text, out);
    } else {
        parts::write_inner_text(text, out);
        out.push(STRING_SEPARATOR);
    }
}

/// Appends one component of a key: its [`write_key`](KeyPart::write_key)
/// encoding when it is the `last`, else its
/// [`write_inner_key`](KeyPart::write_inner_key) encoding and its
/// [`SEPARATOR`](KeyPart::SEPARATOR).
pub fn write_component<P: KeyPart>(part: &P, out: &mut String, last: bool) {
    if last {
        part.write_key(out);
    } else {
        part.write_inner_key(out);
        out.push(P::SEPARATOR);
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

    /// The text of the next component, a part of type `P`; `last` when no
    /// separator follows it.
    fn component<P: KeyPart>(&mut self, last: bool) -> Result<&'a str, KeyDecodeError> {
        let (part, rest) = if last {
            (self.rest, "")
        } else if P::WIDTH > 0 {
            let width = P::WIDTH;
            if self.rest.len() <= width || !self.rest.is_char_boundary(width) {
                return Err(self.error("key is too short"));
            }
            let (part, rest) = self.rest.split_at(width);
            let Some(rest) = rest.strip_prefix(P::SEPARATOR) else {
                return Err(self.error(format!(
                    "expected `{}` after a fixed-width component",
                    P::SEPARATOR
                )));
            };
            (part, rest)
        } else {
            // The first separator. A part's inner text holds its separator
            // only as the base of an escape, followed by the escape mark, and
            // only `Ordered` (whose separator is a space) has such escapes.
            let escapes = P::SEPARATOR == ORDERED_SEPARATOR;
            let mut found = None;
            let mut chars = self.rest.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if c == P::SEPARATOR
                    && !(escapes && chars.peek().is_some_and(|(_, next)| *next == ESCAPE_MARK))
                {
                    found = Some(i);
                    break;
                }
            }
            let Some(i) = found else {
                return Err(self.error(format!(
                    "missing `{}` after a string component",
                    P::SEPARATOR
                )));
            };
            (&self.rest[..i], &self.rest[i + P::SEPARATOR.len_utf8()..])
        };
        self.rest = rest;
        self.component += 1;
        Ok(part)
    }

    /// Reads a kind tag and the [`TAG_SEPARATOR`] after it.
    pub fn expect_tag(&mut self, tag: &str) -> Result<(), KeyDecodeError> {
        match self
            .rest
            .strip_prefix(tag)
            .and_then(|rest| rest.strip_prefix(TAG_SEPARATOR))
        {
            Some(rest) => {
                self.rest = rest;
                Ok(())
            }
            None => Err(self.error(format!(
                "expected the kind tag `{tag}{TAG_SEPARATOR}` before {:?}",
                self.rest
            ))),
        }
    }

    /// Reads a literal text of a key template.
    pub fn expect_literal(&mut self, text: &str) -> Result<(), KeyDecodeError> {
        match self.rest.strip_prefix(text) {
            Some(rest) => {
                self.rest = rest;
                Ok(())
            }
            None => Err(self.error(format!("expected {text:?} before {:?}", self.rest))),
        }
    }

    /// Reads a fixed-width part followed by no separator (inside a key
    /// template).
    pub fn read_fixed<P: KeyPart>(&mut self) -> Result<P, KeyDecodeError> {
        let width = P::WIDTH;
        if width == 0 {
            return Err(self.error("only the last component of a key template may vary in width"));
        }
        if self.rest.len() < width || !self.rest.is_char_boundary(width) {
            return Err(self.error("key is too short"));
        }
        let (text, rest) = self.rest.split_at(width);
        let value = P::read_key(text).map_err(|reason| self.error(reason))?;
        self.rest = rest;
        self.component += 1;
        Ok(value)
    }

    /// Reads the last part of a key template, which `suffix` follows.
    pub fn read_before_suffix<P: KeyPart>(&mut self, suffix: &str) -> Result<P, KeyDecodeError> {
        let Some(text) = self.rest.strip_suffix(suffix) else {
            return Err(self.error(format!("expected the key to end with {suffix:?}")));
        };
        let value = P::read_key(text).map_err(|reason| self.error(reason))?;
        self.rest = &self.rest[text.len()..];
        self.component += 1;
        Ok(value)
    }

    /// Checks that the whole key was read.
    pub fn finish(&self) -> Result<(), KeyDecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.error(format!("unexpected {:?} after the key", self.rest)))
        }
    }

    /// Reads the next component as `P`.
    pub fn read<P: KeyPart>(&mut self, last: bool) -> Result<P, KeyDecodeError> {
        let text = self.component::<P>(last)?;
        let read = if last {
            P::read_key(text)
        } else {
            P::read_inner_key(text)
        };
        read.map_err(|reason| KeyDecodeError {
            component: self.component - 1,
            reason,
        })
    }
}

impl<P: KeyPart> KeyTuple for P {
    const ARITY: usize = 1;
    fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
        layout.write_tags(0, out);
        write_component(self, out, layout.ends_key::<P>(0, 1));
        layout.write_tags(1, out);
    }
    fn decode_laid_out(text: &str, layout: &RowKeyLayout) -> Result<Self, KeyDecodeError> {
        if layout.is_bare() {
            // The whole key is the part's text (the usual PartitionKey, and
            // a RowKey of a type without a kind): read as the reader would.
            return P::read_key(text).map_err(|reason| KeyDecodeError {
                component: 0,
                reason,
            });
        }
        let mut reader = KeyReader::new(text);
        let value = layout.read_part::<P>(0, 1, &mut reader)?;
        layout.read_tags(1, &mut reader)?;
        reader.finish()?;
        Ok(value)
    }
}

/// An entity without RowKey fields: the RowKey is empty (or only the kind prefix).
impl KeyTuple for () {
    const ARITY: usize = 0;
    fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
        layout.write_tags(0, out);
    }
    fn decode_laid_out(text: &str, layout: &RowKeyLayout) -> Result<Self, KeyDecodeError> {
        let mut reader = KeyReader::new(text);
        layout.read_tags(0, &mut reader)?;
        reader.finish()
    }
}

macro_rules! tuple_keys {
    ($($arity:literal => ($($name:ident $index:tt),+; $last_name:ident $last:tt; $before_last:ident)),* $(,)?) => {$(
        impl<$($name: KeyPart,)+ $last_name: KeyPart> KeyTuple for ($($name,)+ $last_name) {
            const ARITY: usize = $arity;
            fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
                // Verbatim text may start with the escape mark, which after a
                // space would read as an escaped character of the component
                // before: `Ordered` (whose separator is a space) cannot be
                // followed by a part whose text is not escaped.
                const {
                    assert!(
                        !($last_name::LAST_ONLY && $before_last::SEPARATOR == ORDERED_SEPARATOR),
                        "a `Verbatim` key part cannot follow an `Ordered` one"
                    )
                };
                $(
                    const { assert!(!$name::LAST_ONLY, "this key part can only be the last component of a key") };
                    layout.write_tags($index, out);
                    write_component(&self.$index, out, layout.ends_key::<$name>($index, $arity));
                )+
                layout.write_tags($last, out);
                let ends = layout.ends_key::<$last_name>($last, $arity);
                write_component(&self.$last, out, ends);
                layout.write_tags($arity, out);
            }
            fn decode_laid_out(text: &str, layout: &RowKeyLayout) -> Result<Self, KeyDecodeError> {
                let mut reader = KeyReader::new(text);
                let value = (
                    $(layout.read_part::<$name>($index, $arity, &mut reader)?,)+
                    layout.read_part::<$last_name>($last, $arity, &mut reader)?
                );
                layout.read_tags($arity, &mut reader)?;
                reader.finish()?;
                Ok(value)
            }
        }
    )*};
}

tuple_keys! {
    2 => (A 0; B 1; A),
    3 => (A 0, B 1; C 2; B),
    4 => (A 0, B 1, C 2; D 3; C),
}

/// A leading part of a compound key, for prefix queries: `P` is a prefix of
/// the key type `Self`.
pub trait KeyPrefix<P> {
    /// Appends the prefix's components, each followed by its separator, with
    /// the kind tags of `layout` that stand before them.
    fn write_prefix(prefix: &P, layout: &RowKeyLayout, out: &mut String);
    /// The separator after the prefix's last component.
    fn last_separator() -> char;
}

/// One component of a key argument: the part itself, a reference to it, or
/// `&str` for a `String` (or [`Verbatim`]) part.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a key of type `{P}`",
    label = "not a key of type `{P}`",
    note = "a key argument is the key itself, a reference to it, or `&str` for a `String` part"
)]
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

impl KeyPartArg<CaseInsensitive> for &str {
    fn write_part_arg(&self, out: &mut String, last: bool) {
        // Folded as the owned value would be.
        write_text_component(&parts::fold_case(self), out, last);
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
            fn write_prefix(prefix: &($($q,)+), layout: &RowKeyLayout, out: &mut String) {
                $(
                    const { assert!(!$p::LAST_ONLY, "this key part can only be the last component of a key") };
                    layout.write_tags($i, out);
                    // A template writes nothing between its components.
                    prefix.$i.write_part_arg(out, layout.is_template());
                )+
            }
            fn last_separator() -> char {
                let separators = [$($p::SEPARATOR),+];
                separators[separators.len() - 1]
            }
        }
    };
}

/// A prefix of one component given alone, not as a 1-tuple:
/// `partition_prefix("acme")`, `row_prefix(7u32)`, `row_prefix(&id)`.
macro_rules! single_prefix {
    ($($rest:ident),+) => {
        impl<A: KeyPart, $($rest: KeyPart),+> KeyPrefix<A> for (A, $($rest),+) {
            fn write_prefix(prefix: &A, layout: &RowKeyLayout, out: &mut String) {
                <Self as KeyPrefix<(&A,)>>::write_prefix(&(prefix,), layout, out);
            }
            fn last_separator() -> char {
                A::SEPARATOR
            }
        }
        impl<A: KeyPart, $($rest: KeyPart),+> KeyPrefix<&A> for (A, $($rest),+) {
            fn write_prefix(prefix: &&A, layout: &RowKeyLayout, out: &mut String) {
                <Self as KeyPrefix<(&A,)>>::write_prefix(&(*prefix,), layout, out);
            }
            fn last_separator() -> char {
                A::SEPARATOR
            }
        }
        impl<$($rest: KeyPart),+> KeyPrefix<&str> for (String, $($rest),+) {
            fn write_prefix(prefix: &&str, layout: &RowKeyLayout, out: &mut String) {
                <Self as KeyPrefix<(&str,)>>::write_prefix(&(*prefix,), layout, out);
            }
            fn last_separator() -> char {
                STRING_SEPARATOR
            }
        }
    };
}

single_prefix!(B);
single_prefix!(B, C);
single_prefix!(B, C, D);

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
    if separator == ORDERED_SEPARATOR {
        // After an `Ordered` part, a space followed by the escape mark is an
        // escaped character of the same component, not the end of it: stop
        // before it.
        end.push(ESCAPE_MARK);
    } else {
        // Replace the separator by the next character.
        end.pop();
        end.push(char::from_u32(separator as u32 + 1).unwrap_or(ESCAPE_MARK));
    }
    (prefix, end)
}

/// A key type whose leading components are the key type `P`: the key of a
/// kind nested under another starts with the other kind's key.
#[diagnostic::on_unimplemented(
    message = "the RowKey fields of this kind do not start with those of its `parent` (`{P}`)",
    label = "the RowKey fields of a nested kind start with its parent's, in order and of the same types",
    note = "a kind with `parent = …` declares its parent's RowKey fields first, then its own"
)]
pub trait KeyStartsWith<P> {}

impl<K: KeyTuple> KeyStartsWith<()> for K {}
impl<A: KeyPart> KeyStartsWith<A> for A {}
impl<A: KeyPart, B: KeyPart> KeyStartsWith<A> for (A, B) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart> KeyStartsWith<A> for (A, B, C) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart, D: KeyPart> KeyStartsWith<A> for (A, B, C, D) {}
impl<A: KeyPart, B: KeyPart> KeyStartsWith<(A, B)> for (A, B) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart> KeyStartsWith<(A, B)> for (A, B, C) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart, D: KeyPart> KeyStartsWith<(A, B)> for (A, B, C, D) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart> KeyStartsWith<(A, B, C)> for (A, B, C) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart, D: KeyPart> KeyStartsWith<(A, B, C)> for (A, B, C, D) {}
impl<A: KeyPart, B: KeyPart, C: KeyPart, D: KeyPart> KeyStartsWith<(A, B, C, D)> for (A, B, C, D) {}

/// Checks at compile time that `K` starts with `P` (used by the derive).
pub fn key_starts_with<K: KeyStartsWith<P>, P>() {}
