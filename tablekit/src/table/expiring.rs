//! Rows that expire, at the typed client: an insert whose keys an expired
//! entity still holds takes its place; every write of an entity that
//! expires first puts its row in the expiry index; and the sweep deletes
//! the entities that are due. (Reads pass expired entities by where they
//! read them: see `schema::expired`.)
//!
//! # The expiry index
//! Each entity that expires has a row in its type's expiry index: in the
//! partition of its hour of expiry, keyed by its expiry time and a hash of
//! its keys, holding its keys (`schema::index_row`). The row is put before
//! the entity's own write, as a blob is before the row that names it, so
//! a stored entity always has one for the time it holds. A row left by a
//! write that did not land, or by a value later moved, names an entity
//! that is not due at its time: the sweep reads the entity and drops it.
//! The due rows of every hour up to now are one key range, so the sweep
//! reads only what is due, never the table.

use futures::stream::{self, StreamExt};

use super::Table;
use super::write::{RowWrite, Write, Written};
use crate::backend::{BatchOperation, EntityWrite, Query, TableBackendExt, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch, Properties};
use crate::error::{Error, Result};
use crate::schema::{self, TableEntity};
use crate::value::Value;

/// How many times an insert over an expired entity reads and tries again
/// when another writer changes the row in between.
const RACES: usize = 4;
/// Entities read at once by the sweep.
const READS_AT_ONCE: usize = 16;
/// Rows of one transaction.
const BATCH: usize = 100;
/// Transactions of the sweep sent at once.
const AT_ONCE: usize = 4;

/// What one [`sweep_expired`](Table::sweep_expired) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExpirySweep {
    /// Expired entities deleted.
    pub deleted: usize,
    /// Index rows dropped without a delete: their entity was gone, or no
    /// longer due at that time (written again since).
    pub passed: usize,
    /// Whether due rows remain past the sweep's limit.
    pub more: bool,
}

impl<T: TableEntity> Table<T> {
    /// Whether the row whose properties are `props` has expired by the
    /// table's clock (which is read only for a type whose entities expire:
    /// every typed read asks).
    pub(crate) fn has_expired(&self, props: &Properties) -> bool {
        schema::expiry_property::<T>().is_some() && schema::expired::<T, _>(props, self.clock.now())
    }

    /// The condition that leaves expired rows out of a query of `T`, by the
    /// table's clock (read only for a type whose entities expire).
    pub(crate) fn live_filter(&self) -> Option<crate::filter::Filter> {
        schema::expiry_property::<T>()?;
        schema::live_filter::<T>(self.clock.now())
    }

