//! Evaluating a filter against an entity, by the service's rules.

use std::cmp::Ordering;

use super::{CompareOp, Filter};
use crate::entity::Entity;
use crate::keyorder::cmp_utf16;
use crate::value::Value;

/// A property of an entity as seen by a comparison, borrowed where possible.
enum Field<'a> {
    Str(&'a str),
    Value(&'a Value),
    Time(crate::datetime::DateTime),
}

/// A row as a filter sees it: its keys, Timestamp and properties,
/// borrowed (from an [`Entity`], or from a row a backend passes by
/// reference).
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    /// The PartitionKey.
    pub partition_key: &'a str,
    /// The RowKey.
    pub row_key: &'a str,
    /// The Timestamp, if known.
    pub timestamp: Option<crate::datetime::DateTime>,
    /// The custom properties.
    pub properties: &'a crate::entity::Properties,
}

impl<'a> From<&'a Entity> for RowView<'a> {
    fn from(entity: &'a Entity) -> RowView<'a> {
        RowView {
            partition_key: &entity.partition_key,
            row_key: &entity.row_key,
            timestamp: entity.timestamp,
            properties: &entity.properties,
        }
    }
}

fn lookup<'a>(entity: &RowView<'a>, name: &str) -> Option<Field<'a>> {
    match name {
        "PartitionKey" => Some(Field::Str(entity.partition_key)),
        "RowKey" => Some(Field::Str(entity.row_key)),
        "Timestamp" => entity.timestamp.map(Field::Time),
        _ => entity.properties.get(name).map(Field::Value),
    }
}

/// How deep [`matches`] recurses before it goes on with its own stack.
const RECURSION_LIMIT: usize = 64;

pub(super) fn matches(filter: &Filter, entity: &RowView<'_>) -> bool {
    matches_at(filter, entity, 0)
}

fn matches_at(filter: &Filter, entity: &RowView<'_>, depth: usize) -> bool {
    if depth > RECURSION_LIMIT {
        return matches_deep(filter, entity);
    }
    match filter {
        Filter::Compare {
            property,
            op,
            value,
        } => compare(entity, property, *op, value),
        Filter::And(a, b) => matches_at(a, entity, depth + 1) && matches_at(b, entity, depth + 1),
        Filter::Or(a, b) => matches_at(a, entity, depth + 1) || matches_at(b, entity, depth + 1),
        Filter::Not(f) => !matches_at(f, entity, depth + 1),
    }
}

/// Evaluates a tree of any depth with a stack of its own (and without
/// short-circuits): for trees no backend would accept, which a caller may
/// still evaluate directly.
fn matches_deep(filter: &Filter, entity: &RowView<'_>) -> bool {
    // Visit each node twice: first to schedule its operands, then, with their
    // results on `results`, to combine them.
    let mut work = vec![(filter, false)];
    let mut results: Vec<bool> = Vec::new();
    while let Some((node, operands_done)) = work.pop() {
        match node {
            Filter::Compare {
                property,
                op,
                value,
            } => results.push(compare(entity, property, *op, value)),
            Filter::And(a, b) | Filter::Or(a, b) if !operands_done => {
                work.extend([(node, true), (&**b, false), (&**a, false)]);
            }
            Filter::Not(a) if !operands_done => work.extend([(node, true), (&**a, false)]),
            Filter::Not(_) => {
                let a = results.pop().unwrap_or(false);
                results.push(!a);
            }
            Filter::And(..) | Filter::Or(..) => {
                let b = results.pop().unwrap_or(false);
                let a = results.pop().unwrap_or(false);
                results.push(if matches!(node, Filter::And(..)) {
                    a && b
                } else {
                    a || b
                });
            }
        }
    }
    results.pop().unwrap_or(false)
}

fn compare(entity: &RowView<'_>, property: &str, op: CompareOp, value: &Value) -> bool {
    match lookup(entity, property) {
        // A comparison with a property the entity lacks is false, `ne` too.
        None => false,
        Some(Field::Str(s)) => compare_str(s, op, value),
        Some(Field::Time(t)) => compare_value(&Value::DateTime(t), op, value),
        Some(Field::Value(v)) => compare_value(v, op, value),
    }
}

fn apply(op: CompareOp, ordering: Option<Ordering>) -> bool {
    match ordering {
        // Unordered (NaN): only `ne` holds, as in IEEE arithmetic.
        None => op == CompareOp::Ne,
        Some(o) => match op {
            CompareOp::Eq => o == Ordering::Equal,
            CompareOp::Ne => o != Ordering::Equal,
            CompareOp::Gt => o == Ordering::Greater,
            CompareOp::Ge => o != Ordering::Less,
            CompareOp::Lt => o == Ordering::Less,
            CompareOp::Le => o != Ordering::Greater,
        },
    }
}

/// The outcome of comparing values of unrelated types, as the service has it.
fn mismatch(op: CompareOp) -> bool {
    matches!(op, CompareOp::Ne | CompareOp::Lt | CompareOp::Le)
}

fn compare_str(s: &str, op: CompareOp, constant: &Value) -> bool {
    match constant {
        Value::String(c) => apply(op, Some(cmp_utf16(s, c))),
        _ => mismatch(op),
    }
}

fn compare_value(stored: &Value, op: CompareOp, constant: &Value) -> bool {
    let ordering = match (stored, constant) {
        (Value::String(a), Value::String(b)) => Some(cmp_utf16(a, b)),
        (Value::Int32(a), Value::Int32(b)) => Some(a.cmp(b)),
        // An Int32 property never matches a wider constant.
        (Value::Int32(_), Value::Int64(_) | Value::Double(_)) => return false,
        (Value::Int64(a), Value::Int64(b)) => Some(a.cmp(b)),
        (Value::Int64(a), Value::Int32(b)) => Some(a.cmp(&i64::from(*b))),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
        (Value::Double(a), Value::Int32(b)) => a.partial_cmp(&f64::from(*b)),
        (Value::Double(a), Value::Int64(b)) => a.partial_cmp(&(*b as f64)),
        (Value::Boolean(a), Value::Boolean(b)) => Some(a.cmp(b)),
        (Value::DateTime(a), Value::DateTime(b)) => Some(a.cmp(b)),
        (Value::Guid(a), Value::Guid(b)) => Some(a.cmp(b)),
        (Value::Binary(a), Value::Binary(b)) => Some(a.cmp(b)),
        _ => return mismatch(op),
    };
    apply(op, ordering)
}
