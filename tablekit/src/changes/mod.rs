//! A typed change feed: every committed change to a kind, in commit order
//! per partition, for consumers that each keep their own place.
//!
//! Azure Table Storage has no change feed, and neither has Cosmos DB for
//! Table. The usual substitute, writing to a queue after the entity, loses
//! the change when the program stops between the two. tablekit records the
//! change *in the entity's own transaction*, in its partition, so:
//!
//! - **a write that commits has its change recorded, and one that does not
//!   has none**, whatever stops it: an error, a crash, a future dropped at
//!   any point, a lost answer settled later;
//! - **changes are numbered in the order they commit**, per partition,
//!   with no gaps: change 7 of a partition committed after change 6, so the
//!   changes of each entity come in the order they were made;
//! - **each change has an id** ([`ChangeId`]: the partition and the
//!   number) that stays the same however often it is read, so a handler
//!   can tell a repeat.
//!
//! # Declaring it
//!
//! ```
//! use tablekit::TableEntity;
//!
//! #[derive(TableEntity, Clone, Debug, PartialEq)]
//! #[tablekit(table = "Orders", kind = "ORDER", changes)]
//! struct Order {
//!     #[tablekit(partition_key)]
//!     customer: String,
//!     #[tablekit(row_key)]
//!     id: u32,
//!     total: i64,
//! }
//! ```
//!
//! Every typed write of the kind then records its change: `insert`,
//! `replace`, `merge`, `upsert`, `upsert_merge`, `delete` and their
//! unconditional forms, `merge_element`, `update`, transactions and
//! batches, the bulk writer, and migrations; with index rows, wide parts
//! and offloaded values alike. A kind with a change feed needs a `kind`
//! (its change rows share its partitions). Moving an entity to other keys
//! ([`Table::move_to`]) records two changes, each with the half of the
//! move it belongs to: an insert at the new keys, committed with the copy,
//! and a delete at the old keys, committed with the old row's removal
//! (which the [upkeep](crate::upkeep) finishes if the mover stops between
//! the two). A consumer may see either first, since they are in two
//! partitions; for a moment the entity is at both keys in the store too.
//!
//! # Reading it
//!
//! ```
//! # use tablekit::{Table, TableEntity};
//! # #[derive(TableEntity, Clone, Debug, PartialEq)]
//! # #[tablekit(table = "Orders", kind = "ORDER", changes)]
//! # struct Order { #[tablekit(partition_key)] customer: String, #[tablekit(row_key)] id: u32, total: i64 }
//! use tablekit::changes::ChangeOp;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
//! let orders: Table<Order> = Table::new(tablekit_mem::MemBackend::new());
//! orders.create_if_missing().await?;
//! orders.insert(&Order { customer: "ann".into(), id: 1, total: 30 }).await?;
//! orders.delete_unconditionally("ann", 1u32).await?;
//!
//! // A named consumer keeps its own checkpoint in the table.
//! let search = orders.changes().consumer("search-index")?;
//! let batch = search.poll(100).await?;
//! let ops: Vec<ChangeOp> = batch.changes.iter().map(|c| c.op).collect();
//! assert_eq!(ops, [ChangeOp::Insert, ChangeOp::Delete]);
//! assert_eq!(batch.changes[0].value.as_ref().map(|o| o.total), Some(30));
//! // ... apply the changes somewhere, then move the checkpoint past them:
//! search.commit(&batch).await?;
//! assert!(search.poll(100).await?.changes.is_empty());
//! # Ok(()) }
//! ```
//!
//! A consumer delivers each change **at least once**: [`Consumer::poll`]
//! reads the changes after its checkpoints, and only
//! [`Consumer::commit`] moves them on. A consumer that stops between the
//! two reads the same changes again; one that commits before it has
//! applied them may lose them. Consumers of different names do not hold
//! each other back.
//!
//! A consumer is read by one handle at a time, unless its instances share
//! it with [leases](Consumer::leased). A handle made later for the same
//! name (the projector started again, or started twice) takes the consumer
//! over: the older handle's next poll fails with
//! [`ConsumerReplaced`](crate::Error::ConsumerReplaced), so a change is not
//! applied by both for ever (the batch the older one had read may be read
//! again by the newer, as after a crash). A batch is committed by the
//! consumer that polled it; another's is refused. Only kinds declared with
//! `#[tablekit(changes)]` have [`Table::changes`].
//!
//! A new consumer starts from the first change; where
//! changes were trimmed already, its first poll says so, and
//! [`Consumer::start_from_oldest`] (the oldest change kept) or
//! [`Consumer::start_from_now`] (only what comes next) picks where it
//! begins.
//!
//! # What it costs
//!
//! - **Storage:** one row per change, beside the entity, holding the
//!   properties written (a change whose properties do not fit in one row
//!   beside the change's own is recorded without them: its
//!   [`value`](Change::value) is `None`), plus one head row per partition
//!   and one directory row per partition with changes, and per consumer
//!   one row per partition (its checkpoint) and one that registers it.
//!   [`Changes::trim`] deletes the changes older than a window (24 hours,
//!   say) that every registered consumer has committed; a consumer whose
//!   checkpoint is behind what was trimmed gets
//!   [`ChangesTrimmed`](crate::Error::ChangesTrimmed), never a silent gap.
//! - **Requests:** a write sends one transaction with its change row and
//!   the head's move beside its own rows: the same one request as without
//!   a feed, once the process knows the partition's head (it keeps the
//!   heads it moved last). The process's first write of a partition reads
//!   the head first, and so does a write that finds it moved by another
//!   writer. A partition's first change also lists the partition in the
//!   directory (one request, once). A transaction whose answer is lost is
//!   settled by reading its first change row back, which names it: its
//!   changes are never recorded twice. The [bulk writer](crate::table::BulkWriter)
//!   writes 49 entities per transaction in each partition.
//! - **Writers of one partition are sent together:** each transaction
//!   moves the partition's head under its ETag, so the writers of one
//!   partition in one process wait in that partition's lane, and one of
//!   them sends every transaction waiting there as one (up to the 100
//!   operations and 4 MiB a transaction may hold), numbering their changes
//!   and moving the head once. Each transaction still commits or fails
//!   alone: one the store refuses is taken out and given its refusal, and
//!   the others are sent again. Writers of other processes race for the
//!   head; the loser reads it again and retries (it gives up with a
//!   [`Transient`](crate::Error::Transient) error after 64 lost races).
//!   Writers of different partitions never wait for each other.
//! - **Throughput:** a write with a feed stores two rows (the entity and
//!   its change), and a store's cost goes by rows. Measured with 64
//!   writers inserting into one partition (`cargo bench -p tablekit-local
//!   --bench changes`, and `-p tablekit-mem`): on the local store, a kind
//!   with a feed writes about 0.55–0.6 times as many entities a second as
//!   the same kind without one, as many as that kind writing one more row
//!   in each transaction; in memory, where a row costs a few microseconds
//!   and the lane's sends run one at a time, about 0.2–0.3 times. Over
//!   HTTP it goes the other way: on Azurite (`cargo bench -p
//!   tablekit-azure --bench azurite_changes`), where a request's round
//!   trip outweighs its rows, the 64 writers with a feed wrote about 4
//!   times as many entities a second as without one, since the lane sends
//!   their transactions as one request where writers without a feed send
//!   one each.
//! - **A transaction holds fewer writes:** each write adds its change row,
//!   and the transaction one head, to the 100 operations a transaction may
//!   hold.
//! - **Writers announce a partition** before they send changes to it: a
//!   process writes the partition's directory row again (one request) when
//!   it last did so five seconds ago or more, so a partition written all
//!   the time costs one request more per process every five seconds.
//! - **A consumer** reads the directory (one query per 1,000 partitions)
//!   and its checkpoints (one query per 1,000 partitions) on every poll,
//!   then the changes after its checkpoint of each partition where
//!   something may have come (a range query each): one announced since
//!   the consumer last read it to its end, or less than five minutes
//!   before that read (the longest a change sent after an announcement may
//!   take to commit, with its retries and clocks a minute apart). A
//!   partition where nothing came is passed by. So an idle feed costs the
//!   directory's queries alone, however many partitions it has; every
//!   hour a poll reads every partition anyway
//!   ([`Consumer::read_all_every`]). The first poll of a consumer handle
//!   reads every partition once.
//! - **Instances sharing a consumer** ([`Consumer::leased`]) each keep one
//!   row of their own alive, renewed once half a lease period is gone (one
//!   write per instance, however many partitions it holds), and read it
//!   and the lease rows on every poll (a query each per 1,000 rows); a
//!   lease row is written when a partition changes hands.
//!
//! The [upkeep](crate::upkeep) trims the feed of every kind it watches,
//! keeping a day of changes by default
//! ([`UpkeepConfig::change_retention`](crate::upkeep::UpkeepConfig::change_retention)).
//! A registered consumer that stopped for good holds its changes back
//! until it is [unregistered](Consumer::unregister), or, with
//! [`UpkeepConfig::change_limit`](crate::upkeep::UpkeepConfig::change_limit),
//! until they are older than the limit: they are trimmed then, and its next
//! poll says so.
//!
//! Several instances of one consumer (processes of one service, say)
//! share its partitions through leases ([`Consumer::leased`]): each reads
//! the partitions it holds, and an instance that stops has its partitions
//! taken over once its leases run out.
//!
//! # Previous values
//!
//! `#[tablekit(changes(previous))]` makes each change also record the
//! entity's value before it ([`Change::previous`]): the value replaced,
//! merged over or deleted; none before an insert. Each write then reads
//! the entity first and is guarded by the ETag it read (an upsert of a new
//! entity becomes an insert), so the previous value is exactly the version
//! the write replaced: a write that races another goes round again. It
//! costs that read (one request more per write that is not an insert) and
//! the previous value's room in the change row (where both do not fit, the
//! previous value is left out first). A move's delete at its old keys, and
//! a migration's rewrite of rows alone, record no previous value.
//!
//! Not yet: a consumer of several kinds at once.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::TryStreamExt;

