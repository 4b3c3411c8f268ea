//! How field types become property values and back.

use super::{PropertySink, write_value};
use crate::datetime::DateTime;
use crate::entity::PropertyName;
use crate::error::{Error, ValueError};
use crate::filter::{CompareOp, Filter};
use crate::value::{Value, ValueRef};

/// A field type that is stored as one property.
///
/// | Rust | stored as |
/// | --- | --- |
/// | `String` | String |
/// | `bool` | Boolean |
/// | `i8` `i16` `i32` `u8` `u16` | Int32 |
/// | `u32` `i64` | Int64 |
/// | `u64` | Int64 holding the same 64 bits: values above `i64::MAX` read back exactly, but the store's own filters see them as negative |
/// | `f32` `f64` | Double |
/// | `Vec<u8>` | Binary |
/// | `uuid::Uuid` | Guid |
/// | [`DateTime`], `time::OffsetDateTime`, `chrono::DateTime<Utc>` (feature `chrono`) | DateTime; a time with digits finer than its 100 ns is refused, as it would read back as another ([`DateTime::from_unix_nanos`] truncates) |
/// | `Option<T>` | as `T`; `None` is an absent property (so `Some(None)` of an `Option<Option<T>>` is refused when written: it would read back as `None`) |
///
/// Reading accepts a lossless widening (an Int32 into an `i64` or `f64`
/// field); anything else of another type is a [`ValueError::WrongType`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be stored as a table property",
    label = "unsupported field type",
    note = "a property holds one value: a number, text, bool, bytes, a timestamp, a UUID, an enum deriving `TableValue`, or an `Option` of these; other types are stored with `#[tablekit(series)]` (a Vec, array or map of such values, one property each), `#[tablekit(json)]` (any serde type), `#[tablekit(with = module)]`, or `#[tablekit(flatten)]` (a struct deriving `TableFields`)"
)]
pub trait PropertyValue: Sized {
    /// Whether a value of the type may be stored as no property at all, as
    /// `Option`'s `None` is. Where no property would read back as another
    /// value (the `Some(None)` of an `Option<Option<T>>`, a `None` element of
    /// a `Vec` or map series), the value is refused when written instead of
    /// being stored as something else.
    const MAY_BE_ABSENT: bool = false;

    /// The value to store; `None` leaves the property out.
    fn to_value(&self) -> Result<Option<Value>, ValueError>;
    /// Reads the stored value (`None` when the property is absent).
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError>;

    /// Reads a stored value that the caller owns; types that hold a string or
    /// bytes take them over instead of copying.
    fn from_owned(value: Option<Value>) -> Result<Self, ValueError> {
        Self::from_value(value.as_ref())
    }

    /// Writes the value into `sink` as the property `name` (nothing when
    /// [`to_value`](PropertyValue::to_value) gives `None`). Types that hold
    /// text or bytes borrow them instead of copying.
    fn write_to<S: PropertySink + ?Sized>(
        &self,
        name: PropertyName,
        sink: &mut S,
    ) -> Result<(), Error> {
        write_value(sink, name, self.to_value())
    }
}

/// Why `Some` of a value stored as no property is refused.
const NESTED_NONE: &str = "`Some(None)` would be stored as no property, which reads back as `None`: \
     an `Option` of an `Option` cannot keep them apart (use one `Option`)";

fn wrong(expected: &'static str, found: &Value) -> ValueError {
    ValueError::WrongType {
        expected,
        found: found.edm_type(),
    }
}

fn present(value: Option<&Value>) -> Result<&Value, ValueError> {
    value.ok_or(ValueError::Missing)
}

/// `to_value` and `write_to` of a type stored as a scalar, from one
/// expression giving its borrowed value: the sink gets the value without a
/// [`Value`] being built.
macro_rules! scalar {
    (|$v:ident| $value:expr) => {
        fn to_value(&self) -> Result<Option<Value>, ValueError> {
            let $v = self;
            Ok(Some($value.to_value()))
        }
        fn write_to<S: PropertySink + ?Sized>(
            &self,
            name: PropertyName,
            sink: &mut S,
        ) -> Result<(), Error> {
            let $v = self;
            sink.push(name, $value)
        }
    };
}

impl PropertyValue for String {
    fn to_value(&self) -> Result<Option<Value>, ValueError> {
        Ok(Some(Value::String(self.clone())))
    }
    fn write_to<S: PropertySink + ?Sized>(
        &self,
        name: PropertyName,
        sink: &mut S,
    ) -> Result<(), Error> {
        sink.push(name, ValueRef::String(self))
    }
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::String(s) => Ok(s.clone()),
            other => Err(wrong("String", other)),
        }
    }
    #[inline]
    fn from_owned(value: Option<Value>) -> Result<Self, ValueError> {
        match value.ok_or(ValueError::Missing)? {
            Value::String(s) => Ok(s),
            other => Err(wrong("String", &other)),
        }
    }
}

