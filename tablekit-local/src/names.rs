//! Property names, stored once per store instead of in every row.
//!
//! A row names each of its properties by a small number, the name's *id*
//! (see [`crate::rows`]). The store keeps two engine tables of names: ids by
//! name ([`IDS`], for writes) and names by id ([`NAMES`], for reads), each
//! value sealed with a checksum of its key (see [`crate::seal::sealed`]).
//! The first [`MAX_NAMES`] names written get an id; any later name is kept
//! in the rows that use it, so that a store whose rows invent names without
//! end (a name per row) keeps a bounded table of names and a bounded cache
//! of them in memory.
//!
//! **Ids never change meaning.** An id is given in a write transaction, and
//! is only ever seen by readers once that transaction is durable (they read
//! the last durable state, see [`crate::writer`]); nothing removes an id.
//! So a reader may keep the names it has read for as long as the store is
//! open ([`NameCache`], shared by every read), and a reader of an older
//! state finds in it every id that state uses. A write reads and gives ids
//! in its own transaction ([`TxnNames`]), never through that cache: a
//! transaction that is rolled back, or refused after a failed sync, takes
//! the ids it gave with it.

use std::cell::RefCell;
use std::sync::Arc;

use redb::{Key, ReadableTable, TableDefinition};
use tablekit_core::backend::sorted::{put_varint, take_varint};
use tablekit_core::{Error, PropertyName, Result};

use crate::LocalStorage;
use crate::logged::{Logged, LoggedTable, Txn};
use crate::seal::{checked, sealed};

/// Ids by name: the sealed varint id of each name.
pub(crate) const IDS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("property_ids");
/// Names by id: the sealed UTF-8 name of each id.
pub(crate) const NAMES: TableDefinition<'static, u64, &[u8]> =
    TableDefinition::new("property_names");

/// How many names get an id: a later name is kept in each row that uses it.
pub(crate) const MAX_NAMES: u64 = 16_384;

/// The names of the engine tables [`create_system_tables`] makes, for the
/// check of the engine's list of its tables.
pub(crate) fn system_tables() -> [String; 2] {
    use redb::TableHandle;
    [IDS.name().to_owned(), NAMES.name().to_owned()]
}

pub(crate) fn create_system_tables(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(IDS)?;
    txn.open_table(NAMES)?;
    Ok(())
}

/// The sealed value of `id` under the name `name` in [`IDS`].
fn id_value(name: &str, id: u64) -> Vec<u8> {
    let mut body = Vec::with_capacity(10);
    put_varint(&mut body, id);
    sealed(name.as_bytes(), &body)
}

/// The id in a value of [`IDS`] stored under `name`; `None` if damaged.
fn read_id(name: &str, stored: &[u8]) -> Option<u64> {
    let mut body = checked(name.as_bytes(), stored)?;
    let id = take_varint(&mut body)?;
    (body.is_empty() && id < MAX_NAMES).then_some(id)
}

/// The name in a value of [`NAMES`] stored under `id`; `None` if damaged.
fn read_name(id: u64, stored: &[u8]) -> Option<&str> {
    std::str::from_utf8(checked(&id.to_le_bytes(), stored)?).ok()
}

/// What a row is read with to turn its ids back into names.
pub(crate) trait NameOf {
    /// `f` of the name whose id is `id`; `None` if the store has no such
    /// name (the row is damaged), or the engine failed to read it.
    fn with_name<R>(&self, id: u64, f: impl FnOnce(&str) -> R) -> Option<R>;

    /// The name whose id is `id`, for an entity; `None` as
    /// [`with_name`](NameOf::with_name).
    fn property_name(&self, id: u64) -> Option<PropertyName> {
        self.with_name(id, |name| PropertyName::Owned(name.to_owned()))
    }

    /// The error of a row that did not read with these names: the
    /// engine's, if it failed to read a name, else `damaged`.
    fn or_damaged(&self, damaged: impl FnOnce() -> Error) -> Error;
}

