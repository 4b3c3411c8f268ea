//! Reading an entity's JSON: a document to be written (checked as a write
//! checks it), a row as a store sent it, and the members a typed value
//! reads into its fields.

use std::borrow::Cow;

use serde_json::Value as Json;

use super::members::{
    Collector, Extras, Members, Raw, UndecodableRow, annotation_type, key_text, timestamp_of,
    value_from, value_from_raw,
};
use crate::entity::Entity;
use crate::error::InvalidInput;
use crate::props::MemberSlot;
use crate::value::Value;

/// Reads an entity document from a JSON object (a request body, or a row
/// given to tablekit to write), with the checks of [`from_str`]: what a write
/// would refuse is refused here.
pub fn from_json(json: &Json) -> Result<Entity, InvalidInput> {
    let entity = row_from_json(json)?;
    crate::validate::entity(&entity)?;
    Ok(entity)
}

/// [`from_json`] for a row as a store holds it: only the JSON's own rules
/// are checked, as [`row_from_str`] checks them.
#[doc(hidden)]
pub fn row_from_json(json: &Json) -> Result<Entity, InvalidInput> {
    let Json::Object(map) = json else {
        return Err(InvalidInput::Json {
            expected: "an entity",
            reason: "an entity is a JSON object".into(),
        });
    };
    let mut collector = Collector::default();
    for (name, value) in map {
        collector.add(Cow::Borrowed(name), Raw::from(value));
    }
    collector.into_entity()
}

/// Reads an entity document from JSON text, straight from the text (no JSON
/// tree is built): a request body, a line of an export, a row given to
/// tablekit to write.
///
/// A document is taken only if tablekit could have written it, so whatever
/// this returns can be written back. Besides the JSON's own rules (see
/// [`row_from_str`]), it refuses what a write refuses: keys over 512 UTF-16
/// units or with a character the service forbids, a property name that is
/// not an identifier, a value over the service's limits, more than 252
/// properties, an entity over 1 MiB. `tablekit::schema::from_json` takes a
/// document by the same rule, so the two agree on every text: a document
/// one of them refuses, the other refuses too.
pub fn from_str(text: &str) -> Result<Entity, InvalidInput> {
    let entity = row_from_str(text)?;
    crate::validate::entity(&entity)?;
    Ok(entity)
}

/// Reads a row as a store sent it (the body of a point read), straight from
/// the text. Only the JSON's own rules are checked: a member given twice is
/// refused with [`InvalidInput::DuplicateProperty`], as the service refuses
/// it (`DuplicatePropertiesSpecified`), as are an annotation that names no
/// type and a value its type cannot hold. The store's limits and naming
/// rules are the store's to keep: Azurite, for one, keeps property names the
/// service refuses, and a row it holds stays readable. Use [`from_str`] for
/// a document to be written.
pub fn row_from_str(text: &str) -> Result<Entity, InvalidInput> {
    parse_object(text, MembersVisitor, "a JSON object")?.into_entity()
}

/// The members of an entity's JSON text, names borrowed from it.
#[doc(hidden)]
pub fn members_from_str(text: &str) -> Result<Members<'_>, InvalidInput> {
    parse_object(text, MembersVisitor, "a JSON object")?.into_members()
}

/// Reads a whole text as one JSON object with `visitor`; `what` names the
/// object in the error.
fn parse_object<'de, V: serde::de::Visitor<'de>>(
    text: &'de str,
    visitor: V,
    what: &'static str,
) -> Result<V::Value, InvalidInput> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, visitor)
        .and_then(|read| de.end().map(|()| read))
        .map_err(|e| InvalidInput::Json {
            expected: what,
            reason: e.to_string(),
        })
}

/// Reads the entities of a query response (`{"value":[…], …}`), straight
/// from the text, each row as [`row_from_str`] reads it; other members of the response are
/// skipped. A row that is valid JSON but not a valid entity (a DateTime
/// outside 1601–9999, say) is returned apart, with its keys and the reason,
/// so the other rows are not lost; text that is not a query response at all
/// is an error.
pub fn entities_from_str(text: &str) -> Result<(Vec<Entity>, Vec<UndecodableRow>), InvalidInput> {
    /// One element of `value`.
    struct Item<'de>(Collector<'de>);
    impl<'de> serde::Deserialize<'de> for Item<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Item<'de>, D::Error> {
            deserializer.deserialize_map(MembersVisitor).map(Item)
        }
    }
    /// The response object.
    struct PageVisitor;
    impl<'de> serde::de::Visitor<'de> for PageVisitor {
        type Value = Option<Vec<Item<'de>>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a query response object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut items = None;
            while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
                if name == "value" {
                    // A second `value` would make one of them win silently.
                    if items.is_some() {
                        return Err(serde::de::Error::duplicate_field("value"));
                    }
                    items = Some(map.next_value::<Vec<Item<'de>>>()?);
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(items)
        }
    }
    match parse_object(text, PageVisitor, "a query response")? {
        Some(items) => {
            let mut entities = Vec::with_capacity(items.len());
            let mut undecodable = Vec::new();
            for Item(collector) in items {
                let keys = collector.keys();
                match collector.into_entity() {
                    Ok(entity) => entities.push(entity),
                    Err(reason) => undecodable.push(UndecodableRow {
                        partition_key: keys.0,
                        row_key: keys.1,
                        reason,
                    }),
                }
            }
            Ok((entities, undecodable))
        }
        None => Err(InvalidInput::Json {
            expected: "a query response",
            reason: "it has no `value`".into(),
        }),
    }
}

