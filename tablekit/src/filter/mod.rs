//! Typed query filters, rendered to the OData `$filter` language.
//!
//! A filter is a tree, not a string: user values are literals in the tree and
//! are escaped when rendered (a `'` in a string is doubled, every other type has
//! its typed literal form), so no value can change a filter's structure.
//! [`Filter::parse`] reads the rendered form back, which the tests use to prove
//! that rendering is unambiguous.
//!
//! ```
//! use tablekit::filter::{prop, Filter};
//! let f = Filter::partition_key().eq("sales") & prop("Name").eq("O'Brien") & !prop("Age").lt(30);
//! assert_eq!(
//!     f.to_string(),
//!     "((PartitionKey eq 'sales') and (Name eq 'O''Brien')) and (not (Age lt 30))"
//! );
//! assert_eq!(Filter::parse(&f.to_string())?, f);
//! # Ok::<(), tablekit::InvalidInput>(())
//! ```

mod eval;
mod parse;

use std::fmt;

use crate::value::Value;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `eq`
    Eq,
    /// `ne`
    Ne,
    /// `gt`
    Gt,
    /// `ge`
    Ge,
    /// `lt`
    Lt,
    /// `le`
    Le,
}

impl CompareOp {
    /// The OData keyword.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
        }
    }

    /// The operator with its operands swapped (`5 lt X` is `X gt 5`).
    pub fn flipped(self) -> CompareOp {
        match self {
            CompareOp::Eq => CompareOp::Eq,
            CompareOp::Ne => CompareOp::Ne,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
        }
    }
}

/// A query filter: comparisons of a property with a typed constant, combined
/// with `and`, `or` and `not`. Build with [`prop`], [`Filter::partition_key`] and
/// [`Filter::row_key`], and combine with `&`, `|` and `!`.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `property op value`.
    Compare {
        /// The property (or `PartitionKey`, `RowKey`, `Timestamp`).
        property: String,
        /// The operator.
        op: CompareOp,
        /// The constant.
        value: Value,
    },
    /// Both must hold.
    And(Box<Filter>, Box<Filter>),
    /// Either must hold.
    Or(Box<Filter>, Box<Filter>),
    /// Must not hold.
    Not(Box<Filter>),
}

/// A property to compare, the start of a [`Filter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prop(String);

/// The property named `name`, to compare with a constant.
pub fn prop(name: impl Into<String>) -> Prop {
    Prop(name.into())
}

macro_rules! comparisons {
    ($($method:ident => $op:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        pub fn $method(self, value: impl Into<Value>) -> Filter {
            Filter::Compare { property: self.0, op: CompareOp::$op, value: value.into() }
        }
    )*};
}

impl Prop {
    comparisons! {
        eq => Eq, "`property eq value`";
        ne => Ne, "`property ne value`";
        gt => Gt, "`property gt value`";
        ge => Ge, "`property ge value`";
        lt => Lt, "`property lt value`";
        le => Le, "`property le value`";
    }

    /// `property op value`.
    pub fn compare(self, op: CompareOp, value: impl Into<Value>) -> Filter {
        Filter::Compare {
            property: self.0,
            op,
            value: value.into(),
        }
    }
}

impl Filter {
    /// The PartitionKey, to compare with a string.
    pub fn partition_key() -> Prop {
        prop("PartitionKey")
    }

    /// The RowKey, to compare with a string.
    pub fn row_key() -> Prop {
        prop("RowKey")
    }

    /// The server-set Timestamp, to compare with a [`crate::DateTime`].
    pub fn timestamp() -> Prop {
        prop("Timestamp")
    }

    /// `self and other`.
    pub fn and(self, other: Filter) -> Filter {
        Filter::And(Box::new(self), Box::new(other))
    }

    /// `self or other`.
    pub fn or(self, other: Filter) -> Filter {
        Filter::Or(Box::new(self), Box::new(other))
    }

    /// `not self`.
    pub fn negate(self) -> Filter {
        Filter::Not(Box::new(self))
    }

