//! Reading a typed value from a row: from an [`Entity`](crate::Entity), from
//! its JSON, or from any [`PropertySource`], with the checks of its kind,
//! version and size.

use super::{Discriminator, TableEntity, stored_version};
use crate::entity::Entity;
use crate::error::{Error, InvalidInput, KeyKind, SchemaError, ValueError};
use crate::key::{KeyDecodeError, KeyTuple};
use crate::props::{KIND_PROPERTY, PropertySource, VERSION_PROPERTY};
use crate::value::Value;

/// Reads a row as `T`: checks its kind and version, decodes the keys, reads
/// the properties. Another kind, an unsupported version, a key that does not
/// decode or a property that does not fit are typed errors.
pub fn from_entity<T: TableEntity>(entity: &Entity) -> Result<T, Error> {
    read_entity(
        &entity.partition_key,
        &entity.row_key,
        &mut entity.properties.clone(),
    )
}

/// [`from_entity`] for an entity the caller no longer needs: its values are
/// moved into the result instead of copied.
pub fn from_entity_owned<T: TableEntity>(mut entity: Entity) -> Result<T, Error> {
    let mut props = std::mem::take(&mut entity.properties);
    read_entity(&entity.partition_key, &entity.row_key, &mut props)
}

/// [`from_entity_owned`] for a row a backend passes by reference
/// ([`RowRef`](crate::backend::RowRef)): the values read are taken out of
/// the row, and no entity is made.
pub fn from_row<T: TableEntity>(row: crate::backend::RowRef<'_>) -> Result<T, Error> {
    read_entity(row.partition_key, row.row_key, row.properties)
}

/// Reads a typed value straight from an entity document (a request body, a
/// row given to be written), with the checks of [`from_entity`]: no
/// property map is built and no property name is copied.
///
/// It takes a document by the rule of [`json::from_str`]: only one tablekit
/// could have written, so whatever it reads, [`to_json`](super::to_json) and the writes take
/// back. Members the type has no field for are not read into the value, as
/// [`from_entity`] ignores them, but they are checked as every member is: a
/// member given twice ([`InvalidInput::DuplicateProperty`]), an annotation
/// that names no type, a name that is not an identifier, a value over the
/// service's limits; so are the keys, the number of properties and the
/// entity's size. `from_json(text)` and
/// `from_entity_owned(json::from_str(text)?)` refuse the same documents and
/// read the others to the same value.
///
/// A row as a store holds it is read by [`from_entity`] (every backend's
/// reads go that way), which leaves the store's limits to the store: a row
/// Azurite keeps with a name the service refuses stays readable. See
/// [`to_json`](super::to_json) for an example.
///
/// [`json::from_str`]: crate::json::from_str
pub fn from_json<T: TableEntity>(text: &str) -> Result<T, Error> {
    if T::DESCRIPTOR.checked_names {
        // Every property has a known field: each member goes straight to its
        // field's slot; members of no field are only checked.
        let mut slots = crate::json::SlotBuffer::new();
        let mut fields = crate::json::fields_from_str(
            text,
            T::DESCRIPTOR.field_names,
            T::member_slot,
            T::DESCRIPTOR.kind,
            &mut slots,
        )?;
        let (pk, rk) = fields.take_keys();
        // The names are the type's own, checked when it was derived. The
        // values are converted as the reader takes them: a value that does
        // not convert is the error, before any the reading met after it.
        // A type with fewer fields than the limit cannot break it, unless
        // the document has members of no field (their names and values are
        // checked as they are read).
        let count = (T::DESCRIPTOR.field_names.len() + 2 > crate::validate::limits::MAX_PROPERTIES
            || fields.has_extras())
        .then(|| fields.count());
        let extras_size = fields.extras_size();
        let checked = if short_enough(text.len(), false) {
            check_read(text.len(), &pk, &rk, count, (std::iter::empty(), 0), false)
        } else {
            fields.present().and_then(|present| {
                check_read(text.len(), &pk, &rk, count, (present, extras_size), false)
            })
        };
        let read = checked
            .map_err(Error::from)
            .and_then(|()| read_entity(&pk, &rk, &mut fields));
        return match fields.value_error() {
            Some(e) => Err(e.into()),
            None => read,
        };
    }
    let mut members = crate::json::members_from_str(text)?;
    let (pk, rk) = (
        std::mem::take(&mut members.partition_key),
        std::mem::take(&mut members.row_key),
    );
    let present = members
        .properties
        .iter()
        .filter_map(|(name, value)| Some((&**name, value.as_ref()?)));
    let count = present.clone().count();
    check_read(text.len(), &pk, &rk, Some(count), (present, 0), true)?;
    read_entity(&pk, &rk, &mut members)
}

