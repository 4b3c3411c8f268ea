//! Listed indexes (index entities): the rows that list the entities
//! holding a value, changed under their own ETags.

use super::super::{Planned, Role};
use super::index_rows::IndexRows;
use crate::backend::{BatchOperation, UpdateMode};
use crate::entity::IfMatch;
use crate::error::Result;
use crate::schema::CompanionRows;

impl IndexRows<'_> {
    /// The index entities of the old and the new value of a listed slot:
    /// this entity leaves one and joins the other (or, moving to its own
    /// RowKey, changes its entry in the one it stays in), each guarded by
    /// its own ETag.
    pub(super) fn plan_list(
        &self,
        rows: &dyn CompanionRows,
        i: usize,
        (old, new): (Option<&String>, Option<&String>),
        kind_properties: bool,
        out: &mut Planned,
    ) -> Result<()> {
        if old == new && self.renamed.is_none() {
            return Ok(());
        }
        let (pk, rk) = (self.pk, self.rk);
        let leaving = self.renamed.unwrap_or(rk);
        let changes = if old == new {
            [(old, true, true), (None, false, false)]
        } else {
            [(old, true, false), (new, false, true)]
        };
        for (key, leaves, joins) in changes {
            let Some(key) = key else { continue };
            let stored = self
                .lists
                .iter()
                .find_map(|(k, stored)| (k == key).then(|| stored.clone()))
                .flatten();
            let mut members = stored.as_ref().map(|(_, m)| m.clone()).unwrap_or_default();
            if leaves && let Ok(at) = members.binary_search_by(|m| m.as_str().cmp(leaving)) {
                members.remove(at);
            }
            if joins && let Err(at) = members.binary_search_by(|m| m.as_str().cmp(rk)) {
                members.insert(at, rk.to_owned());
            }
            let operation = match (stored, members.is_empty()) {
                (None, true) => continue,
                (None, false) => {
                    BatchOperation::Insert(rows.list_row(i, pk, key, &members, kind_properties)?)
                }
                (Some((etag, _)), true) => BatchOperation::Delete {
                    partition_key: pk.to_owned(),
                    row_key: key.clone(),
                    if_match: IfMatch::ETag(etag),
                },
                (Some((etag, _)), false) => BatchOperation::Update {
                    entity: rows.list_row(i, pk, key, &members, kind_properties)?,
                    mode: UpdateMode::Replace,
                    if_match: IfMatch::ETag(etag),
                },
            };
            out.push(operation, Role::List);
        }
        Ok(())
    }
}
