//! Applying steps under their fences, and finishing records.

use std::collections::BTreeSet;

use super::record::{Record, Step, StepOp, fence_row, fence_seq, pending_records};
use crate::backend::{BatchOperation, EntityWrite, TableBackend, TableBackendExt, UpdateMode};
use crate::entity::IfMatch;
use crate::error::{Error, Result};

/// How many times a step re-reads its fence after losing a race for it.
const ATTEMPTS: usize = 16;

/// What applying a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Its rows were written, and its fence moved to its number.
    Written,
    /// Its fence already held its number or a higher one: it, or a newer
    /// step, was applied before. Nothing was written.
    Skipped,
}

/// Applies `step`: its operations and its fence in one transaction, unless
/// the fence shows it (or something newer) applied already. Deletes of rows
/// that do not exist are left out; an insert that meets a row fails the
/// step with [`EntityAlreadyExists`](Error::EntityAlreadyExists), nothing
/// written. Safe to call any number of times, from any number of workers
/// at once.
pub async fn apply_step(backend: &dyn TableBackend, step: &Step) -> Result<Applied> {
    let fence_key = super::record::fence_key(&step.fence);
    // Deletes found to have nothing to delete.
    let mut absent: BTreeSet<usize> = BTreeSet::new();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let fence = backend
            .try_get_entity(&step.table, &step.partition_key, &fence_key)
            .await?;
        if fence.as_ref().is_some_and(|row| fence_seq(row) >= step.seq) {
            return Ok(Applied::Skipped);
        }
        let mut operations: Vec<BatchOperation> = Vec::with_capacity(step.ops.len() + 1);
        // For each operation sent, its position in the step.
        let mut positions = Vec::with_capacity(step.ops.len());
        for (i, op) in step.ops.iter().enumerate() {
            if absent.contains(&i) {
                continue;
            }
            if let Some((add, row_key, member, marker)) = op.as_list() {
                if let Some(operation) =
                    list_operation(backend, step, row_key, member, marker, add).await?
                {
                    positions.push(i);
                    operations.push(operation);
                }
                continue;
            }
            if let Some(operation) = plain_operation(step, op) {
                positions.push(i);
                operations.push(operation);
            }
        }
        // The change rows after the step's own, then the feed's head.
        let changes = changed_rows(step, &absent);
        let first_change = operations.len();
        if !changes.is_empty() {
            operations.extend(change_operations(backend, step, changes).await?);
        }
        let new_fence = fence_row(&step.partition_key, &step.fence, step.seq);
        operations.push(match fence {
            Some(row) => BatchOperation::Update {
                entity: new_fence,
                mode: UpdateMode::Replace,
                if_match: row.etag.map_or(IfMatch::Any, IfMatch::ETag),
            },
            None => BatchOperation::Insert(new_fence),
        });
        let fence_at = operations.len() - 1;
        match crate::exec::send_operations(backend, &step.table, &operations).await {
            Ok(_) => return Ok(Applied::Written),
            Err(Error::BatchFailed { index, source }) => match *source {
                // An index entity changed under its ETag: read it again.
                Error::PreconditionFailed { .. }
                | Error::EntityAlreadyExists { .. }
                | Error::EntityNotFound { .. }
                    if index < first_change && is_list(&step.ops[positions[index]]) =>
                {
                    last = Some(*source);
                }
                Error::EntityNotFound { .. } if index < first_change => {
                    absent.insert(positions[index]);
                }
                // Another writer of the partition took the change feed's
                // next number first: read its head again.
                Error::PreconditionFailed { .. } | Error::EntityAlreadyExists { .. }
                    if index >= first_change && index < fence_at =>
                {
                    last = Some(*source);
                    let wait = std::time::Duration::from_millis(fastrand::u64(0..8));
                    tokio::time::sleep(wait).await;
                }
                Error::PreconditionFailed { .. } | Error::EntityAlreadyExists { .. }
                    if index == fence_at =>
                {
                    // Another worker moved the fence first: look again.
                    last = Some(*source);
                }
                source => return Err(source),
            },
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or(Error::Transient {
        message: "a step made no attempt".into(),
    }))
}

/// The operation of a step's `op` that needs no read first: a put, an
/// insert or a delete; `None` for the others.
fn plain_operation(step: &Step, op: &StepOp) -> Option<BatchOperation> {
    Some(match op {
        StepOp::Put(entity) => {
            let mut entity = entity.clone();
            entity.partition_key.clone_from(&step.partition_key);
            BatchOperation::Upsert {
                entity,
                mode: UpdateMode::Replace,
            }
        }
        StepOp::Insert(entity) => {
            let mut entity = entity.clone();
            entity.partition_key.clone_from(&step.partition_key);
            BatchOperation::Insert(entity)
        }
        StepOp::Delete(row_key) => BatchOperation::Delete {
            partition_key: step.partition_key.clone(),
            row_key: row_key.clone(),
            if_match: IfMatch::Any,
        },
        StepOp::DeleteIf { row_key, etag } => BatchOperation::Delete {
            partition_key: step.partition_key.clone(),
            row_key: row_key.clone(),
            if_match: IfMatch::ETag(etag.clone()),
        },
        StepOp::ListAdd { .. } | StepOp::ListRemove { .. } | StepOp::Change { .. } => return None,
    })
}