/// A member name: borrowed from the input when it holds no escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

/// Reads a JSON object into a [`Collector`], member by member.
struct MembersVisitor;

impl<'de> serde::de::Visitor<'de> for MembersVisitor {
    type Value = Collector<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entity as a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut collector = Collector::default();
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            let value = if name.starts_with("odata.") && name != "odata.etag" {
                map.next_value::<serde::de::IgnoredAny>()?;
                Raw::Null
            } else {
                map.next_value::<Raw<'de>>()?
            };
            collector.add(name, value);
        }
        Ok(collector)
    }
}

/// A field's member as read: its value and its type annotation, each when
/// present.
type Slot<'de> = (Option<Raw<'de>>, Option<Raw<'de>>);

/// Where [`fields_from_str`] keeps a document's members until they are
/// taken, held by the caller: on the stack for a type of up to 16 fields,
/// so a typed read allocates nothing of its own.
#[doc(hidden)]
pub struct SlotBuffer<'de> {
    inline: [Slot<'de>; 16],
    heap: Vec<Slot<'de>>,
}

impl<'de> SlotBuffer<'de> {
    /// An empty buffer.
    #[inline]
    #[doc(hidden)]
    pub fn new() -> Self {
        SlotBuffer {
            inline: Default::default(),
            heap: Vec::new(),
        }
    }

    /// `n` empty slots.
    #[inline]
    fn slots(&mut self, n: usize) -> &mut [Slot<'de>] {
        if n <= self.inline.len() {
            return &mut self.inline[..n];
        }
        self.heap.resize_with(n, || (None, None));
        &mut self.heap
    }
}

/// The values of the slots left when they were converted at once, and the
/// first that did not convert.
type Converted = (Vec<Option<Value>>, Option<Box<InvalidInput>>);

/// The members of an entity's JSON that a typed entity has fields for, each
/// in its field's slot: what [`schema::from_json`](crate::schema::from_json)
/// reads a type with [`checked_names`](crate::schema::EntityDescriptor::checked_names)
/// from.
///
/// A value is converted from its JSON when the reader takes it
/// ([`take_at`](crate::props::PropertySource::take_at)), so it goes from the
/// text to its field without a pass of its own. A value that does not
/// convert is kept as the source's [`value_error`](Fields::value_error),
/// which the caller checks after reading: a field that can be absent must
/// not turn a bad value into a missing one. The first value read by
/// reference ([`get`](crate::props::PropertySource::get)) converts all that
/// are left at once.
#[doc(hidden)]
pub struct Fields<'s, 'de> {
    partition_key: Cow<'de, str>,
    row_key: Cow<'de, str>,
    kind: Option<Value>,
    version: Option<Value>,
    names: &'static [&'static str],
    /// The members not yet taken, in `names`' order.
    slots: &'s mut [Slot<'de>],
    /// Every member left, converted at once: when one is read by reference,
    /// or all are checked.
    converted: std::cell::OnceCell<Converted>,
    /// The first value a take could not convert.
    error: Option<Box<InvalidInput>>,
    /// How many properties no slot holds: the kind and the version (each 1
    /// or 0, when given) and the members of no field.
    listed: usize,
    /// The members of no field's part of the entity's size.
    extras_size: usize,
    /// Every slot before this one is taken: the reader takes them in order,
    /// so this reaches the end and nothing is left to check.
    next: usize,
}

