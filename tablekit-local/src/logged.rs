//! A write transaction that records every change it makes, so that the
//! writer can put a group's changes in the journal (see [`crate::journal`])
//! before the engine commits them without a sync of its own.
//!
//! Every write of the store goes through [`Txn`]: its tables
//! ([`LoggedTable`]) read through the engine's table, and change it only
//! through [`insert`](LoggedTable::insert), [`remove`](LoggedTable::remove)
//! and [`remove_range`](LoggedTable::remove_range), each of which is also
//! recorded. A `LoggedTable` hands out no mutable access to the engine's
//! table, so a change that is not recorded does not compile.
//!
//! Recorded changes are physical (table, key bytes, value bytes), so that
//! replaying them is a plain function of the bytes, whatever the write
//! that made them decided.
//!
//! Written by hand: redb records no changes of its own.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::ops::Deref;

use redb::{Key, StorageError, TableDefinition, TableError, TableHandle, Value, WriteTransaction};

/// The types of keys and values the store's tables use, each with its tag
/// in a recorded change.
pub(crate) trait Logged: Value + 'static {
    /// The type's tag (non-zero, under 16).
    const TAG: u8;

    /// Whether `bytes` are a value of the type (the engine's decoding
    /// panics on others).
    fn valid(bytes: &[u8]) -> bool {
        Self::fixed_width().is_none_or(|width| width == bytes.len())
    }
}

impl Logged for &'static str {
    const TAG: u8 = 1;

    fn valid(bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes).is_ok()
    }
}
impl Logged for &'static [u8] {
    const TAG: u8 = 2;
}
impl Logged for () {
    const TAG: u8 = 3;
}
impl Logged for i64 {
    const TAG: u8 = 4;
}
impl Logged for u64 {
    const TAG: u8 = 5;
}

/// A change's kind, its first byte in a record.
pub(crate) mod op {
    /// Names the table the following changes are in (opening it, which
    /// makes it if it is missing): its types' tag, then its name.
    pub(crate) const TABLE: u8 = b'T';
    /// Inserts (or replaces) a key's value.
    pub(crate) const INSERT: u8 = b'I';
    /// Removes a key.
    pub(crate) const REMOVE: u8 = b'R';
    /// Removes the keys from the first (included) to the second (excluded).
    pub(crate) const REMOVE_RANGE: u8 = b'D';
    /// Deletes the table named next (its types' tag, then its name).
    pub(crate) const DELETE_TABLE: u8 = b'X';
}

/// The tag of a table's key and value types.
fn types_tag<K: Logged, V: Logged>() -> u8 {
    (K::TAG << 4) | V::TAG
}

/// A write transaction of the engine that records its changes.
pub(crate) struct Txn<'a> {
    inner: &'a WriteTransaction,
    changes: RefCell<Changes>,
    /// What the transaction read of the store's own bookkeeping, for the
    /// writer to keep once it is committed.
    pub(crate) learned: RefCell<Learned>,
}

/// What a transaction read of the store's bookkeeping, which the writer
/// keeps once the transaction is committed ([`crate::kept`]), so that
/// later transactions need not read it again.
#[derive(Default)]
pub(crate) struct Learned {
    /// The ids of property names it read or gave ([`crate::names::NameIds`]).
    pub(crate) name_ids: Vec<(Box<str>, u64)>,
    /// The bound on the times given, as it left it
    /// ([`LocalStorage::next_ticks`](crate::LocalStorage::next_ticks)).
    pub(crate) ticks_bound: Option<i64>,
}

#[derive(Default)]
struct Changes {
    bytes: Vec<u8>,
    /// The tables opened, each named once per transaction: a table's
    /// changes refer to it by its place here.
    tables: Vec<(u8, String)>,
    /// The place of the table the last change was in.
    current: Option<usize>,
    /// Whether anything was changed (not only tables opened).
    changed: bool,
    /// How many changes were recorded (puts, removals, tables deleted),
    /// but for those that carried on a run of keys in order (see
    /// [`Recorded::count`]).
    count: u64,
    /// By table place, the greatest key changed in that table so far.
    ends: Vec<Vec<u8>>,
}

impl Changes {
    /// The place of the table `name` (of types `tag`), added if new.
    fn table(&mut self, tag: u8, name: &str) -> usize {
        match self.tables.iter().position(|(t, n)| *t == tag && n == name) {
            Some(at) => at,
            None => {
                self.tables.push((tag, name.to_owned()));
                self.ends.push(Vec::new());
                self.tables.len() - 1
            }
        }
    }

