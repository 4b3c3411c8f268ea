//! Data series: a collection stored as one property per element, so one read
//! fetches the whole series and a merge updates one point.
//!
//! See [`Series`].

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;

use super::{
    ColumnType, FilterValue, PropertySink, PropertySource, PropertyValue, property_error,
    write_property,
};
use crate::entity::PropertyName;
use crate::error::{Error, InvalidInput, ValueError};
use crate::filter::{CompareOp, Filter};

/// A field type stored as a data series: `#[tablekit(series)]`.
///
/// Element properties are named `{field}_{index}` for a `Vec` or an array
/// (`Hourly_0` … `Hourly_23`) and `{field}_{key}` for a map with string keys
/// (`Daily_2024_03_01`). A `Vec` holds the elements `0..len` without gaps;
/// since a merge only writes what it sends, merging a shorter `Vec` keeps the
/// stored tail — replace to shrink.
///
/// **Missing elements.** An element of type `Option<T>` that is `None` is
/// stored as no property. Only an array's fixed length says where its
/// elements are, so only an array (`[Option<f64>; 24]`, an hourly reading
/// that may be missing) keeps `None` elements and reads them back. A `None`
/// element of a `Vec` or a map would read back missing (a shorter `Vec`, a
/// map without the key), so it is refused when written, with
/// [`InvalidInput::PropertyValue`](crate::InvalidInput::PropertyValue)
/// naming the series and the element, and nothing is stored.
///
/// **Map keys.** Each element is a property of its own, so `{field}_{key}`
/// must be a property name the store accepts: the key holds only letters
/// (any alphabet), digits and `_`, and the whole name is at most 255
/// characters. `2024_03_01`, `eu_west`, `Zürich` are keys; `2024-03-01`,
/// `eu west`, `a.b` and the empty key are not. A map with such a key is
/// refused when written, with
/// [`InvalidInput::PropertyValue`](crate::InvalidInput::PropertyValue)
/// naming the series and the key, and nothing is stored. A row holds at most 252
/// properties, so a map series has at most that many keys, less the
/// entity's other properties (`#[tablekit(wide)]` spreads more over
/// several rows).
///
/// ```
/// use std::collections::BTreeMap;
/// use tablekit::{Error, InvalidInput, TableEntity, schema};
///
/// #[derive(TableEntity)]
/// #[tablekit(table = "Meters")]
/// struct Meter {
///     #[tablekit(partition_key)]
///     site: String,
///     #[tablekit(series)]
///     daily: BTreeMap<String, f64>,
/// }
///
/// let mut daily = BTreeMap::from([("2024_03_01".to_string(), 1.5)]);
/// let meter = Meter { site: "north".into(), daily: daily.clone() };
/// assert!(schema::to_entity(&meter)?.properties.get("daily_2024_03_01").is_some());
///
/// daily.insert("2024-03-02".into(), 2.0);
/// let meter = Meter { site: "north".into(), daily };
/// assert!(matches!(
///     schema::to_json(&meter),
///     Err(Error::Invalid(InvalidInput::PropertyValue { property, .. })) if property == "daily"
/// ));
/// # Ok::<(), Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be stored as a series",
    label = "not a series",
    note = "a series is a `Vec<T>`, an array `[T; N]`, or a `BTreeMap<String, T>` / `HashMap<String, T>`, whose elements `T` are each stored as one property (numbers, text, bool, bytes, timestamps, UUIDs, or, in an array, options of these); a series of series is not stored: use `#[tablekit(json)]` for nested data"
)]
pub trait Series: Sized {
    /// The element type.
    type Element: PropertyValue;
    /// The number of properties, when the type fixes it (arrays).
    const FIXED_LEN: Option<usize>;
    /// Writes one property per element.
    fn write_series<S: PropertySink + ?Sized>(
        &self,
        name: &str,
        props: &mut S,
    ) -> Result<(), Error>;
    /// Reads the elements, taking their properties out of `props`.
    fn read_series<S: PropertySource + ?Sized>(name: &str, props: &mut S) -> Result<Self, Error>;
}

/// The property name of element `index` (or map key) of the series `name`.
pub fn element_name(name: &str, index: impl std::fmt::Display) -> String {
    format!("{name}_{index}")
}

