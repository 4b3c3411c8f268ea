//! Secondary indexes: inside the entity's partition, or (eventually
//! consistent) in another partition or table.
//!
//! The store has one index, PartitionKey then RowKey. To find an entity by
//! another value (an employee by email, by last name), a second row is kept
//! in the same partition under a RowKey made from that value: an *index
//! row*. Every typed write of the entity writes, moves or deletes its index
//! rows in the same entity group transaction as the entity itself, so the
//! entity and its index rows are never seen out of step.
//!
//! # Declaring an index
//! ```
//! use tablekit::TableEntity;
//!
//! #[derive(TableEntity, Clone, Debug, PartialEq)]
//! #[tablekit(table = "Staff", kind = "EMP")]
//! #[tablekit(index(name = "email", tag = "email"))]
//! #[tablekit(index(name = "name", copy(email)))]
//! struct Employee {
//!     #[tablekit(partition_key)]
//!     department: String,
//!     #[tablekit(row_key)]
//!     id: u32,
//!     #[tablekit(unique = "email")]
//!     email: String,
//!     #[tablekit(index = "name")]
//!     last_name: String,
//!     #[tablekit(index = "name")]
//!     first_name: String,
//! }
//! ```
//!
//! - `#[tablekit(unique = "NAME")]` on a field puts it in the unique index
//!   `NAME`: no two entities of a partition hold the same value, and a write
//!   that would break this fails with [`Error::UniqueViolation`]
//!   (naming the index and the value) with nothing written.
//! - `#[tablekit(index = "NAME")]` puts it in the non-unique index `NAME`.
//! - Several fields with the same index name form a compound index, its
//!   value made of the fields in declaration order (`name` above is the last
//!   name, then the first name), at most four.
//! - `#[tablekit(index(name = "NAME", tag = "TAG", copy(field, …)))]` on the
//!   struct sets an index's options: `tag`, the text its RowKeys start with
//!   (by default the kind, a dot and the index name: `EMP.email`), and
//!   `copy`, the fields its rows hold (by default every field; `copy()` for
//!   none, so that a read through the index follows it to the entity).
//!   A tag is for the index alone: no kind stored in the same table may
//!   use it as its own (tablekit checks it against the type's own kind and
//!   its other indexes, not against other types).
//!
//! A type with indexes needs a kind (or a RowKey template with a leading
//! text): its rows and its index rows are told apart by the start of their
//! RowKeys, so the type's queries never see index rows, and index rows are
//! never read as entities of any kind (reads of several kinds skip them).
//! Kinds of a collection cannot have indexes yet. An indexed value is a key
//! type that is also a property: a string, an integer, a `bool`, a
//! [`DateTime`](crate::DateTime) or a `Uuid`. A type may have at most 49
//! indexes (see below). An index on an encrypted field keys its rows by a
//! hash of the value and finds equal values alone (see
//! [`encryption`](crate::encryption#finding-rows-by-an-encrypted-value)).
//!
//! # The rows
//! With the declaration above, the employee `("Sales", 223)` with email
//! `jonesj@contoso.com`, named Jones Jim, is three rows of partition `Sales`:
//!
//! | RowKey | holds |
//! |---|---|
//! | `EMP_0000000223` | the entity |
//! | `email_jonesj@contoso.com` | a copy of the entity |
//! | `EMP.name_Jones\|Jim\|EMP_0000000223` | the email, and the entity's RowKey |
//!
//! A unique index row's RowKey is the tag and the value; a non-unique one's
//! goes on with the entity's RowKey, so that entities sharing a value each
//! have their row. Every index row names the entity's RowKey in the
//! property [`ROW_PROPERTY`] and its index in [`INDEX_PROPERTY`].
//!
//! # Index entities
//! `#[tablekit(index(name = "team", list))]` makes a non-unique index an
//! *index entity* per value: one row, `EMP.team_red`, listing the RowKeys of
//! the entities whose value it is (in the properties `_Rows0`, `_Rows1`, …,
//! one RowKey per line, in order), instead of one row per entity. It is the
//! smaller layout when a value is shared by many entities and a read wants
//! their keys. A write that moves an entity from one value to another
//! changes both lists in the entity's transaction, each guarded by its own
//! ETag; when another writer changed a list first, the write reads it again
//! and retries, so concurrent writers never lose each other's entries.
//! Writing costs one point read per list changed. Reads through it follow
//! each listed entity with a point read.
//!
//! A list holds at most 448,000 characters of RowKeys (14 properties of
//! 32,000, under the 1 MiB of a row): some 30,000 entities with keys like
//! `EMP_0000000223`. A write that would make it longer is refused with
//! [`InvalidInput::IndexListFull`], nothing written; an index without
//! `list` has no such bound. Two writes of one transaction cannot change the
//! same list (the store refuses a transaction that names a row twice).
//!
//! # Writes and their cost
//! Each typed write sends one transaction holding the entity's row (or
//! parts), and for each index: the new index row and, when the value
//! changed, the delete of the old one. At most 100 operations fit in a
//! transaction: a type whose rows cannot fit is refused at compile time, and
//! a write that does not fit (a wide entity with many parts) fails with
//! [`InvalidInput::BatchTooManyOperations`] before anything is sent.
//!
//! | write | requests |
//! |---|---|
//! | `insert` | 1 |
//! | `replace`, `delete` of a [`Loaded`](crate::Loaded) read by tablekit | 1 |
//! | `merge` of a `Loaded`, `upsert`, `upsert_merge`, `*_unconditionally`, `merge_element`, `delete_unconditionally` | 2: the current row is read (its index rows and, for a merge, the values the index copies must hold), and its ETag guards the transaction |
//! | `update` | 2 (the read it makes anyway, and the write) |
//!
//! A wide entity's write reads its parts first, as it does without indexes.
//! The [`BulkWriter`](crate::BulkWriter) writes entities with indexes one by
//! one, each in its transaction. An entity whose offloaded values go to the
//! blob store keeps its index rows the same way; their copies hold the blob
//! references, and a read through them fetches the blobs.
//!
//! A [`Transaction`](crate::Transaction) (or a [`TableBatch`](crate::TableBatch))
//! writes several entities of one partition, of any types, at once: each
//! write brings its index rows, and a failure names the write that failed.
//! Two writes of one transaction may not touch the same row: two entities
//! taking the same unique value, or one giving up a value another takes, is
//! refused with [`InvalidInput::BatchDuplicateEntity`] before anything is sent.
//!
//! A write that loses a race to another writer fails as a whole: with
//! [`Error::PreconditionFailed`] when the caller held an ETag, otherwise it
//! reads again and retries. An old index row found already gone is not
//! deleted again, and a unique index row left by a writer other than
//! tablekit, naming an entity that does not hold the value, is taken over
//! under its own ETag: index rows out of step never block a write.
//!
//! # Reads
//! [`Table::index`](crate::Table::index) reads through an index: a unique
//! lookup ([`IndexReader::get`](crate::IndexReader::get)), every entity with a
//! value ([`find`](crate::IndexReader::find)), or a prefix or range of values
//! ([`prefix`](crate::IndexReader::prefix), [`range`](crate::IndexReader::range)),
//! in value order, streamed or a page at a time with a cursor
//! ([`find_page`](crate::IndexReader::find_page) and its kin). When the index row holds every field the read needs (the
//! default `copy`, or a [projection](crate::IndexReader::project) of copied
//! fields), it is served from the index row alone: a unique lookup is one
//! request, a stream one request per page of up to 1,000 rows. Otherwise each
//! index row found is followed to its entity with one point read, and an
//! entity that no longer holds the value (a write moved it between the two
//! reads) is left out. A value read from an index row carries no ETag of its
//! entity; [`get_loaded`](crate::IndexReader::get_loaded) reads the entity
//! itself (two requests) for a write guarded by its ETag.
//!
//! # Indexes kept in another partition or table
//! `#[tablekit(index(name = "email", partition = "email"))]` keeps the
//! non-unique index `email` in the partition `email_{the entity's}` of the
//! same table (`email_Sales`), and `table = "StaffByCity"` in another table
//! (under the entity's PartitionKey, or `partition`'s); both spread the
//! load of an index away from the entity's partition. No transaction
//! reaches them, so every write of the entity records the changes of these
//! rows in its own transaction, through the [outbox](crate::outbox), and
//! applies them right after: readers through
//! [`Table::remote_index`](crate::Table::remote_index) may miss a change
//! for as long as that takes (longer if the writer stops, until the
//! [`OutboxWorker`](crate::outbox::OutboxWorker) or the
//! [sweeper](crate::outbox::sweep) finishes it). Each entity carries a
//! sequence number (`_Seq`) that orders these changes, so they apply once
//! and in order whatever is delivered twice or late; a client other than
//! tablekit that writes the entity must keep it.
//!
//! They cannot be unique (no transaction could refuse a taken value). With
//! `list`, such an index keeps one index entity per value, listing its
//! entities: a write that moves an entity from one value to another
//! removes it from one list and adds it to the other, each list guarded by
//! its ETag and each entity's place in it by a fence of its own. A write of
//! an entity with such indexes reads the stored entity first (one
//! request), and, for each row it moves to a new value, that row's fence
//! (one request each, read at once); the steps then take two requests per
//! row (three per list). [`Table::verify_remote_indexes`](crate::Table::verify_remote_indexes)
//! and [`Table::repair_remote_indexes`](crate::Table::repair_remote_indexes)
//! check and rebuild them per partition, and
//! [`Table::repair_all_remote_indexes`](crate::Table::repair_all_remote_indexes)
//! through the whole table, resumable.
//!
//! # Existing data
//! [`Table::verify_indexes`](crate::Table::verify_indexes) compares a
//! partition's index rows with its entities; [`Table::repair_indexes`](crate::Table::repair_indexes)
//! writes the missing and stale ones and deletes the left-over ones, each
//! repair guarded by its entity's ETag; [`Table::repair_all_indexes`](crate::Table::repair_all_indexes)
//! goes through the whole table, a number of partitions at a time, resumable
//! from the PartitionKey it returns. Declaring an index on a table that holds
//! entities already is: declare it, then repair.
//!
//! [`InvalidInput::BatchTooManyOperations`]: crate::InvalidInput::BatchTooManyOperations
//! [`InvalidInput::IndexListFull`]: crate::InvalidInput::IndexListFull
//! [`InvalidInput::BatchDuplicateEntity`]: crate::InvalidInput::BatchDuplicateEntity
//! [`Error::PreconditionFailed`]: crate::Error::PreconditionFailed

