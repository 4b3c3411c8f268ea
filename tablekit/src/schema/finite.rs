//! Finds the floats a `#[tablekit(json)]` field could not write: serde_json
//! writes NaN and the infinities as `null`, which reads back as another value
//! (`None`) or not at all (an `f64` from `null`). serde_json has no setting
//! that refuses them, and no maintained crate checks a value for them, so
//! this is written by hand: a serializer that reads the value through and
//! writes nothing, failing at the first float that is not finite.

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Serializer};

/// Whether every float in `value` is finite; the first one that is not, as
/// it would be written, otherwise.
pub(crate) fn check<T: Serialize + ?Sized>(value: &T) -> Result<(), NotFinite> {
    value.serialize(Check)
}

/// A float JSON cannot hold (or an error of the value's own `Serialize`).
#[derive(Debug)]
pub(crate) struct NotFinite(pub(crate) String);

impl fmt::Display for NotFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFinite {}

impl ser::Error for NotFinite {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        NotFinite(msg.to_string())
    }
}

/// The serializer that writes nothing.
struct Check;

type Done = Result<(), NotFinite>;

fn float(v: f64) -> Done {
    if v.is_finite() {
        Ok(())
    } else {
        Err(NotFinite(format!(
            "holds the float {v}, which JSON has no number for (it would be written as null)"
        )))
    }
}

/// Methods that take a plain value and check nothing.
macro_rules! plain {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method(self, _: $ty) -> Done {
            Ok(())
        }
    )*};
}

/// Methods that begin a compound value: its parts are checked one by one.
macro_rules! compound {
    ($($method:ident($($ty:ty),*)),* $(,)?) => {$(
        fn $method(self, $(_: $ty),*) -> Result<Check, NotFinite> {
            Ok(Check)
        }
    )*};
}

impl Serializer for Check {
    type Ok = ();
    type Error = NotFinite;
    type SerializeSeq = Check;
    type SerializeTuple = Check;
    type SerializeTupleStruct = Check;
    type SerializeTupleVariant = Check;
    type SerializeMap = Check;
    type SerializeStruct = Check;
    type SerializeStructVariant = Check;

    plain!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_f32(self, v: f32) -> Done {
        float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Done {
        float(v)
    }
    fn serialize_none(self) -> Done {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Done {
        value.serialize(Check)
    }
    fn serialize_unit(self) -> Done {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Done {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Done {
        value.serialize(Check)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Done {
        value.serialize(Check)
    }
    compound!(
        serialize_seq(Option<usize>),
        serialize_tuple(usize),
        serialize_tuple_struct(&'static str, usize),
        serialize_tuple_variant(&'static str, u32, &'static str, usize),
        serialize_map(Option<usize>),
        serialize_struct(&'static str, usize),
        serialize_struct_variant(&'static str, u32, &'static str, usize),
    );
}

/// The compound serializers: each part is checked as a value of its own.
macro_rules! parts {
    ($($trait:ident { $($method:ident($($skip:ty),*)),* }),* $(,)?) => {$(
        impl ser::$trait for Check {
            type Ok = ();
            type Error = NotFinite;
            $(
                fn $method<T: Serialize + ?Sized>(&mut self, $(_: $skip,)* value: &T) -> Done {
                    value.serialize(Check)
                }
            )*
            fn end(self) -> Done {
                Ok(())
            }
        }
    )*};
}

parts!(
    SerializeSeq { serialize_element() },
    SerializeTuple { serialize_element() },
    SerializeTupleStruct { serialize_field() },
    SerializeTupleVariant { serialize_field() },
    SerializeMap { serialize_key(), serialize_value() },
    SerializeStruct { serialize_field(&'static str) },
    SerializeStructVariant { serialize_field(&'static str) },
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    enum Shape {
        Circle { r: f64 },
        Pair(f32, f32),
        Wrapped(Option<f64>),
    }

    #[test]
    fn every_float_inside_is_looked_at() {
        assert!(check(&1.5).is_ok());
        assert!(check(&(1, "x", vec![Some(2.0_f32)])).is_ok());
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(check(&bad).is_err());
            assert!(check(&Some(bad)).is_err());
            assert!(check(&vec![0.0, bad]).is_err());
            assert!(check(&BTreeMap::from([("k", bad)])).is_err());
            assert!(check(&Shape::Circle { r: bad }).is_err());
            assert!(check(&Shape::Pair(0.0, bad as f32)).is_err());
            assert!(check(&Shape::Wrapped(Some(bad))).is_err());
        }
        assert!(check(&Shape::Wrapped(None)).is_ok());
        let message = check(&[f64::NAN]).unwrap_err().to_string();
        assert!(
            message.contains("NaN") && message.contains("null"),
            "{message}"
        );
    }
}