/// Whether `property` is an element of the series `name`: `name_` then a
/// canonical decimal index (no sign, no leading zero), returned.
fn element_index(name: &str, property: &str) -> Option<usize> {
    let digits = property.strip_prefix(name)?.strip_prefix('_')?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if canonical { digits.parse().ok() } else { None }
}

/// Takes the elements of the series `name` out of `props` in one pass, in
/// index order, checked to be `0..n`.
fn take_elements<S: PropertySource + ?Sized>(
    name: &str,
    props: &mut S,
) -> Result<Vec<crate::value::Value>, Error> {
    let mut found: Vec<(usize, crate::value::Value)> = props
        .extract(&mut |property| element_index(name, property).is_some())
        .into_iter()
        .filter_map(|(property, value)| Some((element_index(name, &property)?, value)))
        .collect();
    found.sort_unstable_by_key(|(index, _)| *index);
    for (expected, (index, _)) in found.iter().enumerate() {
        if *index != expected {
            return Err(property_error(
                &element_name(name, expected),
                ValueError::Invalid(format!(
                    "series `{name}` has no element {expected} but has element {index}"
                )),
            ));
        }
    }
    Ok(found.into_iter().map(|(_, value)| value).collect())
}

/// Writes one property per element, named by its index. An element stored
/// as no property (a `None`) is refused unless `fixed`: only an array's
/// length says where its elements end, so only an array reads a missing
/// element back as `None`.
fn write_elements<T: PropertyValue, S: PropertySink + ?Sized>(
    items: &[T],
    name: &str,
    props: &mut S,
    fixed: bool,
) -> Result<(), Error> {
    for (i, v) in items.iter().enumerate() {
        if T::MAY_BE_ABSENT && !fixed {
            refuse_absent(name, v, || format!("element {i}"))?;
        }
        write_property(props, element_name(name, i), v)?;
    }
    Ok(())
}

/// Refuses an element of the series `name` that would be stored as no
/// property, naming it with `which`: it would read back missing.
fn refuse_absent<T: PropertyValue>(
    name: &str,
    value: &T,
    which: impl FnOnce() -> String,
) -> Result<(), Error> {
    if value.to_value().is_ok_and(|stored| stored.is_none()) {
        return Err(InvalidInput::PropertyValue {
            property: name.to_owned(),
            reason: format!(
                "{} is `None`, which is stored as no property and would read back missing: \
                 only an array series keeps `None` elements (its length says where they are); \
                 use an array, leave the element out, or use `#[tablekit(json)]`",
                which()
            ),
        }
        .into());
    }
    Ok(())
}

impl<T: PropertyValue> Series for Vec<T> {
    type Element = T;
    const FIXED_LEN: Option<usize> = None;
    fn write_series<S: PropertySink + ?Sized>(
        &self,
        name: &str,
        props: &mut S,
    ) -> Result<(), Error> {
        write_elements(self, name, props, false)
    }
    fn read_series<S: PropertySource + ?Sized>(name: &str, props: &mut S) -> Result<Self, Error> {
        take_elements(name, props)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                T::from_owned(Some(v))
                    .map_err(|problem| property_error(&element_name(name, i), problem))
            })
            .collect()
    }
}

/// An array is a `Vec` series whose length must be `N`. Its elements may
/// be `None` (stored as no property): the length says where they are.
impl<T: PropertyValue, const N: usize> Series for [T; N] {
    type Element = T;
    const FIXED_LEN: Option<usize> = Some(N);
    fn write_series<S: PropertySink + ?Sized>(
        &self,
        name: &str,
        props: &mut S,
    ) -> Result<(), Error> {
        write_elements(self, name, props, true)
    }
    fn read_series<S: PropertySource + ?Sized>(name: &str, props: &mut S) -> Result<Self, Error> {
        let items = if T::MAY_BE_ABSENT {
            read_sparse::<T, S>(name, props, N)?
        } else {
            Vec::<T>::read_series(name, props)?
        };
        let len = items.len();
        items.try_into().map_err(|_| {
            property_error(
                &element_name(name, len),
                ValueError::Invalid(format!("expected {N} elements, found {len}")),
            )
        })
    }
}

