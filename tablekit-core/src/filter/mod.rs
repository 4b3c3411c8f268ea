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
pub use eval::RowView;
mod parse;

use std::fmt;
use std::ops::Bound;

use crate::keyorder::cmp_utf16;
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
    /// Every operator, in declaration order.
    pub const ALL: [CompareOp; 6] = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Gt,
        CompareOp::Ge,
        CompareOp::Lt,
        CompareOp::Le,
    ];

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
///
/// However deep a tree is built, dropping, cloning, comparing, counting and
/// rendering it never recurse, so they cannot overflow the stack; a backend
/// refuses a tree deeper than [`MAX_FILTER_DEPTH`](crate::validate::limits::MAX_FILTER_DEPTH)
/// or with more comparisons than the service allows before anything is sent.
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

/// A range of key strings in the store's order ([`crate::keyorder::cmp_utf16`]),
/// as [`Filter::key_range`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange<'a> {
    /// The lowest key allowed.
    pub lower: Bound<&'a str>,
    /// The highest key allowed.
    pub upper: Bound<&'a str>,
}

impl<'a> KeyRange<'a> {
    /// Every key.
    pub fn all() -> KeyRange<'a> {
        KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    /// Narrows the range to the keys that `key op value` allows (`ne` allows
    /// keys on both sides, so it leaves the range as it is).
    pub fn tighten(&mut self, op: CompareOp, value: &'a str) {
        let (lower, upper) = match op {
            CompareOp::Eq => (Bound::Included(value), Bound::Included(value)),
            CompareOp::Ge => (Bound::Included(value), Bound::Unbounded),
            CompareOp::Gt => (Bound::Excluded(value), Bound::Unbounded),
            CompareOp::Le => (Bound::Unbounded, Bound::Included(value)),
            CompareOp::Lt => (Bound::Unbounded, Bound::Excluded(value)),
            CompareOp::Ne => return,
        };
        *self = self.intersect(KeyRange { lower, upper });
    }

    /// The keys both ranges allow.
    pub fn intersect(mut self, other: KeyRange<'a>) -> KeyRange<'a> {
        if lower_is_tighter(other.lower, self.lower) {
            self.lower = other.lower;
        }
        if upper_is_tighter(other.upper, self.upper) {
            self.upper = other.upper;
        }
        self
    }

    /// Whether no key lies in the range.
    pub fn is_empty(&self) -> bool {
        use std::cmp::Ordering::*;
        match (self.lower, self.upper) {
            (Bound::Included(l), Bound::Included(u)) => cmp_utf16(l, u) == Greater,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
            | (Bound::Excluded(l), Bound::Included(u)) => cmp_utf16(l, u) != Less,
            _ => false,
        }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &str) -> bool {
        use std::cmp::Ordering::*;
        let above = match self.lower {
            Bound::Unbounded => true,
            Bound::Included(l) => cmp_utf16(key, l) != Less,
            Bound::Excluded(l) => cmp_utf16(key, l) == Greater,
        };
        let below = match self.upper {
            Bound::Unbounded => true,
            Bound::Included(u) => cmp_utf16(key, u) != Greater,
            Bound::Excluded(u) => cmp_utf16(key, u) == Less,
        };
        above && below
    }

    /// The single key the range holds, if it is `[k, k]`.
    pub fn single(&self) -> Option<&'a str> {
        match (self.lower, self.upper) {
            (Bound::Included(l), Bound::Included(u)) if l == u => Some(l),
            _ => None,
        }
    }
}

/// Whether lower bound `a` lets fewer keys through than `b`.
fn lower_is_tighter(a: Bound<&str>, b: Bound<&str>) -> bool {
    is_tighter(a, b, std::cmp::Ordering::Greater)
}

/// Whether upper bound `a` lets fewer keys through than `b`.
fn upper_is_tighter(a: Bound<&str>, b: Bound<&str>) -> bool {
    is_tighter(a, b, std::cmp::Ordering::Less)
}

