//! Changes that span partitions or tables, made reliable with a
//! transactional outbox, a queue and a worker.
//!
//! An entity group transaction holds rows of one partition of one table.
//! A change that must reach other partitions or tables (an index kept in
//! another partition, an entity moving to another department) is split:
//!
//! 1. **Commit.** The part in the entity's partition and an *outbox record*
//!    of the remaining *steps* commit together, in one transaction: there is
//!    never a moment where the change is done and its steps are not
//!    recorded, nor the reverse. The record is a row of the entity's
//!    partition under a reserved RowKey (`~tk|outbox|…`).
//! 2. **Apply at once.** The writer then puts a *notice* on the queue of
//!    the table's [`Outbox`] (delayed, so that it only matters if the
//!    writer stops) while it applies the steps, deletes the record, and
//!    deletes the notice.
//! 3. **Finish what a crash left.** If the writer stops anywhere after the
//!    commit, the [`OutboxWorker`] finishes the record when the message
//!    becomes visible, and the [sweeper](sweep) finishes records older than
//!    an age (for a message that was never put).
//!
//! The same machinery carries rows a [`Transaction`](crate::Transaction)
//! puts into other tables once it commits
//! ([`then_put`](crate::Transaction::then_put)): an audit entry, an event
//! for other services, written exactly when the transaction's writes are.
//!
//! # Steps are safe to apply twice, and in any order
//! A step writes rows of one partition: it puts rows (insert or replace)
//! and deletes rows (if they exist). Each step carries the *sequence
//! number* of the write that made it (above every earlier write of the
//! entity, and above every fence it touches), and applying it also records that number in a *fence* row
//! beside the row it targets (`~tk|fence|…`), in the same transaction,
//! guarded by the fence's ETag. A step whose number is not above the fence's
//! is skipped. So:
//! - a step applied twice (a message delivered again, a worker and the
//!   writer racing) changes nothing the second time;
//! - an older step arriving after a newer one (two writes of one entity,
//!   their steps applied by different workers) cannot undo it;
//! - whatever the order, once every record is finished, each target row
//!   holds what the newest write asked for.
//!
//! Fence rows and outbox records carry marker properties and are never read
//! as entities: typed reads, reads of several kinds and index reads skip
//! them. RowKeys starting with `~tk|` are reserved for them.
//!
//! # Consistency for readers
//! Until the steps are applied, a reader may see the change half done: an
//! index in another partition that does not yet list an entity, or a moved
//! entity in both its old and its new partition (a move copies first and
//! gives up the old row in its step, so the entity is never in neither). It
//! converges as soon as the steps are applied: at once, unless the writer
//! stopped.
//!
//! # Running it
//! - Give the tables whose writes span partitions an [`Outbox`]
//!   ([`Table::with_outbox`](crate::Table::with_outbox)), and run an
//!   [`OutboxWorker`] on its queue, in the background of a service.
//! - Run [`sweep`] now and then (every few minutes, with an age of a few
//!   minutes) on each table whose entities write steps, for the records
//!   whose notice was never put; with a fence horizon, on the tables the
//!   steps reach, to remove fences nothing can need.
//! - Notices the worker could not finish go to `{queue}-poison` with their
//!   last error; their records stay, and a later sweep finishes them once
//!   the cause is fixed.

mod worker;

// The records, steps and fences live below the typed client, which writes
// them (`crate::pending`); they are the outbox's, and public here.
pub use crate::pending::{
    Applied, Bookkeeping, FENCE_PREFIX, Notice, OUTBOX_PREFIX, Record, SEQ_PROPERTY, Step, StepOp,
    SweepReport, apply_step, bookkeeping_of, finish_entity, finish_record, is_bookkeeping_row,
    is_fence_row, is_outbox_row, pending_count, pending_records, remove_fences_before,
    remove_fences_counting, sweep,
};
pub(crate) use worker::outbox_of;
pub use worker::{Outbox, OutboxWorker, WorkerConfig, WorkerStats, poison_queue_name};
