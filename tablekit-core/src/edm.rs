//! The names of the store's property types, apart from the values so that
//! errors can name a type without depending on values.

use std::fmt;

/// The store's property types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EdmType {
    /// `Edm.String`: UTF-16 text.
    String,
    /// `Edm.Int32`.
    Int32,
    /// `Edm.Int64`.
    Int64,
    /// `Edm.Double`: IEEE 754 binary64, NaN and ±Infinity included.
    Double,
    /// `Edm.Boolean`.
    Boolean,
    /// `Edm.DateTime`: UTC, 100 ns ticks.
    DateTime,
    /// `Edm.Guid`.
    Guid,
    /// `Edm.Binary`: bytes.
    Binary,
}

impl EdmType {
    /// The type's name in the `@odata.type` annotation (`Edm.Int64`).
    pub fn as_str(self) -> &'static str {
        match self {
            EdmType::String => "Edm.String",
            EdmType::Int32 => "Edm.Int32",
            EdmType::Int64 => "Edm.Int64",
            EdmType::Double => "Edm.Double",
            EdmType::Boolean => "Edm.Boolean",
            EdmType::DateTime => "Edm.DateTime",
            EdmType::Guid => "Edm.Guid",
            EdmType::Binary => "Edm.Binary",
        }
    }

    /// The type named by an `@odata.type` annotation, if it is one the store supports.
    pub fn from_annotation(name: &str) -> Option<EdmType> {
        Some(match name {
            "Edm.String" => EdmType::String,
            "Edm.Int32" => EdmType::Int32,
            "Edm.Int64" => EdmType::Int64,
            "Edm.Double" => EdmType::Double,
            "Edm.Boolean" => EdmType::Boolean,
            "Edm.DateTime" => EdmType::DateTime,
            "Edm.Guid" => EdmType::Guid,
            "Edm.Binary" => EdmType::Binary,
            _ => return None,
        })
    }
}

impl fmt::Display for EdmType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