/// Whether bound `a` lets fewer keys through than `b`, for bounds on the
/// side where a tighter key compares `inward` (`Greater` for lower bounds).
fn is_tighter(a: Bound<&str>, b: Bound<&str>, inward: std::cmp::Ordering) -> bool {
    match (a, b) {
        (Bound::Unbounded, _) => false,
        (_, Bound::Unbounded) => true,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match cmp_utf16(x, y) {
                std::cmp::Ordering::Equal => {
                    matches!((a, b), (Bound::Excluded(_), Bound::Included(_)))
                }
                order => order == inward,
            }
        }
    }
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
        self.nodes()
            .filter(|(node, _)| node.is_comparison())
            .count()
    }

    /// How deeply the tree nests: 1 for a single comparison, one more for
    /// each `and`, `or` or `not` above it.
    pub fn depth(&self) -> usize {
        self.nodes().map(|(_, depth)| depth).max().unwrap_or(1)
    }

    /// Every comparison of the filter, left to right.
    pub fn comparisons(&self) -> impl Iterator<Item = (&str, CompareOp, &Value)> {
        self.nodes().filter_map(|(node, _)| match node {
            Filter::Compare {
                property,
                op,
                value,
            } => Some((property.as_str(), *op, value)),
            _ => None,
        })
    }

    /// The range of `key` (`"PartitionKey"` or `"RowKey"`) that the string
    /// comparisons joined by `and` at the top of the filter allow; anything
    /// under an `or` or `not` is left out, so every matching entity lies
    /// inside the range (which may be wider than needed).
    ///
    /// ```
    /// use std::ops::Bound;
    /// use tablekit::filter::{Filter, prop};
    /// let f = Filter::partition_key().ge("b") & prop("Age").gt(3) & Filter::partition_key().lt("d");
    /// let range = f.key_range("PartitionKey");
    /// assert_eq!((range.lower, range.upper), (Bound::Included("b"), Bound::Excluded("d")));
    /// ```
    pub fn key_range(&self, key: &str) -> KeyRange<'_> {
        let mut range = KeyRange::all();
        let mut conjuncts = vec![self];
        while let Some(node) = conjuncts.pop() {
            match node {
                Filter::And(a, b) => conjuncts.extend([&**b, &**a]),
                Filter::Compare {
                    property,
                    op,
                    value: Value::String(v),
                } if property == key => range.tighten(*op, v),
                _ => {}
            }
        }
        range
    }

    fn is_comparison(&self) -> bool {
        matches!(self, Filter::Compare { .. })
    }

    /// The operands of an `and`, `or` or `not`.
    fn children(&self) -> (Option<&Filter>, Option<&Filter>) {
        match self {
            Filter::Compare { .. } => (None, None),
            Filter::And(a, b) | Filter::Or(a, b) => (Some(a), Some(b)),
            Filter::Not(a) => (Some(a), None),
        }
    }

    /// Every node with its depth (1 at the root), in prefix order, walked
    /// with a stack of its own rather than by recursion.
    fn nodes(&self) -> impl Iterator<Item = (&Filter, usize)> {
        let mut stack = vec![(self, 1)];
        std::iter::from_fn(move || {
            let (node, depth) = stack.pop()?;
            let (a, b) = node.children();
            stack.extend(b.map(|b| (b, depth + 1)));
            stack.extend(a.map(|a| (a, depth + 1)));
            Some((node, depth))
        })
    }

    /// Parses an OData `$filter` string of the store's dialect.
    pub fn parse(text: &str) -> Result<Filter, crate::error::InvalidInput> {
        parse::parse(text)
    }

    /// Whether `entity` matches, by the service's rules: a comparison with a
    /// property the entity lacks is false (also `ne`); mismatched types follow
    /// the service (Int64 and Double properties compare numerically with
    /// integer constants; an Int32 property never matches an Int64 or Double
    /// constant; other mismatches make `eq`, `gt`, `ge` false and `ne`, `lt`,
    /// `le` true); strings compare by UTF-16 code units.
    pub fn matches(&self, entity: &crate::entity::Entity) -> bool {
        eval::matches(self, &RowView::from(entity))
    }

    /// [`matches`](Filter::matches) of a row seen through a [`RowView`]
    /// (borrowed, as a backend passes it by reference).
    pub fn matches_row(&self, row: &RowView<'_>) -> bool {
        eval::matches(self, row)
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
///
/// This is the text as built: property names are written as they are. The
/// backends render a filter only after [`crate::backend::checks::query`] has checked
/// every name, so no name can change a request's structure; text meant for a
/// request of your own should go through that check too.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// What is left to write, last first.
        enum Step<'a> {
            Node(&'a Filter),
            Text(&'static str),
        }
        let mut steps = vec![Step::Node(self)];
        while let Some(step) = steps.pop() {
            match step {
                Step::Text(text) => f.write_str(text)?,
                Step::Node(Filter::Compare {
                    property,
                    op,
                    value,
                }) => {
                    write!(f, "{property} {} ", op.as_str())?;
                    write_literal(f, value)?;
                }
                Step::Node(Filter::And(a, b) | Filter::Or(a, b)) => {
                    let joint = if matches!(step, Step::Node(Filter::And(..))) {
                        ") and ("
                    } else {
                        ") or ("
                    };
                    steps.extend([
                        Step::Text(")"),
                        Step::Node(b),
                        Step::Text(joint),
                        Step::Node(a),
                        Step::Text("("),
                    ]);
                }
                Step::Node(Filter::Not(inner)) => {
                    steps.extend([Step::Text(")"), Step::Node(inner), Step::Text("not (")]);
                }
            }
        }
        Ok(())
    }
}