mod raw_audit;
mod read;
mod remote_repair;
mod repair;
mod sealed;

pub use raw_audit::{RawIndexAudit, audit_raw};
pub use read::{IndexPage, IndexReader};
pub use remote_repair::{RemoteAudit, RemotePass};
pub use repair::IndexPass;

use std::marker::PhantomData;

use crate::entity::{Entity, Properties};
use crate::error::{Error, InvalidInput, KeyKind};
use crate::key::RowKeyLayout;
// The forms of index rows and index entities live below the typed client,
// where pending steps change index entities too.
pub use crate::pending::lists::{INDEX_PROPERTY, LIST_PROPERTY, ROW_PROPERTY, is_index_row};
pub(crate) use crate::pending::lists::{
    LIST_FIRST_PROPERTY, LIST_MAX_CHARS, list_members, list_row_named,
};
use crate::pending::{Step, StepOp};
use crate::props::WRITES_PROPERTY;
use crate::schema::{self, CompanionRows, DescriptorPart, Sharing, TableEntity, WriteNeeds};
use crate::table::offload::REFERENCE_SUFFIX;
use crate::value::Value;

/// The index part of an entity's descriptor: the indexes
/// `#[derive(TableEntity)]` declares, in declaration order. An index is
/// numbered by its place in [`local`](IndexPart::local), then
/// [`remote`](IndexPart::remote): that number is what
/// [`TableEntity::write_index_key`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexPart {
    /// The indexes kept in the entity's partition, by every write.
    pub local: &'static [IndexDef],
    /// The indexes kept in another partition or table, through the
    /// [outbox](crate::outbox).
    pub remote: &'static [RemoteIndexDef],
}