/// Stored as the text given.
impl PropertyValue for crate::key::CaseInsensitive {
    fn to_value(&self) -> Result<Option<Value>, ValueError> {
        self.0.to_value()
    }
    fn write_to<S: PropertySink + ?Sized>(
        &self,
        name: PropertyName,
        sink: &mut S,
    ) -> Result<(), Error> {
        self.0.write_to(name, sink)
    }
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        String::from_value(value).map(crate::key::CaseInsensitive)
    }
    fn from_owned(value: Option<Value>) -> Result<Self, ValueError> {
        String::from_owned(value).map(crate::key::CaseInsensitive)
    }
}

impl PropertyValue for bool {
    scalar!(|v| ValueRef::Boolean(*v));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::Boolean(b) => Ok(*b),
            other => Err(wrong("Boolean", other)),
        }
    }
}

macro_rules! small_ints {
    ($($ty:ty),*) => {$(
        impl PropertyValue for $ty {
            scalar!(|v| ValueRef::Int32(i32::from(*v)));
            fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
                match present(value)? {
                    Value::Int32(v) => <$ty>::try_from(*v)
                        .map_err(|_| ValueError::Invalid(format!("{v} is out of range for {}", stringify!($ty)))),
                    other => Err(wrong("Int32", other)),
                }
            }
        }
    )*};
}

small_ints!(i8, i16, i32, u8, u16);

impl PropertyValue for i64 {
    scalar!(|v| ValueRef::Int64(*v));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::Int64(v) => Ok(*v),
            Value::Int32(v) => Ok(i64::from(*v)),
            other => Err(wrong("Int64", other)),
        }
    }
}

impl PropertyValue for u32 {
    scalar!(|v| ValueRef::Int64(i64::from(*v)));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        let v = i64::from_value(value)?;
        u32::try_from(v).map_err(|_| ValueError::Invalid(format!("{v} is out of range for u32")))
    }
}

/// The 64 bits as an Int64: lossless, but values above `i64::MAX` look negative
/// to the store's filters.
impl PropertyValue for u64 {
    scalar!(|v| ValueRef::Int64(*v as i64));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::Int64(v) => Ok(*v as u64),
            Value::Int32(v) => {
                u64::try_from(*v).map_err(|_| ValueError::Invalid(format!("{v} is negative")))
            }
            other => Err(wrong("Int64", other)),
        }
    }
}

impl PropertyValue for f64 {
    scalar!(|v| ValueRef::Double(*v));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::Double(v) => Ok(*v),
            Value::Int32(v) => Ok(f64::from(*v)),
            other => Err(wrong("Double", other)),
        }
    }
}

impl PropertyValue for f32 {
    scalar!(|v| ValueRef::Double(f64::from(*v)));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        let wide = f64::from_value(value)?;
        // `as` rounds to the nearest f32 (and overflows to infinity): accept
        // only values that come back to the same f64, NaN included.
        let narrow = wide as f32;
        if f64::from(narrow) == wide || wide.is_nan() {
            Ok(narrow)
        } else {
            Err(ValueError::Invalid(format!(
                "{wide:?} cannot be held exactly by an f32"
            )))
        }
    }
}

impl PropertyValue for Vec<u8> {
    fn to_value(&self) -> Result<Option<Value>, ValueError> {
        Ok(Some(Value::Binary(self.clone())))
    }
    fn write_to<S: PropertySink + ?Sized>(
        &self,
        name: PropertyName,
        sink: &mut S,
    ) -> Result<(), Error> {
        sink.push(name, ValueRef::Binary(self))
    }
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::Binary(b) => Ok(b.clone()),
            other => Err(wrong("Binary", other)),
        }
    }
    fn from_owned(value: Option<Value>) -> Result<Self, ValueError> {
        match value.ok_or(ValueError::Missing)? {
            Value::Binary(b) => Ok(b),
            other => Err(wrong("Binary", &other)),
        }
    }
}

impl PropertyValue for uuid::Uuid {
    scalar!(|v| ValueRef::Guid(*v));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::Guid(g) => Ok(*g),
            other => Err(wrong("Guid", other)),
        }
    }
}

impl PropertyValue for DateTime {
    scalar!(|v| ValueRef::DateTime(*v));
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match present(value)? {
            Value::DateTime(t) => Ok(*t),
            other => Err(wrong("DateTime", other)),
        }
    }
}