/// Shows the rendered filter.
impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Filter({self})")
    }
}

/// A leaf that owns nothing, to move a subtree out in its place.
fn placeholder() -> Filter {
    Filter::Compare {
        property: String::new(),
        op: CompareOp::Eq,
        value: Value::Boolean(false),
    }
}

/// Takes a node's operands out, leaving placeholders.
fn take_children(node: &mut Filter, out: &mut Vec<Filter>) {
    match node {
        Filter::Compare { .. } => {}
        Filter::And(a, b) | Filter::Or(a, b) => {
            out.push(std::mem::replace(&mut **a, placeholder()));
            out.push(std::mem::replace(&mut **b, placeholder()));
        }
        Filter::Not(a) => out.push(std::mem::replace(&mut **a, placeholder())),
    }
}

/// Drops without recursion: a tree of any depth is taken apart node by node.
impl Drop for Filter {
    fn drop(&mut self) {
        if self.is_comparison() {
            return;
        }
        let mut pending = Vec::new();
        take_children(self, &mut pending);
        while let Some(mut node) = pending.pop() {
            take_children(&mut node, &mut pending);
        }
    }
}

/// Clones without recursion.
impl Clone for Filter {
    fn clone(&self) -> Filter {
        // Nodes in prefix order, rebuilt from the last: each operator takes
        // its operands, already built, from the top of `built`.
        let order: Vec<&Filter> = self.nodes().map(|(node, _)| node).collect();
        let mut built: Vec<Filter> = Vec::with_capacity(order.len());
        for node in order.into_iter().rev() {
            let copy = match node {
                Filter::Compare {
                    property,
                    op,
                    value,
                } => Filter::Compare {
                    property: property.clone(),
                    op: *op,
                    value: value.clone(),
                },
                Filter::Not(_) => Filter::Not(Box::new(built.pop().unwrap_or_else(placeholder))),
                Filter::And(..) | Filter::Or(..) => {
                    let a = built.pop().unwrap_or_else(placeholder);
                    let b = built.pop().unwrap_or_else(placeholder);
                    if matches!(node, Filter::And(..)) {
                        Filter::And(Box::new(a), Box::new(b))
                    } else {
                        Filter::Or(Box::new(a), Box::new(b))
                    }
                }
            };
            built.push(copy);
        }
        built.pop().unwrap_or_else(placeholder)
    }
}

/// Compares without recursion.
impl PartialEq for Filter {
    fn eq(&self, other: &Filter) -> bool {
        let mut pairs = vec![(self, other)];
        while let Some(pair) = pairs.pop() {
            match pair {
                (
                    Filter::Compare {
                        property: p1,
                        op: o1,
                        value: v1,
                    },
                    Filter::Compare {
                        property: p2,
                        op: o2,
                        value: v2,
                    },
                ) => {
                    if p1 != p2 || o1 != o2 || v1 != v2 {
                        return false;
                    }
                }
                (Filter::And(a1, b1), Filter::And(a2, b2))
                | (Filter::Or(a1, b1), Filter::Or(a2, b2)) => {
                    pairs.push((b1, b2));
                    pairs.push((a1, a2));
                }
                (Filter::Not(a1), Filter::Not(a2)) => pairs.push((a1, a2)),
                _ => return false,
            }
        }
        true
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
