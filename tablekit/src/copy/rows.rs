//! [`RowWriter`]: the rows of a copy or an import written into one table,
//! in transactions per partition, paced, a few at once, under the
//! conflict policy.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};

use super::Conflict;
use crate::backend::{BatchOperation, EntityWrite, TableBackend, UpdateMode};
use crate::entity::Entity;
use crate::error::{Error, Result};
use crate::pacing::Pacing;

/// What a write of rows did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// Rows written.
    pub written: u64,
    /// Rows the target already held with the same properties.
    pub already_there: u64,
    /// Rows the target held with other properties, left as they were.
    pub skipped: u64,
}

impl std::ops::AddAssign for WriteCounts {
    fn add_assign(&mut self, other: WriteCounts) {
        self.written = self.written.saturating_add(other.written);
        self.already_there = self.already_there.saturating_add(other.already_there);
        self.skipped = self.skipped.saturating_add(other.skipped);
    }
}

/// Writes rows into one table: transactions per partition, paced, a few at
/// once, with the conflict policy.
pub(super) struct RowWriter<'a> {
    pub(super) target: &'a dyn TableBackend,
    pub(super) table: &'a str,
    pub(super) conflict: Conflict,
    pub(super) parallelism: usize,
    pub(super) pacing: Option<&'a Pacing>,
}

impl RowWriter<'_> {
    pub(super) async fn write(&self, rows: Vec<Entity>) -> Result<WriteCounts> {
        // Rows of one partition, in transactions of at most 100 that fit
        // the payload limit.
        let mut groups: Vec<Vec<BatchOperation>> = Vec::new();
        let mut by_partition: BTreeMap<String, Vec<Entity>> = BTreeMap::new();
        for mut row in rows {
            row.etag = None;
            row.timestamp = None;
            by_partition
                .entry(row.partition_key.clone())
                .or_default()
                .push(row);
        }
        for (_, rows) in by_partition {
            let mut group: Vec<BatchOperation> = Vec::new();
            let mut size = 0;
            for row in rows {
                let op = match self.conflict {
                    Conflict::Overwrite => BatchOperation::Upsert {
                        entity: row,
                        mode: UpdateMode::Replace,
                    },
                    Conflict::Fail | Conflict::Skip => BatchOperation::Insert(row),
                };
                let op_size = crate::backend::checks::operation_payload_bound(&op);
                if !group.is_empty()
                    && (group.len() == crate::validate::limits::MAX_BATCH_OPERATIONS
                        || size + op_size > crate::validate::limits::MAX_BATCH_PAYLOAD)
                {
                    groups.push(std::mem::take(&mut group));
                    size = 0;
                }
                size += op_size;
                group.push(op);
            }
            if !group.is_empty() {
                groups.push(group);
            }
        }
        let counts = stream::iter(groups)
            .map(|group| self.write_group(group))
            .buffer_unordered(self.parallelism)
            .try_collect::<Vec<_>>()
            .await?;
        let mut total = WriteCounts::default();
        for c in counts {
            total += c;
        }
        Ok(total)
    }

    async fn write_group(&self, ops: Vec<BatchOperation>) -> Result<WriteCounts> {
        let mut attempt = 0;
        let key = format!("{}\u{0}{}", self.table, ops[0].keys().0);
        loop {
            if let Some(pacing) = self.pacing {
                Pacing::wait(pacing.reserve(&key, ops.len())).await;
            }
            match crate::exec::submit_transaction(self.target, self.table, &ops).await {
                Ok(_) => {
                    if let Some(pacing) = self.pacing {
                        pacing.accepted(&key, ops.len());
                    }
                    return Ok(WriteCounts {
                        written: ops.len() as u64,
                        ..WriteCounts::default()
                    });
                }
                Err(Error::BatchFailed { source, .. })
                    if matches!(*source, Error::EntityAlreadyExists { .. }) =>
                {
                    return self.write_one_by_one(ops).await;
                }
                Err(Error::Throttled { retry_after }) if attempt < Pacing::MAX_THROTTLED => {
                    if let Some(pacing) = self.pacing {
                        pacing.throttled(&key, ops.len(), retry_after);
                    }
                    let store = self.target.store_info();
                    Pacing::wait_throttled(&store, attempt, retry_after).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A transaction met rows already there: each row on its own, by the
    /// conflict policy.
    async fn write_one_by_one(&self, ops: Vec<BatchOperation>) -> Result<WriteCounts> {
        let mut counts = WriteCounts::default();
        let rows = ops.into_iter().filter_map(|op| match op {
            BatchOperation::Insert(entity) | BatchOperation::Upsert { entity, .. } => Some(entity),
            // A copy writes only inserts and upserts.
            BatchOperation::Update { .. } | BatchOperation::Delete { .. } => None,
        });
        for row in rows {
            let insert = EntityWrite::Insert(&row);
            match crate::exec::write_one(self.target, self.table, insert).await {
                Ok(_) => counts.written += 1,
                Err(Error::EntityAlreadyExists { .. }) => {
                    let there = self
                        .target
                        .get_entity(
                            self.table,
                            &row.partition_key,
                            &row.row_key,
                            &Default::default(),
                        )
                        .await?;
                    if same_properties(&there, &row) {
                        counts.already_there += 1;
                    } else if self.conflict == Conflict::Skip {
                        counts.skipped += 1;
                    } else {
                        return Err(Error::EntityAlreadyExists {
                            table: self.table.to_owned(),
                            partition_key: row.partition_key,
                            row_key: row.row_key,
                        });
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(counts)
    }
}

/// Whether two rows hold the same properties, in any order.
pub(super) fn same_properties(a: &Entity, b: &Entity) -> bool {
    a.properties.len() == b.properties.len()
        && a.properties
            .iter()
            .all(|(name, value)| b.properties.get(name) == Some(value))
}
