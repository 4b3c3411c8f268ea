//! Rows that expire: the property that says when an entity of a type
//! expires (its `#[tablekit(expires)]` field), and the test every typed
//! read applies. The reads themselves are the typed client's: a query
//! asks the store for live rows alone ([`live_filter`]); a point read
//! checks the row it got ([`expired`]).

use super::{DescriptorPart, TableEntity};
use crate::datetime::DateTime;
use crate::entity::Entity;
use crate::filter::{Filter, prop};
use crate::props::PropertySource;
use crate::value::Value;

/// When the entities of a type expire, as a part of its descriptor: at
/// the time of its `#[tablekit(expires)]` field, or its `time_to_live`
/// after each write (which stamps [`LAST_WRITE_PROPERTY`]).
#[derive(Debug)]
pub struct Expiry {
    /// The stored name of the property the expiry is read from: the
    /// `expires` field's, or [`LAST_WRITE_PROPERTY`].
    pub property: &'static str,
    /// `None`: the property holds the expiry time. `Some(ttl)`: it holds
    /// the time of the entity's last write, and the entity expires `ttl`
    /// after it.
    pub time_to_live: Option<std::time::Duration>,
}

/// The property in which each typed write of an entity with a
/// `time_to_live` stamps its time (by the table's clock).
pub const LAST_WRITE_PROPERTY: &str = "_LastWrite";

impl DescriptorPart for Expiry {}

/// The type of an `#[tablekit(expires)]` field: a time, or an optional one
/// (`None` never expires).
#[diagnostic::on_unimplemented(
    message = "an `expires` field says when the entity expires: `{Self}` is not a time",
    label = "`expires` needs a `tablekit::DateTime` or `Option<tablekit::DateTime>` field",
    note = "the store compares the expiry time, so it is stored as an `Edm.DateTime`"
)]
pub trait ExpiryTime {}

impl ExpiryTime for DateTime {}
impl ExpiryTime for Option<DateTime> {}

/// How the entities of `T` (for a projection, of its entity) expire, if
/// they do.
fn expiry_of<T: TableEntity>() -> Option<&'static Expiry> {
    T::DESCRIPTOR.part_or_base::<Expiry>()
}

/// The property the expiry of `T`'s entities is read from (see
/// [`Expiry`]), if they expire.
pub fn expiry_property<T: TableEntity>() -> Option<&'static str> {
    expiry_of::<T>().map(|part| part.property)
}

/// The latest value of the expiry property that has expired at `now`;
/// `None` when none can have (a time to live reaching before the first
/// representable time).
fn threshold(expiry: &Expiry, now: DateTime) -> Option<DateTime> {
    match expiry.time_to_live {
        None => Some(now),
        Some(ttl) => now.checked_sub(ttl).ok(),
    }
}

/// Whether the row of `T` whose properties are `props` has expired at
/// `now`: its expiry time is at or before `now`. A row without one (or
/// of a type whose entities do not expire) never expires.
pub fn expired<T: TableEntity, S: PropertySource + ?Sized>(props: &S, now: DateTime) -> bool {
    let Some(expiry) = expiry_of::<T>() else {
        return false;
    };
    let Some(last) = threshold(expiry, now) else {
        return false;
    };
    matches!(props.get(expiry.property), Some(Value::DateTime(at)) if *at <= last)
}

/// The condition a query of `T` adds so the store returns live rows
/// alone: not expired at `now` (a row without an expiry time passes, as a
/// comparison with a missing property is false); `None` for a type whose
/// entities do not expire.
pub fn live_filter<T: TableEntity>(now: DateTime) -> Option<Filter> {
    let expiry = expiry_of::<T>()?;
    let last = threshold(expiry, now)?;
    Some(!prop(expiry.property).le(Value::DateTime(last)))
}

/// Whether `T`'s entities expire a time after their last write.
pub(crate) fn has_time_to_live<T: TableEntity>() -> bool {
    expiry_of::<T>().is_some_and(|e| e.time_to_live.is_some())
}

/// Stamps `row`, about to be written as an entity of `T`, with the time of
/// the write `now`, when `T` has a time to live.
pub(crate) fn stamp_write<T: TableEntity>(row: &mut Entity, now: DateTime) {
    if has_time_to_live::<T>() {
        row.properties
            .insert(LAST_WRITE_PROPERTY, Value::DateTime(now));
    }
}

/// The partitions of a type's expiry index start with this, then its kind
/// (`_` for none), `.`, its expiry property and `|`; each holds the
/// entities that expire in one hour (`yyyyMMddHH`, UTC), so the due ones
/// are read in one key range.
pub const EXPIRY_PARTITIONS: &str = "~tk|expires|";
/// The property of an expiry index row that holds its entity's
/// PartitionKey.
pub const EXPIRY_PK: &str = "_ExpiryPk";
/// The property of an expiry index row that holds its entity's RowKey.
pub const EXPIRY_RK: &str = "_ExpiryRk";

