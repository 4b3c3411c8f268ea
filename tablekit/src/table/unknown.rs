//! Properties a type does not know: kept from the row a [`Loaded`] was read
//! from, and written back by a replace through it, so that a type mapping
//! part of a table another client writes never removes that client's
//! columns.
//!
//! [`Loaded`]: super::Loaded

use crate::entity::{Entity, Properties};
use crate::schema::{self, TableEntity};

/// Whether `name` is one tablekit keeps in a row of `T` for its own
/// bookkeeping (kind, version, write history, and what `T`'s patterns keep,
/// such as the references of offloaded values): each write sets these
/// itself, so they are never carried over.
fn is_bookkeeping<T: TableEntity>(name: &str) -> bool {
    name == schema::KIND_PROPERTY
        || name == schema::VERSION_PROPERTY
        || name == crate::props::WRITES_PROPERTY
        || T::DESCRIPTOR
            .rows
            .is_some_and(|rule| rule.owns_property(name))
        || T::DESCRIPTOR
            .external_values()
            .is_some_and(|values| values.owns_property(name))
}

/// Of the properties a reader of `T` left in a row (`leftover`), those `T`
/// has no field for: neither bookkeeping nor a name `T` reads (an older name
/// of a field the row also holds under its own).
pub(crate) fn unknown_of<T: TableEntity>(mut leftover: Properties) -> Properties {
    leftover.retain(|name, _| !is_bookkeeping::<T>(name));
    if leftover.is_empty() {
        return leftover;
    }
    let mut known = Vec::new();
    // Names a type cannot list all of (a map series) are those its reader
    // took; the listed ones are enough for the rest.
    let _complete = (T::DESCRIPTOR.property_names)(&mut known);
    leftover.retain(|name, _| !known.iter().any(|k| k == name));
    leftover
}

/// [`unknown_of`] the properties a reader left in `leftover`, taken out of
/// it; when there are none (the usual case), `leftover` keeps its room for
/// the next row read into it.
pub(crate) fn unknown_taken<T: TableEntity>(leftover: &mut Properties) -> Properties {
    leftover.retain(|name, _| !is_bookkeeping::<T>(name));
    if leftover.is_empty() {
        return Properties::new();
    }
    unknown_of::<T>(std::mem::take(leftover))
}

/// Puts back in `row` the time of the last write `unknown` records (for a
/// write that is not the entity's own, such as a migration's, from which
/// a time to live does not count).
pub(crate) fn keep_last_write(row: &mut Entity, unknown: &Properties) {
    if let Some(last) = unknown.get(schema::LAST_WRITE_PROPERTY) {
        row.properties
            .insert(schema::LAST_WRITE_PROPERTY, last.clone());
    }
}

/// Adds to `row` (an entity's row as its type writes it) each of `unknown`
/// it does not hold: the row then replaces the stored one without removing
/// what the type does not know.
pub(crate) fn restore(row: &mut Entity, unknown: &Properties) {
    for (name, value) in unknown.entries() {
        if !row.properties.contains(name) {
            row.properties.push_unique(name.clone(), value.clone());
        }
    }
}