use crate::backend::{EntityWrite, Query, TableBackendExt, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, InvalidInput, Result};
use crate::filter::Filter;
use crate::pending::changes::{
    CHANGE_END, CHECKPOINT_PREFIX, CLEARED, DIRECTORY, EXPIRED, FULL, HEAD_KEY, LEASE_OWNER,
    LEASE_PREFIX, LEASE_UNTIL, LISTED_PREFIX, OP, PREVIOUS_PREFIX, READER, REASON,
    REGISTERED_PREFIX, ROW, SEQ, TRIMMED, change_key, is_change_property, listed_key,
    seq_of_change,
};
use crate::schema::{DescriptorPart, TableEntity, WriteNeeds};
use crate::table::Table;

mod here;
pub use here::CommitsHere;

mod consumer;
pub use consumer::*;
mod lease;
mod quiet;
mod trim;
use quiet::READ_ALL_EVERY;
pub(crate) use trim::TrimMemo;
pub use trim::TrimReport;
mod status;
pub use status::{ConsumerLag, consumer_lags};

/// The part of a kind declared with `#[tablekit(changes)]`, which makes
/// every typed write of it record its change. The derive adds it.
#[derive(Debug)]
pub struct ChangeFeed;

impl DescriptorPart for ChangeFeed {
    /// A projection writes some fields only: its writes would change the
    /// entity without a change that says what it holds. It reads only.
    fn bars_partial_writes(&self) -> bool {
        true
    }