/// The `len` elements of the series `name`, an element with no property
/// read as absent (`None`); an element past `len` is an error.
fn read_sparse<T: PropertyValue, S: PropertySource + ?Sized>(
    name: &str,
    props: &mut S,
    len: usize,
) -> Result<Vec<T>, Error> {
    let mut values: Vec<Option<crate::value::Value>> = vec![None; len];
    let found = props.extract(&mut |property| element_index(name, property).is_some());
    for (property, value) in found {
        match element_index(name, &property) {
            Some(index) if index < len => values[index] = Some(value),
            _ => {
                return Err(property_error(
                    &property,
                    ValueError::Invalid(format!("series `{name}` has {len} elements")),
                ));
            }
        }
    }
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            T::from_owned(v).map_err(|problem| property_error(&element_name(name, i), problem))
        })
        .collect()
}

fn check_key(name: &str, key: &str) -> Result<(), Error> {
    if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(InvalidInput::PropertyValue {
            property: name.to_owned(),
            reason: format!("series key {key:?} must be letters, digits and `_` (it becomes part of a property name)"),
        }
        .into());
    }
    Ok(())
}

fn read_map<S: PropertySource + ?Sized, T: PropertyValue, M: FromIterator<(String, T)>>(
    name: &str,
    props: &mut S,
) -> Result<M, Error> {
    let prefix_len = name.len() + 1;
    props
        .extract(&mut |n| {
            n.len() > prefix_len && n.starts_with(name) && n.as_bytes()[name.len()] == b'_'
        })
        .into_iter()
        .map(|(property, value)| {
            let value =
                T::from_owned(Some(value)).map_err(|problem| property_error(&property, problem))?;
            Ok((property[prefix_len..].to_owned(), value))
        })
        .collect()
}

macro_rules! map_series {
    ($($map:ident),*) => {$(
        impl<T: PropertyValue> Series for $map<String, T> {
            type Element = T;
            const FIXED_LEN: Option<usize> = None;
            fn write_series<S: PropertySink + ?Sized>(&self, name: &str, props: &mut S) -> Result<(), Error> {
                for (key, v) in self {
                    check_key(name, key)?;
                    if T::MAY_BE_ABSENT {
                        refuse_absent(name, v, || format!("the element of key {key:?}"))?;
                    }
                    write_property(props, element_name(name, key), v)?;
                }
                Ok(())
            }
            fn read_series<S: PropertySource + ?Sized>(name: &str, props: &mut S) -> Result<Self, Error> {
                read_map(name, props)
            }
        }
    )*};
}

map_series!(BTreeMap, HashMap);

/// A series field of type `S` (a `Vec`, array or map), for typed filters
/// and merges on one element: `Meter::columns().hourly.at(5)`.
pub struct SeriesColumn<S> {
    name: &'static str,
    _type: PhantomData<fn() -> S>,
}

impl<S> Clone for SeriesColumn<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for SeriesColumn<S> {}

impl<S> std::fmt::Debug for SeriesColumn<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SeriesColumn({})", self.name)
    }
}

impl<S> SeriesColumn<S> {
    /// The series stored under `name`.
    pub const fn new(name: &'static str) -> SeriesColumn<S> {
        SeriesColumn {
            name,
            _type: PhantomData,
        }
    }

    /// The series' base name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl<S: Series> SeriesColumn<S> {
    /// Element `index` (or map key), for filters and [`crate::Table::merge_element`].
    pub fn at(&self, index: impl std::fmt::Display) -> Element<S::Element> {
        Element {
            name: element_name(self.name, index),
            _type: PhantomData,
        }
    }
}

/// One element of a series.
pub struct Element<E> {
    name: String,
    _type: PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for Element<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Element({})", self.name)
    }
}

impl<E> Element<E> {
    /// The element's property name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The property name, owned, for a write.
    pub(crate) fn property_name(&self) -> PropertyName {
        PropertyName::Owned(self.name.clone())
    }
}

/// Typed filters on one element: `Meter::columns().hourly.at(5).gt(100)`.
impl<V: ColumnType> Element<V> {
    /// `element op value`.
    pub fn compare(&self, op: CompareOp, value: impl Into<V::Arg>) -> Filter {
        value.into().compare(&self.name, op)
    }

    column_ops!(eq => Eq, ne => Ne, gt => Gt, ge => Ge, lt => Lt, le => Le);
}
