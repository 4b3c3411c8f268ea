//! The transaction runner: plans the writes of one transaction, sends them
//! as one entity group transaction, and plans again after a lost race or a
//! lost answer.

use std::collections::HashMap;
use std::sync::Arc;

use super::changes::{Feed, FeedNotes};
use super::lane::{self, Outcome};
use super::{Learned, Pending, Planned, Role};
use crate::backend::{BatchOperation, TableBackend};
use crate::datetime::DateTime;
use crate::entity::ETag;
use crate::error::{Error, Result};
use crate::exec::{send_operations, too_many_operations};
use crate::table::RACE_ATTEMPTS;
use crate::validate::limits::MAX_BATCH_OPERATIONS;

/// Runs `writes` as one entity group transaction with every row they need
/// (parts, index rows), trying again where a write without an ETag of its
/// own lost a race. One ETag per write (`None` for a delete). A failure is
/// [`BatchFailed`](Error::BatchFailed) with the index of the write (not of
/// the row) in `writes`. Once it commits, `discard` holds the offloaded
/// values the writes replaced, for the caller to delete.
pub(in crate::table) async fn run(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    writes: &[&(dyn Pending + '_)],
    clock: &dyn crate::clock::Clock,
    discard: &mut Vec<String>,
) -> Result<Vec<Option<ETag>>> {
    check_writes(writes)?;
    // The time is for outbox records alone: not read for other writes.
    let at = if writes.iter().any(|w| w.spans().is_some()) {
        clock.now()
    } else {
        DateTime::MIN
    };
    // One write is the common case: it gets by without a list on the heap.
    let mut learned: smallvec::SmallVec<[Learned; 1]> =
        writes.iter().map(|_| Learned::default()).collect();
    let learned = learned.as_mut_slice();
    let mut feed = Feed::of(writes);
    let feed_room = feed.as_ref().map_or(0, Feed::room);
    let room: usize = writes.iter().map(|w| w.room()).sum::<usize>() + feed_room;
    let pk = writes[0].keys().0;
    let mut last = None;
    for _ in 0..RACE_ATTEMPTS {
        let mut planned = Planned::with_capacity(room);
        // Whether each write may try again after a lost race.
        let retry = plan_all(backend, table, writes, learned, at, &mut planned).await?;
        let Planned {
            operations,
            owners,
            feed: notes,
            discard: replaced,
            ..
        } = planned;
        if operations.len() + feed_room > MAX_BATCH_OPERATIONS {
            return Err(too_many_operations(operations.len() + feed_room));
        }
        let (operations, answer) = match feed.as_mut() {
            // Sent by itself, straight to the store.
            None => {
                let sent = send_operations(backend.as_ref(), table, &operations).await;
                (operations, Answer::of(sent))
            }
            // Boxed: the lane's future is large, and a transaction without
            // a feed should not carry its room.
            Some(feed) => {
                Box::pin(send_in_lane(
                    backend, table, pk, clock, feed, operations, &notes,
                ))
                .await
            }
        };
        let answer = match answer {
            Answer::Committed(etags) => Again::Committed(write_etags(etags, &owners, writes.len())),
            answer => {
                let sent = Sent {
                    backend,
                    table,
                    pk,
                    writes,
                    operations: &operations,
                    owners: &owners,
                };
                Box::pin(sent.answered(answer, feed.as_ref(), &retry, learned)).await?
            }
        };
        match answer {
            Again::Committed(etags) => {
                *discard = replaced;
                return Ok(etags);
            }
            Again::Retry(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(Error::Transient {
        message: "the transaction made no attempt".into(),
    }))
}

/// What follows an answer of the store.
enum Again {
    /// The transaction committed: each write's ETag.
    Committed(Vec<Option<ETag>>),
    /// Planned and sent again; this error if it runs out of attempts.
    Retry(Error),
}

/// A transaction as sent, and what it was sent for.
struct Sent<'a> {
    backend: &'a Arc<dyn TableBackend>,
    table: &'a str,
    pk: &'a str,
    writes: &'a [&'a (dyn Pending + 'a)],
    operations: &'a [BatchOperation],
    owners: &'a [(usize, Role)],
}

impl Sent<'_> {
    /// What follows `answer`, any but a commit: a refusal decided by the
    /// failed operation's role (learning about the write's index rows on
    /// the way), an open fate settled.
    async fn answered(
        &self,
        answer: Answer,
        feed: Option<&Feed<'_>>,
        retry: &Retry,
        learned: &mut [Learned],
    ) -> Result<Again> {
        let (at, source) = match answer {
            Answer::Committed(etags) => {
                let etags = write_etags(etags, self.owners, self.writes.len());
                return Ok(Again::Committed(etags));
            }
            Answer::Refused(at, source) => (at, source),
            Answer::Error(e) => return Err(e),
            Answer::Open(error) => {
                if let Some(etags) = self.settle(feed, error).await? {
                    return Ok(Again::Committed(etags));
                }
                // Not sent, or not committed: the turn that held it
                // stopped. Planned and sent again.
                return Ok(Again::Retry(Error::Transient {
                    message: "the transaction's group stopped before it was sent".into(),
                }));
            }
        };
        let (table, writes) = (self.table, self.writes);
        let next = failed(
            table,
            writes,
            self.operations,
            self.owners,
            retry,
            learned,
            at,
            source,
        );
        match next {
            Next::Fail(e) => Err(e),
            Next::Retry(e) => Ok(Again::Retry(e)),
            Next::Claim { w, index, key } => {
                let claimed = writes[w].claim(self.backend, table, index, &key).await;
                if let Some(etag) = claimed.map_err(|e| e.in_batch(w))? {
                    learned[w].take_over.retain(|(k, _)| *k != key);
                    learned[w].take_over.push((key, etag));
                }
                Ok(Again::Retry(precondition(table, writes[w], w)))
            }
        }
    }

    /// Each write's ETag when the transaction committed (a resend refused,
    /// an answer lost, or a turn stopped, after it committed: it is not
    /// planned, and its changes recorded, again); else `error`, or `None`
    /// when it may be sent again.
    async fn settle(
        &self,
        feed: Option<&Feed<'_>>,
        error: Option<Error>,
    ) -> Result<Option<Vec<Option<ETag>>>> {
        let (backend, table, pk) = (self.backend, self.table, self.pk);
        let committed = match feed {
            Some(feed) => feed.committed_already(backend, table, pk).await?,
            None => false,
        };
        if committed {
            tracing::debug!(
                table,
                pk,
                "a transaction with changes committed before its answer"
            );
            let writes = self.writes.len();
            let etags = read_etags(backend, table, self.operations, self.owners, writes);
            return etags.await.map(Some);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }
}

/// How the store answered a transaction.
enum Answer {
    /// Committed: the ETags of its operations.
    Committed(Vec<Option<ETag>>),
    /// Refused at operation `.0`; nothing of it applied.
    Refused(usize, Error),
    /// Failed otherwise; nothing of it applied.
    Error(Error),
    /// Its fate is open (see [`Outcome::Unsettled`]).
    Open(Option<Error>),
}

impl Answer {
    /// The answer to a transaction sent by itself.
    fn of(sent: Result<Vec<Option<ETag>>>) -> Answer {
        match sent {
            Ok(etags) => Answer::Committed(etags),
            Err(Error::BatchFailed { index, source }) => Answer::Refused(index, *source),
            Err(e) => Answer::Error(e),
        }
    }
}

/// Sends `operations` with the changes of `feed` in their partition's
/// lane. Returns them, as sent, with the answer.
async fn send_in_lane(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    pk: &str,
    clock: &dyn crate::clock::Clock,
    feed: &mut Feed<'_>,
    operations: Vec<BatchOperation>,
    notes: &FeedNotes,
) -> (Vec<BatchOperation>, Answer) {
    let entry = feed.entry(pk, operations, notes);
    let sent = lane::send(backend, table, pk, clock, entry).await;
    feed.first = sent.first;
    let answer = match sent.outcome {
        Outcome::Committed(etags) => Answer::Committed(etags),
        Outcome::Failed { at, source } => Answer::Refused(at, source),
        Outcome::Refused { write, source } => Answer::Error(source.in_batch(write)),
        Outcome::Error(e) => Answer::Error(e),
        Outcome::Unsettled(e) => Answer::Open(e),
    };
    (sent.entry.into_operations(), answer)
}

/// Each write's ETag, read back from its row, after a transaction found
/// committed though its answer was lost (`None` for a delete, and for a
/// row gone since). A row another writer changed since gives its ETag.
#[cold]
async fn read_etags(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    operations: &[BatchOperation],
    owners: &[(usize, Role)],
    writes: usize,
) -> Result<Vec<Option<ETag>>> {
    let mut etags = vec![None; writes];
    for (operation, &(w, role)) in operations.iter().zip(owners) {
        if !matches!(role, Role::Row) || matches!(operation, BatchOperation::Delete { .. }) {
            continue;
        }
        let (pk, rk) = operation.keys();
        let stored =
            crate::backend::TableBackendExt::try_get_entity(backend.as_ref(), table, pk, rk)
                .await?;
        if let Some(slot) = etags.get_mut(w).filter(|slot| slot.is_none()) {
            *slot = stored.and_then(|row| row.etag);
        }
    }
    Ok(etags)
}

/// One partition, each entity once: checked in the caller's terms.
fn check_writes(writes: &[&(dyn Pending + '_)]) -> Result<()> {
    let Some(first) = writes.first() else {
        return Err(crate::error::InvalidInput::BatchEmpty.into());
    };
    let (first_pk, _) = first.keys();
    for (index, write) in writes.iter().enumerate() {
        let (pk, rk) = write.keys();
        if pk != first_pk {
            return Err(crate::error::InvalidInput::BatchPartitionMismatch {
                index,
                expected: first_pk.to_owned(),
                found: pk.to_owned(),
            }
            .into());
        }
        if let Some(first) = writes[..index].iter().position(|w| w.keys().1 == rk) {
            return Err(crate::error::InvalidInput::BatchDuplicateEntity {
                first,
                index,
                row_key: rk.to_owned(),
            }
            .into());
        }
    }
    Ok(())
}

/// Whether each write of a transaction may try again after a lost race.
enum Retry {
    One(bool),
    Each(Vec<bool>),
}

/// Plans the writes of a transaction into `planned`.
async fn plan_all(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    writes: &[&(dyn Pending + '_)],
    learned: &[Learned],
    at: DateTime,
    planned: &mut Planned,
) -> Result<Retry> {
    let [write] = writes else {
        // Boxed: a transaction of one write does not carry its room.
        return Box::pin(plan_many(backend, table, writes, learned, at, planned)).await;
    };
    let state = state_of(*write, backend, table, &learned[0], 0).await?;
    let retry = write
        .plan(state, &learned[0], at, planned)
        .map_err(|e| e.in_batch(0))?;
    Ok(Retry::One(retry))
}

/// What write `w` replaces: known, or read.
async fn state_of<'a>(
    write: &'a (dyn Pending + 'a),
    backend: &'a Arc<dyn TableBackend>,
    table: &'a str,
    learned: &'a Learned,
    w: usize,
) -> Result<super::State<'a>> {
    match write.known_state(learned) {
        Some(state) => Ok(state),
        None => write
            .state(backend, table, learned)
            .await
            .map_err(|e| e.in_batch(w)),
    }
}

/// Plans the writes of a transaction of several, their states read at once.
async fn plan_many(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    writes: &[&(dyn Pending + '_)],
    learned: &[Learned],
    at: DateTime,
    planned: &mut Planned,
) -> Result<Retry> {
    let states = futures::future::try_join_all(
        writes
            .iter()
            .zip(learned)
            .enumerate()
            .map(|(w, (write, learned))| state_of(*write, backend, table, learned, w)),
    )
    .await?;
    let mut retry = Vec::with_capacity(writes.len());
    for (w, (write, state)) in writes.iter().zip(states).enumerate() {
        planned.write = w;
        let retried = write
            .plan(state, &learned[w], at, planned)
            .map_err(|e| e.in_batch(w))?;
        retry.push(retried);
    }
    check_rows(&planned.operations, &planned.owners)?;
    Ok(Retry::Each(retry))
}

/// What a transaction does after the store refused one of its operations.
enum Next {
    /// Fails with this error.
    Fail(Error),
    /// Tries again; this error if it runs out of attempts.
    Retry(Error),
    /// A unique index row of write `w` is taken: see whose it is, then try
    /// again.
    Claim { w: usize, index: usize, key: String },
}

/// A write's keys, precondition failed, in the caller's terms.
fn precondition(table: &str, write: &(dyn Pending + '_), w: usize) -> Error {
    let (pk, rk) = write.keys();
    Error::PreconditionFailed {
        table: table.to_owned(),
        partition_key: pk.to_owned(),
        row_key: rk.to_owned(),
    }
    .in_batch(w)
}

/// A refusal of an entity's row (or part), restated in the caller's terms:
/// with the entity's table and keys. Any other error is returned as it is.
pub(super) fn restated(source: Error, table: &str, (pk, rk): (&str, &str)) -> Error {
    let keys = || (table.to_owned(), pk.to_owned(), rk.to_owned());
    match source {
        Error::PreconditionFailed { .. } => {
            let (table, partition_key, row_key) = keys();
            Error::PreconditionFailed {
                table,
                partition_key,
                row_key,
            }
        }
        Error::EntityNotFound { .. } => {
            let (table, partition_key, row_key) = keys();
            Error::EntityNotFound {
                table,
                partition_key,
                row_key,
            }
        }
        Error::EntityAlreadyExists { .. } => {
            let (table, partition_key, row_key) = keys();
            Error::EntityAlreadyExists {
                table,
                partition_key,
                row_key,
            }
        }
        other => other,
    }
}

/// Decides what to do after operation `at` failed with `source`, learning
/// about the write's index rows on the way. Out of line and cold: the
/// common transaction never comes here, and its code stays compact.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn failed(
    table: &str,
    writes: &[&(dyn Pending + '_)],
    operations: &[BatchOperation],
    owners: &[(usize, Role)],
    retry: &Retry,
    learned: &mut [Learned],
    at: usize,
    source: Error,
) -> Next {
    let Some(&(w, role)) = owners.get(at) else {
        return Next::Fail(source);
    };
    let may_retry = match retry {
        Retry::One(retry) => *retry,
        Retry::Each(retry) => retry[w],
    };
    // The failed operation's row: for an index row, its key.
    let key = || operations[at].keys().1.to_owned();
    let write = writes[w];
    match (role, source) {
        (
            Role::Row | Role::Other,
            Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. },
        ) if may_retry => Next::Retry(precondition(table, write, w)),
        (
            Role::Row | Role::Other,
            source @ (Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. }),
        ) => Next::Fail(restated(source, table, write.keys()).in_batch(w)),
        (
            Role::List,
            Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. },
        ) => {
            // Another writer changed the index entity first: read it
            // again and retry.
            Next::Retry(precondition(table, write, w))
        }
        (Role::CompanionDelete, Error::EntityNotFound { .. }) => {
            learned[w].missing.push(key());
            Next::Retry(precondition(table, write, w))
        }
        (Role::CompanionWrite(index), Error::EntityAlreadyExists { .. }) => Next::Claim {
            w,
            index,
            key: key(),
        },
        (
            Role::CompanionWrite(_),
            Error::PreconditionFailed { .. } | Error::EntityNotFound { .. },
        ) => {
            // A row to take over changed or went, or a merge planned
            // without reading met a missing index row: look again, from
            // the stored entity.
            let key = key();
            learned[w].take_over.retain(|(k, _)| *k != key);
            learned[w].read = true;
            Next::Retry(precondition(table, write, w))
        }
        (_, source) => Next::Fail(source.in_batch(w)),
    }
}

/// Each write's ETag, its [`Role::Row`]'s (`None` for a delete), from the
/// ETags of the operations sent, in place: each write has one such row, in
/// the order of the writes, and every write has at least one operation, so
/// the row of write `w` is never before operation `w`.
fn write_etags(
    mut etags: Vec<Option<ETag>>,
    owners: &[(usize, Role)],
    writes: usize,
) -> Vec<Option<ETag>> {
    let mut next = 0;
    for (i, &(w, role)) in owners.iter().enumerate() {
        if w == next && matches!(role, Role::Row) {
            etags.swap(w, i);
            next += 1;
        }
    }
    etags.truncate(writes);
    for etag in &mut etags {
        if etag.as_ref().is_some_and(|e| e.as_str().is_empty()) {
            *etag = None;
        }
    }
    etags
}

/// Refuses two writes of one transaction that would touch the same row (an
/// index value two entities want, or one gives up and another takes), in
/// the caller's terms: the store refuses a transaction that names a row twice.
fn check_rows(operations: &[BatchOperation], owners: &[(usize, Role)]) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (operation, (w, _)) in operations.iter().zip(owners) {
        let rk = operation.keys().1;
        match seen.get(rk) {
            Some(&first) if first != *w => {
                return Err(crate::error::InvalidInput::BatchDuplicateEntity {
                    first,
                    index: *w,
                    row_key: rk.to_owned(),
                }
                .into());
            }
            _ => {
                seen.insert(rk, *w);
            }
        }
    }
    Ok(())
}
