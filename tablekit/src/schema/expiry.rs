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

/// The property that holds when each entity of a type expires (its
/// `#[tablekit(expires)]` field), as a part of its descriptor.
#[derive(Debug)]
pub struct Expiry {
    /// The stored name of the expiry time's property.
    pub property: &'static str,
}

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

/// The expiry property of `T` (for a projection, of its entity), if its
/// entities expire.
pub fn expiry_property<T: TableEntity>() -> Option<&'static str> {
    T::DESCRIPTOR
        .part_or_base::<Expiry>()
        .map(|part| part.property)
}

/// Whether the row of `T` whose properties are `props` has expired at
/// `now`: its expiry time is at or before `now`. A row without one (or
/// of a type whose entities do not expire) never expires.
pub fn expired<T: TableEntity, S: PropertySource + ?Sized>(props: &S, now: DateTime) -> bool {
    expiry_property::<T>()
        .and_then(|property| props.get(property))
        .is_some_and(|value| matches!(value, Value::DateTime(at) if *at <= now))
}

/// The condition a query of `T` adds so the store returns live rows
/// alone: not expired at `now` (a row without an expiry time passes, as a
/// comparison with a missing property is false); `None` for a type whose
/// entities do not expire.
pub fn live_filter<T: TableEntity>(now: DateTime) -> Option<Filter> {
    let property = expiry_property::<T>()?;
    Some(!prop(property).le(Value::DateTime(now)))
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

/// The hour `at` falls in, as the end of an expiry index PartitionKey.
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

/// The expiry time the row of `T` holds, if any.
fn expires_at<T: TableEntity>(row: &Entity) -> Option<DateTime> {
    match row.properties.get(expiry_property::<T>()?)? {
        Value::DateTime(at) => Some(*at),
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
