//! The non-atomic bulk writer.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::stream::{self, StreamExt};

use super::Table;
use crate::backend::checks::operation_payload_bound;
use crate::backend::{BatchOperation, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::IfMatch;
use crate::error::Error;
use crate::schema::{self, TableEntity, WriteNeeds};
use crate::validate::limits::{MAX_BATCH_OPERATIONS, MAX_BATCH_PAYLOAD};

/// One item the bulk writer could not write.
#[derive(Debug, Clone)]
pub struct BulkFailure {
    /// The item's index in the input.
    pub index: usize,
    /// Why it failed (shared when a whole batch failed for one reason).
    pub error: Arc<Error>,
}

/// What a bulk write did. Items can fail while others are written, so the
/// report must be looked at.
#[derive(Debug, Clone, Default)]
#[must_use = "some items may have failed: check `failures` or `is_complete()`"]
pub struct BulkReport {
    /// How many items were written.
    pub written: usize,
    /// The items that were not, by input index.
    pub failures: Vec<BulkFailure>,
    /// How many batches were sent (retries included).
    pub batches: usize,
    /// How many queries were made to find which items of a batch conflict
    /// with stored rows (see [`BulkWriter`]).
    pub queries: usize,
}

impl BulkReport {
    /// The report of `count` items none of which was written, for `error`.
    fn all_failed(count: usize, error: Error) -> BulkReport {
        let error = Arc::new(error);
        BulkReport {
            failures: (0..count)
                .map(|index| BulkFailure {
                    index,
                    error: Arc::clone(&error),
                })
                .collect(),
            ..BulkReport::default()
        }
    }

    /// Whether every item was written.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }

    /// Adds the counts and failures of `part` (of other items) to these.
    fn absorb(&mut self, part: BulkReport) {
        self.written += part.written;
        self.batches += part.batches;
        self.queries += part.queries;
        self.failures.extend(part.failures);
    }

    /// Counts item `index`, written alone in a batch of its own.
    fn one(&mut self, index: usize, result: Result<(), Error>) {
        self.batches += 1;
        match result {
            Ok(()) => self.written += 1,
            Err(error) => self.failures.push(BulkFailure {
                index,
                error: Arc::new(error),
            }),
        }
    }
}

/// What the writer does with each item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Insert,
    Upsert(UpdateMode),
    Delete,
}

/// Writes many entities, not atomically: items are grouped by partition and
/// sent in batches of up to 100; partitions are written in parallel (at most
/// [`parallelism`](BulkWriter::parallelism) batches at once), the batches of
/// one partition in input order. When an item fails, its batch is rolled back
/// by the store; the writer records that item and re-sends the rest, so the
/// report names exactly the items that failed.
///
/// A batch that keeps failing on rows that already exist (inserts) or are
/// already gone (deletes) does not go on item by item: after its second such
/// failure the writer reads which of its rows exist, a query per 14 keys,
/// records every conflicting item at once and sends the rest. Loading rows
/// another writer has loaded too costs a few requests per batch, not one per
/// row.
///
/// Each inserted row carries a tag of its own in its write history (unless
/// the table is [`without_write_history`](Table::without_write_history)):
/// when a batch's answer is lost, or a batch the store applied is sent
/// again after a 503 and meets its own rows, the rows read back tell the
/// writer's own rows from another writer's, so its own are never reported
/// as conflicts.
///
/// Use [`Table::batch`] when the writes must be atomic.
pub struct BulkWriter<T> {
    table: Table<T>,
    parallelism: usize,
    pacing: Option<super::Pacing>,
}

impl<T: TableEntity> BulkWriter<T> {
    pub(super) fn new(table: Table<T>) -> BulkWriter<T> {
        let pacing = table
            .backend()
            .pacing()
            .unwrap_or_else(super::Pacing::service_targets);
        BulkWriter {
            table,
            parallelism: 4,
            pacing: Some(pacing),
        }
    }

    /// Keeps each partition, and the account, to the rates of `pacing`
    /// (shared with every writer it is given to), and sends a batch the
    /// store throttles again after a back-off. See [`Pacing`](super::Pacing).
    ///
    /// A writer is paced by default, adaptively from the service's targets
    /// ([`Pacing::service_targets`](super::Pacing::service_targets)), with
    /// the pacing its backend keeps for the account when it keeps one
    /// ([`TableBackend::pacing`](crate::TableBackend::pacing): the REST
    /// backend does), so that the writers of one account share it. Give
    /// writers one `Pacing` to share it yourself.
    pub fn pacing(mut self, pacing: super::Pacing) -> BulkWriter<T> {
        self.pacing = Some(pacing);
        self
    }