/// The start of the PartitionKeys of `T`'s expiry index.
fn index_partitions<T: TableEntity>() -> String {
    let kind = T::DESCRIPTOR.kind.unwrap_or("_");
    let property = expiry_property::<T>().unwrap_or("_");
    format!("{EXPIRY_PARTITIONS}{kind}.{property}|")
}

/// The condition that reads every row of the expiry indexes of `T`'s kind,
/// under any expiry property (for [`is_stale_index_row`]).
pub(crate) fn kind_index_filter<T: TableEntity>() -> Filter {
    let kind = T::DESCRIPTOR.kind.unwrap_or("_");
    let start = format!("{EXPIRY_PARTITIONS}{kind}.");
    let end = format!("{EXPIRY_PARTITIONS}{kind}/");
    Filter::partition_key().ge(start) & Filter::partition_key().lt(end)
}

/// Whether the expiry index row in partition `pk` (read by
/// [`kind_index_filter`]) belongs to `T`'s kind but not to its expiry as
/// declared now: the time to live was removed, or moved to another
/// property. (A property name holds no `.`, so a partition of another kind
/// whose name extends `T`'s, `K.X`, is never taken for one of `K`'s.)
pub(crate) fn is_stale_index_row<T: TableEntity>(pk: &str) -> bool {
    let kind = T::DESCRIPTOR.kind.unwrap_or("_");
    let Some(rest) = pk
        .strip_prefix(EXPIRY_PARTITIONS)
        .and_then(|rest| rest.strip_prefix(kind))
        .and_then(|rest| rest.strip_prefix('.'))
    else {
        return false;
    };
    let Some((property, _hour)) = rest.rsplit_once('|') else {
        return false;
    };
    !property.contains('.') && Some(property) != expiry_property::<T>()
}

/// The hour `at` falls in, as the end of an expiry index PartitionKey
/// (`bucket::Period::Hour`'s stamp, made here: the schema lies below the
/// patterns).
fn hour_of(at: DateTime) -> String {
    let t = time::OffsetDateTime::from(at);
    let (y, m, d, h) = (t.year(), u8::from(t.month()), t.day(), t.hour());
    format!("{y:04}{m:02}{d:02}{h:02}")
}

/// The RowKey prefix of the index rows of entities expiring at `at`: the
/// time in ticks, so a partition reads in order of expiry.
fn index_row_start(at: DateTime) -> String {
    format!("{}{:019}|", crate::pending::EXPIRY_PREFIX, at.ticks())
}

/// When the row of `T` expires, if it does.
fn expires_at<T: TableEntity>(row: &Entity) -> Option<DateTime> {
    let expiry = expiry_of::<T>()?;
    match row.properties.get(expiry.property)? {
        Value::DateTime(at) => Some(match expiry.time_to_live {
            None => *at,
            Some(ttl) => at.saturating_add(ttl),
        }),
        _ => None,
    }
}

/// The expiry index row of `row`, an entity of `T` that expires: in the
/// partition of its hour of expiry, keyed by that time and a hash of the
/// entity's keys (which its properties hold). `None` for a row without an
/// expiry time.
pub(crate) fn index_row<T: TableEntity>(row: &Entity) -> Option<Entity> {
    use sha2::Digest;
    let at = expires_at::<T>(row)?;
    let mut hash = sha2::Sha256::new();
    hash.update(row.partition_key.as_bytes());
    hash.update([0]);
    hash.update(row.row_key.as_bytes());
    let hash = hash.finalize();
    let mut key = index_row_start(at);
    for byte in &hash[..16] {
        key.push_str(&format!("{byte:02x}"));
    }
    let partition = format!("{}{}", index_partitions::<T>(), hour_of(at));
    Some(
        Entity::new(partition, key)
            .with(EXPIRY_PK, row.partition_key.as_str())
            .with(EXPIRY_RK, row.row_key.as_str()),
    )
}

/// The condition that reads the expiry index rows of `T` that are due at
/// `now`: in the partitions of hours up to `now`'s, keyed at or before it.
pub(crate) fn due_filter<T: TableEntity>(now: DateTime) -> Filter {
    let start = index_partitions::<T>();
    let last = format!("{start}{}", hour_of(now));
    let next_tick = DateTime::from_ticks(now.ticks().saturating_add(1)).unwrap_or(now);
    Filter::partition_key().ge(start)
        & Filter::partition_key().le(last)
        & Filter::row_key().lt(index_row_start(next_tick))
}
