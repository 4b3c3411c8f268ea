//! What typed entities read their properties from and write them to: the
//! source and sink traits, implemented by the property map here and by the
//! wire JSON's reader and writer, and the bookkeeping names every row of a
//! kind holds. Re-exported from `schema`, which uses them.

use crate::entity::{Properties, PropertyName};

/// What a member's name ends with when it carries the type of the member
/// named before it: `Salary@odata.type`.
#[doc(hidden)]
pub const ANNOTATION_SUFFIX: &str = "@odata.type";
use crate::error::Error;
use crate::value::{Value, ValueRef};

/// The property that records an entity's kind in its row.
pub const KIND_PROPERTY: &str = "_Kind";
/// The property that records the schema version of an entity's kind.
pub const VERSION_PROPERTY: &str = "_Version";
/// The property in which the typed writes keep the history of their writes
/// to a row (space-separated tags, newest first). Typed reads ignore it.
pub const WRITES_PROPERTY: &str = "_Writes";

/// Where a member of an entity's JSON goes, by `tablekit::TableEntity::member_slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberSlot {
    /// The value of the field at this index of
    /// `field_names`.
    Value(usize),
    /// The type annotation (`<name>@odata.type`) of the field at this index.
    Annotation(usize),
    /// No field's: the member is skipped.
    Other,
}

impl MemberSlot {
    /// The slot of `name` among `field_names`, found by searching: what a
    /// hand-written [`TableEntity`](crate::TableEntity) gets by default.
    pub fn search(field_names: &[&str], name: &str) -> MemberSlot {
        let (base, annotation) = match name.strip_suffix(ANNOTATION_SUFFIX) {
            Some(base) => (base, true),
            None => (name, false),
        };
        match field_names.iter().position(|n| *n == base) {
            Some(i) if annotation => MemberSlot::Annotation(i),
            Some(i) => MemberSlot::Value(i),
            None => MemberSlot::Other,
        }
    }
}

/// Where a typed entity reads its properties from: a property map
/// ([`Properties`]), or the members of a wire-JSON document read by
/// `from_json` without building one.
pub trait PropertySource {
    /// The value of `name`.
    fn get(&self, name: &str) -> Option<&Value>;
    /// Takes the value of `name` out.
    fn take(&mut self, name: &str) -> Option<Value>;
    /// Takes the value of `name` out, where `index` is its position in the
    /// reading type's `field_names`: a hint a
    /// source that keeps its values in that order uses to skip the search.
    /// The default ignores it.
    fn take_at(&mut self, index: usize, name: &str) -> Option<Value> {
        let _ = index;
        self.take(name)
    }
    /// Takes out every property whose name `select` accepts, with its name.
    fn extract(&mut self, select: &mut dyn FnMut(&str) -> bool) -> Vec<(String, Value)>;
}

impl PropertySource for Properties {
    fn get(&self, name: &str) -> Option<&Value> {
        Properties::get(self, name)
    }
    fn take(&mut self, name: &str) -> Option<Value> {
        Properties::take(self, name)
    }
    fn extract(&mut self, select: &mut dyn FnMut(&str) -> bool) -> Vec<(String, Value)> {
        Properties::extract(self, select)
            .into_iter()
            .map(|(name, value)| (name.into_owned(), value))
            .collect()
    }
}

/// Where a typed entity writes its properties: a property map
/// ([`Properties`]) or the wire JSON itself ([`crate::json::EntityWriter`],
/// through `to_json`).
///
/// A sink need not look for a name written twice: field names within one
/// struct are checked distinct at compile time, so only a flattened struct
/// colliding with another field can cause it, and whoever finishes the row
/// (`to_entity`, `to_json`) refuses it with a
/// [`SchemaError::NameCollision`](crate::SchemaError::NameCollision).
pub trait PropertySink {
    /// Writes a property whose value is borrowed from the entity.
    fn push(&mut self, name: PropertyName, value: ValueRef<'_>) -> Result<(), Error>;

    /// Writes a property whose value was converted for the write (a `with`
    /// codec, a JSON field): the sink may keep it without copying.
    fn push_owned(&mut self, name: PropertyName, value: Value) -> Result<(), Error> {
        self.push(name, value.as_value_ref())
    }
}

impl PropertySink for Properties {
    fn push(&mut self, name: PropertyName, value: ValueRef<'_>) -> Result<(), Error> {
        self.push_unchecked(name, value.to_value());
        Ok(())
    }

    fn push_owned(&mut self, name: PropertyName, value: Value) -> Result<(), Error> {
        self.push_unchecked(name, value);
        Ok(())
    }
}

/// The first name that appears twice, found in linear time for large entities.
#[doc(hidden)]
pub fn first_duplicate<N: Eq + std::hash::Hash + Copy>(names: &[N]) -> Option<N> {
    if names.len() <= 32 {
        return names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
            .map(|(_, n)| *n);
    }
    let mut seen = std::collections::HashSet::with_capacity(names.len());
    names.iter().find(|n| !seen.insert(**n)).copied()
}
