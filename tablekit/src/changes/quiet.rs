//! Which partitions a consumer's poll may pass by: those it read to their
//! end since their last announcement could still bring a change.
//!
//! A writer announces a partition in the directory (its row written again,
//! with the time) before it sends changes there, at most every
//! five seconds, and every change it sends commits within
//! [`QUIET_AFTER`] of the announcement's time (clocks that differ by up to
//! a minute included). So once a consumer has read
//! a partition to its end, in a read that began [`QUIET_AFTER`] after the
//! last announcement, nothing new comes there until the directory row
//! changes: the poll passes it by, and an idle feed costs the directory's
//! queries alone, however many partitions it has.

use super::*;
use crate::pending::changes::{ANNOUNCED, QUIET_AFTER};

/// How often a consumer reads every partition, quiet ones too, unless told
/// otherwise ([`Consumer::read_all_every`]).
pub(super) const READ_ALL_EVERY: Duration = Duration::from_secs(60 * 60);

/// A partition read to its end: the directory row's ETag then, and the
/// last change number read.
#[derive(Debug, Clone)]
pub(super) struct Quiet {
    etag: ETag,
    through: u64,
}

/// The partitions a consumer handle found quiet, and when it last read
/// every partition, quiet ones too.
#[derive(Debug, Default)]
pub(super) struct QuietPartitions {
    quiet: HashMap<String, Quiet>,
    all_read_at: Option<DateTime>,
}

impl QuietPartitions {
    /// Forgets every quiet partition when `every` has passed since the last
    /// time (the next polls read them all again).
    pub(super) fn read_all_when_due(&mut self, now: DateTime, every: Option<Duration>) {
        let Some(every) = every else { return };
        if self
            .all_read_at
            .is_none_or(|at| now >= at.saturating_add(every))
        {
            self.quiet.clear();
            self.all_read_at = Some(now);
        }
    }

    /// Whether the poll may pass `listed` by, with the consumer's checkpoint
    /// there at `after`: it is quiet, its row unchanged, and everything
    /// read there is committed.
    pub(super) fn passes(&self, listed: &Listed, after: u64) -> bool {
        self.quiet.get(&listed.partition_key).is_some_and(|quiet| {
            listed.etag.as_ref() == Some(&quiet.etag) && after >= quiet.through
        })
    }

    /// Notes a read of `listed` that began at `read_at`, read through change
    /// `through`, and reached the partition's end (or not).
    pub(super) fn note(&mut self, listed: &Listed, read_at: DateTime, to_end: bool, through: u64) {
        let settled = listed
            .announced
            .is_some_and(|at| read_at >= at.saturating_add(QUIET_AFTER));
        match (&listed.etag, to_end && settled) {
            (Some(etag), true) => {
                let quiet = Quiet {
                    etag: etag.clone(),
                    through,
                };
                self.quiet.insert(listed.partition_key.clone(), quiet);
            }
            _ => {
                self.quiet.remove(&listed.partition_key);
            }
        }
    }
}

/// When a partition's directory row says it was last announced: the
/// writer's time on it, or where a writer of an older version listed it
/// (without announcing), the time the row was last written.
pub(super) fn announced(row: &Entity) -> Option<DateTime> {
    match row.properties.get(ANNOUNCED) {
        Some(at) => at.as_datetime(),
        None => row.timestamp,
    }
}
