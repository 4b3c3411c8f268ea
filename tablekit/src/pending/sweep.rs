//! The sweeper: finishes outbox records that no message will finish (the
//! writer stopped before putting it), and removes fences nothing can need.

use std::time::Duration;

use futures::TryStreamExt;

use super::apply::finish_record;
use super::record::{
    FENCE_PREFIX, OUTBOX_PREFIX, Record, is_fence_row, is_outbox_row, row_key_prefix,
};
use crate::backend::{EntityWrite, Query, TableBackend, TableBackendExt};
use crate::clock::Clock;
use crate::entity::IfMatch;
use crate::error::{Error, Result};

/// What a sweep did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct SweepReport {
    /// Records finished.
    pub finished: usize,
    /// Records younger than the age, left to their messages.
    pub young: usize,
    /// Records that failed, with why (they stay, for the next sweep).
    pub failed: Vec<(Record, Error)>,
    /// Fence rows removed.
    pub fences_removed: usize,
    /// When the oldest record left pending (young or failed) was written.
    pub oldest_pending: Option<crate::datetime::DateTime>,
}

/// Finishes every outbox record of `table` older than `age`, and, if
/// `fence_horizon` is given, removes fence rows last moved longer ago than
/// it and before the oldest record still pending.
///
/// A record is normally finished by its writer at once, or by the
/// [`OutboxWorker`](crate::outbox::OutboxWorker) when its message comes due; the
/// sweeper is for the records whose message was never put. Pick an age
/// well past the message's delay, so that the two rarely race (a race is
/// harmless: steps are fenced, and a record finished twice is finished).
///
/// Fences keep an older step from undoing a newer one. Remove them only
/// after any step that could still arrive is older than the fence: steps
/// live in records (a notice only names the records to finish), so the
/// fences before the oldest record still pending can go, given a horizon
/// longer than any writer or worker may stall (a day, say).
///
/// The sweep reads the whole table (outbox records and fences live in
/// every partition), one page at a time.
pub async fn sweep(
    backend: &dyn TableBackend,
    table: &str,
    age: Duration,
    fence_horizon: Option<Duration>,
    clock: &dyn Clock,
) -> Result<SweepReport> {
    let now = clock.now();
    let mut report = SweepReport::default();
    let mut oldest_pending = None;
    let records = backend.query_stream(table, Query::new().filter(row_key_prefix(OUTBOX_PREFIX)));
    futures::pin_mut!(records);
    while let Some(row) = records.try_next().await? {
        if !is_outbox_row(&row) {
            continue;
        }
        let record = Record::from_row(&row)?;
        if now
            .duration_since(record.at)
            .is_none_or(|elapsed| elapsed < age)
        {
            report.young += 1;
            oldest_pending = Some(
                oldest_pending.map_or(record.at, |o: crate::datetime::DateTime| o.min(record.at)),
            );
            continue;
        }
        match finish_record(backend, &record).await {
            Ok(()) => report.finished += 1,
            Err(error) => {
                oldest_pending = Some(
                    oldest_pending
                        .map_or(record.at, |o: crate::datetime::DateTime| o.min(record.at)),
                );
                report.failed.push((record, error));
            }
        }
    }
    report.oldest_pending = oldest_pending;
    let Some(horizon) = fence_horizon else {
        return Ok(report);
    };
    let mut cutoff = now
        .checked_sub(horizon)
        .unwrap_or(crate::datetime::DateTime::MIN);
    if let Some(oldest) = oldest_pending {
        cutoff = cutoff.min(oldest);
    }
    report.fences_removed = remove_fences_before(backend, table, cutoff).await?;
    Ok(report)
}

/// Removes the fence rows of `table` last moved before `cutoff`; how many.
///
/// Fences keep an older step from undoing a newer one: pick a cutoff before
/// the oldest record still pending anywhere whose steps reach `table`, and
/// further back than any writer or worker may stall (see [`sweep`]).
///
/// A fence that cannot be deleted does not stop the others; the first such
/// error is returned once all were tried, and the removals it hides are
/// lost to the count (see [`remove_fences_counting`], which keeps them).
pub async fn remove_fences_before(
    backend: &dyn TableBackend,
    table: &str,
    cutoff: crate::datetime::DateTime,
) -> Result<usize> {
    let mut removed = 0;
    remove_fences_counting(backend, table, cutoff, &mut removed).await?;
    Ok(removed)
}

/// [`remove_fences_before`], adding each fence removed to `removed` as it
/// goes, so that the count holds also when the call fails.
pub async fn remove_fences_counting(
    backend: &dyn TableBackend,
    table: &str,
    cutoff: crate::datetime::DateTime,
    removed: &mut usize,
) -> Result<()> {
    let mut first_error = None;
    let fences = backend.query_stream(table, Query::new().filter(row_key_prefix(FENCE_PREFIX)));
    futures::pin_mut!(fences);
    while let Some(row) = fences.try_next().await? {
        let old = row.timestamp.is_some_and(|moved| moved < cutoff);
        if !is_fence_row(&row) || !old {
            continue;
        }
        let if_match = row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        let delete = EntityWrite::Delete(&row.partition_key, &row.row_key, &if_match);
        match crate::exec::write_one(backend, table, delete).await {
            Ok(_) => *removed += 1,
            // Moved or removed meanwhile: it stays, or is gone already.
            Err(Error::PreconditionFailed { .. } | Error::EntityNotFound { .. }) => {}
            // This fence stays for the next round; the others go on.
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// How many outbox records of `table` are not finished yet (one read of
/// the records' RowKeys, page by page).
pub async fn pending_count(backend: &dyn TableBackend, table: &str) -> Result<usize> {
    let mut query = Query::new().filter(row_key_prefix(OUTBOX_PREFIX));
    query.select = Some(vec![super::record::OUTBOX_PROPERTY.to_owned()]);
    let records = backend.query_stream(table, query);
    futures::pin_mut!(records);
    let mut count = 0;
    while let Some(row) = records.try_next().await? {
        if is_outbox_row(&row) {
            count += 1;
        }
    }
    Ok(count)
}
