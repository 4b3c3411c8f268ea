//! What `#[derive(TableEntity)]` generates: the schema of a typed entity.
//!
//! [`TableEntity`] describes the table, the entity kind and version, the key
//! layout and how fields become properties. [`to_entity`] and [`from_entity`]
//! turn a value into a row and back, checking keys, kind and version;
//! [`Column`]s give typed filters on fields.

mod companions;
mod descriptor;
mod encrypted;
mod expiry;
mod finite;
mod read;
mod values;

pub use encrypted::Encrypted;
pub(crate) use encrypted::{encrypted, refuse_sealed};
pub use expiry::{
    EXPIRY_PARTITIONS, EXPIRY_PK, EXPIRY_RK, Expiry, ExpiryTime, LAST_WRITE_PROPERTY, expired,
    expiry_property, live_filter,
};
pub(crate) use expiry::{
    due_filter, has_time_to_live, index_row, is_stale_index_row, kind_index_filter, stamp_write,
};
pub(crate) use read::read_entity;
pub use read::{from_entity, from_entity_owned, from_json, from_row, present_name};
pub use tablekit_encrypt::SealedColumn;

use std::marker::PhantomData;

pub use descriptor::{
    CompanionRows, DescriptorPart, Discriminator, EntityDescriptor, ExternalValues, Part,
    PartitionRule, RowRule, Sharing, WriteNeeds,
};
pub use series::{Element, Series, SeriesColumn, element_name};
pub use values::{ColumnType, FilterValue, PropertyValue};

use crate::entity::{Entity, Properties, PropertyName};
use crate::error::{Error, InvalidInput, KeyKind, SchemaError, ValueError};
use crate::filter::RowView;
use crate::filter::{CompareOp, Filter};
use crate::key::{KeyTuple, RowKeyLayout};
use crate::keyorder::utf16_len;
use crate::validate::limits::MAX_KEY_UTF16;
use crate::value::{Value, ValueRef};

pub(crate) use crate::props::first_duplicate;
pub use crate::props::{KIND_PROPERTY, MemberSlot, PropertySink, PropertySource, VERSION_PROPERTY};
pub(crate) use companions::{
    companions, hashed, hashed_key, hashed_keys, local_keys, local_slots, read_for_keys,
    remote_key, remote_slots, sealed_slot, stored_keys_each, stored_local_keys,
};

