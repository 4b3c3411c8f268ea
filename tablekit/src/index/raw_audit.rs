//! An audit of a partition's index rows from its raw rows alone, for a
//! program that knows no type (the `tablekit studio`): index rows whose
//! entity is gone, copies of values the entity no longer holds, and index
//! entities that list entities that are gone. It cannot see a missing
//! index row (finding one needs the type that computes its values):
//! [`Table::verify_indexes`](crate::Table::verify_indexes) does that.

use std::collections::HashMap;

use crate::backend::{Query, TableBackend, TableBackendExt};
use crate::entity::Entity;
use crate::error::Result;
use crate::filter::Filter;
use crate::pending::lists::{INDEX_PROPERTY, ROW_PROPERTY, is_index_row, list_members};
use crate::schema::{KIND_PROPERTY, VERSION_PROPERTY};

/// What [`audit_raw`] found in one partition.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RawIndexAudit {
    /// Index rows and index entities read.
    pub index_rows: usize,
    /// Entities read (rows that are neither index rows nor tablekit's
    /// other bookkeeping).
    pub entities: usize,
    /// Index rows whose entity is not in the partition: (the index row's
    /// RowKey, the RowKey it names). This and the lists below are in key
    /// order.
    pub orphans: Vec<(String, String)>,
    /// Index rows copying a value their entity holds otherwise, or not at
    /// all: (the index row's RowKey, the property).
    pub stale: Vec<(String, String)>,
    /// Index entities listing an entity that is not in the partition:
    /// (the index entity's RowKey, the RowKey listed).
    pub dangling: Vec<(String, String)>,
}

impl RawIndexAudit {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.orphans.is_empty() && self.stale.is_empty() && self.dangling.is_empty()
    }
}

/// Audits the index rows of partition `partition_key` of `table` against
/// its entities, from the raw rows alone (see the module). Indexes kept in
/// other partitions are not read.
pub async fn audit_raw(
    backend: &dyn TableBackend,
    table: &str,
    partition_key: &str,
) -> Result<RawIndexAudit> {
    let query = Query::new().filter(Filter::partition_key().eq(partition_key));
    let rows = backend.query_all(table, query).await?;
    let entities: HashMap<&str, &Entity> = rows
        .iter()
        .filter(|r| !crate::pending::is_bookkeeping_row(r))
        .map(|r| (r.row_key.as_str(), r))
        .collect();
    let mut audit = RawIndexAudit {
        entities: entities.len(),
        ..RawIndexAudit::default()
    };
    for row in rows.iter().filter(|r| is_index_row(r)) {
        audit.index_rows += 1;
        let Some(crate::value::Value::String(pointed)) = row.properties.get(ROW_PROPERTY) else {
            // An index entity: each entity it lists.
            for member in list_members(row) {
                if !entities.contains_key(member.as_str()) {
                    audit.dangling.push((row.row_key.clone(), member));
                }
            }
            continue;
        };
        let Some(entity) = entities.get(pointed.as_str()) else {
            audit.orphans.push((row.row_key.clone(), pointed.clone()));
            continue;
        };
        let own = [
            ROW_PROPERTY,
            INDEX_PROPERTY,
            KIND_PROPERTY,
            VERSION_PROPERTY,
        ];
        for (name, value) in row.properties.iter() {
            if own.contains(&name) {
                continue;
            }
            if entity.properties.get(name) != Some(value) {
                audit.stale.push((row.row_key.clone(), name.to_owned()));
            }
        }
    }
    // In key order, whatever order the store gave the rows in.
    audit.orphans.sort();
    audit.stale.sort();
    audit.dangling.sort();
    Ok(audit)
}