impl DescriptorPart for IndexPart {
    /// A write through a projection would leave the index rows of the
    /// fields it lacks behind.
    fn bars_partial_writes(&self) -> bool {
        !self.local.is_empty()
    }

    /// A changed value deletes one index row and inserts another, in the
    /// entity's transaction; a remote index is kept through the outbox.
    fn write_needs(&self) -> WriteNeeds {
        WriteNeeds {
            planned: !self.local.is_empty(),
            rows: 2 * self.local.len(),
            follow_up: !self.remote.is_empty(),
            ..WriteNeeds::NONE
        }
    }

    #[inline]
    fn companion_rows(&self) -> Option<&dyn CompanionRows> {
        (!self.local.is_empty() || !self.remote.is_empty()).then_some(self)
    }
}

/// The typed client plans index rows through this, as it plans any rows
/// kept beside an entity.
impl CompanionRows for IndexPart {
    #[inline]
    fn local(&self) -> usize {
        self.local.len()
    }

    #[inline]
    fn remote(&self) -> usize {
        self.remote.len()
    }

    #[inline]
    fn sharing(&self, slot: usize) -> Sharing {
        let def = &self.local[slot];
        if def.list {
            Sharing::Listed
        } else if def.unique {
            Sharing::Exclusive
        } else {
            Sharing::Own
        }
    }