/// A typed entity: implemented by `#[derive(TableEntity)]`.
///
/// Key fields are stored only in the PartitionKey and RowKey, never again as
/// properties. With a kind, the RowKey starts with `KIND_` and the row holds
/// [`KIND_PROPERTY`] and [`VERSION_PROPERTY`].
///
/// # Attributes
///
/// Every attribute `#[derive(TableEntity)]` reads, in `#[tablekit(...)]`.
/// A mistake in one is a compile error on the offending token.
///
/// **On the struct:**
///
/// | attribute | meaning |
/// | --- | --- |
/// | `table = "Name"` | the table (default: the struct's name); 3–63 letters and digits, starting with a letter |
/// | `kind = "EMP"` | the entity kind: 1–64 letters and digits; every RowKey starts with `EMP_` and the row stores `_Kind` and `_Version`, so kinds share a table and a partition |
/// | `kind_properties = false` | the kind lives in the RowKey prefix only, with no `_Kind`/`_Version` properties (a table laid out before) |
/// | `version = 2`, `min_version = 1` | the schema version written, and the oldest one read (default: the current one only) |
/// | `row_key = "empid_{id}"` | a RowKey template: the `row_key` fields in key order, with the texts around and between them written as they are; every field but the last is fixed-width |
/// | `collection` | other kinds may nest under this kind's rows (their RowKeys go on after its own), read together with [`Table::read_collection`](crate::Table::read_collection) |
/// | `parent = Type` | this kind nests under `Type` (which has `collection`): its RowKey fields start with `Type`'s and its tag follows them; `parent = Self` is refused, and kinds that name each other in a ring are a cycle the compiler reports (E0391, "cycle detected … `DESCRIPTOR`", at their derives), since each one's key layout is built from its parent's |
/// | `index(name = "NAME", tag = "TAG", copy(field, …), list, partition = "P", table = "T")` | options of the index `NAME`: the text its RowKeys start with (default: kind, `.`, name), the fields its rows copy (default: all; none for a `wide` entity), `list` for one row per value listing the entities that hold it, and where its rows live when not beside the entity: in the partition `P_{the entity's}` of the same table, or in the table `T` (kept in step through the outbox); see [`index`](crate::index) |
/// | `previous_kinds = ["PRD"]` | names the kind had before: their rows are read as this type on every typed path, and moved to the kind's own RowKey when written or migrated ([`Loaded::previous_kind`](crate::Loaded::previous_kind) says a row still lies there) |
/// | `discriminator(property = "EntityType", value = "Payment")` | the property and value that tell this type's rows from other types' in a table they share when the RowKey does not: a write stores it (no field may be stored under that name), a read refuses a row with another value, a query keeps to the rows that hold it, and an [`EntityKinds`] enum reads each row as the variant whose value it holds |
/// | `wide` | the entity may span several rows of one partition (up to 100 rows of 249 properties), always written in one transaction |
/// | `changes` | every typed write of the kind records its change in its own transaction, numbered in commit order per partition, for consumers to read (see [`changes`](crate::changes)); needs a `kind`. `changes(previous)`: each change also records the entity's value before it (each write reads it first) |
/// | `buckets = "day"` | one table per `"hour"`, `"day"` or `"month"` (UTC), named by the table and the period (`Logins20261123`), written and read through [`Buckets`](crate::bucket::Buckets); the period comes from the `bucket` field, or from the time of the write |
/// | `time_to_live = "30m"` | each entity expires this long after its last typed write (`"90s"`, `"12h"`, `"7days"`, …), which stamps its time in `_LastWrite`; see [`Table`](crate::Table#rows-that-expire) |
/// | `shards = N` | one logical partition spread over N (2–100) stored ones, `PK\|00` … `PK\|NN`, by the RowKey: for kinds whose inserts would all hit one partition; reads of the partition merge the shards (see [`shard`](crate::shard)) |
/// | `upgrade_from = Old`, `upgrade_with = path` | rows of `Old`'s versions (the same table, kind and keys, a lower version) are read as `Old` and converted with `From<Old>`, or with `path`, a function from `Old` (`upgrade_with` needs `upgrade_from`); chains (V1 → V2 → V3) follow; `min_version` defaults to `Old`'s and may not be above `Old`'s version |
/// | `projection_of = Entity` | a subset of `Entity`'s fields, for [`TableQuery::project`](crate::TableQuery::project) or a table of its own: the key fields and some plain property fields of `Entity`, under the same field names; table, kind, version, key layout and property names come from `Entity`, and a field `Entity` lacks, or holds with another type, is a compile error on the field |
/// | `rename_all = "PascalCase"` | property names from field names: `PascalCase`, `camelCase`, `snake_case`, `SCREAMING_SNAKE_CASE`, `lowercase`, `UPPERCASE` |
/// | `crate = ::path` | where `tablekit` is, for crates that re-export it |
///
/// **On a field:**
///
/// | attribute | meaning |
/// | --- | --- |
/// | `partition_key`, `partition_key = N` | a PartitionKey component; up to three form a hierarchical key (tenant > user > session), in field order or numbered from 0 |
/// | `row_key`, `row_key = N` | a RowKey component; up to four form a compound key, in field order or numbered from 0 |
/// | `rename = "Name"` | the property name (letters, digits, `_`; at most 255 characters) |
/// | `skip` | not stored; `Default` when read |
/// | `default` | `Default` when the property is absent (a field added later: older rows lack it) |
/// | `default = path` | what the function `path()` returns when the property is absent |
/// | `alias = "Old"` | also read from the older name `Old` (any number of them; the current name wins when a row has both); written under the current name only |
/// | `json` | any serde type, stored as one JSON string |
/// | `with = module` | a codec: `module::to_value(&T) -> Result<Option<Value>, ValueError>` and `module::from_value(Option<&Value>) -> Result<T, ValueError>` |
/// | `flatten`, `flatten(prefix = "P", delimiter = "_")` | the fields of a struct deriving [`TableFields`], stored as `P_Field` (two flattened fields need different prefixes) |
/// | `series` | a `Vec`, array or `String`-keyed map stored as one property per element, `Field_0`, `Field_1`, … or `Field_key` (see [`Series`] for the rule on map keys) |
/// | `blob` | text or bytes kept in the blob store, the row holding a reference (see [`Table::with_blob_store`](crate::Table::with_blob_store)) |
/// | `offload` | text or bytes kept in the row while they fit, in the blob store when too large |
/// | `unique = "NAME"` | the field is in the unique index `NAME`, kept in the entity's partition by every write (see [`index`](crate::index)); several fields with one name form a compound index |
/// | `index = "NAME"` | the field is in the non-unique index `NAME` |
/// | `bucket` | this [`DateTime`](crate::DateTime) field picks the entity's table, for a kind with `buckets` |
/// | `encrypted` | stored as ciphertext, sealed before each write and opened after each read with the table's keys (see [`encryption`](crate::encryption)); no column, so no filter; with `index` or `unique`, found by an equal value through rows keyed by its hash; not on a key field, nor with `alias`; a projection marks the encrypted fields it reads, and never writes |
/// | `expires` | a `DateTime` (or `Option<DateTime>`, where `None` never expires): when the entity expires; from then on every typed read passes it by and the upkeep deletes it (see [`Table`](crate::Table#rows-that-expire)); not with `time_to_live`, and not yet in a type with indexes, a change feed, `wide`, `blob` or `offload` |
///
/// Key field types: integers, `bool`, `String`, [`DateTime`](crate::DateTime),
/// `uuid::Uuid`, and the types of [`key`](crate::key) ([`InvertedTime`](crate::key::InvertedTime),
/// [`Padded`](crate::key::Padded), [`Verbatim`](crate::key::Verbatim),
/// [`Ordered`](crate::key::Ordered)); property field types: any
/// [`PropertyValue`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an entity type",
    label = "needs `#[derive(TableEntity)]`",
    note = "for an enum of kinds (`#[derive(EntityKinds)]`), take a table of one of its kinds and turn it into the enum's: `Table::<OneKind>::new(backend).of::<{Self}>()`, or `Table::<{Self}>::from_arc(backend, \"TableName\")`"
)]
pub trait TableEntity: Sized + Send + Sync + 'static {
    /// The typed PartitionKey: one key part or a tuple (the levels of a
    /// hierarchical key).
    type PartitionKey: KeyTuple + KeyArg<Self::PartitionKey> + Send + Sync;
    /// The typed RowKey: one key part or a tuple.
    type RowKey: KeyTuple + KeyArg<Self::RowKey> + Send + Sync;
    /// Typed filters on the entity's fields.
    type Columns;
    /// Typed handles on the declared [indexes](crate::index), one field per
    /// index (`()` for a type without any).
    type Indexes;

    /// The static facts of the type: table, kind, versions, key layout,
    /// flags, field names, and the parts the patterns need (indexes, blob
    /// fields, shards, buckets). See [`EntityDescriptor`].
    const DESCRIPTOR: EntityDescriptor;

    /// Which field of the descriptor's
    /// [`field_names`](EntityDescriptor::field_names) a member of the
    /// entity's JSON holds the value or the type annotation of, for readers
    /// that file each member into its field's slot. The derive generates a
    /// `match` over the literal names; the default searches the names.
    fn member_slot(name: &str) -> MemberSlot {
        MemberSlot::search(Self::DESCRIPTOR.field_names, name)
    }

    /// The PartitionKey of this value.
    fn partition_key(&self) -> Self::PartitionKey;
    /// The RowKey of this value (without the kind prefix).
    fn row_key(&self) -> Self::RowKey;
    /// Appends the encoded PartitionKey.
    fn write_partition_key(&self, out: &mut String);
    /// Appends the stored RowKey: the key fields encoded and laid out with
    /// their kind tags as [`row_key_layout`](EntityDescriptor::row_key_layout) says.
    fn write_row_key(&self, out: &mut String);
    /// The typed filters.
    fn columns() -> Self::Columns;
    /// The typed index handles.
    fn indexes() -> Self::Indexes;
    /// Appends the RowKey of this value's row in the index at `index`:
    /// the index tag and the encoded value. Indexes are numbered in the
    /// order the [index part](crate::index::IndexPart) lists them, those of
    /// the entity's partition first. The RowKey of a non-unique index's row
    /// goes on with the entity's RowKey, which the caller appends; an
    /// optional value that is `None` appends nothing.
    fn write_index_key(&self, index: usize, out: &mut String) {
        let _ = (index, out);
    }
    /// Writes every property field into a sink: a property map, or the wire
    /// JSON directly ([`to_json`]).
    fn write_properties<S: PropertySink + ?Sized>(&self, props: &mut S) -> Result<(), Error>;
    /// Builds a value from decoded keys and the stored properties, taking the
    /// values it reads out of `props`.
    fn read_properties<S: PropertySource + ?Sized>(
        pk: Self::PartitionKey,
        rk: Self::RowKey,
        props: &mut S,
    ) -> Result<Self, Error>;
}