    /// Names the table at `at` in the record, unless the last change was
    /// in it already.
    fn select(&mut self, at: usize) {
        if self.current == Some(at) {
            return;
        }
        let (tag, name) = &self.tables[at];
        self.bytes.push(op::TABLE);
        self.bytes.push(*tag);
        put_bytes(&mut self.bytes, name.as_bytes());
        self.current = Some(at);
    }
}

/// The changes of a transaction, as [`Txn::into_changes`] gives them.
#[derive(Default)]
pub(crate) struct Recorded {
    /// As the journal stores them.
    pub(crate) bytes: Vec<u8>,
    /// How many, as far as the engine's pages go: puts, removals and tables
    /// deleted, but for a change to a key after every key the transaction
    /// changed in that table before (the first change to a table counts).
    /// A load of rows in key order changes one page after another, and
    /// counts one change a transaction; writes all over a table count one
    /// each. An estimate: it only says when a checkpoint comes.
    pub(crate) count: u64,
}

/// Appends `bytes` with their length before them.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // A key or value of the engine is under 4 GiB (it is in memory).
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

impl<'a> Txn<'a> {
    /// Records the changes made through it to `inner`.
    pub(crate) fn new(inner: &'a WriteTransaction) -> Txn<'a> {
        Txn {
            inner,
            changes: RefCell::new(Changes::default()),
            learned: RefCell::default(),
        }
    }

    /// The changes made, in order, as the journal stores them (empty if
    /// nothing was changed: tables were only opened and read, and a table
    /// made by its opening alone holds nothing that needs keeping), and how
    /// many there are. With them, what it read of the store's bookkeeping.
    pub(crate) fn into_changes(self) -> (Recorded, Learned) {
        let changes = self.changes.into_inner();
        let recorded = if changes.changed {
            Recorded {
                bytes: changes.bytes,
                count: changes.count,
            }
        } else {
            Recorded::default()
        };
        (recorded, self.learned.into_inner())
    }

    /// Opens (creating if needed) the table `definition`. The opening is
    /// recorded too, so that a table made and left empty is made again by a
    /// replay.
    pub(crate) fn open_table<K: Logged + Key, V: Logged>(
        &self,
        definition: TableDefinition<'_, K, V>,
    ) -> Result<LoggedTable<'_, K, V>, TableError> {
        let table = self.inner.open_table(definition)?;
        let mut changes = self.changes.borrow_mut();
        let at = changes.table(types_tag::<K, V>(), definition.name());
        changes.select(at);
        Ok(LoggedTable {
            table,
            at,
            txn: self,
        })
    }

    /// Opens the table `definition`, which every store has (the open for
    /// writing makes it): unlike [`open_table`](Txn::open_table), the
    /// opening is not recorded, only the changes made through the table, so
    /// that a transaction that only reads it records nothing for it.
    pub(crate) fn open_system_table<K: Logged + Key, V: Logged>(
        &self,
        definition: TableDefinition<'_, K, V>,
    ) -> Result<LoggedTable<'_, K, V>, TableError> {
        let table = self.inner.open_table(definition)?;
        let at = self
            .changes
            .borrow_mut()
            .table(types_tag::<K, V>(), definition.name());
        Ok(LoggedTable {
            table,
            at,
            txn: self,
        })
    }

    /// Deletes the table `definition`; `false` if there was none.
    pub(crate) fn delete_table<K: Logged + Key, V: Logged>(
        &self,
        definition: TableDefinition<'_, K, V>,
    ) -> Result<bool, TableError> {
        let deleted = self.inner.delete_table(definition)?;
        if deleted {
            let mut changes = self.changes.borrow_mut();
            changes.changed = true;
            changes.count += 1;
            changes.bytes.push(op::DELETE_TABLE);
            changes.bytes.push(types_tag::<K, V>());
            put_bytes(&mut changes.bytes, definition.name().as_bytes());
            changes.current = None;
        }
        Ok(deleted)
    }
}

/// A table of a [`Txn`]: reads as the engine's table does (through
/// `Deref`), and records each change.
pub(crate) struct LoggedTable<'t, K: Key + 'static, V: Value + 'static> {
    table: redb::Table<'t, K, V>,
    /// Its place among the transaction's tables.
    at: usize,
    txn: &'t Txn<'t>,
}