    /// A change row beside the entity's, and the head's move, in its
    /// transaction.
    fn write_needs(&self) -> WriteNeeds {
        WriteNeeds {
            planned: true,
            rows: 1,
            changes: true,
            ..WriteNeeds::NONE
        }
    }
}

/// The part of a kind declared with `#[tablekit(changes(previous))]`:
/// [`ChangeFeed`], and each change also records the entity's value before
/// it ([`Change::previous`]). The derive adds it.
#[derive(Debug)]
pub struct ChangeFeedWithPrevious;

impl DescriptorPart for ChangeFeedWithPrevious {
    fn bars_partial_writes(&self) -> bool {
        true
    }

    /// As [`ChangeFeed`]'s, and the write reads the entity first.
    fn write_needs(&self) -> WriteNeeds {
        WriteNeeds {
            previous: true,
            ..ChangeFeed.write_needs()
        }
    }
}

/// What a change did to its entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeOp {
    /// An insert: the entity is new.
    Insert,
    /// A replace: the entity holds exactly the value written.
    Replace,
    /// A merge: the properties written changed, the others stayed.
    Merge,
    /// An upsert: the entity holds exactly the value written, new or not.
    Upsert,
    /// A merging upsert: the properties written changed or were added.
    UpsertMerge,
    /// A delete: the entity is gone.
    Delete,
}