/// The checks a write makes, made of what [`from_json`] read: keys, the
/// `count` of properties (`None` when the type cannot hold too many), and of
/// `properties` their names (with `names`), values and the entity's size,
/// to which the size of properties checked apart (the second member) is
/// added. A document tablekit could not have written is refused. In a
/// document [`short_enough`], only the keys and the count are checked.
fn check_read<'a>(
    text_len: usize,
    partition_key: &str,
    row_key: &str,
    count: Option<usize>,
    (properties, checked_size): (impl Iterator<Item = (&'a str, &'a Value)>, usize),
    names: bool,
) -> Result<(), InvalidInput> {
    use crate::validate::limits::{MAX_ENTITY_SIZE, MAX_PROPERTIES};
    crate::validate::keys(partition_key, row_key)?;
    if let Some(count) = count {
        crate::validate::property_count(partition_key, row_key, count)?;
    }
    if short_enough(text_len, names) {
        return Ok(());
    }
    let sized = 4 + 24 * (MAX_PROPERTIES + 2) + 2 * text_len > MAX_ENTITY_SIZE;
    let mut size = checked_size;
    for (name, value) in properties {
        let value = value.as_value_ref();
        if names {
            crate::validate::property_name(name)?;
        }
        crate::validate::property_value_ref(name, value)?;
        if sized {
            size += crate::validate::property_size(name, value);
        }
    }
    crate::validate::entity_size(partition_key, row_key, size)
}

/// Whether a document of `text_len` bytes is too short to break a limit
/// [`check_read`] checks of its values, so that (without `names` to check)
/// only its keys and count are left: a value never has more UTF-16 units (a
/// string) or bytes (base64 binary) than its text has bytes; and the entity
/// size is only reached by a long text, since each property's part of the
/// service's formula is at most 24 bytes plus twice the bytes of its name and
/// value in the text (a UTF-16 unit takes a byte or more there, binary takes
/// 4/3 in base64, and no fixed-size value takes over 16), and the keys' part
/// is 4 plus twice theirs.
fn short_enough(text_len: usize, names: bool) -> bool {
    use crate::validate::limits::{
        MAX_BINARY_BYTES, MAX_ENTITY_SIZE, MAX_PROPERTIES, MAX_STRING_UTF16,
    };
    !names
        && text_len <= MAX_STRING_UTF16.min(MAX_BINARY_BYTES)
        && 4 + 24 * (MAX_PROPERTIES + 2) + 2 * text_len <= MAX_ENTITY_SIZE
}