    #[inline]
    fn name(&self, slot: usize) -> &'static str {
        self.local[slot].name
    }

    #[inline]
    fn sealed(&self, slot: usize) -> bool {
        self.local[slot].sealed
    }

    fn local_key(&self, slot: usize, encoded: String, row_key: &str) -> Result<String, Error> {
        let def = &self.local[slot];
        // A non-unique index row's RowKey ends with the entity's; an index
        // entity's, with the value.
        finish_key(def, encoded, !def.unique && !def.list, row_key)
    }

    fn remote_key(&self, slot: usize, encoded: String, row_key: &str) -> Result<String, Error> {
        let def = &self.remote[slot].index;
        finish_key(def, encoded, !def.list, row_key)
    }

    fn value_of<'a>(&self, slot: usize, key: &'a str) -> &'a str {
        value_of(&self.local[slot], key)
    }

    fn local_row(&self, slot: usize, key: String, row: &Entity, kind_properties: bool) -> Entity {
        row_of(&self.local[slot], key, row, kind_properties)
    }

    fn list_row(
        &self,
        slot: usize,
        partition_key: &str,
        key: &str,
        members: &[String],
        kind_properties: bool,
    ) -> Result<Entity, Error> {
        list_of(
            &self.local[slot],
            partition_key,
            key,
            members,
            kind_properties,
        )
    }

    fn remote_place(
        &self,
        slot: usize,
        table: &str,
        partition_key: &str,
        key: &str,
        row_key: &str,
    ) -> (String, String, String) {
        let def = &self.remote[slot];
        let (table, partition) = def.place(table, partition_key);
        (table, partition, remote_fence(def, key, row_key))
    }

    fn record_kind(&self) -> &'static str {
        "index"
    }

    fn remote_steps(
        &self,
        table: &str,
        keys: (&str, &str),
        seq: i64,
        old: &[Option<String>],
        new: &[Option<String>],
        new_row: Option<&Entity>,
        kind_properties: bool,
    ) -> Vec<Step> {
        steps_of(
            self.remote,
            table,
            keys,
            seq,
            (old, new),
            new_row,
            kind_properties,
        )
    }
}

/// An index RowKey from the encoded value `key`: the entity's RowKey
/// appended when `with_row_key`; refused when it would not fit.
fn finish_key(
    def: &IndexDef,
    mut key: String,
    with_row_key: bool,
    row_key: &str,
) -> Result<String, Error> {
    if with_row_key {
        key.push_str(row_key);
    }
    schema::check_key_length(KeyKind::RowKey, def.fields, &key)?;
    Ok(key)
}

/// The indexes of `T` kept in its partition (none unless it declares
/// some).
pub fn local_indexes<T: TableEntity>() -> &'static [IndexDef] {
    T::DESCRIPTOR
        .part::<IndexPart>()
        .map_or(&[], |part| part.local)
}

/// The indexes of `T` kept elsewhere (none unless it declares some).
pub fn remote_indexes<T: TableEntity>() -> &'static [RemoteIndexDef] {
    T::DESCRIPTOR
        .part::<IndexPart>()
        .map_or(&[], |part| part.remote)
}

/// One declared index, as `#[derive(TableEntity)]` describes it in its
/// [`IndexPart`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexDef {
    /// The index's name.
    pub name: &'static str,
    /// How its RowKeys are laid out: the tag, then the value (with a
    /// separator after it for a non-unique index, whose keys go on with the
    /// entity's RowKey).
    pub layout: RowKeyLayout,
    /// Whether two entities may share a value.
    pub unique: bool,
    /// The indexed fields, for messages.
    pub fields: &'static str,
    /// The property names an index row copies; `None` for every property.
    pub copy: Option<&'static [&'static str]>,
    /// An index entity: one row per value, listing the RowKeys of the
    /// entities that hold it, instead of one row per entity.
    pub list: bool,
    /// On an encrypted field: its RowKeys hold the tag and a keyed hash of
    /// the value (see [`encryption`](crate::encryption)).
    pub sealed: bool,
}