    /// No pacing: batches go as fast as `parallelism` allows, and a batch
    /// the store throttles fails with
    /// [`Error::Throttled`](crate::Error::Throttled). For stores that do not
    /// throttle (the in-memory backend, Azurite) and loads that must not wait.
    pub fn unpaced(mut self) -> BulkWriter<T> {
        self.pacing = None;
        self
    }

    /// How many batches may be in flight at once (at least 1; default 4).
    pub fn parallelism(mut self, n: usize) -> BulkWriter<T> {
        self.parallelism = n.max(1);
        self
    }

    /// Inserts every item.
    pub async fn insert(&self, items: &[T]) -> BulkReport {
        self.run(items, Mode::Insert).await
    }

    /// Inserts or replaces every item.
    pub async fn upsert(&self, items: &[T]) -> BulkReport {
        self.run(items, Mode::Upsert(UpdateMode::Replace)).await
    }

    /// Inserts or merges every item.
    pub async fn upsert_merge(&self, items: &[T]) -> BulkReport {
        self.run(items, Mode::Upsert(UpdateMode::Merge)).await
    }

    /// Deletes every item's entity, whatever its version.
    pub async fn delete(&self, items: &[T]) -> BulkReport {
        self.run(items, Mode::Delete).await
    }

    async fn run(&self, items: &[T], mode: Mode) -> BulkReport {
        let backend = self.table.backend();
        let call = super::operation(
            &**backend,
            "bulk",
            self.table.name(),
            T::DESCRIPTOR.kind,
            None,
        )
        .batch_size(items.len());
        let done = |call: crate::telemetry::Call, report: &BulkReport| {
            let first = report.failures.first().map(|f| &*f.error);
            call.finish_outcome(first.is_some(), first);
        };
        let run = async {
            let report = self.run_unspanned(items, mode).await;
            self.over_expired(items, mode, report).await
        };
        call.observe(run, done).await
    }

    /// The inserts of `report` refused as taken keys, each tried again
    /// through [`Table::insert`], which takes the keys of an expired entity
    /// (for a type whose entities expire).
    async fn over_expired(&self, items: &[T], mode: Mode, mut report: BulkReport) -> BulkReport {
        if mode != Mode::Insert || crate::schema::expiry_property::<T>().is_none() {
            return report;
        }
        let mut kept = Vec::with_capacity(report.failures.len());
        for failure in std::mem::take(&mut report.failures) {
            if !matches!(*failure.error, Error::EntityAlreadyExists { .. }) {
                kept.push(failure);
                continue;
            }
            match self.table.insert(&items[failure.index]).await {
                Ok(_) => report.written += 1,
                Err(error) => kept.push(BulkFailure {
                    index: failure.index,
                    error: Arc::new(error),
                }),
            }
        }
        report.failures = kept;
        report
    }