impl<'de> Fields<'_, 'de> {
    /// Whether the document has properties no field reads, besides the
    /// kind and the version.
    #[doc(hidden)]
    pub fn has_extras(&self) -> bool {
        self.extras_size > 0
    }

    /// The part of the entity's size of the properties no field reads,
    /// besides the kind and the version.
    #[doc(hidden)]
    pub fn extras_size(&self) -> usize {
        self.extras_size
    }

    /// How many properties the document holds (the kind and version and the
    /// members of no field included), before any is taken: members that are
    /// not `null`.
    #[doc(hidden)]
    pub fn count(&self) -> usize {
        let values = self.slots.iter();
        self.listed
            + values
                .filter(|(raw, _)| !matches!(raw, None | Some(Raw::Null)))
                .count()
    }

    /// Every value, with its property name (the kind and version
    /// included); the first value that does not convert is the error.
    #[doc(hidden)]
    pub fn present(&mut self) -> Result<impl Iterator<Item = (&str, &Value)>, InvalidInput> {
        let values = match self.converted() {
            (_, Some(e)) => return Err(InvalidInput::clone(e)),
            (values, None) => values,
        };
        let kind = self.kind.as_ref().map(|v| (crate::props::KIND_PROPERTY, v));
        let version = self
            .version
            .as_ref()
            .map(|v| (crate::props::VERSION_PROPERTY, v));
        let values = self
            .names
            .iter()
            .zip(values)
            .filter_map(|(name, value)| Some((*name, value.as_ref()?)));
        Ok(kind.into_iter().chain(version).chain(values))
    }

    /// Takes the keys out.
    #[doc(hidden)]
    pub fn take_keys(&mut self) -> (Cow<'de, str>, Cow<'de, str>) {
        (
            std::mem::take(&mut self.partition_key),
            std::mem::take(&mut self.row_key),
        )
    }

    /// The first value of the document that does not convert, in field
    /// order: one met while reading, else one of those never read. `None`
    /// when every value converts.
    #[doc(hidden)]
    pub fn value_error(&mut self) -> Option<InvalidInput> {
        if let Some(e) = self.error.take() {
            return Some(*e);
        }
        if let Some((_, error)) = self.converted.get_mut() {
            return error.take().map(|e| *e);
        }
        let next = self.next;
        self.slots[next..]
            .iter_mut()
            .zip(&self.names[next..])
            .find_map(|(slot, name)| slot_value(name, std::mem::take(slot)).err())
            .map(|e| *e)
    }

    /// The members left, converted (once).
    fn converted(&self) -> &Converted {
        self.converted.get_or_init(|| {
            let mut error = None;
            let values = self
                .slots
                .iter()
                .zip(self.names)
                .map(|((raw, annotation), name)| {
                    slot_value(name, (raw.clone(), annotation.clone())).unwrap_or_else(|e| {
                        error.get_or_insert(e);
                        None
                    })
                })
                .collect();
            (values, error)
        })
    }

    /// Takes the value at `index` out, converting it.
    #[inline]
    fn take_slot(&mut self, index: usize) -> Option<Value> {
        if let Some((values, _)) = self.converted.get_mut() {
            return values[index].take();
        }
        /// Keeps the first error met (rarely: out of the common path).
        #[cold]
        fn keep(error: &mut Option<Box<InvalidInput>>, e: Box<InvalidInput>) -> Option<Value> {
            error.get_or_insert(e);
            None
        }
        let slot = std::mem::take(&mut self.slots[index]);
        if index == self.next {
            self.next += 1;
        }
        match slot_value(self.names[index], slot) {
            Ok(value) => value,
            Err(e) => keep(&mut self.error, e),
        }
    }
}

impl crate::props::PropertySource for Fields<'_, '_> {
    fn get(&self, name: &str) -> Option<&Value> {
        match name {
            crate::props::KIND_PROPERTY => self.kind.as_ref(),
            crate::props::VERSION_PROPERTY => self.version.as_ref(),
            _ => {
                let i = self.names.iter().position(|n| *n == name)?;
                self.converted().0[i].as_ref()
            }
        }
    }
    fn take(&mut self, name: &str) -> Option<Value> {
        let i = self.names.iter().position(|n| *n == name)?;
        self.take_slot(i)
    }
    #[inline]
    fn take_at(&mut self, index: usize, name: &str) -> Option<Value> {
        // The slots are in `names`' order; the hint is checked, not trusted.
        // The generated reader passes the very text the list holds: equal
        // pointers settle the check without comparing the text.
        match self.names.get(index) {
            Some(n) if std::ptr::eq(*n, name) || *n == name => self.take_slot(index),
            _ => self.take(name),
        }
    }
    fn extract(&mut self, select: &mut dyn FnMut(&str) -> bool) -> Vec<(String, Value)> {
        let names = self.names;
        names
            .iter()
            .enumerate()
            .filter(|(_, name)| select(name))
            .filter_map(|(i, name)| Some(((*name).to_owned(), self.take_slot(i)?)))
            .collect()
    }
}

/// A field's value from its member and annotation; `None` when absent or
/// `null`. The error is boxed: this runs for every field, and a small
/// result keeps the common path free of large moves.
#[inline]
fn slot_value(name: &str, (raw, annotation): Slot<'_>) -> Result<Option<Value>, Box<InvalidInput>> {
    let edm = match annotation {
        None => None,
        Some(annotation) => Some(annotation_type(name, &annotation).map_err(Box::new)?),
    };
    match raw {
        Some(raw) => value_from_raw(name, raw, edm),
        None => Ok(None),
    }
}

