//! The times a store gives its writes (each row's Timestamp, and the ETag
//! made from it): always later than every time given before, across
//! restarts and crashes too, without a second changed row per write.

use std::sync::atomic::Ordering;

use redb::ReadableTable;
use tablekit_core::Result;

use crate::{LocalStorage, META, logged};

/// The key in [`META`] of the bound on the times the store has given.
pub(crate) const TICKS: &str = "ticks";

/// How far past the time it gives a write moves the store's bound on the
/// times given (see [`LocalStorage::next_ticks`]): 100 ms, in ticks.
pub(crate) const TICKS_AHEAD: i64 = 1_000_000;

impl LocalStorage {
    /// A time later than every earlier one given by this store, so that an
    /// ETag is never handed out twice, across restarts too: the wall clock
    /// in ticks, or one tick past the last.
    ///
    /// The store keeps a bound on the times it gave (`ticks` in [`META`]),
    /// not each one: the bound is moved, [`TICKS_AHEAD`] past the time
    /// given, only by a write whose time passes it. So most writes change
    /// no row beyond their own, and after a crash the first time given is
    /// at most [`TICKS_AHEAD`] later than the wall clock. A clean close
    /// stores the last time given exactly ([`store_last_ticks`]).
    ///
    /// [`store_last_ticks`]: LocalStorage::store_last_ticks
    pub(crate) fn next_ticks(&self, txn: &logged::Txn<'_>) -> Result<i64> {
        // Under the bound a committed transaction left (which `txn` holds,
        // or a later one): nothing to read or move.
        let kept = self.shared.kept.ticks_bound.load(Ordering::Relaxed);
        let last = self.shared.last_ticks.load(Ordering::Relaxed);
        if kept != i64::MIN && last != i64::MIN {
            let now = self.wall_ticks().max(last.saturating_add(1));
            if now <= kept {
                self.shared.last_ticks.store(now, Ordering::Relaxed);
                return Ok(now);
            }
        }
        (|| -> Result<i64, redb::Error> {
            let mut meta = txn.open_table(META)?;
            let bound = meta.get(TICKS)?.map_or(i64::MIN, |v| v.value());
            // The last time given in this process; before the first, the
            // bound the store kept.
            let last = match self.shared.last_ticks.load(Ordering::Relaxed) {
                i64::MIN => bound,
                last => last,
            };
            let now = self.wall_ticks().max(last.saturating_add(1));
            let bound = if now > bound {
                // In this write's transaction: durable with it, or gone with it.
                let moved = now.saturating_add(TICKS_AHEAD);
                meta.insert(TICKS, moved)?;
                moved
            } else {
                bound
            };
            txn.learned.borrow_mut().ticks_bound = Some(bound);
            self.shared.last_ticks.store(now, Ordering::Relaxed);
            Ok(now)
        })()
        .map_err(|e| self.error(e))
    }

    /// The wall clock, in ticks.
    #[cfg(not(test))]
    fn wall_ticks(&self) -> i64 {
        tablekit_core::DateTime::now().ticks()
    }

    /// The wall clock, in ticks, or the time the tests set.
    #[cfg(test)]
    fn wall_ticks(&self) -> i64 {
        match self.shared.wall_ticks.load(Ordering::Relaxed) {
            i64::MIN => tablekit_core::DateTime::now().ticks(),
            set => set,
        }
    }

