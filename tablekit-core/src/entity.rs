//! The untyped entity: keys, properties, ETag and Timestamp.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::datetime::DateTime;
use crate::value::Value;

/// A property name: borrowed when it is a `&'static str` (the names a derive
/// writes), owned otherwise, so typed entities build rows without allocating
/// their names.
pub type PropertyName = Cow<'static, str>;

/// The properties of an entity: names mapped to values, in insertion order.
///
/// An entity has at most 252 custom properties, so a vector searched linearly
/// is both smaller and faster here than a hash or tree map. A name appears at
/// most once: the store's `DuplicatePropertiesSpecified` cannot be expressed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Properties {
    entries: Vec<(PropertyName, Value)>,
}

impl Properties {
    /// No properties.
    pub fn new() -> Properties {
        Properties::default()
    }

    /// No properties, with room for `capacity`.
    pub fn with_capacity(capacity: usize) -> Properties {
        Properties {
            entries: Vec::with_capacity(capacity),
        }
    }

    /// Makes room for at least `additional` more properties.
    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// Removes every property, keeping the room they took for the next.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Sets `name` to `value`, returning the value it replaces. A `&'static
    /// str` name is not copied; pass a `String` for any other name.
    pub fn insert(
        &mut self,
        name: impl Into<PropertyName>,
        value: impl Into<Value>,
    ) -> Option<Value> {
        let name = name.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some((_, slot)) => Some(std::mem::replace(slot, value)),
            None => {
                self.entries.push((name, value));
                None
            }
        }
    }

    /// Appends without checking whether `name` is already present. For decoders
    /// that have checked uniqueness themselves.
    #[doc(hidden)]
    pub fn push_unchecked(&mut self, name: PropertyName, value: Value) {
        self.entries.push((name, value));
    }

    /// Appends a property whose name the caller knows is not present yet (a
    /// decoder of rows that hold each name once): no search, unlike
    /// [`insert`](Properties::insert). A name given twice is a bug of the
    /// caller, caught by a debug assertion.
    pub fn push_unique(&mut self, name: impl Into<PropertyName>, value: impl Into<Value>) {
        let name = name.into();
        debug_assert!(!self.contains(&name), "property `{name}` pushed twice");
        self.entries.push((name, value.into()));
    }

    /// Removes and returns, in order, every property whose name `select`
    /// accepts, in one pass.
    pub fn extract(&mut self, mut select: impl FnMut(&str) -> bool) -> Vec<(PropertyName, Value)> {
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|(n, _)| select(n));
        self.entries = kept;
        taken
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        let index = self.entries.iter().position(|(n, _)| n == name)?;
        Some(self.entries.remove(index).1)
    }

    /// Takes the value of `name` out, leaving the others in place (faster than
    /// [`remove`](Properties::remove): the order of the rest may change).
    pub fn take(&mut self, name: &str) -> Option<Value> {
        let index = self.entries.iter().position(|(n, _)| n == name)?;
        Some(self.entries.swap_remove(index).1)
    }

    /// Whether `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// How many properties there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The properties in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> + '_ {
        self.entries.iter().map(|(n, v)| (&**n, v))
    }

    /// The properties with their names as stored (borrowed or owned).
    pub fn entries(&self) -> &[(PropertyName, Value)] {
        &self.entries
    }

    /// Keeps only the properties for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &Value) -> bool) {
        self.entries.retain(|(n, v)| keep(n, v));
    }
}

impl<N: Into<PropertyName>, V: Into<Value>> FromIterator<(N, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Properties {
        let mut props = Properties::new();
        for (n, v) in iter {
            props.insert(n, v);
        }
        props
    }
}