impl PropertyValue for time::OffsetDateTime {
    fn to_value(&self) -> Result<Option<Value>, ValueError> {
        let t = DateTime::try_from(*self).map_err(|e| ValueError::Invalid(e.to_string()))?;
        Ok(Some(Value::DateTime(t)))
    }
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        Ok(DateTime::from_value(value)?.into())
    }
}

/// `Edm.DateTime`. Needs the `chrono` feature.
#[cfg(feature = "chrono")]
impl PropertyValue for chrono::DateTime<chrono::Utc> {
    fn to_value(&self) -> Result<Option<Value>, ValueError> {
        let t = DateTime::from_unix_nanos_exact(chrono_nanos(self))
            .map_err(|e| ValueError::Invalid(e.to_string()))?;
        Ok(Some(Value::DateTime(t)))
    }
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        let nanos = DateTime::from_value(value)?.unix_nanos();
        let secs = nanos.div_euclid(1_000_000_000) as i64;
        let sub = nanos.rem_euclid(1_000_000_000) as u32;
        chrono::DateTime::from_timestamp(secs, sub)
            .ok_or_else(|| ValueError::Invalid("out of chrono's range".into()))
    }
}

impl<T: PropertyValue> PropertyValue for Option<T> {
    const MAY_BE_ABSENT: bool = true;

    fn to_value(&self) -> Result<Option<Value>, ValueError> {
        match self {
            Some(v) => match v.to_value()? {
                // `Some` of a value stored as nothing would read back as `None`.
                None => Err(ValueError::Invalid(NESTED_NONE.to_owned())),
                stored => Ok(stored),
            },
            None => Ok(None),
        }
    }
    fn write_to<S: PropertySink + ?Sized>(
        &self,
        name: PropertyName,
        sink: &mut S,
    ) -> Result<(), Error> {
        match self {
            // Only an inner type that may be absent needs the check above.
            Some(_) if T::MAY_BE_ABSENT => write_value(sink, name, self.to_value()),
            Some(v) => v.write_to(name, sink),
            None => Ok(()),
        }
    }
    fn from_value(value: Option<&Value>) -> Result<Self, ValueError> {
        match value {
            Some(_) => T::from_value(value).map(Some),
            None => Ok(None),
        }
    }
    fn from_owned(value: Option<Value>) -> Result<Self, ValueError> {
        match value {
            Some(v) => T::from_owned(Some(v)).map(Some),
            None => Ok(None),
        }
    }
}

/// The Unix time of a chrono time in nanoseconds, at any date chrono holds.
#[cfg(feature = "chrono")]
fn chrono_nanos(t: &chrono::DateTime<chrono::Utc>) -> i128 {
    t.timestamp_nanos_opt().map(i128::from).unwrap_or_else(|| {
        i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos())
    })
}

/// A type that can be the constant of a typed filter on a field
/// ([`crate::schema::Column`]).
pub trait FilterValue {
    /// The constant as the field stores it.
    fn filter_value(&self) -> Value;

    /// The filter `property op self`: the comparison with
    /// [`filter_value`](FilterValue::filter_value). A type with values the
    /// store cannot hold exactly (a time finer than 100 ns, or outside
    /// 1601–9999) gives instead the comparison that holds for exactly the
    /// stored values `stored op self` holds for.
    fn compare(&self, property: &str, op: CompareOp) -> Filter {
        Filter::Compare {
            property: property.to_owned(),
            op,
            value: self.filter_value(),
        }
    }
}

/// `property op t` for a time `t` in Unix nanoseconds that the store may
/// not hold: stored times are whole 100 ns ticks from [`DateTime::MIN`] to
/// [`DateTime::MAX`], so `t` between two ticks, or past either end,
/// compares with them as the nearest tick does in the right direction, and
/// `eq` (`ne`) holds for none (all) of them.
fn time_compare(property: &str, op: CompareOp, nanos: i128) -> Filter {
    use CompareOp::{Eq, Ge, Gt, Le, Lt, Ne};
    let compare = |op, t: DateTime| Filter::Compare {
        property: property.to_owned(),
        op,
        value: Value::DateTime(t),
    };
    // No stored time is below MIN or above MAX.
    let (none, all) = (compare(Lt, DateTime::MIN), compare(Ge, DateTime::MIN));
    if nanos < DateTime::MIN.unix_nanos() {
        return match op {
            Gt | Ge | Ne => all,
            Lt | Le | Eq => none,
        };
    }
    if nanos > DateTime::MAX.unix_nanos() {
        return match op {
            Lt | Le | Ne => all,
            Gt | Ge | Eq => none,
        };
    }
    let Ok(floor) = DateTime::from_unix_nanos(nanos) else {
        return none;
    };
    if floor.unix_nanos() == nanos {
        return compare(op, floor);
    }
    // floor < t < the next tick: a stored time is above t when it is above
    // floor, and below t when it is at most floor.
    match op {
        Eq => none,
        Ne => all,
        Gt | Ge => compare(Gt, floor),
        Lt | Le => compare(Le, floor),
    }
}