/// A struct whose fields can be flattened into an entity:
/// `#[derive(TableFields)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be flattened into an entity",
    label = "`flatten` needs a struct deriving `TableFields`",
    note = "add `#[derive(tablekit::TableFields)]` to `{Self}`, or store it with `#[tablekit(json)]`"
)]
pub trait TableFields: Sized {
    /// The stored names of the fields, each after `prefix`; `false` when
    /// they cannot all be listed (see [`EntityDescriptor::property_names`]).
    fn field_names(prefix: &str, names: &mut Vec<String>) -> bool;
    /// Writes the fields, each name after `prefix`.
    fn write_fields<S: PropertySink + ?Sized>(
        &self,
        prefix: &str,
        props: &mut S,
    ) -> Result<(), Error>;
    /// Reads the fields, each name after `prefix`, taking their values out of `props`.
    fn read_fields<S: PropertySource + ?Sized>(prefix: &str, props: &mut S) -> Result<Self, Error>;
}

/// An enum over entity kinds that share a partition: `#[derive(EntityKinds)]`
/// on an enum whose variants each hold one entity type. A row goes to the
/// variant of its kind; types without a kind (a RowKey template or a plain
/// layout) claim the rows whose RowKeys decode as their keys, in the order
/// of the variants, after the types with a kind.
pub trait EntityKinds: Sized + Send + Sync + 'static {
    /// The PartitionKey type every kind shares.
    type PartitionKey: KeyTuple + KeyArg<Self::PartitionKey> + Send + Sync;
    /// The kinds, one per variant.
    const KINDS: &'static [&'static str];
    /// Reads a row as the variant of its kind; `None` when its kind is none of
    /// [`KINDS`](EntityKinds::KINDS).
    fn from_entity(entity: &Entity) -> Option<Result<Self, Error>>;

    /// [`from_entity`](EntityKinds::from_entity) for a row the caller no
    /// longer needs: its values are moved into the result instead of copied.
    /// The row comes back as `Err` when its kind is none of
    /// [`KINDS`](EntityKinds::KINDS).
    fn from_entity_owned(entity: Entity) -> Result<Result<Self, Error>, Entity> {
        match Self::from_entity(&entity) {
            Some(read) => Ok(read),
            None => Err(entity),
        }
    }

    /// Whether the row, read as the variant of its kind, has expired at
    /// `now` (see [`expired`]); `false` for a row no variant reads.
    fn expired(entity: &Entity, now: crate::datetime::DateTime) -> bool {
        let _ = (entity, now);
        false
    }

    /// [`from_entity_owned`](EntityKinds::from_entity_owned) for a row a
    /// backend passes by reference ([`RowRef`](crate::backend::RowRef)):
    /// the values read are taken out of the row; `None`, the row as it
    /// was, when its kind is none of [`KINDS`](EntityKinds::KINDS). The
    /// derive reads the row where it lies; the default makes an [`Entity`]
    /// of it and reads that.
    fn from_row(row: crate::backend::RowRef<'_>) -> Option<Result<Self, Error>> {
        let mut entity = Entity::new(row.partition_key, row.row_key);
        entity.properties = std::mem::take(row.properties);
        match Self::from_entity_owned(entity) {
            Ok(read) => Some(read),
            Err(entity) => {
                *row.properties = entity.properties;
                None
            }
        }
    }

    /// [`expired`](EntityKinds::expired) of a row a backend passes by
    /// reference. The derive asks the row where it lies; the default makes
    /// an [`Entity`] of it.
    fn row_expired(row: &crate::backend::RowRef<'_>, now: crate::datetime::DateTime) -> bool {
        let mut entity = Entity::new(row.partition_key, row.row_key);
        entity.properties = row.properties.clone();
        Self::expired(&entity, now)
    }
}