impl ChangeOp {
    fn parse(text: &str) -> Option<ChangeOp> {
        Some(match text {
            "insert" => ChangeOp::Insert,
            "replace" => ChangeOp::Replace,
            "merge" => ChangeOp::Merge,
            "upsert" => ChangeOp::Upsert,
            "upsert_merge" => ChangeOp::UpsertMerge,
            "delete" => ChangeOp::Delete,
            _ => return None,
        })
    }

    /// Whether the change wrote the entity's whole value (an insert, a
    /// replace, an upsert): its [`value`](Change::value) can be read.
    pub fn writes_whole_value(self) -> bool {
        matches!(
            self,
            ChangeOp::Insert | ChangeOp::Replace | ChangeOp::Upsert
        )
    }
}

/// Where a change lies: its partition (as stored) and its number there.
/// The same change always has the same id, so a handler that sees an id
/// again can tell a repeat.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChangeId {
    /// The stored PartitionKey.
    pub partition_key: String,
    /// The change's number in its partition, from 1, in commit order.
    pub seq: u64,
}

impl fmt::Display for ChangeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.seq, self.partition_key)
    }
}

/// One committed change to an entity of kind `T`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Change<T> {
    /// Where the change lies; unique in the table. Its number is also the
    /// entity's version: of two changes of one entity, the one with the
    /// higher number committed later. (The entity's ETag after the change
    /// is not recorded: the store sets it at commit, and only the service
    /// gives every row of a transaction the same one.)
    pub id: ChangeId,
    /// What the change did.
    pub op: ChangeOp,
    /// Whether the change is a [`Delete`](ChangeOp::Delete) the library
    /// made because the entity expired (its [time to
    /// live](crate::Table#rows-that-expire) ran out, and
    /// [`sweep_expired`](crate::Table::sweep_expired) deleted it, or a write
    /// took its keys or a unique value it held); `false` for every other
    /// change.
    pub expired: bool,
    /// The entity's stored RowKey.
    pub row_key: String,
    /// The value written, for a change that wrote the whole value
    /// ([`ChangeOp::writes_whole_value`]) and was recorded with it; `None`
    /// for a merge or a delete, and for a value too large to record beside
    /// the change. A value that does not read as `T` (a row of a newer
    /// program) is `None` too, and [`decode_error`](Change::decode_error)
    /// says why; so is a value with an offloaded field whose blob a later
    /// write of the entity has replaced (a change row holds the blob's
    /// name, not its bytes).
    pub value: Option<T>,
    /// The entity's value before the change, for a kind declared with
    /// `changes(previous)`: `None` where there was none (an insert, an
    /// upsert of a new entity), where it was not recorded (a kind without
    /// `previous`; a move's delete, and a migration of rows alone; a value
    /// too large to record beside the change), and where it does not read
    /// as `T` ([`decode_error`](Change::decode_error) says why). An
    /// offloaded value of it may be gone from the blob store: the previous
    /// value then does not read.
    pub previous: Option<T>,
    /// Why [`value`](Change::value) (or [`previous`](Change::previous)) is
    /// `None` though the change recorded it.
    pub decode_error: Option<String>,
    /// The properties the write sent (for a merge, those it changed), as
    /// stored; empty for a delete, or when they did not fit.
    pub properties: crate::entity::Properties,
    /// When the change committed, by the store's clock.
    pub committed_at: Option<DateTime>,
}

/// The change feed of a table's kind `T`: see the [module docs](self).
pub struct Changes<T> {
    table: Table<T>,
}

/// A kind whose writes record their changes: the derive implements it for
/// a kind declared with `#[tablekit(changes)]`, so that
/// [`Table::changes`] exists only for such kinds (a feed of any other
/// would stay empty for ever).
///
/// ```compile_fail
/// use tablekit::{Table, TableEntity};
/// #[derive(TableEntity)]
/// #[tablekit(table = "Notes", kind = "NOTE")]
/// struct Note { #[tablekit(partition_key)] a: String, #[tablekit(row_key)] b: String }
/// fn feed(notes: &Table<Note>) {
///     let _ = notes.changes(); // `Note` records no changes
/// }
/// ```
pub trait RecordsChanges: TableEntity {}

impl<T: RecordsChanges> Table<T> {
    /// The change feed of this kind, which `#[tablekit(changes)]` makes its
    /// writes record (see [`changes`](crate::changes)).
    pub fn changes(&self) -> Changes<T> {
        self.feed()
    }
}