    async fn run_unspanned(&self, items: &[T], mode: Mode) -> BulkReport {
        if let Err(error) = Table::<T>::refuse_unwritable() {
            return BulkReport::all_failed(items.len(), error);
        }
        let now = self.table.clock.now();
        if crate::schema::expiry_property::<T>().is_some() && mode != Mode::Delete {
            // The expiry index rows before the entities' (see `index_expiry`).
            let rows: Vec<_> = items.iter().filter_map(|i| row_at(i, now).ok()).collect();
            if let Err(error) = self.table.index_expiries(&rows).await {
                return BulkReport::all_failed(items.len(), error);
            }
        }
        // Wide entities and entities with index rows are transactions of
        // their own, and offloaded values follow the blob write protocol:
        // all are written one by one. A kind whose only need is its change
        // feed goes in planned transactions of several per partition: one
        // at a time per partition, they do not race for its head, and a
        // lost answer is settled by the feed's tag.
        let needs = T::DESCRIPTOR.write_needs();
        let feed_only = WriteNeeds {
            planned: true,
            rows: 1,
            changes: true,
            ..WriteNeeds::NONE
        };
        let with_previous = WriteNeeds {
            previous: true,
            ..feed_only
        };
        // Encrypted fields are sealed per entity, as each is written.
        if crate::schema::encrypted::<T>().is_some() {
            return self.run_one_by_one(items, mode).await;
        }
        if (needs == feed_only || needs == with_previous) && mode != Mode::Delete {
            return self.run_planned(items, mode).await;
        }
        if needs.any() {
            return self.run_one_by_one(items, mode).await;
        }
        let mut report = BulkReport::default();
        // Build every operation first; an item that cannot even be encoded fails alone.
        let mut partitions: BTreeMap<String, Vec<(usize, BatchOperation)>> = BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            match operation(item, mode, self.table.record_writes, now) {
                Ok(op) => partitions
                    .entry(op.keys().0.to_owned())
                    .or_default()
                    .push((index, op)),
                Err(error) => report.failures.push(BulkFailure {
                    index,
                    error: Arc::new(error),
                }),
            }
        }
        let (table, pacing) = (&self.table, self.pacing.as_ref());
        let results = stream::iter(partitions.into_values())
            .map(|ops| write_partition(table, ops, mode, pacing))
            .buffer_unordered(self.parallelism)
            .collect::<Vec<_>>()
            .await;
        for partition in results {
            report.absorb(partition);
        }
        report.failures.sort_by_key(|f| f.index);
        report
    }
}

impl<T: TableEntity> BulkWriter<T> {
    /// Writes each item through [`Table`]'s own write, `parallelism` at a time.
    async fn run_one_by_one(&self, items: &[T], mode: Mode) -> BulkReport {
        // The futures are made before they are streamed: a closure that
        // borrows each item inside the stream would make this future
        // impossible to spawn (rustc's "FnOnce is not general enough").
        let writes: Vec<_> = items
            .iter()
            .enumerate()
            .map(|(index, item)| write_one(&self.table, index, item, mode))
            .collect();
        let results: Vec<(usize, Result<(), Error>)> = stream::iter(writes)
            .buffer_unordered(self.parallelism)
            .collect()
            .await;
        let mut report = BulkReport::default();
        for (index, result) in results {
            report.one(index, result);
        }
        report.failures.sort_by_key(|f| f.index);
        report
    }
}

impl<T: TableEntity> BulkWriter<T> {
    /// Writes the items of each partition in planned transactions of
    /// several (as [`Table::batch`] does, with their index rows and
    /// changes), partitions `parallelism` at a time. A transaction that
    /// fails is written again item by item, so each item gets its own
    /// answer: one that exists already fails an insert alone.
    async fn run_planned(&self, items: &[T], mode: Mode) -> BulkReport {
        // Each write's row and its change row; the feed's head once.
        let size = (MAX_BATCH_OPERATIONS - 1) / 2;
        let mut partitions: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut report = BulkReport::default();
        for (index, item) in items.iter().enumerate() {
            match schema::partition_key_of(item) {
                Ok(pk) => partitions.entry(pk).or_default().push(index),
                Err(error) => report.failures.push(BulkFailure {
                    index,
                    error: Arc::new(error),
                }),
            }
        }
        let table = &self.table;
        let results: Vec<BulkReport> = stream::iter(partitions.into_values())
            .map(|indexes| async move {
                let mut report = BulkReport::default();
                for chunk in indexes.chunks(size) {
                    report.absorb(write_planned_chunk(table, items, chunk, mode).await);
                }
                report
            })
            .buffer_unordered(self.parallelism)
            .collect()
            .await;
        for part in results {
            report.absorb(part);
        }
        report.failures.sort_by_key(|f| f.index);
        report
    }
}

/// Writes the items `chunk` (indexes into `items`, of one partition) in one
/// planned transaction, or one by one if it fails.
async fn write_planned_chunk<T: TableEntity>(
    table: &Table<T>,
    items: &[T],
    chunk: &[usize],
    mode: Mode,
) -> BulkReport {
    crate::order::between_pages().await;
    let mut batch = table.batch();
    let added = chunk.iter().try_for_each(|&index| {
        let item = &items[index];
        match mode {
            Mode::Insert => batch.insert(item),
            Mode::Upsert(UpdateMode::Replace) => batch.upsert(item),
            _ => batch.upsert_merge(item),
        }
        .map(drop)
    });
    let mut report = BulkReport::default();
    if added.is_ok() && chunk.len() > 1 {
        report.batches += 1;
        if batch.submit().await.is_ok() {
            report.written = chunk.len();
            return report;
        }
    }
    for &index in chunk {
        let (index, result) = write_one(table, index, &items[index], mode).await;
        report.one(index, result);
    }
    report
}