/// The property names handed out by the reads of every store of the
/// process, each kept once for the life of the process so that a row read
/// gives its entity the name without copying it (a [`PropertyName`] is
/// borrowed when it is `'static`). Bounded: past [`MAX_INTERNED_BYTES`]
/// of names, or [`MAX_INTERNED`] names, a name is handed out as a copy,
/// so that a process opening stores without end never grows it without
/// end. Hand-written: the interning crates keep every name they are
/// given, with no bound.
struct Interned {
    names: std::collections::HashSet<&'static str>,
    bytes: usize,
}

/// The most names [`interned`] keeps.
const MAX_INTERNED: usize = 65_536;
/// The most bytes of names [`interned`] keeps.
const MAX_INTERNED_BYTES: usize = 1 << 20;

static INTERNED: parking_lot::Mutex<Option<Interned>> = parking_lot::Mutex::new(None);

/// `name` as the process's one kept copy of it, or as a copy of its own
/// once the process keeps as many names as it may.
fn interned(name: &str) -> PropertyName {
    let mut guard = INTERNED.lock();
    let kept = guard.get_or_insert_with(|| Interned {
        names: std::collections::HashSet::new(),
        bytes: 0,
    });
    if let Some(name) = kept.names.get(name) {
        return PropertyName::Borrowed(name);
    }
    if kept.names.len() >= MAX_INTERNED || kept.bytes + name.len() > MAX_INTERNED_BYTES {
        return PropertyName::Owned(name.to_owned());
    }
    // Kept for the life of the process, within the bounds above.
    let name: &'static str = Box::leak(Box::from(name));
    kept.names.insert(name);
    kept.bytes += name.len();
    PropertyName::Borrowed(name)
}

/// The names a store's readers have read, by id (`None` for an id whose
/// entry is damaged). Ids are given from 0 up, so this is a vector.
#[derive(Debug, Default)]
pub(crate) struct NameCache {
    by_id: Vec<Option<PropertyName>>,
}

impl NameCache {
    /// This cache and the names of `txn` from the first id it lacks on.
    fn extended(&self, txn: &redb::ReadTransaction) -> Result<NameCache, redb::Error> {
        let table = txn.open_table(NAMES)?;
        let mut by_id = self.by_id.clone();
        for item in table.range(by_id.len() as u64..)? {
            let (id, stored) = item?;
            let id = id.value();
            let at = usize::try_from(id).unwrap_or(usize::MAX);
            if id >= MAX_NAMES || at < by_id.len() {
                // Not an id this store gives: damage, read as no name.
                continue;
            }
            by_id.resize(at, None);
            by_id.push(read_name(id, stored.value()).map(interned));
        }
        Ok(NameCache { by_id })
    }

    fn get(&self, id: u64) -> Option<&PropertyName> {
        self.by_id.get(usize::try_from(id).ok()?)?.as_ref()
    }
}

/// The ids of property names, as the writer has met them in transactions
/// it committed: a name's id never changes once committed, so a write
/// whose names are all here opens neither table of names. Its entries
/// come from the engine's commits, durable or not yet: when commits that
/// were not durable are discarded (a failed sync), the ids they gave may
/// be given again to other names, and the cache is emptied with them
/// (`LocalStorage::forget_learned`), as it is when the engine is opened
/// again. Filled and read on the writer thread, in the order of its
/// transactions.
#[derive(Default)]
pub(crate) struct NameIds(parking_lot::Mutex<std::collections::HashMap<Box<str>, u64>>);

impl NameIds {
    /// The id of `name`, if met.
    fn get(&self, name: &str) -> Option<u64> {
        self.0.lock().get(name).copied()
    }

    /// Keeps the ids a committed transaction read or gave.
    pub(crate) fn extend(&self, ids: Vec<(Box<str>, u64)>) {
        if !ids.is_empty() {
            self.0.lock().extend(ids);
        }
    }