impl<'t, K: Logged + Key, V: Logged> LoggedTable<'t, K, V> {
    fn record(&self, kind: u8, first: &[u8], second: &[u8]) {
        let mut changes = self.txn.changes.borrow_mut();
        changes.changed = true;
        // Counted unless it carries on the run of keys in order that this
        // transaction's changes to the table make (as a load of ordered
        // rows does): such changes fill the same pages.
        let carries_on = match changes.ends.get_mut(self.at) {
            Some(end) if end.is_empty() || first > end.as_slice() => {
                let carries_on = !end.is_empty();
                end.clear();
                end.extend_from_slice(first);
                carries_on
            }
            _ => false,
        };
        if !carries_on {
            changes.count += 1;
        }
        changes.select(self.at);
        changes.bytes.push(kind);
        put_bytes(&mut changes.bytes, first);
        if kind != op::REMOVE {
            put_bytes(&mut changes.bytes, second);
        }
    }

    /// Inserts `value` under `key`, or replaces its value; whether it
    /// replaced one.
    pub(crate) fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<bool, StorageError> {
        Ok(self.insert_seeing(key, value, |_| ())?.is_some())
    }

    /// [`insert`](Self::insert), handing the value it replaced, if any,
    /// to `seen`: what `seen` made of it.
    pub(crate) fn insert_seeing<'k, 'v, R>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
        seen: impl FnOnce(V::SelfType<'_>) -> R,
    ) -> Result<Option<R>, StorageError> {
        let (key, value) = (key.borrow(), value.borrow());
        let replaced = self.table.insert(key, value)?.map(|old| seen(old.value()));
        self.record(
            op::INSERT,
            K::as_bytes(key).as_ref(),
            V::as_bytes(value).as_ref(),
        );
        Ok(replaced)
    }

    /// Removes `key`; whether it was there.
    pub(crate) fn remove<'k>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<bool, StorageError> {
        let key = key.borrow();
        let removed = self.table.remove(key)?.is_some();
        if removed {
            self.record(op::REMOVE, K::as_bytes(key).as_ref(), &[]);
        }
        Ok(removed)
    }

    /// Removes every key from `from` (included) to `to` (excluded).
    pub(crate) fn remove_range<'k>(
        &mut self,
        from: K::SelfType<'k>,
        to: K::SelfType<'k>,
    ) -> Result<(), StorageError> {
        let (first, last) = (
            K::as_bytes(&from).as_ref().to_vec(),
            K::as_bytes(&to).as_ref().to_vec(),
        );
        self.table
            .retain_in::<K::SelfType<'k>, _>(from..to, |_, _| false)?;
        self.record(op::REMOVE_RANGE, &first, &last);
        Ok(())
    }
}

impl<'t, K: Key + 'static, V: Value + 'static> Deref for LoggedTable<'t, K, V> {
    type Target = redb::Table<'t, K, V>;

    fn deref(&self) -> &Self::Target {
        &self.table
    }
}

/// Why recorded changes could not be applied again.
#[derive(Debug)]
pub(crate) enum ReplayError {
    /// The bytes are not changes this module records (the journal's
    /// checksum held, so they were written so: a defect, or another
    /// program's file).
    Malformed(&'static str),
    /// The engine's.
    Engine(redb::Error),
}

impl<E: Into<redb::Error>> From<E> for ReplayError {
    fn from(error: E) -> ReplayError {
        ReplayError::Engine(error.into())
    }
}

/// Reads recorded changes.
struct Reader<'b> {
    bytes: &'b [u8],
}

impl<'b> Reader<'b> {
    fn byte(&mut self) -> Result<u8, ReplayError> {
        let (&first, rest) = self
            .bytes
            .split_first()
            .ok_or(ReplayError::Malformed("a change cut short"))?;
        self.bytes = rest;
        Ok(first)
    }

    fn bytes(&mut self) -> Result<&'b [u8], ReplayError> {
        let short = ReplayError::Malformed("a change cut short");
        let (length, rest) = self.bytes.split_first_chunk::<4>().ok_or(short)?;
        let length = u32::from_le_bytes(*length) as usize;
        if rest.len() < length {
            return Err(ReplayError::Malformed("a change cut short"));
        }
        let (bytes, rest) = rest.split_at(length);
        self.bytes = rest;
        Ok(bytes)
    }

    fn name(&mut self) -> Result<(u8, &'b str), ReplayError> {
        let tag = self.byte()?;
        let name = std::str::from_utf8(self.bytes()?)
            .map_err(|_| ReplayError::Malformed("a table name that is not UTF-8"))?;
        Ok((tag, name))
    }
}