macro_rules! filter_values {
    ($($ty:ty => |$v:ident| $e:expr),* $(,)?) => {$(
        impl FilterValue for $ty {
            fn filter_value(&self) -> Value {
                let $v = self;
                $e
            }
        }
    )*};
}

filter_values! {
    String => |v| Value::String(v.clone()),
    crate::key::CaseInsensitive => |v| Value::String(v.0.clone()),
    bool => |v| Value::Boolean(*v),
    i8 => |v| Value::Int32(i32::from(*v)),
    i16 => |v| Value::Int32(i32::from(*v)),
    i32 => |v| Value::Int32(*v),
    u8 => |v| Value::Int32(i32::from(*v)),
    u16 => |v| Value::Int32(i32::from(*v)),
    u32 => |v| Value::Int64(i64::from(*v)),
    i64 => |v| Value::Int64(*v),
    u64 => |v| Value::Int64(*v as i64),
    f32 => |v| Value::Double(f64::from(*v)),
    f64 => |v| Value::Double(*v),
    Vec<u8> => |v| Value::Binary(v.clone()),
    uuid::Uuid => |v| Value::Guid(*v),
    DateTime => |v| Value::DateTime(*v),
}

/// Compared as `Edm.DateTime`, exactly: a time the store cannot hold (finer
/// than 100 ns, or outside 1601–9999) matches the stored times it should
/// ([`FilterValue::compare`]).
impl FilterValue for time::OffsetDateTime {
    fn filter_value(&self) -> Value {
        let nanos = self.unix_timestamp_nanos();
        let t = DateTime::from_unix_nanos(nanos).unwrap_or(if nanos < 0 {
            DateTime::MIN
        } else {
            DateTime::MAX
        });
        Value::DateTime(t)
    }

    fn compare(&self, property: &str, op: CompareOp) -> Filter {
        time_compare(property, op, self.unix_timestamp_nanos())
    }
}

/// Compared as `Edm.DateTime`, exactly, as `time::OffsetDateTime` is.
/// Needs the `chrono` feature.
#[cfg(feature = "chrono")]
impl FilterValue for chrono::DateTime<chrono::Utc> {
    fn filter_value(&self) -> Value {
        let system: std::time::SystemTime = (*self).into();
        Value::DateTime(DateTime::from(system))
    }

    fn compare(&self, property: &str, op: CompareOp) -> Filter {
        time_compare(property, op, chrono_nanos(self))
    }
}

/// The type of a field as seen by filters: the field's type, or `T` for an
/// `Option<T>` field.
pub trait ColumnType {
    /// The type of the constants the field is compared with.
    type Arg: FilterValue;
}

impl<T: FilterValue> ColumnType for T {
    type Arg = T;
}