/// Reads a row from its keys and properties: checks its kind and version,
/// decodes the keys, reads the properties.
pub(crate) fn read_entity<T: TableEntity, S: PropertySource + ?Sized>(
    partition_key: &str,
    row_key: &str,
    props: &mut S,
) -> Result<T, Error> {
    super::refuse_sealed::<T, S>(partition_key, row_key, props)?;
    // The layout of a row stored under a previous kind, when it is one.
    let mut renamed = None;
    if let Some(kind) = T::DESCRIPTOR.kind {
        let wrong = || SchemaError::WrongKind {
            expected: kind,
            row_key: row_key.to_owned(),
        };
        if !T::DESCRIPTOR.row_key_layout.starts(row_key) {
            match T::DESCRIPTOR.layout_of(row_key) {
                Some((layout, Some(_))) => renamed = Some(layout),
                _ => return Err(wrong().into()),
            }
        }
        {
            // A projection may leave the kind properties out; when present they must agree.
            match props.get(KIND_PROPERTY) {
                None => {}
                // Against the constant first: the compiler compares it in
                // place; a previous kind is the rare case.
                Some(Value::String(stored)) if stored == kind => {}
                Some(Value::String(stored))
                    if T::DESCRIPTOR.previous_kinds.contains(&&**stored) => {}
                Some(_) => return Err(wrong().into()),
            }
            check_version::<T, S>(kind, partition_key, row_key, props)?;
        }
    }
    if let Some(d) = T::DESCRIPTOR.discriminator {
        check_discriminator(&d, row_key, props)?;
    }
    fn key_error(kind: KeyKind, key: &str, fields: &'static str, e: KeyDecodeError) -> SchemaError {
        SchemaError::KeyDecode {
            kind,
            key: key.to_owned(),
            fields,
            reason: e.to_string(),
        }
    }
    let logical = if let Some(rule) = T::DESCRIPTOR.partitions {
        rule.logical(partition_key, row_key)
            .map_err(|reason| SchemaError::KeyDecode {
                kind: KeyKind::PartitionKey,
                key: partition_key.to_owned(),
                fields: T::DESCRIPTOR.partition_key_fields,
                reason,
            })?
    } else {
        partition_key
    };
    let pk = T::PartitionKey::decode(logical).map_err(|e| {
        key_error(
            KeyKind::PartitionKey,
            partition_key,
            T::DESCRIPTOR.partition_key_fields,
            e,
        )
    })?;
    // The type's own layout is a constant the decoder is built around; a
    // previous kind's is the rare case, decoded from the value.
    let rk = match &renamed {
        None => T::RowKey::decode_laid_out(row_key, &T::DESCRIPTOR.row_key_layout),
        Some(layout) => T::RowKey::decode_laid_out(row_key, layout),
    }
    .map_err(|e| key_error(KeyKind::RowKey, row_key, T::DESCRIPTOR.row_key_fields, e))?;
    match T::read_properties(pk, rk, props) {
        Err(Error::Schema(e)) => Err(e
            .in_row(|| row_context::<T, S>(partition_key, row_key, props))
            .into()),
        read => read,
    }
}

/// Checks a row's stored schema version (`_Version`), when it has one,
/// against the versions the type reads.
#[inline]
fn check_version<T: TableEntity, S: PropertySource + ?Sized>(
    kind: &'static str,
    partition_key: &str,
    row_key: &str,
    props: &mut S,
) -> Result<(), Error> {
    if let Some(version) = props.get(VERSION_PROPERTY) {
        let found = match version {
            Value::Int32(v) => i64::from(*v),
            Value::Int64(v) => *v,
            other => {
                return Err(SchemaError::Property {
                    property: VERSION_PROPERTY.into(),
                    problem: ValueError::WrongType {
                        expected: "Int32",
                        found: other.edm_type(),
                    },
                    row: None,
                }
                .into());
            }
        };
        if found < i64::from(T::DESCRIPTOR.min_version) || found > i64::from(T::DESCRIPTOR.version)
        {
            return Err(SchemaError::UnsupportedVersion {
                kind,
                found,
                min: T::DESCRIPTOR.min_version,
                max: T::DESCRIPTOR.version,
                row: Some(Box::new(row_context::<T, S>(partition_key, row_key, props))),
            }
            .into());
        }
    }
    Ok(())
}

/// Checks a row's discriminator property against the type's, taking it
/// out of `props` (the type writes it itself). A row without it is read (a
/// projection may leave it out); one with another value is another type's.
fn check_discriminator<S: PropertySource + ?Sized>(
    d: &Discriminator,
    row_key: &str,
    props: &mut S,
) -> Result<(), Error> {
    match props.get(d.property) {
        None => Ok(()),
        Some(Value::String(stored)) if stored == d.value => {
            props.take(d.property);
            Ok(())
        }
        Some(_) => Err(SchemaError::WrongKind {
            expected: d.value,
            row_key: row_key.to_owned(),
        }
        .into()),
    }
}

/// The row a typed read of `T` met a problem in.
#[cold]
fn row_context<T: TableEntity, S: PropertySource + ?Sized>(
    partition_key: &str,
    row_key: &str,
    props: &S,
) -> crate::error::RowContext {
    let version = stored_version(props);
    crate::error::RowContext::new(partition_key, row_key, T::DESCRIPTOR.kind, version)
}

/// The name under which `props` holds a field stored as `name` that was
/// once stored under `aliases` (`#[tablekit(alias = "…")]`): `name` when the
/// row has it (or has none of them), else the first alias it has.
pub fn present_name<'a, S: PropertySource + ?Sized>(
    props: &S,
    name: &'a str,
    aliases: &[&'a str],
) -> &'a str {
    if props.get(name).is_some() {
        return name;
    }
    aliases
        .iter()
        .copied()
        .find(|alias| props.get(alias).is_some())
        .unwrap_or(name)
}