impl IndexDef {
    /// Whether an index row holds `property`.
    pub fn copies(&self, property: &str) -> bool {
        match self.copy {
            None => true,
            Some(names) => names.iter().any(|name| {
                property == *name
                    || property
                        .strip_prefix(name)
                        .is_some_and(|rest| rest == REFERENCE_SUFFIX)
            }),
        }
    }

    /// The RowKey every row of this index starts with.
    pub fn prefix(&self) -> String {
        self.layout.prefix().unwrap_or_default()
    }
}

/// An index kept in another partition or table, as `#[derive(TableEntity)]`
/// describes it in [`IndexPart::remote`]: declared with
/// `partition = "…"` or `table = "…"` in its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteIndexDef {
    /// The index: its name, layout, fields and copies (never unique, never
    /// a list).
    pub index: IndexDef,
    /// Its rows' partition is this, `_`, and the entity's PartitionKey;
    /// `None` for the entity's PartitionKey.
    pub partition: Option<&'static str>,
    /// Its rows' table; `None` for the entity's.
    pub table: Option<&'static str>,
}

impl RemoteIndexDef {
    /// The table and partition of the index rows of an entity of partition
    /// `partition_key` in table `table`.
    pub fn place(&self, table: &str, partition_key: &str) -> (String, String) {
        let table = self.table.unwrap_or(table).to_owned();
        let partition = match self.partition {
            Some(prefix) => format!("{prefix}_{partition_key}"),
            None => partition_key.to_owned(),
        };
        (table, partition)
    }

    /// The entity's PartitionKey, from the partition of its index rows.
    pub fn source_partition<'a>(&self, partition: &'a str) -> Option<&'a str> {
        match self.partition {
            Some(prefix) => partition.strip_prefix(prefix)?.strip_prefix('_'),
            None => Some(partition),
        }
    }
}

/// A typed handle on an index of `T` kept in another partition or table,
/// whose values are `V`: a field of `T::indexes()`.
pub struct RemoteIndex<T, V> {
    position: usize,
    _marker: PhantomData<Marker<(T, V)>>,
}

impl<T, V> Clone for RemoteIndex<T, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, V> Copy for RemoteIndex<T, V> {}

impl<T, V> std::fmt::Debug for RemoteIndex<T, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteIndex")
            .field("position", &self.position)
            .finish()
    }
}

impl<T: TableEntity, V> RemoteIndex<T, V> {
    /// The handle on `remote_indexes::<T>()[position]` (the derive makes these).
    #[doc(hidden)]
    pub const fn new(position: usize) -> RemoteIndex<T, V> {
        RemoteIndex {
            position,
            _marker: PhantomData,
        }
    }

    /// The index's definition.
    pub fn def(&self) -> &'static RemoteIndexDef {
        &remote_indexes::<T>()[self.position]
    }

    /// The index's position in [`IndexPart::remote`].
    pub fn position(&self) -> usize {
        self.position
    }
}

/// The key of the fence of entity `row_key`'s row `key` in a remote index:
/// the row's own, or for an index entity (shared by many) the row and the
/// entity.
pub(crate) fn remote_fence(def: &RemoteIndexDef, key: &str, row_key: &str) -> String {
    if def.index.list {
        format!("{key}|{row_key}")
    } else {
        key.to_owned()
    }
}

/// The outbox steps that bring the rows of `T`'s indexes kept elsewhere
/// from the keys `old` to the keys `new` (one per index, `None` where the
/// entity has no row: before an insert, after a delete), for the entity
/// `(pk, rk)` of table `table_name` at sequence number `seq`; `new_row` is
/// the entity's row after the write.
pub(crate) fn remote_steps<T: TableEntity>(
    table_name: &str,
    keys: (&str, &str),
    seq: i64,
    (old, new): (&[Option<String>], &[Option<String>]),
    new_row: Option<&Entity>,
) -> Vec<Step> {
    steps_of(
        remote_indexes::<T>(),
        table_name,
        keys,
        seq,
        (old, new),
        new_row,
        T::DESCRIPTOR.kind_properties,
    )
}