    /// How many comparisons the filter holds (the service allows 15).
    pub fn comparison_count(&self) -> usize {
        match self {
            Filter::Compare { .. } => 1,
            Filter::And(a, b) | Filter::Or(a, b) => a.comparison_count() + b.comparison_count(),
            Filter::Not(f) => f.comparison_count(),
        }
    }

    /// Parses an OData `$filter` string of the store's dialect.
    pub fn parse(text: &str) -> Result<Filter, crate::InvalidInput> {
        parse::parse(text)
    }

    /// Whether `entity` matches, by the service's rules: a comparison with a
    /// property the entity lacks is false (also `ne`); mismatched types follow
    /// AZURE_TABLE.md §5 (Int64 and Double properties compare numerically with
    /// integer constants; an Int32 property never matches an Int64 or Double
    /// constant; other mismatches make `eq`, `gt`, `ge` false and `ne`, `lt`,
    /// `le` true); strings compare by UTF-16 code units.
    pub fn matches(&self, entity: &crate::Entity) -> bool {
        eval::matches(self, entity)
    }
}

impl std::ops::BitAnd for Filter {
    type Output = Filter;
    fn bitand(self, rhs: Filter) -> Filter {
        self.and(rhs)
    }
}

impl std::ops::BitOr for Filter {
    type Output = Filter;
    fn bitor(self, rhs: Filter) -> Filter {
        self.or(rhs)
    }
}

impl std::ops::Not for Filter {
    type Output = Filter;
    fn not(self) -> Filter {
        self.negate()
    }
}

/// Renders the OData `$filter` text. Every operand of `and`, `or` and `not` is
/// parenthesised, so the text parses back to the same tree.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::Compare {
                property,
                op,
                value,
            } => {
                write!(f, "{property} {} ", op.as_str())?;
                write_literal(f, value)
            }
            Filter::And(a, b) => write!(f, "({a}) and ({b})"),
            Filter::Or(a, b) => write!(f, "({a}) or ({b})"),
            Filter::Not(inner) => write!(f, "not ({inner})"),
        }
    }
}

/// Writes a constant as an OData literal of its type.
pub fn write_literal(f: &mut impl fmt::Write, value: &Value) -> fmt::Result {
    match value {
        Value::String(s) => {
            f.write_char('\'')?;
            for part in s.split('\'').enumerate() {
                if part.0 > 0 {
                    f.write_str("''")?;
                }
                f.write_str(part.1)?;
            }
            f.write_char('\'')
        }
        Value::Int32(v) => write!(f, "{v}"),
        Value::Int64(v) => write!(f, "{v}L"),
        Value::Double(v) => write_double(f, *v),
        Value::Boolean(v) => write!(f, "{v}"),
        Value::DateTime(v) => write!(f, "datetime'{v}'"),
        Value::Guid(v) => write!(f, "guid'{}'", v.hyphenated()),
        Value::Binary(v) => {
            f.write_str("X'")?;
            for b in v {
                write!(f, "{b:02x}")?;
            }
            f.write_char('\'')
        }
    }
}

/// A double literal always has a decimal point or exponent, so it cannot be
/// read as an integer; the exponent is written `E+n`/`E-n` as OData spells it.
fn write_double(f: &mut impl fmt::Write, v: f64) -> fmt::Result {
    if v.is_nan() {
        return f.write_str("NaN");
    }
    if v.is_infinite() {
        return f.write_str(if v > 0.0 { "INF" } else { "-INF" });
    }
    // `{:?}` is the shortest text that reads back to the same bits.
    let text = format!("{v:?}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let mantissa = if mantissa.contains('.') {
                mantissa.to_owned()
            } else {
                format!("{mantissa}.0")
            };
            let exponent = if exponent.starts_with('-') {
                exponent.to_owned()
            } else {
                format!("+{exponent}")
            };
            write!(f, "{mantissa}E{exponent}")
        }
        None => f.write_str(&text),
    }
}

#[cfg(test)]
mod tests;
