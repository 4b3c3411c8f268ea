//! Rows that expire: the property that says when an entity of a type
//! expires (its `#[tablekit(expires)]` field), and the test every typed
//! read applies. The reads themselves are the typed client's: a query
//! asks the store for live rows alone ([`live_filter`]); a point read
//! checks the row it got ([`expired`]).

use super::{DescriptorPart, TableEntity};
use crate::datetime::DateTime;
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