/// Writes one item as its own transaction.
async fn write_one<T: TableEntity>(
    table: &Table<T>,
    index: usize,
    item: &T,
    mode: Mode,
) -> (usize, Result<(), Error>) {
    crate::order::between_pages().await;
    let result = match mode {
        Mode::Insert => table.insert(item).await.map(drop),
        Mode::Upsert(UpdateMode::Replace) => table.upsert(item).await.map(drop),
        Mode::Upsert(UpdateMode::Merge) => table.upsert_merge(item).await.map(drop),
        Mode::Delete => match (schema::partition_key_of(item), schema::row_key_of(item)) {
            (Ok(_), Ok(_)) => {
                table
                    .delete_unconditionally(item.partition_key(), item.row_key())
                    .await
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
    };
    (index, result)
}

/// The operation that writes `item`. An insert carries a tag of its own in
/// the row's write history (unless `tagged` is off, or the row has no room
/// for it), by which a row read back after a lost answer, or after a resent
/// batch's conflict, is told from another writer's.
fn operation<T: TableEntity>(
    item: &T,
    mode: Mode,
    tagged: bool,
    now: DateTime,
) -> Result<BatchOperation, Error> {
    Ok(match mode {
        Mode::Insert => {
            let mut row = row_at(item, now)?;
            super::write::Recorded::insert().add_to::<T>(&mut row, tagged);
            BatchOperation::Insert(row)
        }
        Mode::Upsert(mode) => BatchOperation::Upsert {
            entity: row_at(item, now)?,
            mode,
        },
        Mode::Delete => BatchOperation::Delete {
            partition_key: schema::partition_key_of(item)?,
            row_key: schema::row_key_of(item)?,
            if_match: IfMatch::Any,
        },
    })
}

/// The row of `item`, written at `now` (which a time to live counts from).
fn row_at<T: TableEntity>(item: &T, now: DateTime) -> Result<crate::entity::Entity, Error> {
    let mut row = schema::to_entity(item)?;
    schema::stamp_write::<T>(&mut row, now);
    Ok(row)
}

/// One batch: the operations, and the input index of each.
#[derive(Default)]
struct Chunk {
    items: Vec<usize>,
    ops: Vec<BatchOperation>,
}

/// Splits one partition's operations into batches of at most 100 operations
/// and at most 4 MiB of payload (by a bound that never undercounts what the
/// validator counts, so no batch is refused for its size) in which no
/// entity appears twice; a repeated entity starts a new batch, so repeats
/// apply in input order.
fn chunks(ops: Vec<(usize, BatchOperation)>) -> Vec<Chunk> {
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut keys: HashSet<String> = HashSet::new();
    let mut payload = 0;
    for (index, op) in ops {
        let rk = op.keys().1.to_owned();
        let size = operation_payload_bound(&op);
        let full = chunks.last().is_none_or(|c| {
            c.ops.len() == MAX_BATCH_OPERATIONS || payload + size > MAX_BATCH_PAYLOAD
        });
        if full || keys.contains(&rk) {
            chunks.push(Chunk::default());
            keys.clear();
            payload = 0;
        }
        keys.insert(rk);
        payload += size;
        if let Some(chunk) = chunks.last_mut() {
            chunk.items.push(index);
            chunk.ops.push(op);
        }
    }
    chunks
}

async fn write_partition<T: TableEntity>(
    table: &Table<T>,
    ops: Vec<(usize, BatchOperation)>,
    mode: Mode,
    pacing: Option<&super::Pacing>,
) -> BulkReport {
    let mut report = BulkReport::default();
    for mut chunk in chunks(ops) {
        crate::order::between_pages().await;
        // Failures of this chunk on a row's existence since its last probe.
        let mut conflicts = 0;
        // Lost answers of this chunk's batches so far.
        let mut lost = 0;
        // Throttled answers of this chunk's batches so far.
        let mut throttled = 0;
        while !chunk.ops.is_empty() {
            if let Some(pacing) = pacing {
                let wait = pacing.reserve(chunk.ops[0].keys().0, chunk.ops.len());
                super::Pacing::wait(wait).await;
            }
            report.batches += 1;
            match table.enter(super::write::Write::Rows(&chunk.ops)).await {
                Ok(_) => {
                    if let Some(pacing) = pacing {
                        pacing.accepted(chunk.ops[0].keys().0, chunk.ops.len());
                    }
                    report.written += chunk.ops.len();
                    chunk = Chunk::default();
                }
                Err(Error::BatchFailed { index, source }) if index < chunk.ops.len() => {
                    // An insert's row is there: the rows read back tell
                    // which items are stored as given (this batch applied
                    // before a 503 and sent again, or a writer of the very
                    // same rows) and which meet another row.
                    if mode == Mode::Insert
                        && is_conflict(mode, &source)
                        && settle_from_stored(table, &mut chunk, &mut report).await
                    {
                        continue;
                    }
                    // That item failed; the store rolled the others back: send them again.
                    if is_conflict(mode, &source) {
                        conflicts += 1;
                    }
                    chunk.ops.remove(index);
                    report.failures.push(BulkFailure {
                        index: chunk.items.remove(index),
                        error: Arc::new(*source),
                    });
                    if conflicts >= 2 && !chunk.ops.is_empty() {
                        conflicts = 0;
                        settle_conflicts(table, &mut chunk, mode, &mut report).await;
                    }
                }
                // The batch's answer was lost: read the rows back to see
                // what it did, and send again what it did not.
                Err(error) if error.is_outcome_unknown() && lost < MAX_LOST_ANSWERS => {
                    lost += 1;
                    settle_lost_batch(table, &mut chunk, mode, &mut report).await;
                }
                // Throttled: nothing was applied. Paced, wait and go again.
                Err(Error::Throttled { retry_after })
                    if pacing.is_some() && throttled < super::Pacing::MAX_THROTTLED =>
                {
                    if let Some(pacing) = pacing {
                        pacing.throttled(chunk.ops[0].keys().0, chunk.ops.len(), retry_after);
                    }
                    let store = table.backend().store_info();
                    super::Pacing::wait_throttled(&store, throttled, retry_after).await;
                    throttled += 1;
                }
                Err(error) => fail_all(&mut chunk, error, &mut report),
            }
        }
    }
    report
}

/// Reports every item left in `chunk` as failed with `error`, and empties it.
fn fail_all(chunk: &mut Chunk, error: Error, report: &mut BulkReport) {
    let error = Arc::new(error);
    report
        .failures
        .extend(chunk.items.drain(..).map(|index| BulkFailure {
            index,
            error: Arc::clone(&error),
        }));
    chunk.ops.clear();
}

/// How many lost answers of one batch the writer settles before it reports
/// the batch's items as failed with the last of them.
const MAX_LOST_ANSWERS: usize = 4;

/// Settles a batch whose answer was lost, by reading its rows back. An
/// upsert is simply sent again (the same effect twice is the effect once). A
/// delete's row that is gone was deleted. An insert's row that holds exactly
/// the item's properties was written (by this batch, or by another writer
/// writing the very same row: either way the item is stored as given); a row
/// that holds something else belongs to another writer. What is left is sent
/// again. If the rows cannot be read, the items are reported with an unknown
/// outcome.
async fn settle_lost_batch<T: TableEntity>(
    table: &Table<T>,
    chunk: &mut Chunk,
    mode: Mode,
    report: &mut BulkReport,
) {
    if matches!(mode, Mode::Upsert(_)) {
        return;
    }
    if !settle_from_stored(table, chunk, report).await {
        // Unreadable: sending the batch again could report its own rows as
        // conflicts. Its items' outcome stays unknown.
        let error = Error::OutcomeUnknown {
            message: "a batch's answer was lost and its rows could not be read back".into(),
        };
        fail_all(chunk, error, report);
    }
}

/// Reads the rows of `chunk` back and settles each item by what is stored:
/// a delete's row that is gone, and an insert's row this write stored (see
/// [`stored_as_ours`]), are done; an insert's row another writer stored is
/// [`Error::EntityAlreadyExists`]; the rest stay in `chunk`. `false`
/// (the chunk as it was) if the rows cannot be read.
async fn settle_from_stored<T: TableEntity>(
    table: &Table<T>,
    chunk: &mut Chunk,
    report: &mut BulkReport,
) -> bool {
    // Tagged inserts are told by their tags alone.
    let tagged = chunk.ops.iter().all(|op| match op {
        BatchOperation::Insert(row) => super::writes_of(row).is_some(),
        _ => false,
    });
    let select: Option<&[&str]> = tagged.then_some(&["RowKey", crate::props::WRITES_PROPERTY]);
    let Some(stored) = stored_rows(table, &chunk.ops, select, report).await else {
        return false;
    };
    let mut kept = Chunk::default();
    for (index, op) in chunk.items.drain(..).zip(chunk.ops.drain(..)) {
        let row = stored.get(op.keys().1);
        let done = match (&op, row) {
            (BatchOperation::Delete { .. }, None) => Some(None),
            (BatchOperation::Insert(ours), Some(row)) if stored_as_ours(ours, row) => Some(None),
            (BatchOperation::Insert(ours), Some(_)) => Some(Some(Error::EntityAlreadyExists {
                table: table.name().to_owned(),
                partition_key: ours.partition_key.clone(),
                row_key: ours.row_key.clone(),
            })),
            _ => None,
        };
        match done {
            Some(None) => report.written += 1,
            Some(Some(error)) => report.failures.push(BulkFailure {
                index,
                error: Arc::new(error),
            }),
            None => {
                kept.items.push(index);
                kept.ops.push(op);
            }
        }
    }
    *chunk = kept;
    true
}

/// Whether `stored` is the row the insert `ours` wrote: by the tag `ours`
/// carries in its history; for a row without one, by holding exactly its
/// properties (this write's, or another writer's of the very same row).
fn stored_as_ours(ours: &crate::entity::Entity, stored: &crate::entity::Entity) -> bool {
    match super::writes_of(ours) {
        Some(tag) => super::write::history_has(stored, tag),
        None => same_properties(ours, stored),
    }
}

/// Whether a stored row holds exactly `ours`'s properties (a NaN equals a NaN).
fn same_properties(ours: &crate::entity::Entity, stored: &crate::entity::Entity) -> bool {
    use crate::value::Value;
    let same = |a: &Value, b: &Value| match (a, b) {
        (Value::Double(x), Value::Double(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    };
    ours.properties.len() == stored.properties.len()
        && ours.properties.iter().all(|(name, value)| {
            stored
                .properties
                .get(name)
                .is_some_and(|other| same(value, other))
        })
}

/// The stored rows among those `ops` address, by RowKey, with only the
/// properties `select` names (all of them for `None`): see [`probe_rows`].
async fn stored_rows<T: TableEntity>(
    table: &Table<T>,
    ops: &[BatchOperation],
    select: Option<&[&str]>,
    report: &mut BulkReport,
) -> Option<std::collections::HashMap<String, crate::entity::Entity>> {
    let mut rows = std::collections::HashMap::new();
    probe_rows(table, ops, select, report, |e| {
        rows.insert(e.row_key.clone(), e);
    })
    .await?;
    Some(rows)
}

/// The filter for exactly the rows `ops` address in `partition`.
fn rows_named(partition: &str, ops: &[BatchOperation]) -> Option<crate::filter::Filter> {
    use crate::filter::Filter;
    let rows = ops
        .iter()
        .map(|op| Filter::row_key().eq(op.keys().1))
        .reduce(Filter::or)?;
    Some(Filter::partition_key().eq(partition) & rows)
}

/// Whether `error` says the row's existence is not what `mode` needs.
fn is_conflict(mode: Mode, error: &Error) -> bool {
    match mode {
        Mode::Insert => matches!(error, Error::EntityAlreadyExists { .. }),
        Mode::Delete => matches!(error, Error::EntityNotFound { .. }),
        Mode::Upsert(_) => false,
    }
}

/// Most RowKeys one probe names: with the PartitionKey, the service's 15
/// comparisons.
const KEYS_PER_PROBE: usize = crate::validate::limits::MAX_FILTER_COMPARISONS - 1;

/// Finds which rows of `chunk` exist and moves every item that would fail on
/// that into the report's failures. If a probe fails, the chunk is left as it
/// is and the batch itself finds the conflicts.
async fn settle_conflicts<T: TableEntity>(
    table: &Table<T>,
    chunk: &mut Chunk,
    mode: Mode,
    report: &mut BulkReport,
) {
    let Some(existing) = existing_rows(table, &chunk.ops, report).await else {
        return;
    };
    let mut kept = Chunk::default();
    for (index, op) in chunk.items.drain(..).zip(chunk.ops.drain(..)) {
        let (pk, rk) = op.keys();
        let error = match mode {
            Mode::Insert if existing.contains(rk) => Error::EntityAlreadyExists {
                table: table.name().to_owned(),
                partition_key: pk.to_owned(),
                row_key: rk.to_owned(),
            },
            Mode::Delete if !existing.contains(rk) => Error::EntityNotFound {
                table: table.name().to_owned(),
                partition_key: pk.to_owned(),
                row_key: rk.to_owned(),
            },
            _ => {
                kept.items.push(index);
                kept.ops.push(op);
                continue;
            }
        };
        report.failures.push(BulkFailure {
            index,
            error: Arc::new(error),
        });
    }
    *chunk = kept;
}

/// Which of the rows that `ops` address exist. One query over the range of
/// their RowKeys settles it when the range holds few other rows (rows loaded
/// together usually sit together); otherwise one query per
/// [`KEYS_PER_PROBE`] keys. `None` if a query fails.
async fn existing_rows<T: TableEntity>(
    table: &Table<T>,
    ops: &[BatchOperation],
    report: &mut BulkReport,
) -> Option<HashSet<String>> {
    let mut existing = HashSet::new();
    probe_rows(table, ops, Some(&["RowKey"]), report, |e| {
        existing.insert(e.row_key);
    })
    .await?;
    Some(existing)
}

/// Hands each stored row among those `ops` address to `each`, with the
/// properties `select` names. One query over the range of their RowKeys
/// settles it when the range holds few other rows (rows loaded together
/// usually sit together); otherwise one query per [`KEYS_PER_PROBE`] keys.
/// `None` if a query fails.
async fn probe_rows<T: TableEntity>(
    table: &Table<T>,
    ops: &[BatchOperation],
    select: Option<&[&str]>,
    report: &mut BulkReport,
    mut each: impl FnMut(crate::entity::Entity),
) -> Option<()> {
    use crate::filter::Filter;
    use crate::keyorder::cmp_utf16;
    let partition = ops.first()?.keys().0;
    let asked: HashSet<&str> = ops.iter().map(|op| op.keys().1).collect();
    let low = asked.iter().copied().min_by(|a, b| cmp_utf16(a, b))?;
    let high = asked.iter().copied().max_by(|a, b| cmp_utf16(a, b))?;
    let range = Filter::partition_key().eq(partition)
        & Filter::row_key().ge(low)
        & Filter::row_key().le(high);
    // Read the range while it holds at most a few rows for each one asked about.
    let mut found = Vec::new();
    let complete = read_rows(table, range, select, 4 * ops.len(), report, |e| {
        if asked.contains(e.row_key.as_str()) {
            found.push(e);
        }
    })
    .await?;
    if complete {
        found.into_iter().for_each(each);
        return Some(());
    }
    for keys in ops.chunks(KEYS_PER_PROBE) {
        let probe = rows_named(partition, keys)?;
        read_rows(table, probe, select, usize::MAX, report, &mut each).await?;
    }
    Some(())
}

/// Hands every row `filter` matches to `each`, a page (one request) at a
/// time, a page that fails transiently being asked for again (a read is safe
/// to repeat). `Some(false)` when more than `budget` rows were read before
/// the end; `None` if a request fails for good.
async fn read_rows<T: TableEntity>(
    table: &Table<T>,
    filter: crate::filter::Filter,
    select: Option<&[&str]>,
    budget: usize,
    report: &mut BulkReport,
    mut each: impl FnMut(crate::entity::Entity),
) -> Option<bool> {
    let mut query = crate::backend::Query::new().filter(filter);
    if let Some(names) = select {
        query = query.select(names.iter().copied());
    }
    let mut read = 0;
    loop {
        let mut page = None;
        for _ in 0..4 {
            report.queries += 1;
            match table.backend().query_entities(table.name(), &query).await {
                Ok(found) => {
                    page = Some(found);
                    break;
                }
                Err(e) if e.is_transient() => {}
                Err(_) => return None,
            }
        }
        let page = page?;
        read += page.entities.len();
        page.entities.into_iter().for_each(&mut each);
        match page.continuation {
            None => return Some(true),
            Some(_) if read > budget => return Some(false),
            next => query.continuation = next,
        }
    }
}