    /// Forgets every id: they may no longer be the engine's.
    pub(crate) fn clear(&self) {
        self.0.lock().clear();
    }
}

/// The names of one read: the store's [`NameCache`], read on from the
/// read's own state once when it meets an id the cache lacks.
pub(crate) struct SnapshotNames<'a> {
    storage: &'a LocalStorage,
    txn: &'a redb::ReadTransaction,
    cache: RefCell<Arc<NameCache>>,
    /// Whether the cache was read on already: an id still missing then is
    /// damage, and is not looked for again.
    extended: std::cell::Cell<bool>,
    /// The engine's error while reading on, reported instead of damage.
    failed: RefCell<Option<Error>>,
}

impl<'a> SnapshotNames<'a> {
    pub(crate) fn new(storage: &'a LocalStorage, txn: &'a redb::ReadTransaction) -> Self {
        SnapshotNames {
            storage,
            txn,
            cache: RefCell::new(Arc::clone(&storage.shared.names.read())),
            extended: std::cell::Cell::new(false),
            failed: RefCell::new(None),
        }
    }

    fn extend(&self) {
        self.extended.set(true);
        let current = Arc::clone(&self.cache.borrow());
        match current.extended(self.txn) {
            Ok(more) => {
                let more = Arc::new(more);
                let mut shared = self.storage.shared.names.write();
                // Another read may have read on further, from a later state.
                if more.by_id.len() > shared.by_id.len() {
                    *shared = Arc::clone(&more);
                }
                *self.cache.borrow_mut() = more;
            }
            Err(e) => *self.failed.borrow_mut() = Some(self.storage.error(e)),
        }
    }
}

impl SnapshotNames<'_> {
    /// `f` of the cached name of `id`, the cache read on first if it lacks it.
    fn cached<R>(&self, id: u64, f: impl FnOnce(&PropertyName) -> R) -> Option<R> {
        if self.cache.borrow().get(id).is_none() && !self.extended.get() && id < MAX_NAMES {
            self.extend();
        }
        self.cache.borrow().get(id).map(f)
    }
}

impl NameOf for SnapshotNames<'_> {
    fn with_name<R>(&self, id: u64, f: impl FnOnce(&str) -> R) -> Option<R> {
        self.cached(id, |name| f(name))
    }

    fn property_name(&self, id: u64) -> Option<PropertyName> {
        // A kept name is handed out without copying it.
        self.cached(id, PropertyName::clone)
    }

    fn or_damaged(&self, damaged: impl FnOnce() -> Error) -> Error {
        self.failed.borrow_mut().take().unwrap_or_else(damaged)
    }
}

/// The names of a write transaction: read in it, and ids given in it.
pub(crate) struct TxnNames<'t> {
    storage: &'t LocalStorage,
    txn: &'t Txn<'t>,
    ids: RefCell<Option<LoggedTable<'t, &'static str, &'static [u8]>>>,
    names: RefCell<Option<LoggedTable<'t, u64, &'static [u8]>>>,
    /// The ids found or given in this transaction so far, so that the rows
    /// of a batch look each name up once; valid only in it.
    known: RefCell<std::collections::HashMap<Box<str>, Option<u64>>>,
    /// The engine's error while reading a name, reported instead of damage.
    failed: RefCell<Option<Error>>,
}

impl<'t> TxnNames<'t> {
    pub(crate) fn new(storage: &'t LocalStorage, txn: &'t Txn<'t>) -> Self {
        TxnNames {
            storage,
            txn,
            ids: RefCell::new(None),
            names: RefCell::new(None),
            known: RefCell::default(),
            failed: RefCell::new(None),
        }
    }