impl<T: TableEntity> Table<T> {
    /// The change feed of `T`, whether or not it records one (the library's
    /// own upkeep, over every kind).
    pub(crate) fn feed(&self) -> Changes<T> {
        Changes {
            table: self.clone(),
        }
    }
}

impl<T: TableEntity> Changes<T> {
    /// The changes of the partition `partition_key` (as stored) numbered
    /// after `after` (0: from the first), at most `max`, in order.
    pub async fn read(
        &self,
        partition_key: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<Change<T>>> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let filter = Filter::partition_key()
            .eq(partition_key)
            .and(Filter::row_key().gt(change_key(after)))
            .and(Filter::row_key().lt(CHANGE_END));
        let query = Query::new()
            .filter(filter)
            .top(u32::try_from(max.min(1000)).unwrap_or(1000));
        let backend = self.table.backend();
        let rows = take_max(backend.query_stream(self.table.name(), query), max).await?;
        let mut changes = Vec::with_capacity(rows.len());
        for row in rows {
            changes.push(self.decode(row).await?);
        }
        Ok(changes)
    }

    /// The number of the newest change of the partition `partition_key`
    /// (as stored); 0 when it has none.
    pub async fn newest(&self, partition_key: &str) -> Result<u64> {
        let backend = self.table.backend();
        match backend
            .try_get_entity(self.table.name(), partition_key, HEAD_KEY)
            .await?
        {
            Some(head) => Ok(number(&head, SEQ)),
            None => Ok(0),
        }
    }

    /// The partitions (as stored) that have changes, in key order.
    pub async fn partitions(&self) -> Result<Vec<String>> {
        Ok(self
            .listed()
            .await?
            .into_iter()
            .map(|l| l.partition_key)
            .collect())
    }

    /// The partitions the directory lists, with what was trimmed of each.
    async fn listed(&self) -> Result<Vec<Listed>> {
        let rows = self.directory(LISTED_PREFIX).await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let partition_key = row.row_key.strip_prefix(LISTED_PREFIX)?.to_owned();
                Some(Listed {
                    partition_key,
                    trimmed: number(&row, TRIMMED),
                    cleared: number(&row, CLEARED),
                    announced: quiet::announced(&row),
                    etag: row.etag,
                })
            })
            .collect())
    }

    /// The consumer `name`, which keeps its own checkpoints in the table.
    /// A name is 1–63 letters, digits, `-`, `_` or `.`.
    pub fn consumer(&self, name: &str) -> Result<Consumer<T>> {
        consumer_name(name)?;
        Ok(Consumer {
            table: self.table.clone(),
            name: name.to_owned(),
            reader: crate::uuid::Builder::from_random_bytes(fastrand::u128(..).to_le_bytes())
                .into_uuid()
                .to_string(),
            registered: AtomicBool::new(false),
            replaced: AtomicBool::new(false),
            lease: None,
            held: parking_lot::Mutex::new(Vec::new()),
            quiet: parking_lot::Mutex::new(quiet::QuietPartitions::default()),
            read_all_every: Some(READ_ALL_EVERY),
            _marker: PhantomData,
        })
    }

    /// The directory's rows whose RowKeys start with `prefix`.
    async fn directory(&self, prefix: &str) -> Result<Vec<Entity>> {
        // Every directory prefix ends with `|`; `}` is the character after
        // it, so the range ends in plain ASCII on the wire.
        let end = match prefix.strip_suffix('|') {
            Some(stem) => format!("{stem}}}"),
            None => format!("{prefix}\u{10FFFF}"),
        };
        let filter = Filter::partition_key()
            .eq(DIRECTORY)
            .and(Filter::row_key().ge(prefix))
            .and(Filter::row_key().lt(end));
        let backend = self.table.backend();
        backend
            .query_all(self.table.name(), Query::new().filter(filter))
            .await
    }

    /// A change row as a [`Change`].
    async fn decode(&self, mut row: Entity) -> Result<Change<T>> {
        let bad = |what: &str| Error::Decode {
            message: format!(
                "change row {:?} of partition {:?} in table `{}`: {what}",
                row.row_key,
                row.partition_key,
                self.table.name()
            ),
        };
        let seq = seq_of_change(&row.row_key).ok_or_else(|| bad("not a change number"))?;
        let op = match row.properties.get(OP) {
            Some(crate::value::Value::String(op)) => ChangeOp::parse(op),
            _ => None,
        }
        .ok_or_else(|| bad("no operation"))?;
        let row_key = match row.properties.get(ROW) {
            Some(crate::value::Value::String(rk)) => rk.clone(),
            _ => return Err(bad("no entity RowKey")),
        };
        let expired = matches!(
            row.properties.get(REASON),
            Some(crate::value::Value::String(reason)) if reason == EXPIRED
        );
        let full = !matches!(
            row.properties.get(FULL),
            Some(crate::value::Value::Boolean(false))
        );
        let mut before = Entity::new(row.partition_key.clone(), row_key.clone());
        for (name, value) in row.properties.iter() {
            if let Some(name) = name.strip_prefix(PREVIOUS_PREFIX) {
                before.properties.insert(name.to_owned(), value.clone());
            }
        }
        row.properties.retain(|name, _| !is_change_property(name));
        let committed_at = row.timestamp;
        let mut entity = Entity::new(row.partition_key.clone(), row_key.clone());
        entity.properties = row.properties.clone();
        let mut decode_error = None;
        let value = if op.writes_whole_value() && full {
            self.value_of(entity)
                .await
                .map_err(|e| decode_error = Some(e.to_string()))
                .ok()
        } else {
            None
        };
        let previous = if before.properties.is_empty() {
            None
        } else {
            self.value_of(before)
                .await
                .map_err(|e| decode_error = Some(format!("the previous value: {e}")))
                .ok()
        };
        Ok(Change {
            id: ChangeId {
                partition_key: row.partition_key,
                seq,
            },
            op,
            expired,
            row_key,
            value,
            previous,
            decode_error,
            properties: row.properties,
            committed_at,
        })
    }

    /// The value a change row holds, its offloaded values read back and
    /// its encrypted ones opened (the row carries them sealed, with the
    /// entity's envelope and keys).
    async fn value_of(&self, mut entity: Entity) -> Result<T> {
        self.table.restore_blobs(&mut entity).await?;
        self.table.open(&mut entity, true).await?;
        crate::schema::from_entity_owned(entity)
    }
}

