//! Trimming the change feed: deleting the changes older than a window that
//! every registered consumer has committed, and remembering, for the
//! upkeep's next round, which partitions can have nothing to trim yet.

use super::*;

/// What one partition's trim found holds its changes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Its oldest change left is too young until then (changes after it
    /// are younger).
    Until(DateTime),
    /// Every change up to the consumers' checkpoints is gone: nothing more
    /// until they pass this number.
    Behind(u64),
}

/// What trims learned of each partition, for the next: the upkeep keeps
/// one, so that a round reads only the partitions where something may be
/// due (once a day, say, for a feed kept 24 hours), not every partition.
#[derive(Debug, Default)]
pub(crate) struct TrimMemo {
    partitions: HashMap<String, Blocked>,
}

impl TrimMemo {
    /// Whether the partition `pk` can have nothing to trim at `now`, with
    /// the consumers at `passed` (a trim with a limit takes changes no
    /// consumer passed, so only time holds those back).
    fn holds_back(&self, pk: &str, now: DateTime, passed: u64, limited: bool) -> bool {
        match self.partitions.get(pk) {
            Some(Blocked::Until(at)) => now < *at,
            Some(Blocked::Behind(at)) => !limited && passed == *at,
            None => false,
        }
    }

    /// Notes what holds the partition `pk` back now (`None`: not known).
    fn note(&mut self, pk: &str, blocked: Option<Blocked>) {
        match blocked {
            Some(blocked) => {
                self.partitions.insert(pk.to_owned(), blocked);
            }
            None => {
                self.partitions.remove(pk);
            }
        }
    }
}

/// What [`Changes::trim`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrimReport {
    /// The changes deleted.
    pub removed: usize,
    /// The partitions they were deleted from.
    pub partitions: usize,
}

impl<T: TableEntity> Changes<T> {
    /// Deletes the changes older than `window` that every registered
    /// consumer has committed (all of them older than `window`, when no
    /// consumer is registered). A consumer registers when it first polls,
    /// and holds trimming back until it is
    /// [unregistered](Consumer::unregister). A consumer whose checkpoint
    /// is behind what was trimmed (one that was not registered) gets
    /// [`ChangesTrimmed`](Error::ChangesTrimmed) from its next poll:
    /// changes are never skipped in silence.
    ///
    /// Requests: the directory (one query per 1,000 partitions and
    /// consumers), then per partition with changes to trim a range query,
    /// the directory row's update, and one transaction per 100 changes.
    pub async fn trim(&self, window: Duration) -> Result<TrimReport> {
        self.trim_with_limit(window, None).await
    }

    /// [`trim`](Changes::trim), and with a `limit` also the changes older
    /// than it that a registered consumer has not committed: a consumer
    /// that stopped for good (and was never
    /// [unregistered](Consumer::unregister)) then holds the feed back no
    /// longer than `limit`. A consumer behind what was trimmed gets
    /// [`ChangesTrimmed`](Error::ChangesTrimmed) from its next poll. A
    /// `limit` shorter than `window` counts as `window`.
    pub async fn trim_with_limit(
        &self,
        window: Duration,
        limit: Option<Duration>,
    ) -> Result<TrimReport> {
        self.trim_remembering(window, limit, &mut TrimMemo::default())
            .await
    }

    /// [`trim_with_limit`](Changes::trim_with_limit), passing by the
    /// partitions `memo` (what earlier trims learned) shows can have
    /// nothing to trim yet, and noting what this one learns: the upkeep's
    /// trim, which would otherwise read every partition every round.
    pub(crate) async fn trim_remembering(
        &self,
        window: Duration,
        limit: Option<Duration>,
        memo: &mut TrimMemo,
    ) -> Result<TrimReport> {
        let now = self.table.clock.now();
        let hard = limit.and_then(|limit| now.checked_sub(limit.max(window)).ok());
        let registered: Vec<String> = self
            .directory(REGISTERED_PREFIX)
            .await?
            .into_iter()
            .filter_map(|row| {
                row.row_key
                    .strip_prefix(REGISTERED_PREFIX)
                    .map(str::to_owned)
            })
            .collect();
        let mut checkpoints: HashMap<(String, String), u64> = HashMap::new();
        for row in self.directory(CHECKPOINT_PREFIX).await? {
            let Some(rest) = row.row_key.strip_prefix(CHECKPOINT_PREFIX) else {
                continue;
            };
            if let Some((name, pk)) = rest.split_once('|') {
                checkpoints.insert((name.to_owned(), pk.to_owned()), number(&row, SEQ));
            }
        }
        let mut report = TrimReport::default();
        for listed in self.listed().await? {
            let pk = &listed.partition_key;
            let passed = registered
                .iter()
                .map(|name| {
                    let key = (name.clone(), pk.clone());
                    checkpoints.get(&key).copied().unwrap_or(0)
                })
                .min()
                .unwrap_or(u64::MAX);
            // (A trim that stopped half way left rows up to its mark: this
            // one deletes them.)
            let settled = listed.cleared >= listed.trimmed;
            if settled && passed <= listed.trimmed && hard.is_none() {
                continue;
            }
            if settled && memo.holds_back(pk, now, passed, hard.is_some()) {
                continue;
            }
            let (removed, blocked) = self
                .trim_partition(&listed, passed, (now, window), hard)
                .await?;
            memo.note(pk, blocked);
            report.partitions += usize::from(removed > 0);
            report.removed += removed;
        }
        Ok(report)
    }