/// The changes `step` records, as `(RowKey, operation)`: those of its
/// [`Change`](StepOp::Change) operations whose entity's row the step still
/// deletes (one found gone, in `absent`, was removed by a write that
/// recorded its own change).
fn changed_rows<'a>(step: &'a Step, absent: &BTreeSet<usize>) -> Vec<(&'a str, &'a str)> {
    let gone = |row_key: &str| {
        absent.iter().any(|&i| match &step.ops[i] {
            StepOp::Delete(rk) | StepOp::DeleteIf { row_key: rk, .. } => rk == row_key,
            _ => false,
        })
    };
    step.ops
        .iter()
        .filter_map(|op| match op {
            StepOp::Change { row_key, op } if !gone(row_key) => {
                Some((row_key.as_str(), op.as_str()))
            }
            _ => None,
        })
        .collect()
}

fn is_list(op: &StepOp) -> bool {
    matches!(op, StepOp::ListAdd { .. } | StepOp::ListRemove { .. })
}

/// The operation that adds `member` to (or removes it from) the index
/// entity `row_key`, guarded by the entity's ETag; `None` when there is
/// nothing to change.
async fn list_operation(
    backend: &dyn TableBackend,
    step: &Step,
    row_key: &str,
    member: &str,
    marker: Option<&str>,
    add: bool,
) -> Result<Option<BatchOperation>> {
    let stored = backend
        .try_get_entity(&step.table, &step.partition_key, row_key)
        .await?;
    let mut members = stored
        .as_ref()
        .map(super::lists::list_members)
        .unwrap_or_default();
    match (add, members.binary_search_by(|m| m.as_str().cmp(member))) {
        (true, Err(at)) => members.insert(at, member.to_owned()),
        (false, Ok(at)) => {
            members.remove(at);
        }
        _ => return Ok(None),
    }
    let row = |members: &[String]| {
        super::lists::list_row_named(marker, &step.partition_key, row_key, members).map_err(
            |entries| {
                Error::from(crate::error::InvalidInput::IndexListFull {
                    index: "(an index kept elsewhere)",
                    value: row_key.to_owned(),
                    entries,
                    max_chars: super::lists::LIST_MAX_CHARS,
                })
            },
        )
    };
    Ok(Some(match (stored, members.is_empty()) {
        (None, true) => return Ok(None),
        (None, false) => BatchOperation::Insert(row(&members)?),
        (Some(stored), true) => BatchOperation::Delete {
            partition_key: step.partition_key.clone(),
            row_key: row_key.to_owned(),
            if_match: stored.etag.map_or(IfMatch::Any, IfMatch::ETag),
        },
        (Some(stored), false) => BatchOperation::Update {
            entity: row(&members)?,
            mode: UpdateMode::Replace,
            if_match: stored.etag.map_or(IfMatch::Any, IfMatch::ETag),
        },
    }))
}

/// Applies every step of `record` (at once: each is fenced on its own, so
/// their order does not matter), then deletes it. A record another worker
/// finished meanwhile is not an error. A step that puts an outbox record
/// (a move hands the delete of its old row, with that row's own steps, to
/// its old partition) has that record finished too, before this one is
/// deleted.
pub async fn finish_record(backend: &dyn TableBackend, record: &Record) -> Result<()> {
    futures::future::try_join_all(record.steps.iter().map(|step| apply_step(backend, step)))
        .await?;
    for step in &record.steps {
        for op in &step.ops {
            if let StepOp::Put(row) | StepOp::Insert(row) = op
                && let Some(owner) = super::record::record_owner(&row.row_key)
                && super::record::is_outbox_row(row)
            {
                Box::pin(finish_entity(
                    backend,
                    &step.table,
                    &step.partition_key,
                    owner,
                ))
                .await?;
            }
        }
    }
    let if_match = IfMatch::ETag(record.etag.clone());
    let delete = EntityWrite::Delete(&record.partition_key, &record.row_key, &if_match);
    match crate::exec::write_one(backend, &record.table, delete).await {
        Ok(_) | Err(Error::EntityNotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Finishes every outbox record of the entity `(partition_key, row_key)`
/// of `table`, oldest first, except that a move's record goes first: it
/// gives up the entity's old row (and its rows elsewhere) before the rows
/// the entity takes at its new keys are written, where the two could meet.
/// (Steps are fenced, so any order ends the same; this one ends sooner.)
/// The number finished.
pub async fn finish_entity(
    backend: &dyn TableBackend,
    table: &str,
    partition_key: &str,
    row_key: &str,
) -> Result<usize> {
    let mut records = pending_records(backend, table, partition_key, row_key).await?;
    records.sort_by_key(|record| record.what != super::record::MOVE);
    for record in &records {
        finish_record(backend, record).await?;
    }
    Ok(records.len())
}

/// The change rows of a step's writes `changes` (RowKey and operation),
/// numbered after its partition's head, and the head's move. The partition
/// is announced first, at every send: a step is a rare write (a move's
/// half, an index's repair), applied where no table's clock is at hand, so
/// on the system's.
async fn change_operations(
    backend: &dyn TableBackend,
    step: &Step,
    changes: Vec<(&str, &str)>,
) -> Result<Vec<BatchOperation>> {
    use super::changes::{announce, bare_change_row, head_before_changes, head_move};
    let now = crate::datetime::DateTime::now();
    let (pk, table) = (&step.partition_key, &step.table);
    let (head, listed) = head_before_changes(backend, table, pk, now).await?;
    if !listed {
        announce(backend, table, pk, now).await?;
    }
    let mut seq = head.as_ref().map_or(0, |head| head.seq);
    let mut operations = Vec::with_capacity(changes.len() + 1);
    for (row_key, op) in changes {
        seq += 1;
        operations.push(BatchOperation::Insert(bare_change_row(
            pk, seq, op, row_key,
        )));
    }
    operations.push(head_move(pk, seq, head.as_ref()));
    Ok(operations)
}