/// [`remote_steps`] for the indexes `remote` of a kind whose rows record
/// their kind when `kind_properties` holds.
fn steps_of(
    remote: &[RemoteIndexDef],
    table_name: &str,
    (pk, rk): (&str, &str),
    seq: i64,
    (old, new): (&[Option<String>], &[Option<String>]),
    new_row: Option<&Entity>,
    kind_properties: bool,
) -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, def) in remote.iter().enumerate() {
        let (table, partition) = def.place(table_name, pk);
        let step = |fence: String, op: StepOp| Step {
            table: table.clone(),
            partition_key: partition.clone(),
            fence,
            seq,
            ops: vec![op],
        };
        let (old, new) = (&old[i], &new[i]);
        if def.index.list {
            // An index entity per value: the entity leaves the old value's
            // list and joins the new one's.
            if old == new {
                continue;
            }
            let marker = kind_properties.then(|| def.index.name.to_owned());
            for (key, add) in [(old, false), (new, true)] {
                let Some(key) = key else { continue };
                let op = StepOp::list(add, key.clone(), rk.to_owned(), marker.clone());
                steps.push(step(remote_fence(def, key, rk), op));
            }
            continue;
        }
        if let Some(old) = old
            && new.as_ref() != Some(old)
        {
            steps.push(step(old.clone(), StepOp::Delete(old.clone())));
        }
        if let (Some(new), Some(row)) = (new, new_row) {
            let mut index_row = row_of(&def.index, new.clone(), row, kind_properties);
            index_row.partition_key.clone_from(&partition);
            steps.push(step(new.clone(), StepOp::Put(index_row)));
        }
    }
    steps
}

/// Marks an index as unique: [`IndexReader::get`](crate::IndexReader::get) finds at most one entity.
#[derive(Debug, Clone, Copy)]
pub enum Unique {}
/// Marks an index as non-unique.
#[derive(Debug, Clone, Copy)]
pub enum NonUnique {}

/// The values of an index on an encrypted field, of type `V`
/// (`Index<T, Sealed<V>, Unique>`): its RowKeys hold their keyed hash, so
/// an entity is found by an equal value ([`find`](crate::IndexReader::find),
/// and [`get`](crate::IndexReader::get) for a unique index), never by a
/// prefix or a range. Never made: it only marks index handles.
pub struct Sealed<V>(PhantomData<Marker<V>>, std::convert::Infallible);

/// Marks type parameters a value holds none of (and stays `Send`, `Sync`
/// and `Copy` whatever they are).
pub(crate) type Marker<T> = fn() -> T;

/// A typed handle on one index of `T`, whose values are `V` (a key part, or
/// a tuple for a compound index) and which is [`Unique`] or [`NonUnique`]:
/// a field of `T::indexes()`.
pub struct Index<T, V, U> {
    position: usize,
    _marker: PhantomData<Marker<(T, V, U)>>,
}

impl<T, V, U> Clone for Index<T, V, U> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, V, U> Copy for Index<T, V, U> {}

impl<T, V, U> std::fmt::Debug for Index<T, V, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("position", &self.position)
            .finish()
    }
}

impl<T: TableEntity, V, U> Index<T, V, U> {
    /// The handle on `local_indexes::<T>()[position]` (the derive makes these).
    #[doc(hidden)]
    pub const fn new(position: usize) -> Index<T, V, U> {
        Index {
            position,
            _marker: PhantomData,
        }
    }

    /// The index's definition.
    pub fn def(&self) -> &'static IndexDef {
        &local_indexes::<T>()[self.position]
    }

    /// The index's position in [`IndexPart::local`].
    pub fn position(&self) -> usize {
        self.position
    }
}

/// The encoded value of an index RowKey: what follows the tag.
pub(crate) fn value_of<'a>(def: &IndexDef, index_key: &'a str) -> &'a str {
    let prefix = def.prefix();
    index_key.strip_prefix(&prefix).unwrap_or(index_key)
}

/// Whether a stored property is bookkeeping of the entity's own row, never
/// copied into an index row.
fn own_bookkeeping(name: &str) -> bool {
    name == WRITES_PROPERTY
        || name == schema::KIND_PROPERTY
        || name == crate::table::wide::PARTS_PROPERTY
}