/// A partition the directory lists.
struct Listed {
    partition_key: String,
    /// The last change number trimmed; 0 for none.
    trimmed: u64,
    /// The last change number up to which every change row is deleted
    /// (below `trimmed` after a trim that stopped half way).
    cleared: u64,
    /// When a writer last announced it (see `quiet`).
    announced: Option<DateTime>,
    /// The directory row's ETag: any write to the row changes it.
    etag: Option<ETag>,
}

/// Raises the number `property` of the directory row `key` to `value`,
/// unless it is that high already, under the ETag of the row read (others
/// may raise it meanwhile); `what` names the row for the error when it
/// keeps changing.
async fn raise<T>(
    table: &Table<T>,
    key: &str,
    property: &'static str,
    value: u64,
    what: impl FnOnce() -> String,
) -> Result<()> {
    let backend = table.backend();
    let row = Entity::new(DIRECTORY, key).with(property, value as i64);
    for _ in 0..crate::table::RACE_ATTEMPTS {
        let stored = backend.try_get_entity(table.name(), DIRECTORY, key).await?;
        let if_match = match stored {
            Some(stored) if number(&stored, property) >= value => return Ok(()),
            Some(stored) => Some(IfMatch::ETag(stored.etag.unwrap_or_else(|| ETag::new("")))),
            None => None,
        };
        let write = match &if_match {
            Some(if_match) => EntityWrite::Update(&row, UpdateMode::Merge, if_match),
            None => EntityWrite::Insert(&row),
        };
        let written = crate::exec::write_one(backend.as_ref(), table.name(), write).await;
        match written {
            Ok(_) => return Ok(()),
            Err(Error::PreconditionFailed { .. } | Error::EntityAlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Err(Error::Transient {
        message: format!("{} kept changing", what()),
    })
}

/// The owner of a lease row, and until when it holds it.
fn lease_of(row: &Entity) -> Option<(String, DateTime)> {
    let owner = row.properties.get(LEASE_OWNER)?.as_str()?.to_owned();
    let until = row.properties.get(LEASE_UNTIL)?.as_datetime()?;
    Some((owner, until))
}

/// A number property of a directory row; 0 when it has none.
fn number(row: &Entity, name: &str) -> u64 {
    row.properties
        .get(name)
        .and_then(|v| v.as_i64())
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}