    /// Stores the last time given as the bound of the times given (see
    /// [`next_ticks`](Self::next_ticks)), in `txn`: a clean close does, so
    /// that the next open goes on from the wall clock.
    pub(crate) fn store_last_ticks(&self, txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
        let last = self.shared.last_ticks.load(Ordering::Relaxed);
        if last != i64::MIN {
            txn.open_table(META)?.insert(TICKS, last)?;
        }
        // The bound is no longer the one kept.
        self.forget_learned();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use tablekit_core::{Entity, TableBackend, TableBackendExt};

    use super::*;

    /// A long-past time, for a wall clock set back.
    const T: i64 = 630_000_000_000_000_000;

    /// The times given to `n` inserts into `store` (from their ETags).
    async fn insert(store: &LocalStorage, from: u32, n: u32) -> Vec<i64> {
        let mut given = Vec::new();
        for i in from..from + n {
            let row = Entity::new("p", format!("{i:04}"));
            let etag = store.insert_entity("times", &row).await.unwrap();
            given.push(etag.timestamp().unwrap().ticks());
        }
        given
    }

    /// Copies the files of the open store in `dir` into `image`, as a
    /// crash would leave them.
    fn crash_image(dir: &std::path::Path, image: &std::path::Path) {
        for name in [crate::FILE_NAME, crate::journal::FILE_NAME] {
            std::fs::copy(dir.join(name), image.join(name)).unwrap();
        }
    }

    /// The store in `dir`, opened, with the table `times`, its wall clock
    /// set at `T`.
    async fn at_t(dir: &std::path::Path) -> LocalStorage {
        let store = LocalStorage::open(dir).unwrap();
        store.create_table("times").await.unwrap();
        set_wall(&store, T);
        store
    }

    fn set_wall(store: &LocalStorage, ticks: i64) {
        store.shared.wall_ticks.store(ticks, Ordering::Relaxed);
    }

    /// With the wall clock held back, the times given after a crash and
    /// after a clean close are still later than every time given before:
    /// after a crash, at most `TICKS_AHEAD` later than the last; after a
    /// clean close, one tick later.
    #[test]
    fn times_given_stay_later_than_any_before_across_a_crash_and_a_close() {
        let runtime = crate::testing::runtime();
        let (dir, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        runtime.block_on(async {
            let store = at_t(dir.path()).await;
            let given = insert(&store, 0, 50).await;
            let expected: Vec<i64> = (0..50).map(|i| T + i).collect();
            assert_eq!(
                given, expected,
                "one tick past the last, with the clock still"
            );
            // A crash now: the files as they are, with the store open.
            crash_image(dir.path(), image.path());
            let last = *given.last().unwrap();
            {
                let crashed = LocalStorage::open(image.path()).unwrap();
                set_wall(&crashed, T);
                let after = insert(&crashed, 100, 2).await;
                assert!(after[0] > last, "{} after {last}", after[0]);
                assert!(
                    after[0] <= last + TICKS_AHEAD + 1,
                    "{} after {last}",
                    after[0]
                );
                assert_eq!(after[1], after[0] + 1);
            }
            drop(store);
            let reopened = LocalStorage::open(dir.path()).unwrap();
            set_wall(&reopened, T);
            assert_eq!(insert(&reopened, 200, 1).await, vec![last + 1]);
        });
    }

    /// A bound on the times given that a refused write moved (its sync
    /// failed, and its commit was discarded) is not taken as moved: the
    /// writes after it move the stored bound themselves, so that the times
    /// given after a crash are still later than theirs.
    #[test]
    fn a_bound_moved_by_a_refused_write_is_moved_again() {
        let runtime = crate::testing::runtime();
        let (dir, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        runtime.block_on(async {
            let store = at_t(dir.path()).await;
            insert(&store, 0, 1).await;
            // Past the bound: the refused write moves it, in a commit that
            // is discarded.
            set_wall(&store, T + 2 * TICKS_AHEAD);
            store.shared.failing_syncs.store(1, Ordering::Release);
            let refused = store.insert_entity("times", &Entity::new("p", "x")).await;
            assert!(refused.is_err());
            set_wall(&store, T + 2 * TICKS_AHEAD + 10);
            let given = insert(&store, 1, 3).await;
            crash_image(dir.path(), image.path());
            let crashed = LocalStorage::open(image.path()).unwrap();
            set_wall(&crashed, T);
            let after = insert(&crashed, 100, 1).await;
            let last = *given.last().unwrap();
            assert!(after[0] > last, "{} after {last}", after[0]);
        });
    }
}