    /// The insert of `value` after the store refused it as `taken`: when
    /// the entity holding its keys has expired, `value` replaces it as a
    /// new entity (none of the expired row's properties is kept), guarded
    /// by the expired row's ETag; a live one leaves the refusal as it was.
    pub(super) async fn insert_over_expired(&self, value: &T, taken: Error) -> Result<ETag> {
        let (pk, rk) = (schema::partition_key_of(value)?, schema::row_key_of(value)?);
        let none = Properties::new();
        for _ in 0..RACES {
            let Some(stored) = self.read_stored(&pk, &rk).await? else {
                // Deleted meanwhile (by the sweep, say): an insert again.
                match self.enter(Write::Insert(value)).await {
                    Err(Error::EntityAlreadyExists { .. }) => continue,
                    other => return other.map(Written::etag),
                }
            };
            if !self.has_expired(&stored.properties) {
                return Err(taken);
            }
            let Some(etag) = stored.etag.clone() else {
                return Err(taken);
            };
            if T::DESCRIPTOR.write_needs().any() {
                // Rows beside it (index rows, a change) are its own: the
                // expired entity is deleted as the sweep would, then the
                // insert goes again.
                self.expire(&stored, etag).await?;
                continue;
            }
            let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag));
            match self.enter(Write::Put(value, write, &none)).await {
                Err(Error::PreconditionFailed { .. } | Error::EntityNotFound { .. }) => continue,
                other => return other.map(Written::etag),
            }
        }
        Err(taken)
    }

    /// The ETag of the expired entity stored under the keys of `row`, if
    /// one is (for a type whose entities expire).
    pub(crate) async fn expired_at(&self, row: &Entity) -> Result<Option<ETag>> {
        if schema::expiry_property::<T>().is_none() {
            return Ok(None);
        }
        let stored = self.read_stored(&row.partition_key, &row.row_key).await?;
        Ok(stored
            .filter(|stored| self.has_expired(&stored.properties))
            .and_then(|stored| stored.etag))
    }

    /// Deletes the expired entity stored under the keys of `row`, read with
    /// `etag` ([`Write::Expire`]); one changed or gone meanwhile is left as
    /// it is now.
    pub(crate) async fn expire(&self, row: &Entity, etag: ETag) -> Result<()> {
        let (pk, rk) = (row.partition_key.clone(), row.row_key.clone());
        match self.enter(Write::Expire(pk, rk, etag)).await {
            Ok(_) | Err(Error::PreconditionFailed { .. } | Error::EntityNotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether `error` refused a write for a unique value held by an
    /// entity that may have expired (of a type whose entities expire).
    pub(crate) fn may_have_expired(&self, error: &Error) -> bool {
        schema::expiry_property::<T>().is_some() && unique_refusal(error).is_some()
    }

    /// After `error`, a write refused for a unique value another entity
    /// holds ([`may_have_expired`](Self::may_have_expired)): when that
    /// entity has expired, deletes it as the sweep would (an expired
    /// entity holds no value), and says the write may go again; so it may
    /// when the holder is gone meanwhile.
    pub(crate) async fn free_unique(&self, error: &Error) -> Result<bool> {
        let Some((partition_key, held_by)) = unique_refusal(error) else {
            return Ok(false);
        };
        let Some(holder) = self.read_stored(partition_key, held_by).await? else {
            return Ok(true);
        };
        match &holder.etag {
            Some(etag) if self.has_expired(&holder.properties) => {
                self.expire(&holder, etag.clone()).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Puts the expiry index row of `row`, an entity of `T` about to be
    /// written, if it holds an expiry time (see the module's notes).
    pub(crate) async fn index_expiry(&self, row: &Entity) -> Result<()> {
        let Some(index) = schema::index_row::<T>(row) else {
            return Ok(());
        };
        let write = EntityWrite::Upsert(&index, UpdateMode::Replace);
        crate::exec::write_one(&*self.backend, &self.name, write).await?;
        Ok(())
    }

    /// [`index_expiry`](Self::index_expiry) of many rows, in transactions
    /// of one index partition.
    pub(crate) async fn index_expiries(
        &self,
        rows: impl IntoIterator<Item = &Entity>,
    ) -> Result<()> {
        // By partition, each row once (a transaction names a row once).
        type Rows = std::collections::BTreeMap<String, Entity>;
        let mut partitions: std::collections::BTreeMap<String, Rows> = Default::default();
        for index in rows.into_iter().filter_map(schema::index_row::<T>) {
            let partition = partitions.entry(index.partition_key.clone()).or_default();
            partition.insert(index.row_key.clone(), index);
        }
        for entries in partitions.into_values() {
            let entries: Vec<Entity> = entries.into_values().collect();
            for chunk in entries.chunks(BATCH) {
                let operations: Vec<BatchOperation> = chunk
                    .iter()
                    .map(|row| BatchOperation::Upsert {
                        entity: row.clone(),
                        mode: UpdateMode::Replace,
                    })
                    .collect();
                crate::exec::send_operations(&*self.backend, &self.name, &operations).await?;
            }
        }
        Ok(())
    }

    /// Deletes up to `limit` entities of `T` that have expired by the
    /// table's clock, with their index rows: reads the due rows of the
    /// expiry index (never the table), then each entity they name. An
    /// entity that is due is deleted under the ETag it was read with, so
    /// one written again meanwhile stays; a row whose entity is gone or no
    /// longer due is dropped. The upkeep calls it every round
    /// ([`Upkeep::watch`](crate::upkeep::Upkeep::watch)).
    ///
    /// Stopped at any point (a dropped future, a failure), it leaves index
    /// rows that the next sweep reads again: none is dropped before its
    /// entity is deleted.
    pub async fn sweep_expired(&self, limit: usize) -> Result<ExpirySweep> {
        let mut report = ExpirySweep::default();
        if schema::expiry_property::<T>().is_none() || limit == 0 {
            return Ok(report);
        }
        let now = self.clock.now();
        let mut query = Query::new().filter(schema::due_filter::<T>(now));
        query.top = Some(u32::try_from(limit.min(1000)).unwrap_or(1000));
        let mut due: Vec<Entity> = Vec::new();
        loop {
            let page = self.backend.query_entities(&self.name, &query).await?;
            due.extend(page.entities);
            match page.continuation {
                Some(next) if due.len() < limit => query.continuation = Some(next),
                Some(_) => {
                    report.more = true;
                    break;
                }
                None => break,
            }
        }
        report.more |= due.len() > limit;
        due.truncate(limit);
        // Each entity read, and judged: due (deleted under its ETag), or
        // not (its index row alone goes).
        // Made before they are streamed: a closure that borrows each row
        // inside the stream would make this future impossible to spawn.
        let reads: Vec<_> = due.iter().map(|index| self.judge(index, now)).collect();
        let judged: Vec<_> = stream::iter(reads).buffered(READS_AT_ONCE).collect().await;
        let mut doomed: Vec<(usize, String, String, ETag)> = Vec::new();
        let mut done: Vec<usize> = Vec::new();
        // An entity named by two due rows (one left by an earlier value) is
        // deleted once; the second row goes with the first.
        let mut first = std::collections::HashMap::new();
        let mut twins: Vec<(usize, usize)> = Vec::new();
        for (at, verdict) in judged.into_iter().enumerate() {
            match verdict? {
                Verdict::Due(pk, rk, etag) => match first.get(&(pk.clone(), rk.clone())) {
                    Some(&earlier) => twins.push((at, earlier)),
                    None => {
                        first.insert((pk.clone(), rk.clone()), at);
                        doomed.push((at, pk, rk, etag));
                    }
                },
                Verdict::Passed => {
                    report.passed += 1;
                    done.push(at);
                }
            }
        }
        let gone = self.delete_due(&doomed).await?;
        for &(at, deleted) in &gone {
            match deleted {
                true => report.deleted += 1,
                false => report.passed += 1,
            }
            done.push(at);
        }
        for (at, earlier) in twins {
            if gone.iter().any(|&(gone, _)| gone == earlier) {
                report.passed += 1;
                done.push(at);
            }
        }
        let rows: Vec<&Entity> = done.iter().map(|&at| &due[at]).collect();
        self.drop_index_rows(&rows).await?;
        Ok(report)
    }

    /// Drops the rows of the expiry index of `T`'s kind that its expiry as
    /// declared now does not read (its time to live removed, or given to
    /// another property): their entities no longer expire by them. A
    /// migration calls it once it has rewritten every row. How many it
    /// dropped.
    pub(crate) async fn drop_stale_expiry_rows(&self) -> Result<usize> {
        let mut query = Query::new().filter(schema::kind_index_filter::<T>());
        query.select = Some(vec!["PartitionKey".into(), "RowKey".into()]);
        let rows = self.backend.query_all(&self.name, query).await?;
        let stale: Vec<(&str, &str, IfMatch)> = rows
            .iter()
            .filter(|row| schema::is_stale_index_row::<T>(&row.partition_key))
            .map(|row| {
                (
                    row.partition_key.as_str(),
                    row.row_key.as_str(),
                    IfMatch::Any,
                )
            })
            .collect();
        let dropped = stale.len();
        self.delete_rows(stale).await?;
        Ok(dropped)
    }

    /// Whether the entity `index` names is due at `now`: then its keys and
    /// the ETag it was read with.
    async fn judge(&self, index: &Entity, now: crate::datetime::DateTime) -> Result<Verdict> {
        let (Some(Value::String(pk)), Some(Value::String(rk))) =
            (index.get(schema::EXPIRY_PK), index.get(schema::EXPIRY_RK))
        else {
            // Not a row of the index: nothing to delete by it.
            return Ok(Verdict::Passed);
        };
        let Some(row) = self.read_stored(pk, rk).await? else {
            return Ok(Verdict::Passed);
        };
        if !schema::expired::<T, _>(&row.properties, now) {
            // Written again since, or its type's time to live made longer:
            // indexed at the time it expires now before this row goes.
            self.index_expiry(&row).await?;
            return Ok(Verdict::Passed);
        }
        match row.etag {
            Some(etag) => Ok(Verdict::Due(pk.clone(), rk.clone(), etag)),
            None => Ok(Verdict::Passed),
        }
    }

    /// Deletes the due entities `(position, pk, rk, etag)`, each under its
    /// ETag: the position of each one that is gone now, and whether this
    /// sweep deleted it (or found it gone). One written again meanwhile is
    /// left, with its index row, for the next sweep to judge again.
    async fn delete_due(
        &self,
        doomed: &[(usize, String, String, ETag)],
    ) -> Result<Vec<(usize, bool)>> {
        if T::DESCRIPTOR.write_needs().any() {
            // Rows beside the entity (index rows, an outbox record, its
            // change) go with it: each is a typed delete of its own.
            return self.expire_each(doomed).await;
        }
        let rows = doomed
            .iter()
            .map(|(_, pk, rk, etag)| (pk.as_str(), rk.as_str(), IfMatch::ETag(etag.clone())));
        let outcomes = self.delete_rows(rows.collect()).await?;
        Ok((doomed.iter().zip(outcomes))
            .filter_map(|((at, ..), outcome)| match outcome {
                Deleted::Now => Some((*at, true)),
                Deleted::Before => Some((*at, false)),
                // Written again meanwhile: judged again next time.
                Deleted::Changed => None,
            })
            .collect())
    }

    /// [`delete_due`](Self::delete_due) of a type that keeps rows beside
    /// its entities: each a typed delete ([`Write::Expire`]), which plans
    /// them with it and records the expiry in its change feed; [`AT_ONCE`]
    /// at a time.
    async fn expire_each(
        &self,
        doomed: &[(usize, String, String, ETag)],
    ) -> Result<Vec<(usize, bool)>> {
        // Made before they are streamed (see `judge`'s).
        let deletes: Vec<_> = doomed
            .iter()
            .map(|(at, pk, rk, etag)| async move {
                let expire = Write::Expire(pk.clone(), rk.clone(), etag.clone());
                let outcome = match self.enter(expire).await {
                    Ok(_) => Deleted::Now,
                    Err(Error::EntityNotFound { .. }) => Deleted::Before,
                    Err(Error::PreconditionFailed { .. }) => Deleted::Changed,
                    Err(e) => return Err(e),
                };
                Ok((*at, outcome))
            })
            .collect();
        let mut done = stream::iter(deletes).buffer_unordered(AT_ONCE);
        let mut gone = Vec::with_capacity(doomed.len());
        while let Some(outcome) = done.next().await {
            match outcome? {
                (at, Deleted::Now) => gone.push((at, true)),
                (at, Deleted::Before) => gone.push((at, false)),
                // Written again meanwhile: judged again next time.
                (_, Deleted::Changed) => {}
            }
        }
        Ok(gone)
    }

    /// Deletes the expiry index rows `rows`, those already gone passed by.
    async fn drop_index_rows(&self, rows: &[&Entity]) -> Result<()> {
        let rows = rows.iter().map(|row| {
            (
                row.partition_key.as_str(),
                row.row_key.as_str(),
                IfMatch::Any,
            )
        });
        self.delete_rows(rows.collect()).await?;
        Ok(())
    }

    /// Deletes `rows` (keys and guard): those of one partition in
    /// transactions, [`AT_ONCE`] at a time, and a transaction one of whose
    /// rows changed or went meanwhile row by row. What became of each row,
    /// in the order given.
    async fn delete_rows(&self, rows: Vec<(&str, &str, IfMatch)>) -> Result<Vec<Deleted>> {
        let mut partitions: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
        for (at, (pk, ..)) in rows.iter().enumerate() {
            partitions.entry(pk).or_default().push(at);
        }
        // Made before they are streamed (see `judge`'s).
        let chunks: Vec<_> = partitions
            .values()
            .flat_map(|entries| entries.chunks(BATCH))
            .map(|chunk| self.delete_chunk(&rows, chunk))
            .collect();
        let mut outcomes = vec![Deleted::Changed; rows.len()];
        let mut done = stream::iter(chunks).buffer_unordered(AT_ONCE);
        while let Some(chunk) = done.next().await {
            for (at, outcome) in chunk? {
                outcomes[at] = outcome;
            }
        }
        Ok(outcomes)
    }

    /// [`delete_rows`](Self::delete_rows) of the rows at `chunk`, of one
    /// partition: in one transaction, or each alone when it is refused.
    async fn delete_chunk(
        &self,
        rows: &[(&str, &str, IfMatch)],
        chunk: &[usize],
    ) -> Result<Vec<(usize, Deleted)>> {
        let operations: Vec<BatchOperation> = chunk
            .iter()
            .map(|&at| BatchOperation::Delete {
                partition_key: rows[at].0.to_owned(),
                row_key: rows[at].1.to_owned(),
                if_match: rows[at].2.clone(),
            })
            .collect();
        match crate::exec::send_operations(&*self.backend, &self.name, &operations).await {
            Ok(_) => return Ok(chunk.iter().map(|&at| (at, Deleted::Now)).collect()),
            Err(Error::BatchFailed { .. }) => {}
            Err(e) => return Err(e),
        }
        let mut outcomes = Vec::with_capacity(chunk.len());
        for &at in chunk {
            let (pk, rk, guard) = &rows[at];
            let delete = EntityWrite::Delete(pk, rk, guard);
            let outcome = match crate::exec::write_one(&*self.backend, &self.name, delete).await {
                Ok(_) => Deleted::Now,
                Err(Error::EntityNotFound { .. }) => Deleted::Before,
                Err(Error::PreconditionFailed { .. }) => Deleted::Changed,
                Err(e) => return Err(e),
            };
            outcomes.push((at, outcome));
        }
        Ok(outcomes)
    }
}

/// The keys of the entity holding the unique value `error` (a write's, or
/// a transaction's) was refused for.
fn unique_refusal(error: &Error) -> Option<(&str, &str)> {
    let error = match error {
        Error::BatchFailed { source, .. } => source,
        other => other,
    };
    match error {
        Error::UniqueViolation {
            partition_key,
            held_by,
            ..
        } => Some((partition_key, held_by)),
        _ => None,
    }
}

/// What became of a row the sweep deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deleted {
    /// Deleted by this sweep.
    Now,
    /// Gone already.
    Before,
    /// Changed since it was read: left.
    Changed,
}

/// What the sweep found of an entity its index names.
enum Verdict {
    /// Expired: its keys, and the ETag it was read with.
    Due(String, String, ETag),
    /// Gone, or not due at that time.
    Passed,
}