/// The index row `key` of the entity stored as `row` (its logical row: keys,
/// bookkeeping and every property).
pub(crate) fn index_row<T: TableEntity>(def: &IndexDef, key: String, row: &Entity) -> Entity {
    row_of(def, key, row, T::DESCRIPTOR.kind_properties)
}

/// [`index_row`] for a kind whose rows record their kind when
/// `kind_properties` holds.
fn row_of(def: &IndexDef, key: String, row: &Entity, kind_properties: bool) -> Entity {
    let mut properties = Properties::with_capacity(row.properties.len() + 2);
    for (name, value) in row.properties.entries() {
        // The envelope goes with any sealed value copied (it holds no
        // secret: the content key, wrapped).
        let kept = def.copies(name)
            || name == schema::VERSION_PROPERTY
            || name == tablekit_encrypt::ENVELOPE_PROPERTY;
        if own_bookkeeping(name) || !kept {
            continue;
        }
        properties.push_unchecked(name.clone(), value.clone());
    }
    if kind_properties {
        properties.push_unchecked(INDEX_PROPERTY.into(), Value::String(def.name.to_owned()));
    }
    properties.push_unchecked(ROW_PROPERTY.into(), Value::String(row.row_key.clone()));
    let mut entity = Entity::new(row.partition_key.clone(), key);
    entity.properties = properties;
    entity
}

/// The index entity `key` of index `def` listing `members` (sorted, each
/// once); refused when it would outgrow a row.
pub(crate) fn list_row<T: TableEntity>(
    def: &'static IndexDef,
    pk: &str,
    key: &str,
    members: &[String],
) -> Result<Entity, Error> {
    list_of(def, pk, key, members, T::DESCRIPTOR.kind_properties)
}

/// [`list_row`] for a kind whose rows record their kind when
/// `kind_properties` holds.
fn list_of(
    def: &'static IndexDef,
    pk: &str,
    key: &str,
    members: &[String],
    kind_properties: bool,
) -> Result<Entity, Error> {
    let name = kind_properties.then_some(def.name);
    list_row_named(name, pk, key, members).map_err(|entries| {
        InvalidInput::IndexListFull {
            index: def.name,
            value: value_of(def, key).to_owned(),
            entries,
            max_chars: LIST_MAX_CHARS,
        }
        .into()
    })
}

/// The entity's RowKey an index row points at.
pub(crate) fn pointed_row(def: &IndexDef, row: &Entity) -> Result<String, Error> {
    match row.properties.get(ROW_PROPERTY) {
        Some(Value::String(rk)) => Ok(rk.clone()),
        _ => Err(crate::error::SchemaError::Property {
            property: ROW_PROPERTY.into(),
            problem: crate::error::ValueError::Invalid(format!(
                "index row {:?} of index `{}` names no entity",
                row.row_key, def.name
            )),
            row: None,
        }
        .into()),
    }
}

/// Turns an index row that copies every field the read needs into the
/// entity's row: its RowKey, its kind.
pub(crate) fn as_entity_row<T: TableEntity>(
    def: &IndexDef,
    mut row: Entity,
) -> Result<Entity, Error> {
    let rk = pointed_row(def, &row)?;
    row.properties.remove(ROW_PROPERTY);
    row.properties.remove(INDEX_PROPERTY);
    if let (Some(kind), true) = (T::DESCRIPTOR.kind, T::DESCRIPTOR.kind_properties) {
        row.properties.insert(schema::KIND_PROPERTY, kind);
    }
    row.row_key = rk;
    Ok(row)
}

/// What [`audit`] finds in a partition's rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexAudit {
    /// Index rows an entity should have and that are not there.
    pub missing: Vec<Entity>,
    /// Index rows that are there with other content than their entity's;
    /// each as it should be.
    pub stale: Vec<Entity>,
    /// Index rows that no entity should have: `(PartitionKey, RowKey)`.
    pub orphans: Vec<(String, String)>,
    /// Entities of the type that could not be read, with the error.
    pub unreadable: Vec<(String, String)>,
}

impl IndexAudit {
    /// Whether every index row is in step.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.stale.is_empty() && self.orphans.is_empty()
    }
}