    /// The table `definition` of the transaction in `slot`, opened there on
    /// first use.
    fn opened<'s, K: Logged + Key, V: Logged>(
        &self,
        slot: &'s mut Option<LoggedTable<'t, K, V>>,
        definition: TableDefinition<'static, K, V>,
    ) -> Result<&'s mut LoggedTable<'t, K, V>> {
        if slot.is_none() {
            let table = self
                .txn
                .open_system_table(definition)
                .map_err(|e| self.storage.error(e.into()))?;
            *slot = Some(table);
        }
        Ok(slot.as_mut().expect("opened above"))
    }

    /// Runs `f` on the table of names by id.
    fn names<R>(
        &self,
        f: impl FnOnce(&mut LoggedTable<'t, u64, &'static [u8]>) -> Result<R, redb::Error>,
    ) -> Result<R> {
        let mut names = self.names.borrow_mut();
        f(self.opened(&mut names, NAMES)?).map_err(|e| self.storage.error(e))
    }

    /// The id of `name`, given now if it has none; `None` once
    /// [`MAX_NAMES`] names have ids (the row keeps the name itself).
    pub(crate) fn id_of(&self, name: &str) -> Result<Option<u64>> {
        if let Some(id) = self.known.borrow().get(name) {
            return Ok(*id);
        }
        // Committed before this transaction began: its state holds it (and
        // the writer's cache answers as fast as `known` would).
        if let Some(id) = self.storage.shared.kept.name_ids.get(name) {
            return Ok(Some(id));
        }
        let id = self.look_up(name)?;
        if let Some(id) = id {
            let learned = &mut self.txn.learned.borrow_mut();
            learned.name_ids.push((name.into(), id));
        }
        self.known.borrow_mut().insert(name.into(), id);
        Ok(id)
    }

    /// [`id_of`](TxnNames::id_of), from the engine's tables.
    fn look_up(&self, name: &str) -> Result<Option<u64>> {
        let mut ids = self.ids.borrow_mut();
        let ids = self.opened(&mut ids, IDS)?;
        let found = ids
            .get(name)
            .map_err(|e| self.storage.error(e.into()))?
            .map(|stored| read_id(name, stored.value()));
        if let Some(id) = found {
            let id = id.ok_or_else(|| {
                self.storage
                    .damaged(&format!("the id of the property name {name:?}"))
            })?;
            return Ok(Some(id));
        }
        let last = self.names(|names| Ok(names.last()?.map(|(last, _)| last.value())))?;
        let next = match last {
            None => 0,
            Some(last) if last < MAX_NAMES => last + 1,
            // No id this store gives: the table is damaged, and a number
            // counted on from it could be one already in use.
            Some(last) => {
                return Err(self
                    .storage
                    .damaged(&format!("the property name of id {last}")));
            }
        };
        if next >= MAX_NAMES {
            return Ok(None);
        }
        self.names(|names| {
            names.insert(
                next,
                sealed(&next.to_le_bytes(), name.as_bytes()).as_slice(),
            )?;
            Ok(())
        })?;
        ids.insert(name, id_value(name, next).as_slice())
            .map_err(|e| self.storage.error(e.into()))?;
        Ok(Some(next))
    }
}

impl NameOf for TxnNames<'_> {
    fn with_name<R>(&self, id: u64, f: impl FnOnce(&str) -> R) -> Option<R> {
        let read = |stored: &[u8]| read_name(id, stored).map(f);
        match self.names(|names| Ok(names.get(id)?.and_then(|v| read(v.value())))) {
            Ok(read) => read,
            Err(e) => {
                *self.failed.borrow_mut() = Some(e);
                None
            }
        }
    }

    fn or_damaged(&self, damaged: impl FnOnce() -> Error) -> Error {
        self.failed.borrow_mut().take().unwrap_or_else(damaged)
    }
}