/// What reading a partition of several kinds does with a row of another kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownKind {
    /// Fail with [`SchemaError::UnknownKind`].
    Fail,
    /// Leave the row out.
    Skip,
}

/// The RowKey prefix of a kind: `KIND_`.
pub fn kind_prefix(kind: &str) -> String {
    format!("{kind}_")
}

/// The filter that keeps a query to the rows of `T`'s kind: the RowKey range
/// of its outermost tag, and, for a kind in a collection (whose range it
/// shares with other kinds), its `_Kind` property. `None` for a type without
/// a kind.
pub fn kind_filter<T: TableEntity>() -> Option<Filter> {
    // Each layout the kind's rows are stored in (a renamed kind's previous
    // ones too), as a RowKey range; none for a type every key may be one of.
    let mut range: Option<Filter> = None;
    for (layout, _) in T::DESCRIPTOR.stored_layouts() {
        let Some((start, end)) = layout_rows(&layout) else {
            return kind_property_filter::<T>();
        };
        let from = Filter::row_key().ge(start);
        let one = match end {
            Some(end) => from & Filter::row_key().lt(end),
            None => from,
        };
        range = Some(match range {
            Some(range) => range | one,
            None => one,
        });
    }
    let range = range?;
    Some(match kind_property_filter::<T>() {
        Some(kind) => range & kind,
        None => range,
    })
}

/// The RowKey range `[start, end)` every row of `T` lies in: the rows
/// that start with its kind tag (or its key template's leading text); `end`
/// is `None` when the range has no end. `None` when every RowKey may be one
/// of `T`'s. (A renamed kind's rows under its previous names lie outside
/// it: see [`EntityDescriptor::stored_layouts`].)
pub fn kind_rows<T: TableEntity>() -> Option<(String, Option<String>)> {
    layout_rows(&T::DESCRIPTOR.row_key_layout)
}

/// The RowKey range of the keys laid out by `layout`, as [`kind_rows`].
fn layout_rows(layout: &RowKeyLayout) -> Option<(String, Option<String>)> {
    let prefix = layout.prefix()?;
    let end = crate::keyorder::prefix_end(&prefix);
    Some((prefix, end))
}