/// Whether `row_key` is in the RowKey range of one of `T`'s indexes.
pub(crate) fn is_index_key<T: TableEntity>(row_key: &str) -> bool {
    local_indexes::<T>()
        .iter()
        .any(|def| def.layout.starts(row_key))
}

fn sorted(entity: &Entity) -> Vec<(&str, &Value)> {
    let mut props: Vec<(&str, &Value)> = entity.properties.iter().collect();
    props.sort_by(|a, b| a.0.cmp(b.0));
    props
}

/// Compares the index rows among `rows` (rows of one or more partitions,
/// in any order) with the index rows `T`'s entities among them should have.
pub fn audit<T: TableEntity>(rows: &[Entity]) -> IndexAudit {
    use std::collections::BTreeMap;
    let mut report = IndexAudit::default();
    let mut found: BTreeMap<(String, String), &Entity> = BTreeMap::new();
    let mut entities: Vec<Entity> = Vec::new();
    let mut parts: BTreeMap<(&str, &str), Vec<Entity>> = BTreeMap::new();
    for row in rows {
        if is_index_key::<T>(&row.row_key) {
            found.insert((row.partition_key.clone(), row.row_key.clone()), row);
        } else if T::DESCRIPTOR.wide() {
            if let Some(base) = crate::table::wide::base_of(&row.row_key)
                && T::DESCRIPTOR.layout_of(base).is_some()
            {
                parts
                    .entry((&row.partition_key, base))
                    .or_default()
                    .push(row.clone());
            }
        } else if T::DESCRIPTOR.layout_of(&row.row_key).is_some() && schema::is_kind::<T>(row) {
            entities.push(row.clone());
        }
    }
    for ((_, base), rows) in parts {
        match crate::table::wide::join(base, rows) {
            Ok(Some((entity, _))) => entities.push(entity),
            Ok(None) => {}
            Err(e) => report.unreadable.push((base.to_owned(), e.to_string())),
        }
    }
    let mut expected: BTreeMap<(String, String), Entity> = BTreeMap::new();
    let mut lists: BTreeMap<(String, String), (&'static IndexDef, Vec<String>)> = BTreeMap::new();
    for entity in &entities {
        let keys = match schema::stored_keys_each::<T>(entity) {
            Ok(keys) => keys,
            Err(e) => {
                report
                    .unreadable
                    .push((entity.row_key.clone(), e.to_string()));
                continue;
            }
        };
        for (def, key) in local_indexes::<T>().iter().zip(keys) {
            match key {
                // No value, no row.
                Ok(key) if key.is_empty() => {}
                Ok(key) if def.list => lists
                    .entry((entity.partition_key.clone(), key))
                    .or_insert_with(|| (def, Vec::new()))
                    .1
                    .push(entity.row_key.clone()),
                Ok(key) => {
                    let row = index_row::<T>(def, key.clone(), entity);
                    expected.insert((entity.partition_key.clone(), key), row);
                }
                Err(e) => report
                    .unreadable
                    .push((entity.row_key.clone(), e.to_string())),
            }
        }
    }
    for ((pk, key), (def, mut members)) in lists {
        members.sort();
        match list_row::<T>(def, &pk, &key, &members) {
            Ok(row) => {
                expected.insert((pk, key), row);
            }
            Err(e) => report.unreadable.push((key, e.to_string())),
        }
    }
    for ((pk, rk), want) in expected {
        match found.remove(&(pk, rk)) {
            None => report.missing.push(want),
            Some(have) if sorted(have) != sorted(&want) => report.stale.push(want),
            Some(_) => {}
        }
    }
    report.orphans = found.into_keys().collect();
    report
}

/// [`audit`] as readable lines, empty when every index row is in step.
pub fn problems<T: TableEntity>(rows: &[Entity]) -> Vec<String> {
    let report = audit::<T>(rows);
    let mut lines = Vec::new();
    for row in &report.missing {
        lines.push(format!(
            "missing index row {:?} (of {:?})",
            row.row_key,
            row.properties.get(ROW_PROPERTY)
        ));
    }
    for row in &report.stale {
        lines.push(format!("stale index row {:?}", row.row_key));
    }
    for (_, rk) in &report.orphans {
        lines.push(format!("index row {rk:?} belongs to no entity"));
    }
    for (rk, e) in &report.unreadable {
        lines.push(format!("entity {rk:?} unreadable: {e}"));
    }
    lines
}