/// Reads the members into `read`, which the caller holds: the read state
/// is written in place, never moved through serde's result.
struct FieldsVisitor<'r, 's, 'de> {
    fields: usize,
    slot_of: fn(&str) -> MemberSlot,
    read: &'r mut Read<'s, 'de>,
}
struct Read<'s, 'de> {
    /// The keys, kind, version, ETag and Timestamp, in that order.
    keys: [Option<Raw<'de>>; 6],
    slots: &'s mut [Slot<'de>],
    repeated: Option<String>,
    /// The members of no field (boxed, and only when there are any):
    /// not read into the value, but checked as the wire reader checks
    /// them, so a document it refuses is refused here too.
    extras: Option<Box<Collector<'de>>>,
}
impl<'de> serde::de::Visitor<'de> for FieldsVisitor<'_, '_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entity as a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let read = self.read;
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            let slot = match &*name {
                "PartitionKey" => &mut read.keys[0],
                "RowKey" => &mut read.keys[1],
                crate::props::KIND_PROPERTY => &mut read.keys[2],
                crate::props::VERSION_PROPERTY => &mut read.keys[3],
                n => match (self.slot_of)(n) {
                    MemberSlot::Value(i) if i < self.fields => &mut read.slots[i].0,
                    MemberSlot::Annotation(i) if i < self.fields => &mut read.slots[i].1,
                    // A member of no field: a response's own, or one
                    // to check as the wire reader would.
                    _ => match n {
                        "odata.etag" => &mut read.keys[4],
                        "Timestamp" => &mut read.keys[5],
                        // The other OData control members are ignored.
                        _ if n.starts_with("odata.") => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                        _ => {
                            let value = map.next_value::<Raw<'de>>()?;
                            read.extras.get_or_insert_default().add(name, value);
                            continue;
                        }
                    },
                },
            };
            if slot.replace(map.next_value::<Raw<'de>>()?).is_some() {
                read.repeated.get_or_insert_with(|| name.into_owned());
            }
        }
        Ok(())
    }
}

/// Reads the members of an entity's JSON text that `names` lists (and the
/// keys, kind and version), each into its slot; other members are skipped.
/// A listed member given twice is refused, as [`from_str`] refuses it.
#[doc(hidden)]
pub fn fields_from_str<'s, 'de>(
    text: &'de str,
    names: &'static [&'static str],
    slot_of: fn(&str) -> MemberSlot,
    kind: Option<&str>,
    buffer: &'s mut SlotBuffer<'de>,
) -> Result<Fields<'s, 'de>, InvalidInput> {
    let fields = names.len();
    let mut read = Read {
        keys: [None, None, None, None, None, None],
        slots: buffer.slots(fields),
        repeated: None,
        extras: None,
    };
    let visitor = FieldsVisitor {
        fields,
        read: &mut read,
        slot_of,
    };
    parse_object(text, visitor, "a JSON object")?;
    if let Some(name) = read.repeated {
        return Err(InvalidInput::DuplicateProperty { name });
    }
    // The members of no field: refused where the wire reader refuses them.
    // An annotation of the kind or the version applies to it, as there.
    let extras = match read.extras {
        Some(extras) => extras.check_extras()?,
        None => Extras {
            kind_edm: None,
            version_edm: None,
            count: 0,
            size: 0,
        },
    };
    let (kind_edm, version_edm) = (extras.kind_edm, extras.version_edm);
    let [
        partition_key,
        row_key,
        stored_kind,
        version,
        _etag,
        timestamp,
    ] = read.keys;
    // A service's response carries the row's time: it must be one.
    timestamp_of(&timestamp)?;
    // Counted here, before any is taken: `null` is an absent property.
    let present = |raw: &Option<Raw<'_>>| !matches!(raw, None | Some(Raw::Null));
    let listed = usize::from(present(&stored_kind)) + usize::from(present(&version));
    // The expected kind is settled here, without building its value; any
    // other is kept for the reader to refuse.
    let stored_kind = match (stored_kind, kind, kind_edm) {
        (Some(Raw::Str(stored)), Some(kind), None) if stored == kind => None,
        (stored, _, _) => stored,
    };
    Ok(Fields {
        partition_key: key_text(partition_key, "PartitionKey")?,
        row_key: key_text(row_key, "RowKey")?,
        kind: value_from(crate::props::KIND_PROPERTY, stored_kind, kind_edm)?,
        version: value_from(crate::props::VERSION_PROPERTY, version, version_edm)?,
        names,
        slots: read.slots,
        converted: std::cell::OnceCell::new(),
        error: None,
        listed: listed + extras.count,
        extras_size: extras.size,
        next: 0,
    })
}
