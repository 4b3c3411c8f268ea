//! What readers read: a snapshot of the engine, held for as long as a read
//! reads it.
//!
//! Readers of a writable store read the state the last durable group of
//! writes left ([`Shared::published`](crate::Shared)). A read holds its
//! snapshot and, with it, a shared hold on [`Shared::reads`](crate::Shared):
//! the engine is closed only when it is opened again after a failed write
//! (`LocalStorage::reopen`), and that waits for reads under way to end, for
//! a snapshot of a closed engine reads nothing more (`DatabaseClosed`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tablekit_core::Result;

use crate::LocalStorage;

/// The engine's table of a table's rows, opened for reading.
pub(crate) type Rows = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The most tables whose rows a snapshot keeps open ([`Published`]).
const KEPT_TABLES: usize = 64;

/// A state of the engine shown to readers, and the tables read in it so
/// far. Opening a table looks its name up in the engine's catalogue of
/// tables, which cost a point read a fifth of its instructions; a snapshot
/// shown to many reads opens each table once, and the next write's
/// snapshot starts afresh.
pub(crate) struct Published {
    txn: redb::ReadTransaction,
    /// By the name the reads gave (names differing in case each take an
    /// entry), at most [`KEPT_TABLES`].
    rows: parking_lot::Mutex<HashMap<String, Arc<Rows>>>,
    /// Whether it keeps the tables it opens: not when it is one read's
    /// alone.
    keeps: bool,
}

impl Published {
    /// `txn`, to be shown to readers, with no table open yet.
    pub(crate) fn new(txn: redb::ReadTransaction) -> Arc<Published> {
        Published::keeping(txn, true)
    }

    /// `txn`, for one read alone: it keeps no table.
    fn alone(txn: redb::ReadTransaction) -> Arc<Published> {
        Published::keeping(txn, false)
    }

    fn keeping(txn: redb::ReadTransaction, keeps: bool) -> Arc<Published> {
        Arc::new(Published {
            txn,
            rows: parking_lot::Mutex::new(HashMap::new()),
            keeps,
        })
    }
}

/// How long a compaction waits for reads under way to end.
pub(crate) const WAIT_FOR_READS: Duration = Duration::from_secs(2);

/// How long an open of the engine again waits for reads under way to end:
/// reads that come meanwhile wait behind it, so it gives up soon (a read
/// of a page ends well within it; a long one, a check of the whole store,
/// say, does not) and a later operation tries again.
pub(crate) const WAIT_TO_REOPEN: Duration = Duration::from_millis(250);

/// A snapshot being read: the engine is not closed under it.
pub(crate) struct Snapshot<'a> {
    txn: Arc<Published>,
    _reading: parking_lot::RwLockReadGuard<'a, ()>,
}

impl std::ops::Deref for Snapshot<'_> {
    type Target = redb::ReadTransaction;

    fn deref(&self) -> &redb::ReadTransaction {
        &self.txn.txn
    }
}

impl Snapshot<'_> {
    /// The rows of `table` as this snapshot opened them before, if it did.
    pub(crate) fn opened_rows(&self, table: &str) -> Option<Arc<Rows>> {
        self.txn.rows.lock().get(table).cloned()
    }

    /// Keeps `rows`, the rows of `table` just opened, for the next reads of
    /// this snapshot.
    pub(crate) fn keep_rows(&self, table: &str, rows: &Arc<Rows>) {
        if !self.txn.keeps {
            return;
        }
        let mut kept = self.txn.rows.lock();
        if kept.len() < KEPT_TABLES {
            kept.insert(table.to_owned(), Arc::clone(rows));
        }
    }
}