/// For a kind in a collection, whose RowKey range holds rows of other kinds
/// too, the filter that leaves those rows out: `not (_Kind ne 'KIND')`. A
/// comparison with a property a row lacks is false, so this keeps the rows
/// of the kind and the rows with no `_Kind` at all, which a typed read then
/// reads (or refuses) the way [`from_entity`] does, never dropping them
/// unseen. `None` for other types.
///
/// For a type with a [`Discriminator`], the filter also keeps to the rows
/// that hold its value.
pub fn kind_property_filter<T: TableEntity>() -> Option<Filter> {
    let kind = T::DESCRIPTOR
        .kind
        .filter(|_| T::DESCRIPTOR.row_key_layout.in_collection())
        .map(|kind| !crate::filter::prop(KIND_PROPERTY).ne(kind));
    let discriminator = T::DESCRIPTOR
        .discriminator
        .map(|d| crate::filter::prop(d.property).eq(d.value));
    match (kind, discriminator) {
        (Some(kind), Some(d)) => Some(kind & d),
        (kind, d) => kind.or(d),
    }
}

pub(crate) fn check_key_length(
    kind: KeyKind,
    fields: &'static str,
    key: &str,
) -> Result<(), Error> {
    if key.len() > MAX_KEY_UTF16 {
        let utf16_len = utf16_len(key);
        if utf16_len > MAX_KEY_UTF16 {
            return Err(InvalidInput::EncodedKeyTooLong {
                kind,
                fields,
                utf16_len,
                max: MAX_KEY_UTF16,
            }
            .into());
        }
    }
    Ok(())
}

/// The encoded PartitionKey of a value.
pub fn partition_key_of<T: TableEntity>(value: &T) -> Result<String, Error> {
    let mut pk = String::with_capacity(KEY_ROOM);
    write_partition_key_of(value, &mut pk)?;
    Ok(pk)
}

/// The stored RowKey of a value: the kind prefix and the encoded row key.
pub fn row_key_of<T: TableEntity>(value: &T) -> Result<String, Error> {
    let mut rk = String::with_capacity(KEY_ROOM);
    write_row_key_of(value, &mut rk)?;
    Ok(rk)
}

/// Appends the encoded PartitionKey, checked for length.
fn write_partition_key_of<T: TableEntity>(value: &T, out: &mut String) -> Result<(), Error> {
    value.write_partition_key(out);
    if let Some(rule) = T::DESCRIPTOR.partitions {
        let mut rk = String::with_capacity(KEY_ROOM);
        value.write_row_key(&mut rk);
        rule.push_suffix(out, &rk);
    }
    check_key_length(
        KeyKind::PartitionKey,
        T::DESCRIPTOR.partition_key_fields,
        out,
    )
}

/// Appends the stored RowKey (kind tags and encoded key), checked for length.
fn write_row_key_of<T: TableEntity>(value: &T, out: &mut String) -> Result<(), Error> {
    value.write_row_key(out);
    check_key_length(KeyKind::RowKey, T::DESCRIPTOR.row_key_fields, out)
}

/// The room a key is made in ([`encode_keys`]): most keys fit.
const KEY_ROOM: usize = 32;

/// Encodes a typed PartitionKey as stored, checked for length.
pub fn encode_partition_key<T: TableEntity>(
    pk: &impl KeyArg<T::PartitionKey>,
) -> Result<String, Error> {
    // Room for the usual key at once: growing it by each part it writes
    // costs more than the spare bytes.
    let mut p = String::with_capacity(KEY_ROOM);
    pk.write_key_arg(&mut p);
    check_key_length(
        KeyKind::PartitionKey,
        T::DESCRIPTOR.partition_key_fields,
        &p,
    )?;
    Ok(p)
}

/// Encodes typed keys as stored: `(PartitionKey, RowKey with the kind prefix)`.
pub fn encode_keys<T: TableEntity>(
    pk: &impl KeyArg<T::PartitionKey>,
    rk: &impl KeyArg<T::RowKey>,
) -> Result<(String, String), Error> {
    let mut p = encode_partition_key::<T>(pk)?;
    let mut r = String::with_capacity(KEY_ROOM);
    rk.write_laid_out(&T::DESCRIPTOR.row_key_layout, &mut r);
    check_key_length(KeyKind::RowKey, T::DESCRIPTOR.row_key_fields, &r)?;
    if let Some(rule) = T::DESCRIPTOR.partitions {
        rule.push_suffix(&mut p, &r);
        check_key_length(
            KeyKind::PartitionKey,
            T::DESCRIPTOR.partition_key_fields,
            &p,
        )?;
    }
    Ok((p, r))
}