/// Applies recorded `changes` (as [`Txn::into_changes`] gave them) to
/// `txn`, in order.
pub(crate) fn replay(txn: &WriteTransaction, changes: &[u8]) -> Result<(), ReplayError> {
    let mut reader = Reader { bytes: changes };
    let mut table = None;
    while !reader.bytes.is_empty() {
        let kind = reader.byte()?;
        match kind {
            op::TABLE => {
                let (tag, name) = reader.name()?;
                by_types(tag, txn, name, Change::Open)?;
                table = Some((tag, name));
            }
            op::DELETE_TABLE => {
                let (tag, name) = reader.name()?;
                by_types(tag, txn, name, Change::DeleteTable)?;
                table = None;
            }
            op::INSERT | op::REMOVE | op::REMOVE_RANGE => {
                let (tag, name) = table.ok_or(ReplayError::Malformed("a change in no table"))?;
                let first = reader.bytes()?;
                let change = match kind {
                    op::INSERT => Change::Insert(first, reader.bytes()?),
                    op::REMOVE => Change::Remove(first),
                    _ => Change::RemoveRange(first, reader.bytes()?),
                };
                by_types(tag, txn, name, change)?;
            }
            _ => return Err(ReplayError::Malformed("an unknown kind of change")),
        }
    }
    Ok(())
}

/// One change read back.
enum Change<'b> {
    Insert(&'b [u8], &'b [u8]),
    Remove(&'b [u8]),
    RemoveRange(&'b [u8], &'b [u8]),
    /// Opens the table, making it if it is missing.
    Open,
    DeleteTable,
}

/// Applies `change` to the table `name` whose types have the tag `tag`.
fn by_types(
    tag: u8,
    txn: &WriteTransaction,
    name: &str,
    change: Change<'_>,
) -> Result<(), ReplayError> {
    type Str = &'static str;
    type Bytes = &'static [u8];
    let both = |k: u8, v: u8| (k << 4) | v;
    let (s, b, u, i, n) = (
        <Str as Logged>::TAG,
        <Bytes as Logged>::TAG,
        <() as Logged>::TAG,
        <i64 as Logged>::TAG,
        <u64 as Logged>::TAG,
    );
    match tag {
        t if t == both(s, u) => apply::<Str, ()>(txn, name, change),
        t if t == both(s, b) => apply::<Str, Bytes>(txn, name, change),
        t if t == both(s, s) => apply::<Str, Str>(txn, name, change),
        t if t == both(s, i) => apply::<Str, i64>(txn, name, change),
        t if t == both(s, n) => apply::<Str, u64>(txn, name, change),
        t if t == both(b, b) => apply::<Bytes, Bytes>(txn, name, change),
        t if t == both(n, b) => apply::<u64, Bytes>(txn, name, change),
        _ => Err(ReplayError::Malformed("a table of unknown types")),
    }
}

/// Applies `change` to the table `name` of keys `K` and values `V`.
fn apply<K: Logged + Key, V: Logged>(
    txn: &WriteTransaction,
    name: &str,
    change: Change<'_>,
) -> Result<(), ReplayError> {
    let definition = TableDefinition::<K, V>::new(name);
    if let Change::DeleteTable = change {
        txn.delete_table(definition)?;
        return Ok(());
    }
    let valid = match change {
        Change::Insert(key, value) => K::valid(key) && V::valid(value),
        Change::Remove(key) => K::valid(key),
        Change::RemoveRange(from, to) => K::valid(from) && K::valid(to),
        Change::Open | Change::DeleteTable => true,
    };
    if !valid {
        return Err(ReplayError::Malformed(
            "a key or value not of its table's type",
        ));
    }
    let mut table = txn.open_table(definition)?;
    match change {
        Change::Insert(key, value) => {
            table.insert(K::from_bytes(key), V::from_bytes(value))?;
        }
        Change::Remove(key) => {
            table.remove(K::from_bytes(key))?;
        }
        Change::RemoveRange(from, to) => {
            table.retain_in::<K::SelfType<'_>, _>(
                K::from_bytes(from)..K::from_bytes(to),
                |_, _| false,
            )?;
        }
        Change::Open | Change::DeleteTable => {}
    }
    Ok(())
}
