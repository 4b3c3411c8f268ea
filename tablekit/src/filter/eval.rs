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
    Time(crate::DateTime),
}

fn lookup<'a>(entity: &'a Entity, name: &str) -> Option<Field<'a>> {
    match name {
        "PartitionKey" => Some(Field::Str(&entity.partition_key)),
        "RowKey" => Some(Field::Str(&entity.row_key)),
        "Timestamp" => entity.timestamp.map(Field::Time),
        _ => entity.properties.get(name).map(Field::Value),
    }
}

pub(super) fn matches(filter: &Filter, entity: &Entity) -> bool {
    match filter {
        Filter::Compare {
            property,
            op,
            value,
        } => match lookup(entity, property) {
            // A comparison with a property the entity lacks is false, `ne` too.
            None => false,
            Some(Field::Str(s)) => compare_str(s, *op, value),
            Some(Field::Time(t)) => compare_value(&Value::DateTime(t), *op, value),
            Some(Field::Value(v)) => compare_value(v, *op, value),
        },
        Filter::And(a, b) => matches(a, entity) && matches(b, entity),
        Filter::Or(a, b) => matches(a, entity) || matches(b, entity),
        Filter::Not(f) => !matches(f, entity),
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

/// The outcome of comparing values of unrelated types (AZURE_TABLE.md §5).
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