/// The row of a value: keys, kind and version, properties.
///
/// A type with encrypted fields is refused
/// ([`EncryptionError::NotDecrypted`](crate::error::EncryptionError::NotDecrypted)):
/// its row is sealed by a [`Table`](crate::Table) given keys, and never
/// built here with its values in plain text.
pub fn to_entity<T: TableEntity>(value: &T) -> Result<Entity, Error> {
    let entity = to_entity_unsealed(value)?;
    if encrypted::<T>().is_some() {
        return Err(crate::error::EncryptionError::NotDecrypted {
            partition_key: entity.partition_key,
            row_key: entity.row_key,
            path: "schema::to_entity",
        }
        .into());
    }
    Ok(entity)
}

/// [`to_entity`] of any type: encrypted fields in plain text, for the
/// typed client to seal.
pub(crate) fn to_entity_unsealed<T: TableEntity>(value: &T) -> Result<Entity, Error> {
    let mut entity = Entity::new(partition_key_of(value)?, row_key_of(value)?);
    // Room for the fields, the kind and version, and a write history, so
    // that the list is not grown (and copied) on the way. Flattened and
    // series fields, which the names leave out, grow it as needed.
    entity.properties = Properties::with_capacity(T::DESCRIPTOR.field_names.len().max(4) + 3);
    if let Some(kind) = T::DESCRIPTOR.kind.filter(|_| T::DESCRIPTOR.kind_properties) {
        entity.properties.insert(KIND_PROPERTY, kind);
        entity
            .properties
            .insert(VERSION_PROPERTY, T::DESCRIPTOR.version as i32);
    }
    value.write_properties(&mut entity.properties)?;
    // Names checked at compile time cannot collide; others are looked at.
    if !T::DESCRIPTOR.checked_names {
        let names: Vec<&str> = entity.properties.iter().map(|(n, _)| n).collect();
        if let Some(name) = first_duplicate(&names) {
            return Err(SchemaError::NameCollision {
                name: name.to_owned(),
            }
            .into());
        }
    }
    Ok(entity)
}

/// The wire JSON of a value's row (what [`to_entity`] builds, as
/// [`json::to_string`](crate::json::to_string) writes it), written straight
/// from the fields by a [`json::EntityWriter`](crate::json::EntityWriter):
/// no property map, no copies. It checks what the service checks (keys,
/// names, value sizes, property count, entity size), so text it returns is
/// a row the service accepts.
///
/// ```
/// use tablekit::{TableEntity, schema};
///
/// #[derive(TableEntity, Debug, PartialEq)]
/// #[tablekit(table = "Staff", kind = "EMP", rename_all = "PascalCase")]
/// struct Employee {
///     #[tablekit(partition_key)]
///     department: String,
///     #[tablekit(row_key)]
///     id: u32,
///     salary: i64,
/// }
///
/// let ada = Employee { department: "Sales".into(), id: 7, salary: 90_000 };
/// let text = schema::to_json(&ada)?;
/// assert_eq!(
///     text,
///     r#"{"PartitionKey":"Sales","RowKey":"EMP_0000000007","_Kind":"EMP","_Version":1,"Salary":"90000","Salary@odata.type":"Edm.Int64"}"#
/// );
/// assert_eq!(schema::from_json::<Employee>(&text)?, ada);
/// # Ok::<(), tablekit::Error>(())
/// ```
pub fn to_json<T: TableEntity>(value: &T) -> Result<String, Error> {
    thread_local! {
        /// Where keys are built before they are written: one buffer per
        /// thread, so writing a row allocates only its text.
        static KEYS: std::cell::RefCell<(String, String)> = const {
            std::cell::RefCell::new((String::new(), String::new()))
        };
    }
    let mut writer = KEYS.with_borrow_mut(|(pk, rk)| {
        pk.clear();
        write_partition_key_of(value, pk)?;
        rk.clear();
        write_row_key_of(value, rk)?;
        Ok::<_, Error>(crate::json::EntityWriter::start(
            pk,
            rk,
            T::DESCRIPTOR.checked_names,
        )?)
    })?;
    if let Some(kind) = T::DESCRIPTOR.kind.filter(|_| T::DESCRIPTOR.kind_properties) {
        writer.push(KIND_PROPERTY.into(), ValueRef::String(kind))?;
        writer.push(
            VERSION_PROPERTY.into(),
            ValueRef::Int32(T::DESCRIPTOR.version as i32),
        )?;
    }
    value.write_properties(&mut writer)?;
    writer.finish()
}

/// Checks up front (in a test, or at start-up) that a type's stored names are
/// distinct and none is reserved: flattened names are made at run time, so a
/// collision is otherwise found only when a value is written.
pub fn check_names<T: TableEntity>() -> Result<(), Error> {
    let mut names = Vec::new();
    (T::DESCRIPTOR.property_names)(&mut names);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let clash = names
        .iter()
        .find(|n| [KIND_PROPERTY, VERSION_PROPERTY].contains(n))
        .copied()
        .or_else(|| first_duplicate(&names));
    match clash {
        Some(name) => Err(SchemaError::NameCollision {
            name: name.to_owned(),
        }
        .into()),
        None => Ok(()),
    }
}

