//! Property values: the store's EDM types.

use uuid::Uuid;

use crate::datetime::DateTime;
pub use crate::edm::EdmType;

/// One property value, typed as the store types it.
///
/// Equality treats two NaN doubles as equal (they are the same stored value);
/// otherwise doubles compare as IEEE numbers.
#[derive(Debug, Clone)]
pub enum Value {
    /// `Edm.String`.
    String(String),
    /// `Edm.Int32`.
    Int32(i32),
    /// `Edm.Int64`.
    Int64(i64),
    /// `Edm.Double`.
    Double(f64),
    /// `Edm.Boolean`.
    Boolean(bool),
    /// `Edm.DateTime`.
    DateTime(DateTime),
    /// `Edm.Guid`.
    Guid(Uuid),
    /// `Edm.Binary`.
    Binary(Vec<u8>),
}

impl Value {
    /// The value's EDM type.
    pub fn edm_type(&self) -> EdmType {
        match self {
            Value::String(_) => EdmType::String,
            Value::Int32(_) => EdmType::Int32,
            Value::Int64(_) => EdmType::Int64,
            Value::Double(_) => EdmType::Double,
            Value::Boolean(_) => EdmType::Boolean,
            Value::DateTime(_) => EdmType::DateTime,
            Value::Guid(_) => EdmType::Guid,
            Value::Binary(_) => EdmType::Binary,
        }
    }

    /// The string, if this is a `String` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if this is an `Int32` value.
    pub fn as_i32(&self) -> Option<i32> {
        match self {
            Value::Int32(v) => Some(*v),
            _ => None,
        }
    }

    /// The number, if this is an `Int64` value.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int64(v) => Some(*v),
            _ => None,
        }
    }

    /// The number, if this is a `Double` value.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The flag, if this is a `Boolean` value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Boolean(v) => Some(*v),
            _ => None,
        }
    }

    /// The time, if this is a `DateTime` value.
    pub fn as_datetime(&self) -> Option<DateTime> {
        match self {
            Value::DateTime(v) => Some(*v),
            _ => None,
        }
    }

    /// The GUID, if this is a `Guid` value.
    pub fn as_guid(&self) -> Option<Uuid> {
        match self {
            Value::Guid(v) => Some(*v),
            _ => None,
        }
    }

    /// The bytes, if this is a `Binary` value.
    pub fn as_binary(&self) -> Option<&[u8]> {
        match self {
            Value::Binary(v) => Some(v),
            _ => None,
        }
    }

    /// The size the service charges for this value in its entity-size formula:
    /// String `4 + 2·(UTF-16 units)`, Binary `4 + bytes`, DateTime 8, Guid 16,
    /// Double 8, Int32 4, Int64 8, Boolean 1.
    pub fn stored_size(&self) -> usize {
        self.as_value_ref().stored_size()
    }

    /// The value, borrowed.
    pub fn as_value_ref(&self) -> ValueRef<'_> {
        match self {
            Value::String(v) => ValueRef::String(v),
            Value::Int32(v) => ValueRef::Int32(*v),
            Value::Int64(v) => ValueRef::Int64(*v),
            Value::Double(v) => ValueRef::Double(*v),
            Value::Boolean(v) => ValueRef::Boolean(*v),
            Value::DateTime(v) => ValueRef::DateTime(*v),
            Value::Guid(v) => ValueRef::Guid(*v),
            Value::Binary(v) => ValueRef::Binary(v),
        }
    }
}

/// A property value that borrows its text or bytes: what a typed entity hands
/// to a `PropertySink` without copying its
/// fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// `Edm.String`.
    String(&'a str),
    /// `Edm.Int32`.
    Int32(i32),
    /// `Edm.Int64`.
    Int64(i64),
    /// `Edm.Double`.
    Double(f64),
    /// `Edm.Boolean`.
    Boolean(bool),
    /// `Edm.DateTime`.
    DateTime(DateTime),
    /// `Edm.Guid`.
    Guid(Uuid),
    /// `Edm.Binary`.
    Binary(&'a [u8]),
}

impl ValueRef<'_> {
    /// The value's EDM type.
    pub fn edm_type(self) -> EdmType {
        match self {
            ValueRef::String(_) => EdmType::String,
            ValueRef::Int32(_) => EdmType::Int32,
            ValueRef::Int64(_) => EdmType::Int64,
            ValueRef::Double(_) => EdmType::Double,
            ValueRef::Boolean(_) => EdmType::Boolean,
            ValueRef::DateTime(_) => EdmType::DateTime,
            ValueRef::Guid(_) => EdmType::Guid,
            ValueRef::Binary(_) => EdmType::Binary,
        }
    }

    /// An owned copy.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::String(v) => Value::String(v.to_owned()),
            ValueRef::Int32(v) => Value::Int32(v),
            ValueRef::Int64(v) => Value::Int64(v),
            ValueRef::Double(v) => Value::Double(v),
            ValueRef::Boolean(v) => Value::Boolean(v),
            ValueRef::DateTime(v) => Value::DateTime(v),
            ValueRef::Guid(v) => Value::Guid(v),
            ValueRef::Binary(v) => Value::Binary(v.to_vec()),
        }
    }

    /// The size the service charges for this value: see [`Value::stored_size`].
    pub fn stored_size(self) -> usize {
        match self {
            ValueRef::String(s) => 4 + 2 * crate::keyorder::utf16_len(s),
            ValueRef::Binary(b) => 4 + b.len(),
            ValueRef::DateTime(_) | ValueRef::Double(_) | ValueRef::Int64(_) => 8,
            ValueRef::Guid(_) => 16,
            ValueRef::Int32(_) => 4,
            ValueRef::Boolean(_) => 1,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Int32(a), Value::Int32(b)) => a == b,
            (Value::Int64(a), Value::Int64(b)) => a == b,
            (Value::Double(a), Value::Double(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Value::Boolean(a), Value::Boolean(b)) => a == b,
            (Value::DateTime(a), Value::DateTime(b)) => a == b,
            (Value::Guid(a), Value::Guid(b)) => a == b,
            (Value::Binary(a), Value::Binary(b)) => a == b,
            _ => false,
        }
    }
}

macro_rules! value_from {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for Value {
            fn from(v: $ty) -> Value {
                Value::$variant(v.into())
            }
        }
    )*};
}

value_from! {
    String => String,
    &str => String,
    i32 => Int32,
    i64 => Int64,
    f64 => Double,
    bool => Boolean,
    DateTime => DateTime,
    Uuid => Guid,
    Vec<u8> => Binary,
    &[u8] => Binary,
}
