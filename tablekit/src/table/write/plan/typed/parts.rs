//! A wide entity's parts: written or deleted together, under the guard
//! of the first part.

use super::super::{Planned, Role};
use crate::entity::{Entity, IfMatch};
use crate::error::Result;
use crate::schema::{self, RowRule};

/// A wide entity's parts, written (over the `parts` stored, which go when
/// the new value has fewer) or deleted, under the guard of its first part,
/// whose ETag is the write's.
pub(super) fn plan_parts(
    rule: &dyn RowRule,
    (pk, rk): (&str, &str),
    parts: usize,
    guard_match: Option<IfMatch>,
    new_row: Option<Entity>,
    out: &mut Planned,
) -> Result<()> {
    let operations = match new_row {
        Some(row) => {
            let bookkeeping = [schema::KIND_PROPERTY, schema::VERSION_PROPERTY];
            rule.write(row, &bookkeeping, parts, guard_match)?
        }
        None => rule.delete(pk, rk, parts, guard_match.unwrap_or(IfMatch::Any)),
    };
    for (n, operation) in operations.into_iter().enumerate() {
        out.push(operation, if n == 0 { Role::Row } else { Role::Other });
    }
    Ok(())
}