/// Whether a stored row is of the kind of `T`: by its `_Kind` property when
/// it has one, else by its RowKey prefix, as [`from_entity`] decides (a kind
/// in a collection always writes `_Kind`, so a row of its range without one
/// was written by someone else, and is read as `T` the way a point read
/// reads it).
pub fn is_kind<T: TableEntity>(entity: &Entity) -> bool {
    is_kind_of::<T>(entity.into())
}

/// [`is_kind`] of a row however it is read (an entity, or a row passed by
/// reference).
fn is_kind_of<T: TableEntity>(entity: RowView<'_>) -> bool {
    let Some(kind) = T::DESCRIPTOR.kind else {
        return true;
    };
    match entity.properties.get(KIND_PROPERTY) {
        // Against the constant first, compared in place.
        Some(Value::String(stored)) => {
            stored == kind || T::DESCRIPTOR.previous_kinds.contains(&&**stored)
        }
        Some(_) => false,
        None => T::DESCRIPTOR.layout_of(entity.row_key).is_some(),
    }
}

/// Whether a row of a partition that holds several kinds is `T`'s, for an
/// [`EntityKinds`] enum: by its kind for a type with a `kind`; for one
/// without (a RowKey template or a plain layout, as in a table laid out
/// before tablekit), by its RowKey: it must decode as `T`'s keys.
pub fn claims<T: TableEntity>(entity: &Entity) -> bool {
    claims_row::<T>(entity.into())
}

/// [`claims`] of a row however it is read (an entity, or a row passed by
/// reference).
pub fn claims_row<T: TableEntity>(entity: RowView<'_>) -> bool {
    if let Some(d) = T::DESCRIPTOR.discriminator
        && !matches!(entity.properties.get(d.property), Some(Value::String(v)) if v == d.value)
    {
        return false;
    }
    if T::DESCRIPTOR.kind.is_some() {
        return is_kind_of::<T>(entity);
    }
    T::DESCRIPTOR.row_key_layout.starts(entity.row_key)
        && T::RowKey::decode_laid_out(entity.row_key, &T::DESCRIPTOR.row_key_layout).is_ok()
}

/// Entity types whose rows have the same keys: what `upgrade_from` needs
/// of the older type it names.
#[diagnostic::on_unimplemented(
    message = "`upgrade_from = {Old}` names a type whose key fields differ from `{Self}`'s",
    label = "an upgrade reads the rows of the same keys: give both types the same PartitionKey and RowKey fields"
)]
pub trait SameKeys<Old: TableEntity>: TableEntity {
    /// The keys, as the older type names them.
    fn old_keys(pk: Self::PartitionKey, rk: Self::RowKey) -> (Old::PartitionKey, Old::RowKey);
}

impl<Old, New> SameKeys<Old> for New
where
    Old: TableEntity,
    New: TableEntity<PartitionKey = Old::PartitionKey, RowKey = Old::RowKey>,
{
    fn old_keys(pk: New::PartitionKey, rk: New::RowKey) -> (Old::PartitionKey, Old::RowKey) {
        (pk, rk)
    }
}

/// The schema version a row's properties record (`_Version`), if any: what
/// an upgrading reader picks the older type by.
pub fn stored_version<S: PropertySource + ?Sized>(props: &S) -> Option<i64> {
    match props.get(VERSION_PROPERTY)? {
        Value::Int32(v) => Some(i64::from(*v)),
        Value::Int64(v) => Some(*v),
        _ => None,
    }
}

/// Reads one property for a generated reader, naming it in the error.
pub fn read_property<V: PropertyValue, S: PropertySource + ?Sized>(
    props: &S,
    name: &str,
) -> Result<V, Error> {
    V::from_value(props.get(name)).map_err(|problem| property_error(name, problem))
}

/// Takes one property out for a generated reader, naming it in the error.
pub fn take_property<V: PropertyValue, S: PropertySource + ?Sized>(
    props: &mut S,
    name: &str,
) -> Result<V, Error> {
    V::from_owned(props.take(name)).map_err(|problem| property_error(name, problem))
}

/// [`take_property`] for a field at `index` of the reading type's
/// [`field_names`](EntityDescriptor::field_names) (see [`PropertySource::take_at`]).
#[inline]
pub fn take_property_at<V: PropertyValue, S: PropertySource + ?Sized>(
    props: &mut S,
    index: usize,
    name: &str,
) -> Result<V, Error> {
    V::from_owned(props.take_at(index, name)).map_err(|problem| property_error(name, problem))
}