impl<T: FilterValue> ColumnType for Option<T> {
    type Arg = T;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips_and_range_is_checked() {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_600_000_000_123_456_700).unwrap();
        let stored = t.to_value().unwrap();
        assert_eq!(
            time::OffsetDateTime::from_value(stored.as_ref()).unwrap(),
            t
        );
        let too_early = time::OffsetDateTime::from_unix_timestamp(-20_000_000_000).unwrap();
        assert!(matches!(too_early.to_value(), Err(ValueError::Invalid(_))));
    }

    #[test]
    fn widening_reads_and_wrong_types() {
        assert_eq!(i64::from_value(Some(&Value::Int32(-5))).unwrap(), -5);
        assert_eq!(f64::from_value(Some(&Value::Int32(2))).unwrap(), 2.0);
        assert_eq!(u64::from_value(Some(&Value::Int64(-1))).unwrap(), u64::MAX);
        assert!(matches!(
            i8::from_value(Some(&Value::Int32(300))),
            Err(ValueError::Invalid(_))
        ));
        assert!(matches!(
            String::from_value(Some(&Value::Int32(1))),
            Err(ValueError::WrongType { .. })
        ));
        assert!(matches!(String::from_value(None), Err(ValueError::Missing)));
        assert_eq!(Option::<String>::from_owned(None).unwrap(), None);
    }

    /// An f32 takes a Double only when it holds the very same value.
    #[test]
    fn f32_refuses_what_it_cannot_hold_exactly() {
        for exact in [
            0.5,
            -1.25,
            0.0,
            -0.0,
            1e30_f32 as f64,
            f64::INFINITY,
            16_777_216.0,
        ] {
            let read = f32::from_value(Some(&Value::Double(exact))).unwrap();
            assert_eq!(f64::from(read), exact);
        }
        assert!(
            f32::from_value(Some(&Value::Double(f64::NAN)))
                .unwrap()
                .is_nan()
        );
        assert_eq!(f32::from_value(Some(&Value::Int32(-7))).unwrap(), -7.0);
        for lossy in [
            Value::Double(0.1),
            Value::Double(1e300),
            Value::Double(1e-50),
            Value::Int32(16_777_217),
        ] {
            assert!(
                matches!(f32::from_value(Some(&lossy)), Err(ValueError::Invalid(_))),
                "{lossy:?}"
            );
        }
        for v in [0.1_f32, f32::MAX, f32::MIN_POSITIVE, 3.4028235e38] {
            let stored = v.to_value().unwrap();
            assert_eq!(f32::from_value(stored.as_ref()).unwrap(), v, "round trip");
        }
    }

    /// A time with digits finer than the store's 100 ns would read back as
    /// another: refused, with the way to truncate it named.
    #[test]
    fn times_finer_than_a_tick_are_refused() {
        let fine =
            time::OffsetDateTime::from_unix_timestamp_nanos(1_600_000_000_123_456_789).unwrap();
        match fine.to_value() {
            Err(ValueError::Invalid(why)) => assert!(why.contains("100 ns"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(DateTime::try_from(fine).is_err());
        let stored = DateTime::from_unix_nanos(fine.unix_timestamp_nanos()).unwrap();
        assert_eq!(
            stored.unix_nanos(),
            1_600_000_000_123_456_700,
            "truncated on request"
        );
        #[cfg(feature = "chrono")]
        {
            let fine = chrono::DateTime::from_timestamp(1_600_000_000, 123_456_789).unwrap();
            assert!(matches!(fine.to_value(), Err(ValueError::Invalid(_))));
        }
    }

    use proptest::prelude::*;

    proptest::proptest! {
        /// Whatever the constant (between two ticks, on one, before 1601 or
        /// after 9999), a time filter holds for exactly the stored times the
        /// comparison holds for.
        #[test]
        fn time_filters_match_what_the_comparison_says(
            stored_tick in proptest::prop_oneof![
                Just(0i64), Just(1), Just(2), -3i64..3, any::<i64>(),
            ],
            offset in -350i128..350,
            near_min in any::<bool>(),
            near_max in any::<bool>(),
            op in proptest::sample::select(vec![
                CompareOp::Eq, CompareOp::Ne, CompareOp::Gt,
                CompareOp::Ge, CompareOp::Lt, CompareOp::Le,
            ]),
        ) {
            let (min, max) = (DateTime::MIN.ticks(), DateTime::MAX.ticks());
            let base = if near_min { min } else if near_max { max } else { (min + max) / 2 };
            let ticks = base.saturating_add(stored_tick % 4).clamp(min, max);
            let stored = DateTime::from_ticks(ticks).unwrap();
            let t = DateTime::from_ticks(base).unwrap().unix_nanos() + offset;
            let filter = time_compare("T", op, t);
            let entity = crate::entity::Entity::new("p", "r").with("T", Value::DateTime(stored));
            let s = stored.unix_nanos();
            let expected = match op {
                CompareOp::Eq => s == t,
                CompareOp::Ne => s != t,
                CompareOp::Gt => s > t,
                CompareOp::Ge => s >= t,
                CompareOp::Lt => s < t,
                CompareOp::Le => s <= t,
            };
            prop_assert_eq!(filter.matches(&entity), expected, "{} {:?} {}: {}", s, op, t, filter);
            // The filter's text reads back as the same filter.
            prop_assert_eq!(Filter::parse(&filter.to_string()).unwrap(), filter);
        }
    }

    #[cfg(feature = "chrono")]
    #[test]
    fn chrono_round_trips() {
        let t = chrono::DateTime::from_timestamp(1_600_000_000, 123_456_700).unwrap();
        let stored = t.to_value().unwrap();
        assert_eq!(
            stored,
            Some(Value::DateTime(
                DateTime::from_unix_nanos(1_600_000_000_123_456_700).unwrap()
            ))
        );
        assert_eq!(
            chrono::DateTime::<chrono::Utc>::from_value(stored.as_ref()).unwrap(),
            t
        );
        assert_eq!(t.filter_value(), stored.unwrap());
    }
}