    /// Trims the changes of one partition after those deleted already:
    /// those up to its mark, then those committed before `cutoff` up to
    /// `passed`, or any committed before `hard`; how many.
    async fn trim_partition(
        &self,
        listed: &Listed,
        passed: u64,
        (now, window): (DateTime, Duration),
        hard: Option<DateTime>,
    ) -> Result<(usize, Option<Blocked>)> {
        let cutoff = now.checked_sub(window).ok();
        let pk = &listed.partition_key;
        let end = match (passed, hard) {
            (u64::MAX, _) | (_, Some(_)) => Filter::row_key().lt(CHANGE_END),
            (passed, None) => Filter::row_key().le(change_key(passed)),
        };
        let filter = Filter::partition_key()
            .eq(pk.as_str())
            .and(Filter::row_key().gt(change_key(listed.cleared)))
            .and(end);
        let query = Query::new().filter(filter).select([OP, "Timestamp"]);
        let backend = self.table.backend();
        let mut rows: Vec<Entity> = backend.query_all(self.table.name(), query).await?;
        // In number order, which is commit order, on a store that returns
        // rows in no order too.
        rows.sort_by_key(|row| seq_of_change(&row.row_key));
        // Oldest first: the changes up to the first one too young.
        let before = |at: Option<DateTime>, time: Option<DateTime>| match (at, time) {
            (Some(at), Some(time)) => at < time,
            _ => false,
        };
        let taken = rows
            .iter()
            .take_while(|row| {
                let seq = seq_of_change(&row.row_key);
                let marked = seq.is_some_and(|seq| seq <= listed.trimmed);
                let committed = seq.is_some_and(|seq| seq <= passed);
                marked
                    || (before(row.timestamp, cutoff) && (committed || before(row.timestamp, hard)))
            })
            .count();
        // What holds the rest back: the first change left, too young until
        // its time plus the window; or, where every change this trim could
        // take is gone, the consumers (or, with none, the next change's
        // age).
        let blocked = match rows.get(taken) {
            Some(row) => row
                .timestamp
                .map(|at| Blocked::Until(at.saturating_add(window))),
            None if passed != u64::MAX && hard.is_none() => Some(Blocked::Behind(passed)),
            None => Some(Blocked::Until(now.saturating_add(window))),
        };
        let old: Vec<u64> = rows[..taken]
            .iter()
            .filter_map(|row| seq_of_change(&row.row_key))
            .collect();
        let Some(&last) = old.last() else {
            return Ok((0, blocked));
        };
        // Said first, deleted after, then the deletes said done: a consumer
        // behind is told, and a trim that stops half way leaves its rows to
        // the next one.
        self.mark_trimmed(pk, TRIMMED, last).await?;
        for chunk in old.chunks(100) {
            let operations: Vec<crate::backend::BatchOperation> = chunk
                .iter()
                .map(|&seq| crate::backend::BatchOperation::Delete {
                    partition_key: pk.clone(),
                    row_key: change_key(seq),
                    if_match: IfMatch::Any,
                })
                .collect();
            match crate::exec::send_operations(backend.as_ref(), self.table.name(), &operations)
                .await
            {
                Ok(_) => {}
                // Another trim took some first: the rest one by one.
                Err(Error::BatchFailed { source, .. })
                    if matches!(*source, Error::EntityNotFound { .. }) =>
                {
                    for operation in &operations {
                        let (pk, rk) = operation.keys();
                        let delete = EntityWrite::Delete(pk, rk, &IfMatch::Any);
                        match crate::exec::write_one(backend.as_ref(), self.table.name(), delete)
                            .await
                        {
                            Ok(_) | Err(Error::EntityNotFound { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.mark_trimmed(pk, CLEARED, last).await?;
        Ok((old.len(), blocked))
    }

    /// Records on the partition's directory row that changes up to `seq`
    /// are trimmed ([`TRIMMED`]) or deleted ([`CLEARED`]), never lowering
    /// what is there.
    async fn mark_trimmed(&self, pk: &str, mark: &'static str, seq: u64) -> Result<()> {
        raise(&self.table, &listed_key(pk), mark, seq, || {
            format!("the change feed's directory row of partition {pk:?}")
        })
        .await
    }
}