/// A type a `#[tablekit(json)]` field may have: one serde writes (implemented
/// for every `serde::Serialize` type).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be written as JSON: `#[tablekit(json)]` needs serde's `Serialize`",
    label = "needs `serde::Serialize`",
    note = "add `#[derive(serde::Serialize, serde::Deserialize)]` to it (or, for a type of another crate, see whether it has a `serde` feature)"
)]
pub trait JsonField: serde::Serialize {}

impl<T: serde::Serialize> JsonField for T {}

/// A type a `#[tablekit(json)]` field may be read as: one serde reads
/// (implemented for every `serde::de::DeserializeOwned` type).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be read from JSON: `#[tablekit(json)]` needs serde's `Deserialize`",
    label = "needs `serde::Deserialize`",
    note = "add `#[derive(serde::Serialize, serde::Deserialize)]` to it (or, for a type of another crate, see whether it has a `serde` feature)"
)]
pub trait JsonFieldRead: serde::de::DeserializeOwned {}

impl<T: serde::de::DeserializeOwned> JsonFieldRead for T {}

/// Writes a field as a JSON string (`#[tablekit(json)]`). A value holding a
/// float that is not finite (NaN, ±infinity) is refused: JSON has no number
/// for it, and serde_json would write `null`, which reads back as another
/// value or not at all.
pub fn write_json<S: PropertySink + ?Sized, V: JsonField>(
    props: &mut S,
    name: impl Into<PropertyName>,
    value: &V,
) -> Result<(), Error> {
    // serde_json would write a float that is not finite as `null`.
    let text = finite::check(value)
        .map_err(|e| e.to_string())
        .and_then(|()| serde_json::to_string(value).map_err(|e| e.to_string()))
        .map_err(|e| ValueError::Invalid(format!("cannot be written as JSON: {e}")));
    write_value(props, name, text.map(|t| Some(Value::String(t))))
}

/// Reads a field stored as a JSON string (`#[tablekit(json)]`), taking its
/// value out of `props` (what a reader leaves are the properties its type
/// does not know).
pub fn read_json<V: JsonFieldRead, S: PropertySource + ?Sized>(
    props: &mut S,
    name: &str,
) -> Result<V, Error> {
    let text: String = take_property(props, name)?;
    serde_json::from_str(&text).map_err(|e| {
        property_error(
            name,
            ValueError::Invalid(format!("not the expected JSON: {e}")),
        )
    })
}

/// Writes one property for a generated writer, naming it in the error.
pub fn write_property<S: PropertySink + ?Sized, V: PropertyValue>(
    props: &mut S,
    name: impl Into<PropertyName>,
    value: &V,
) -> Result<(), Error> {
    value.write_to(name.into(), props)
}

/// Writes a field's converted value (absent when `None`), naming the property
/// in the error.
pub fn write_value<S: PropertySink + ?Sized>(
    props: &mut S,
    name: impl Into<PropertyName>,
    value: Result<Option<Value>, ValueError>,
) -> Result<(), Error> {
    let name = name.into();
    match value {
        Ok(Some(v)) => props.push_owned(name, v),
        Ok(None) => Ok(()),
        Err(problem) => Err(invalid_value(name, problem)),
    }
}

/// The error for a field whose value cannot be written.
pub(crate) fn invalid_value(name: PropertyName, problem: ValueError) -> Error {
    InvalidInput::PropertyValue {
        property: name.into_owned(),
        reason: problem.to_string(),
    }
    .into()
}

/// The error for a property that does not fit its field.
pub fn property_error(name: &str, problem: ValueError) -> Error {
    SchemaError::Property {
        property: name.to_owned(),
        problem,
        row: None,
    }
    .into()
}

/// A field of an entity, for typed filters: `Employee::columns().age.gt(30)`.
pub struct Column<V> {
    name: &'static str,
    _type: PhantomData<fn() -> V>,
}

impl<V> Clone for Column<V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Column<V> {}

impl<V> std::fmt::Debug for Column<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Column({})", self.name)
    }
}

macro_rules! column_ops {
    ($($method:ident => $op:ident),*) => {$(
        #[doc = concat!("`field ", stringify!($method), " value`")]
        pub fn $method(&self, value: impl Into<V::Arg>) -> Filter {
            self.compare(CompareOp::$op, value)
        }
    )*};
}

mod series;

impl<V> Column<V> {
    /// The column of the property stored as `name`.
    pub const fn new(name: &'static str) -> Column<V> {
        Column {
            name,
            _type: PhantomData,
        }
    }

    /// The stored property name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Comparisons exist for fields whose type has a [`FilterValue`] (all the
/// store's types, and `Option`s of them).
impl<V: ColumnType> Column<V> {
    /// `field op value`.
    pub fn compare(&self, op: CompareOp, value: impl Into<V::Arg>) -> Filter {
        value.into().compare(self.name, op)
    }

    column_ops!(eq => Eq, ne => Ne, gt => Gt, ge => Ge, lt => Lt, le => Le);
}

pub use crate::key::{KeyArg, UnknownKey};
