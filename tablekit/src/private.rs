//! What generated code names. Not public API: it may change in any release.

pub use ::core::clone::Clone;
pub use ::core::default::Default;
pub use ::core::marker::PhantomData;
pub use ::core::option::Option::{self, None, Some};
pub use ::core::result::Result::{self, Err, Ok};
pub use ::std::string::String;
pub use ::std::vec::Vec;

pub use crate::backend::RowRef;
pub use crate::bucket::{BucketPart, BucketTime, Bucketed, Period};
pub use crate::changes::{ChangeFeed, ChangeFeedWithPrevious, RecordsChanges};
pub use crate::datetime::DateTime;
pub use crate::entity::{Entity, Properties, PropertyName};
pub use crate::error::{Error, SchemaError, ValueError};
pub use crate::filter::RowView;
pub use crate::index::{
    Index, IndexDef, IndexPart, NonUnique, RemoteIndex, RemoteIndexDef, Sealed, Unique,
};
pub use crate::key::{
    KeyPart, KeyTuple, ORDERED_SEPARATOR, RowKeyLayout, key_starts_with, write_component,
    write_escaped,
};
pub use crate::schema::{
    Column, Discriminator, EntityDescriptor, EntityKinds, FilterValue, JsonField, JsonFieldRead,
    KIND_PROPERTY, KeyArg, MemberSlot, Part, PropertySink, PropertySource, PropertyValue, SameKeys,
    Series, SeriesColumn, TableEntity, TableFields, UnknownKey, VERSION_PROPERTY, claims,
    claims_row, element_name, expired, from_entity, from_entity_owned, from_row, is_kind,
    present_name, property_error, read_json, read_property, stored_version, take_property,
    take_property_at, write_json, write_property, write_value,
};
pub use crate::schema::{Encrypted, Expiry, ExpiryTime, LAST_WRITE_PROPERTY, SealedColumn};
pub use crate::shard::ShardRule;
pub use crate::table::offload::{BlobField, BlobFields, BlobValue};
pub use crate::table::wide::WideRows;
pub use crate::value::{Value, ValueRef};
pub use serde;
pub use serde_json;

/// `a == b`, in a constant (for the derives' compile-time checks).
/// Writes the value of a one-field index into its key: the derive calls it
/// with the field's type named, so a type that is no key type is reported
/// on the field as one unmet `KeyPart`.
pub fn write_index_value<P: KeyPart>(value: &P, layout: &RowKeyLayout, out: &mut String) {
    KeyArg::<P>::write_laid_out(&value, layout, out);
}

pub const fn str_eq(a: &str, b: &str) -> bool {
    crate::keyorder::same_text(a, b)
}

/// Whether two kinds are the same one (both `Some` and equal).
pub const fn same_kind(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => str_eq(a, b),
        _ => false,
    }
}

/// Whether the rows of two kind-less entity types can be told apart (at
/// compile time: the check on an `EntityKinds` enum's variants): by their
/// RowKey layouts, or by discriminators of one property with two values.
/// Types with a kind are told apart by it.
pub const fn distinguishable(a: &EntityDescriptor, b: &EntityDescriptor) -> bool {
    if a.kind.is_some() || b.kind.is_some() {
        return true;
    }
    if !a.row_key_layout.same_as(&b.row_key_layout) {
        return true;
    }
    match (a.discriminator, b.discriminator) {
        (Some(x), Some(y)) => str_eq(x.property, y.property) && !str_eq(x.value, y.value),
        _ => false,
    }
}

/// Whether `kind` is one of `listed` (at compile time: the derive's check
/// that an `upgrade_from` type is of a previous kind).
pub const fn kind_listed(kind: &str, listed: &[&str]) -> bool {
    let mut i = 0;
    while i < listed.len() {
        if str_eq(kind, listed[i]) {
            return true;
        }
        i += 1;
    }
    false
}

/// Reads a property, or the field type's default when it is absent.
pub fn read_property_or_default<V: PropertyValue + Default, S: PropertySource + ?Sized>(
    props: &S,
    name: &str,
) -> Result<V, Error> {
    match props.get(name) {
        None => Ok(V::default()),
        Some(_) => read_property(props, name),
    }
}

/// Writes a field through a custom codec's `to_value` (`#[tablekit(with = …)]`).
pub use crate::schema::write_value as write_with;

/// Reads a field through a custom codec's `from_value`.
pub fn read_with<S: PropertySource + ?Sized, V>(
    props: &mut S,
    name: &str,
    from_value: impl FnOnce(Option<&Value>) -> Result<V, ValueError>,
) -> Result<V, Error> {
    // Taken out: what a reader leaves are the properties its type does not know.
    from_value(props.take(name).as_ref()).map_err(|problem| property_error(name, problem))
}

/// `prefix` followed by `name`: the stored name of a flattened field.
pub fn join(prefix: &str, name: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len());
    out.push_str(prefix);
    out.push_str(name);
    out
}