impl IntoIterator for Properties {
    type Item = (PropertyName, Value);
    type IntoIter = std::vec::IntoIter<(PropertyName, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// An entity tag: the opaque version the service gives each write of an entity.
///
/// The service's form is a weak tag around the write time,
/// `W/"datetime'2021-02-01T20%3A58%3A58.3738734Z'"`; treat it as opaque and send
/// it back unchanged in [`IfMatch::ETag`].
///
/// Cloning an ETag is cheap (it is shared, not copied): every write through a
/// `Loaded` clones the ETag it holds into its `If-Match`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ETag(Arc<str>);

const PREFIX: &str = "W/\"datetime'";
const SUFFIX: &str = "'\"";
/// The longest such ETag: a time with escaped colons is at most 36 bytes.
const TAG_CAPACITY: usize = PREFIX.len() + 36 + SUFFIX.len();

/// The text of the ETag of an entity written at `timestamp`, assembled on
/// the stack: `W/"datetime'<time, colons as %3A>'"`.
fn timestamp_tag(timestamp: DateTime) -> ([u8; TAG_CAPACITY], usize) {
    let iso = timestamp.iso_text("%3A", true);
    let mut bytes = [0u8; TAG_CAPACITY];
    let mut len = 0;
    for part in [PREFIX.as_bytes(), iso.as_bytes(), SUFFIX.as_bytes()] {
        bytes[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    (bytes, len)
}

impl ETag {
    /// Wraps an ETag as the service sent it.
    pub fn new(tag: impl Into<String>) -> ETag {
        ETag(Arc::from(tag.into()))
    }

    /// The service's ETag for an entity written at `timestamp`.
    pub fn from_timestamp(timestamp: DateTime) -> ETag {
        let (bytes, len) = timestamp_tag(timestamp);
        // Three texts joined: valid UTF-8, as the check confirms.
        ETag(Arc::from(
            std::str::from_utf8(&bytes[..len]).unwrap_or_default(),
        ))
    }

    /// Whether this is the service's ETag for an entity written at
    /// `timestamp` ([`ETag::from_timestamp`]), compared without allocating.
    pub fn is_of_timestamp(&self, timestamp: DateTime) -> bool {
        let (bytes, len) = timestamp_tag(timestamp);
        self.0.as_bytes() == &bytes[..len]
    }

    /// The write time inside a `W/"datetime'…'"` ETag, if it has that form.
    pub fn timestamp(&self) -> Option<DateTime> {
        let inner = self.0.strip_prefix("W/\"datetime'")?.strip_suffix("'\"")?;
        // Unescaped into a buffer on the stack: this runs on every write
        // through a `Loaded`. A timestamp has at most 30 characters.
        let mut buffer = [0u8; 40];
        let mut len = 0;
        let mut rest = inner.as_bytes();
        while let Some(&first) = rest.first() {
            let (byte, used) = match rest {
                [b'%', b'3', b'A' | b'a', ..] => (b':', 3),
                _ => (first, 1),
            };
            *buffer.get_mut(len)? = byte;
            len += 1;
            rest = &rest[used..];
        }
        DateTime::parse_text(std::str::from_utf8(&buffer[..len]).ok()?).ok()
    }

    /// The tag as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ETag({})", self.0)
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `If-Match` condition of a replace, merge or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: act whatever the entity's current ETag, as long as it exists.
    Any,
    /// Act only if the entity's current ETag is this one.
    ETag(ETag),
}

impl From<ETag> for IfMatch {
    fn from(tag: ETag) -> IfMatch {
        IfMatch::ETag(tag)
    }
}

/// An entity as the store sees it: two keys and a bag of typed properties, plus
/// the ETag and Timestamp the service set on its last write.
///
/// ```
/// use tablekit::{Entity, Value};
/// let e = Entity::new("sales", "emp_000123")
///     .with("Name", "Ada")
///     .with("Age", 36)
///     .with("Salary", 1250.5);
/// assert_eq!(e.get("Age"), Some(&Value::Int32(36)));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// The PartitionKey.
    pub partition_key: String,
    /// The RowKey.
    pub row_key: String,
    /// The custom properties.
    pub properties: Properties,
    /// The ETag of the stored version, on entities read from a store.
    pub etag: Option<ETag>,
    /// The server-set time of the last write, on entities read from a store.
    /// Ignored on writes, as the service ignores it.
    pub timestamp: Option<DateTime>,
}

impl Entity {
    /// An entity with these keys and no properties.
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Entity {
        Entity {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            properties: Properties::new(),
            etag: None,
            timestamp: None,
        }
    }

    /// Sets a property and returns the entity (builder style).
    pub fn with(mut self, name: impl Into<PropertyName>, value: impl Into<Value>) -> Entity {
        self.properties.insert(name, value);
        self
    }

    /// Sets a property.
    pub fn insert(
        &mut self,
        name: impl Into<PropertyName>,
        value: impl Into<Value>,
    ) -> Option<Value> {
        self.properties.insert(name, value)
    }

    /// A property's value.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.properties.get(name)
    }

    /// The entity's size by the service's formula:
    /// `4 + 2·(len(PK) + len(RK)) + Σ (8 + 2·len(name) + sizeof(value))`, lengths in
    /// UTF-16 code units. The service refuses entities over 1 MiB by it.
    pub fn stored_size(&self) -> usize {
        use crate::keyorder::utf16_len;
        let keys = 4 + 2 * (utf16_len(&self.partition_key) + utf16_len(&self.row_key));
        let props: usize = self
            .properties
            .iter()
            .map(|(name, value)| 8 + 2 * utf16_len(name) + value.stored_size())
            .sum();
        keys + props
    }
}

#[cfg(test)]
mod etag_tests {
    use super::*;

    #[test]
    fn etag_timestamps_are_read_or_refused() {
        let stamp = DateTime::parse("2026-11-24T01:17:45.1234567Z").unwrap();
        let etag = ETag::new("W/\"datetime'2026-11-24T01%3A17%3A45.1234567Z'\"");
        assert_eq!(etag.timestamp(), Some(stamp));
        let lower = ETag::new("W/\"datetime'2026-11-24T01%3a17%3a45.1234567Z'\"");
        assert_eq!(lower.timestamp(), Some(stamp));
        let plain = ETag::new("W/\"datetime'2026-11-24T01:17:45.1234567Z'\"");
        assert_eq!(plain.timestamp(), Some(stamp));
        for other in [
            "\"0x8DC\"",
            "W/\"datetime''\"",
            "W/\"datetime'2026-11-24T01%3A17%3A45.1234567Z-and-a-great-deal-more'\"",
            "W/\"datetime'2026-11-24T01%3'\"",
        ] {
            assert_eq!(ETag::new(other).timestamp(), None, "{other}");
        }
    }
}