impl LocalStorage {
    /// A snapshot to read: what the last durable group of writes left (see
    /// [`Shared::published`](crate::Shared)). Never taken twice at once by
    /// one thread: an open of the engine again waiting for the first would
    /// make the second wait for it.
    pub(crate) fn begin_read(&self) -> Result<Snapshot<'_>> {
        // Opens the engine again first, if a write failed.
        let engine = self.engine()?;
        let reading = self.shared.reads.read();
        let txn = match &*self.shared.published.read() {
            Some(snapshot) => Arc::clone(snapshot),
            None => engine
                .begin_read()
                .map(Published::alone)
                .map_err(|e| self.error(e.into()))?,
        };
        Ok(Snapshot {
            txn,
            _reading: reading,
        })
    }

    /// Shows readers the engine's state as it is now: on the writer thread,
    /// once all of it is durable.
    pub(crate) fn publish(&self) -> Result<()> {
        let snapshot = self
            .engine()?
            .begin_read()
            .map_err(|e| self.error(e.into()))?;
        self.publish_snapshot(Some(Published::new(snapshot)));
        Ok(())
    }

    /// Shows readers `snapshot` (`None`: the engine itself, when it holds
    /// nothing but durable state).
    pub(crate) fn publish_snapshot(&self, snapshot: Option<Arc<Published>>) {
        let old = std::mem::replace(&mut *self.shared.published.write(), snapshot);
        // Dropped outside the lock: the last reference ends a transaction.
        drop(old);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use tablekit_core::{Entity, TableBackend, TableBackendExt, Value};

    use super::*;

    /// A read under way when the engine is opened again (after a failed
    /// write) reads its snapshot to its end: the open waits for it, and
    /// then takes place. Before, the open closed the engine under the read,
    /// which then failed with "Database has been closed".
    #[test]
    fn a_read_under_way_is_not_closed_by_an_open_again() {
        let (runtime, store) = crate::testing::store_with_table("Things");
        runtime.block_on(async {
            store
                .insert_entity("Things", &Entity::new("p", "r").with("n", 1_i32))
                .await
                .unwrap();
        });
        let snapshot = store.begin_read().unwrap();
        // A write failed for the file: the next operation opens it again.
        store.shared.needs_reopen.store(true, Ordering::Release);
        let opening = std::thread::spawn({
            let store = store.clone();
            move || store.engine().map(drop)
        });
        std::thread::sleep(Duration::from_millis(50));
        // Still readable, whether or not the open has started to wait.
        let rows = store.rows_to_read(&snapshot, "Things").unwrap();
        assert_eq!(redb::ReadableTable::iter(&*rows).unwrap().count(), 1);
        if opening.is_finished() {
            // Only by giving up: it never closes the engine under a read.
            assert!(opening.join().unwrap().is_err());
        } else {
            drop(rows);
            drop(snapshot);
            opening.join().unwrap().unwrap();
            assert!(!store.shared.needs_reopen.load(Ordering::Acquire));
        }
        let read = runtime.block_on(store.get_entity("Things", "p", "r", &Default::default()));
        assert_eq!(read.unwrap().properties.get("n"), Some(&Value::Int32(1)));
    }

    /// The tables a snapshot keeps open are its own: a write shows the
    /// next reads a snapshot that opens them afresh, so they read what it
    /// wrote (a value replaced, a table deleted); a name in other case
    /// reads the same table; and a snapshot keeps at most `KEPT_TABLES`.
    #[test]
    fn kept_tables_belong_to_their_snapshot() {
        use tablekit_core::{Error, UpdateMode};
        let (runtime, store) = crate::testing::store_with_table("Things");
        runtime.block_on(async {
            let n = |e: Entity| e.properties.get("n").cloned();
            let get = |table: &'static str| {
                let store = store.clone();
                async move { store.get_entity(table, "p", "r", &Default::default()).await }
            };
            let row = |v: i32| Entity::new("p", "r").with("n", v);
            store.insert_entity("Things", &row(1)).await.unwrap();
            assert_eq!(n(get("Things").await.unwrap()), Some(Value::Int32(1)));
            assert!(store.begin_read().unwrap().opened_rows("Things").is_some());
            assert_eq!(n(get("things").await.unwrap()), Some(Value::Int32(1)));
            store
                .upsert_entity("Things", &row(2), UpdateMode::Replace)
                .await
                .unwrap();
            assert!(store.begin_read().unwrap().opened_rows("Things").is_none());
            assert_eq!(n(get("Things").await.unwrap()), Some(Value::Int32(2)));
            assert_eq!(n(get("things").await.unwrap()), Some(Value::Int32(2)));
            store.delete_table("Things").await.unwrap();
            let gone = get("Things").await;
            // As the service answers for a table just deleted.
            assert!(
                matches!(gone, Err(Error::TableBeingDeleted { .. })),
                "{gone:?}"
            );

            let names: Vec<String> = (0..KEPT_TABLES + 6).map(|i| format!("Many{i}")).collect();
            for name in &names {
                store.create_table(name).await.unwrap();
            }
            for name in &names {
                let missing = store.get_entity(name, "p", "r", &Default::default()).await;
                assert!(matches!(missing, Err(Error::EntityNotFound { .. })));
            }
            let snapshot = store.begin_read().unwrap();
            let kept = names
                .iter()
                .filter(|name| snapshot.opened_rows(name).is_some());
            assert_eq!(kept.count(), KEPT_TABLES);
        });
    }
}