/// [`check`](LocalStorage::check)'s part for names: each entry of both
/// tables against its checksum, and each name's id naming it back.
pub(crate) fn check(txn: &redb::ReadTransaction, report: &mut crate::check::CheckReport) {
    let mut by_id = std::collections::HashMap::new();
    crate::check::walk(
        txn,
        NAMES,
        crate::check::Presence::Optional,
        "the property names",
        report,
        |report, id, stored| match read_name(id, stored) {
            Some(name) if id < MAX_NAMES => {
                by_id.insert(id, name.to_owned());
            }
            _ => report.damage(
                format!("the property name of id {id}"),
                "does not match its checksum or does not decode",
            ),
        },
    );
    crate::check::walk(
        txn,
        IDS,
        crate::check::Presence::Optional,
        "the property ids",
        report,
        |report, name, stored| match read_id(name, stored) {
            Some(id) if by_id.get(&id).is_some_and(|n| n == name) => {}
            Some(id) => report.damage(
                format!("the id of the property name {name:?}"),
                format!("names id {id}, whose name is not {name:?}"),
            ),
            None => report.damage(
                format!("the id of the property name {name:?}"),
                "does not match its checksum or does not decode",
            ),
        },
    );
}

#[cfg(test)]
mod tests {
    use tablekit_core::{Entity, TableBackend, TableBackendExt};

    use super::*;

    #[test]
    fn names_are_kept_once_and_within_their_bound() {
        let first = interned("interned-test-name");
        assert!(matches!(first, PropertyName::Borrowed(_)));
        let again = interned("interned-test-name");
        let (PropertyName::Borrowed(a), PropertyName::Borrowed(b)) = (&first, &again) else {
            panic!("a kept name is handed out borrowed");
        };
        assert!(std::ptr::eq(*a, *b), "one copy per name");
        // Past the bound, names are copies, each still its own name.
        let mut copied = 0;
        for n in 0..MAX_INTERNED + 1 {
            let name = format!("interned-test-{n:08}");
            let got = interned(&name);
            assert_eq!(got, name);
            if matches!(got, PropertyName::Owned(_)) {
                copied += 1;
            }
        }
        assert!(copied > 0, "the bound was never reached");
        {
            let guard = INTERNED.lock();
            let kept = guard.as_ref().expect("made above");
            assert!(kept.names.len() <= MAX_INTERNED);
            assert!(kept.bytes <= MAX_INTERNED_BYTES);
        }
        // A name kept before the bound was reached is still handed out kept.
        assert!(matches!(
            interned("interned-test-name"),
            PropertyName::Borrowed(_)
        ));
        // As long as the names refused above: refused too.
        let refused = "interned-test-past-the-bound";
        assert!(refused.len() >= "interned-test-00000000".len());
        assert!(matches!(interned(refused), PropertyName::Owned(_)));
    }

    /// A property name first given an id by a write whose sync failed is
    /// given one again when written later: the id the failed write had
    /// went back with its commit, and may name another property by then.
    /// (The writer's cache of ids forgets them when commits are discarded.)
    #[test]
    fn a_name_first_written_by_a_refused_write_is_named_again() {
        let (runtime, store) = crate::testing::store_with_table("Things");
        runtime.block_on(async {
            store
                .shared
                .failing_syncs
                .store(1, std::sync::atomic::Ordering::Release);
            let refused = Entity::new("p", "a").with("Fresh", 1_i32);
            assert!(store.insert_entity("Things", &refused).await.is_err());
            // The next write opens the engine again, and takes the id the
            // refused write had given.
            let other = Entity::new("p", "b").with("Other", 2_i32);
            store.insert_entity("Things", &other).await.unwrap();
            let again = Entity::new("p", "c").with("Fresh", 3_i32);
            store.insert_entity("Things", &again).await.unwrap();
            for (row, written) in [("b", &other), ("c", &again)] {
                let read = store
                    .get_entity("Things", "p", row, &Default::default())
                    .await
                    .unwrap();
                assert_eq!(read.properties, written.properties, "row {row}");
            }
        });
    }
}
