//! # tablekit-local
//!
//! A persistent embedded backend of [tablekit](https://docs.rs/tablekit): tables, blobs and queues in
//! one directory on disk, with no server. Data survives a restart, a crash
//! and a power cut; it behaves like Azure Table Storage, as the in-memory
//! backend does, and runs the same conformance suite:
//! - every limit, checked by tablekit's shared validator;
//! - keys sorted by UTF-16 code units, table names case-insensitive;
//! - ETags and Timestamps in the service's format, later on every write, and
//!   never handed out twice, across restarts too;
//! - replace, merge, `If-Match`, and transactions all or nothing;
//! - at most 1,000 rows per page, opaque continuation tokens;
//! - a deleted table's name unusable for 40 seconds
//!   ([`LocalStorageBuilder::table_deletion_delay`]);
//! - queues with visibility timeouts, dequeue counts and pop receipts, on a
//!   [`Clock`] tests can move by hand.
//!
//! One [`LocalStorage`] is all three stores: it implements
//! [`TableBackend`], [`BlobStore`] and [`QueueStore`].
//!
//! ```
//! use tablekit::{Entity, TableBackend, TableBackendExt};
//! use tablekit_local::LocalStorage;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! # let temporary = tempfile::tempdir().expect("a temporary directory");
//! # let dir = temporary.path().join("data");
//! {
//!     let store = LocalStorage::open(&dir)?;
//!     store.create_table("orders").await?;
//!     let order = Entity::new("customer1", "order1").with("Total", 12.5);
//!     store.insert_entity("orders", &order).await?;
//! } // closed here, as when the program stops
//! let store = LocalStorage::open(&dir)?;
//! let order = store.get_entity("orders", "customer1", "order1", &Default::default()).await?;
//! assert_eq!(order.get("Total"), Some(&12.5.into()));
//! # Ok(())
//! # }
//! ```
//!
//! # Durability
//! A write returns only once it is on disk, so an acknowledged write
//! survives a crash of the process or of the machine. Every operation is
//! one transaction: after a crash, the store holds each write completely or
//! not at all, never a part of a transaction.
//!
//! - **The journal.** A write's changes are appended to the store's
//!   journal, `tablekit.journal`, in a record with its checksum, and the
//!   journal is synced before the write is acknowledged, or seen by any
//!   reader. The engine's file takes the write without a sync of its own,
//!   and is made durable in one go (a *checkpoint*) each time the
//!   journal's 4 MiB are used or the engine holds 512 changes since the
//!   last (so that writes all over a large store leave few free pages in
//!   its file), and when the store is closed. A sync of the journal that
//!   fails refuses the writes it held and those that ran after
//!   them, and the engine forgets them all (it is opened again on its file
//!   and the journal), so that no refused write is ever read. The next
//!   [`open`](LocalStorage::open) after a crash applies the journal's
//!   records again (milliseconds at any size of store); the engine's own
//!   recovery after a kill, and the check of the file's pages that every
//!   open makes ([`LocalStorageBuilder::verify_on_open`]), each read the
//!   file once.
//!   [`LocalStorage::write_stats`] counts the records it applied.
//! - **A torn tail.** A crash while a record is written leaves it cut
//!   short: its checksum fails, and the next open ignores it (it was never
//!   acknowledged). A crash during a checkpoint leaves the engine's commit
//!   half written; the engine checksums its commits and falls back to the
//!   last complete one, and the journal still holds everything after it.
//!   A record that fails its checksum is damage when whole records follow
//!   it (a crash cannot leave that): the open fails with
//!   [`StorageFailure::Damaged`], naming the record, rather than apply the
//!   writes after it out of order. The last record damaged cannot be told
//!   from one a crash cut short, and ends the journal as such.
//! - **A full disk.** A write that finds no space fails with
//!   [`Error::Storage`] of kind [`StorageFailure::DiskFull`] and is not
//!   applied; nothing acknowledged is lost. Reads go on (unless the room
//!   left is too short even to apply the journal to the engine opened
//!   again: they then fail with `DiskFull` too, never read a store without
//!   its acknowledged writes, until there is room). The next operation
//!   opens the engine on the file again (the engine refuses every write
//!   after such a failure) and applies the journal to it, so once there is
//!   room the same handle takes writes again: nothing needs to be dropped
//!   or opened again by hand. [`LocalStorageBuilder::max_size`] caps the
//!   engine file's size the same way, and [`LocalStorage::set_max_size`]
//!   moves the cap.
//! - **Creation.** A new store's file is made whole under another name and
//!   then renamed: a process killed while it makes a store leaves no store
//!   (the next open makes it) or a whole one, never a file that does not
//!   open.
//! - **Damage** not caused by a crash (a file changed by another program,
//!   a failing disk) gives [`StorageFailure::Damaged`]. Every open reads
//!   the whole file first and checks each page against its checksum
//!   ([`LocalStorageBuilder::verify_on_open`]), so a damaged file is refused
//!   there, before the engine trusts it; open it read-only without that
//!   check to read what it still holds. Without the check, damage shows
//!   where the engine meets it: a file cut short or empty, a page that
//!   does not parse. The engine
//!   can panic on a bad page instead of reporting it; such a panic is
//!   caught at the store's boundary and reported as `Damaged`, and the
//!   handle then refuses every further operation (open the store again).
//!   Every table row (index rows are table rows) carries a checksum of
//!   its key and bytes, checked on every read: a row changed in the file,
//!   or found under another key, is `Damaged`, naming the table and keys,
//!   never a value quietly different from the one stored.
//!   [`LocalStorage::check`] reads the whole store and names every damaged
//!   piece (the `tablekit check` command runs it). A blob's
//!   properties and a queue message carry such a checksum too, and a blob's
//!   bytes are checked against their MD5 on every read.
//! - **Two processes.** A store is open in one process at a time: a second
//!   [`open`](LocalStorage::open) of the same directory, from another
//!   process or this one, fails with [`StorageFailure::Locked`]. Clone the
//!   handle to share it between tasks.
//! - **Read-only.** [`LocalStorage::open_read_only`] reads a store on
//!   read-only media, or a backup, without making or changing anything in
//!   its directory; every write fails with [`StorageFailure::ReadOnly`]. A
//!   store left by a killed process opens read-only too: it is recovered in
//!   memory, and its files are left as they were.
//! - **Format.** A store records the number of its format when it is made.
//!   A store of another format (made by an earlier version whose rows this
//!   one would misread) fails to open with [`StorageFailure::Format`], never
//!   reads as values.
//!
//! # The engine: redb
//! The store is one [redb](https://www.redb.org) file, `tablekit.redb`, in
//! the directory, beside its journal (empty once the store is closed).
//! redb was chosen over fjall, the other pure-Rust engine with crash
//! safety, for this workload:
//! - **A write decides on what it reads.** An insert checks the row is
//!   absent, a conditional update compares ETags, a merge reads the stored
//!   properties, and a transaction does all of that for up to 100 rows,
//!   atomically. redb's write transactions are serializable and atomic over
//!   all its tables; with fjall, a read-then-write is atomic only through its
//!   transactional layer, and atomic batches alone do not see conflicts.
//! - **Reads beside writes.** Readers see a snapshot and never wait for the
//!   writer, which is what a query page needs.
//! - **Reads and opens are faster**, as measured below: a table store is
//!   read far more often than written. Its writes were slower, which the
//!   journal mends: redb commits durably only at checkpoints.
//! - **One file and its journal, one small dependency**, and no threads
//!   of its own but the writer (see [Concurrency](#concurrency)).
//!
//! The `engines` program in `bench/engines` (outside the workspace, so that
//! fjall is never built by it: `cargo run --release --manifest-path
//! bench/engines/Cargo.toml`) runs this backend's key/value work on both, on
//! 100,000 rows of about 130 bytes in 100 partitions. One run on the
//! development machine (2 cores, an SSD):
//!
//! | engine | point read | 1,000-row range | durable insert | 100-row transaction | open again | on disk |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | redb 4.6 | 1.3 µs | 71 µs | 193 µs | 439 µs | 0.4 ms | 17.8 MB |
//! | fjall 3.1 | 1.7 µs | 163 µs | 103 µs | 308 µs | 120 ms | 13.8 MB |
//!
//! # Speed
//! The `disk` program in `bench/disk` (outside the workspace, so that SQLite
//! is never built by it: `cargo run --release --manifest-path
//! bench/disk/Cargo.toml`) measures this backend beside SQLite 3.50 (WAL,
//! `synchronous=FULL`, so each commit is durable too) on 100,000 rows of
//! 150-byte values in the same directory; `TABLEKIT_BENCH_TABLE=5` prints
//! the medians of five rounds that measure both sides in turn. One such
//! run on the development machine (2 cores, an SSD, a load average of
//! about 1.4):
//!
//! | measure | tablekit-local | SQLite |
//! | --- | --- | --- |
//! | durable single writes, 1 writer | 5,208/s; typed 5,025/s | 7,965/s; 5,447/s called from a task through `spawn_blocking` |
//! | durable single writes, 16 writers | 40,225/s | 6,710/s |
//! | 1,000-row range, first read (the engine's cache empty) | 0.51 ms; typed 0.58 ms | 0.38 ms |
//! | 1,000-row range, read again | 0.38 ms; typed 0.44 ms | 0.36 ms |
//! | point reads | 492,833/s; typed 416,460/s | 178,839/s |
//! | bulk load, 100-row transactions | 178,358 rows/s | 260,724 rows/s |
//! | bytes per row (the files' length) after the load | 201 | 196 (208 with the 12 bytes each row of the store also keeps) |
//!
//! An earlier run measured what the table leaves out: bytes per row of six
//! named columns, 120 after [`compact`](LocalStorage::compact) against
//! SQLite's 100 (109 with a Timestamp column). An open of a store of
//! 100,000 rows after a clean close takes about 25 ms, nearly all of it the
//! check of the file's pages ([`LocalStorageBuilder::verify_on_open`];
//! 1 ms without it); after a kill, 26 ms (20 ms without the check). At
//! 1,000,000 rows, the open after a kill took 278–330 ms (152 ms without
//! the check).
//!
//! A lone writer's write is one record written to the journal and one
//! sync, as SQLite's is; what it costs beyond that is the hand-over of the
//! write to the store's writer thread and back (so that no sync runs on an
//! async runtime's worker), and the engine's commit. SQLite called from an
//! async task through a thread of its own pays the same hand-over, and
//! then takes about as long. Writers that come together share syncs,
//! which is where the store gains. The open after a kill replays what the
//! journal holds since its last checkpoint (at most 4 MiB); the engine's
//! own recovery and the check of its pages read the file, so an open takes
//! longer the larger the store.
//!
//! A range read as entities costs what the entities cost: most of it goes
//! to the allocations of each [`Entity`](tablekit_core::Entity)'s keys,
//! property list and values. A typed query reads each row where the store
//! decodes it, without an entity in between ([`TableBackend::read_rows`]):
//! each value is moved from the store's decoding into the typed value, and
//! a row the query's filter leaves out is passed by with only the
//! properties the filter compares read. A first read of a range costs
//! more than the next ones: the engine reads each page of its file into
//! its cache on first use. The names
//! of properties are not copied into each entity either: the process keeps
//! one copy of each name its stores read (at most 65,536 names or 1 MiB of
//! them, for the life of the process; past that a name is copied).
//!
//! Bytes on disk are the blocks the files take. The engine grows its file
//! by doubling it, and the part it has not written yet is a hole that takes
//! no room; [`compact`](LocalStorage::compact) gives back the free pages.
//! Writes spread over a large store leave free pages behind until the
//! engine's next checkpoint (it copies each page a write changes, and frees
//! the original only after its next durable commit): a checkpoint every 512
//! changes keeps them few. After 400,000 writes over 100,000 rows the
//! store took 397–408 bytes per row on disk, against SQLite's 307 (319
//! with the 12 bytes each row of the store also keeps).
//! A row names its properties by number: each name is stored once in the
//! store, as a column's name is in a SQLite table's schema (the first
//! 16,384 names; a later one is kept in each row that uses it). Each row
//! keeps what a plain SQLite table of the same columns does not: its write
//! time (8 bytes) and a checksum (4 bytes); the engine adds 8 bytes of
//! offsets to each entry. The engine alone, holding the same keys and
//! values with those 12 bytes, takes 200 bytes a row. By the value's size,
//! the store takes 0.94 to 1.08 times what SQLite with a Timestamp column
//! takes from 20 to 500 bytes, more than plain SQLite below 100 bytes
//! (63 bytes a row against 48 at 20), and less from about 300; SQLite
//! moves a value of about 1,000 bytes to pages of its own (1,397 bytes a
//! row against 4,681).
//!
//! # Memory
//! An open store keeps at most [`DEFAULT_CACHE_SIZE`] (64 MiB) of its file
//! in memory, or what [`LocalStorageBuilder::cache_size`] sets (and
//! `CacheSize=` in a connection string, through `tablekit-stores`): the
//! engine's pages read last, and the pages written since its last
//! checkpoint. Beyond that, a store takes its journal's buffer (one group
//! of writes at a time) and the names of its properties (the first 16,384
//! of each store, and the process's one copy of each, within 1 MiB). A
//! store far larger than its cache reads through the operating system's
//! cache of the file; it is never held whole in memory. That costs a copy
//! per page read: on the development machine, random point reads of a
//! 190 MB store (1,000,000 rows) take 3.3 µs each with the default cache,
//! and 2.1 µs with a cache that holds the whole file.
//!
//! # Concurrency
//! Clones share the store. Reads run side by side, on the caller's task:
//! they read a snapshot and never wait for a write.
//!
//! Writes run on the store's writer thread, and the journal is synced on a
//! thread of its own, never on an async runtime's worker: the commit and
//! the sync of the file do not hold up other tasks. Writes that arrive
//! together share one commit, and writes that arrive while the journal
//! syncs share the next sync (group commit), so concurrent writers are not
//! held to one sync each. Each write still decides on every write committed
//! or grouped before it, so ETag checks, inserts and transactions mean what
//! they mean alone, and each is acknowledged only once it is on disk.
//!
//! A future dropped at any point has applied its write completely or not
//! at all: a write handed to the writer runs to its end even if its caller
//! stops waiting (and counts as [`InFlight`](tablekit_core::backend::InFlight)
//! until it has). Dropping the last handle waits for those writes, then
//! closes the file, so the store can be opened again at once.

mod audit;
mod blobs;
mod check;
mod compact;
mod errors;
mod journal;
mod kept;
mod limit;
mod logged;
mod names;
mod open;
mod overlay;
mod panics;
mod queues;
mod rows;
mod seal;
mod snapshot;
mod tables;
#[cfg(test)]
mod testing;
mod ticks;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redb::{Database, ReadableDatabase, TableDefinition};
use tablekit_core::clock::{Clock, SystemClock};
use tablekit_core::{Error, Result, StorageFailure};

use crate::panics::contain_panics;
use crate::snapshot::WAIT_TO_REOPEN;
pub(crate) use errors::{io_error, storage_error};
use open::*;

#[cfg(doc)]
use tablekit_core::{BlobStore, QueueStore, TableBackend};

pub use check::{CheckReport, Damage, SkippedRow};
pub use compact::Compaction;
pub use writer::WriteStats;

/// The engine's file in a store's directory.
pub const FILE_NAME: &str = "tablekit.redb";

/// The most memory an open store's engine keeps of its file, unless
/// [`LocalStorageBuilder::cache_size`] says otherwise: 64 MiB.
pub const DEFAULT_CACHE_SIZE: usize = 64 << 20;

/// Settings kept with the store.
const META: TableDefinition<'static, &str, i64> = TableDefinition::new("meta");

/// A persistent store of tables, blobs and queues in one directory. See the
/// [crate documentation](crate).
#[derive(Clone)]
pub struct LocalStorage {
    /// The writer thread; `None` in the thread's own handle and in a
    /// read-only store. Dropped before `shared`: the last handle's drop
    /// stops the thread, which closes the engine.
    writer: Option<Arc<writer::Writer>>,
    shared: Arc<Shared>,
}

/// The storage engine on the store's file: writable, or read-only.
enum Engine {
    Writable(Database),
    ReadOnly(redb::ReadOnlyDatabase),
    /// A read-only open of a store that was not closed cleanly: the engine
    /// repaired and the journal applied in memory alone, over the file as
    /// it is ([`overlay`]). Every write is refused, as for `ReadOnly`.
    Recovered(Database),
}

impl Engine {
    fn begin_read(&self) -> std::result::Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Engine::Writable(db) | Engine::Recovered(db) => db.begin_read(),
            Engine::ReadOnly(db) => db.begin_read(),
        }
    }
}

struct Shared {
    /// What a writable store's readers read: the engine's state as of the
    /// last group of writes made durable. The engine takes a group's
    /// commit before its journal record is synced (see [`writer`]), so
    /// reading the engine itself would show writes not yet durable. `None`
    /// in a read-only store, and while nothing is committed but durable
    /// state (a compaction, an open of the engine again), when readers read
    /// the engine. Declared first, so dropped first: the engine's last
    /// read ends before the engine closes.
    published: parking_lot::RwLock<Option<Arc<snapshot::Published>>>,
    /// Held (shared) by every read for as long as it reads, and (alone) by
    /// an open of the engine again, which closes the old engine: a read
    /// under way then would find its snapshot closed ([`snapshot`]).
    reads: parking_lot::RwLock<()>,
    /// The property names readers have read ([`names`]).
    names: parking_lot::RwLock<Arc<names::NameCache>>,
    /// What the writer keeps of its committed transactions (property
    /// names' ids, the bound on the times given).
    kept: kept::Kept,
    /// The engine; `None` while it is opened again (see
    /// [`LocalStorage::engine`]).
    db: parking_lot::RwLock<Option<Arc<Engine>>>,
    /// Opened with [`LocalStorageBuilder::read_only`]: every write is
    /// refused, and nothing in the directory is changed.
    read_only: bool,
    /// A write failed for the file (a full disk): the engine refuses every
    /// later write until it is opened again, which the next operation does.
    needs_reopen: AtomicBool,
    /// The file's size cap ([`LocalStorageBuilder::max_size`]), which
    /// [`LocalStorage::set_max_size`] may change.
    max_size: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// The engine's cache ([`LocalStorageBuilder::cache_size`]), kept for
    /// its opens after a full disk.
    cache_size: usize,
    path: PathBuf,
    table_deletion_delay: Duration,
    clock: Arc<dyn Clock>,
    /// The engine panicked in an operation: its state is not trusted, and
    /// every later operation of this handle is refused as damaged.
    engine_failed: AtomicBool,
    /// Whether queries pass over damaged rows
    /// ([`LocalStorageBuilder::skip_damaged_rows`]), and those they passed.
    skip_damaged: bool,
    skipped: parking_lot::Mutex<std::collections::BTreeSet<check::SkippedRow>>,
    /// What the writer thread did ([`LocalStorage::write_stats`]).
    stats: writer::Counters,
    /// The last time given to a write ([`LocalStorage::next_ticks`]);
    /// `i64::MIN` before the first.
    last_ticks: std::sync::atomic::AtomicI64,
    /// The journal of a writable store; `None` in a read-only one, and
    /// after a write to it failed in a way that leaves its state unknown
    /// (the engine is then opened again, which opens it again).
    journal: parking_lot::Mutex<Option<journal::Journal>>,
    /// Groups of writes the engine holds that the journal may not hold
    /// durably yet: the engine is not opened again until they are settled.
    unsynced: std::sync::atomic::AtomicUsize,
    /// The changes the engine holds since its last durable commit (see
    /// [`journal::MOST_HELD`]).
    held: std::sync::atomic::AtomicU64,
    /// How many syncs of the journal fail, for the tests.
    #[cfg(test)]
    failing_syncs: std::sync::atomic::AtomicUsize,
    /// The wall clock's ticks as the tests set them (`i64::MIN`: the wall
    /// clock's own).
    #[cfg(test)]
    wall_ticks: std::sync::atomic::AtomicI64,
    /// The switch of the writable engine's file ([`limit::Discard`]).
    discard: parking_lot::Mutex<Option<limit::Discard>>,
    /// Removed with the store, for [`LocalStorage::temporary`].
    _temporary: Option<tempfile::TempDir>,
}

impl fmt::Debug for LocalStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalStorage")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

/// Configures a [`LocalStorage`].
#[derive(Debug, Clone)]
pub struct LocalStorageBuilder {
    table_deletion_delay: Duration,
    clock: Arc<dyn Clock>,
    max_size: Option<u64>,
    cache_size: usize,
    verify_on_open: bool,
    read_only: bool,
    quick_recovery: bool,
    skip_damaged_rows: bool,
    lost_journal_accepted: bool,
}

impl LocalStorageBuilder {
    /// Queries pass over a damaged row (one that fails its checksum or
    /// does not decode) instead of failing at it, and the store keeps its
    /// keys ([`LocalStorage::skipped_rows`]), each also logged as a
    /// warning: to copy or export what a damaged store still holds
    /// (`tablekit copy` and `export` with `--skip-damaged`). A point read
    /// of a damaged row still fails. Off by default: a damaged row fails
    /// the query that meets it.
    pub fn skip_damaged_rows(mut self, skip: bool) -> LocalStorageBuilder {
        self.skip_damaged_rows = skip;
        self
    }

    /// How long a deleted table's name answers
    /// [`TableBeingDeleted`](tablekit_core::Error::TableBeingDeleted). The service
    /// takes at least 40 seconds, the default; `Duration::ZERO` frees the name
    /// at once, as Azurite does.
    pub fn table_deletion_delay(mut self, delay: Duration) -> LocalStorageBuilder {
        self.table_deletion_delay = delay;
        self
    }

    /// The clock of the queues' visibility timeouts and expiry:
    /// [`SystemClock`] by default, or a
    /// [`ManualClock`](tablekit_core::clock::ManualClock) that tests move by hand.
    pub fn clock(mut self, clock: impl Clock + 'static) -> LocalStorageBuilder {
        self.clock = Arc::new(clock);
        self
    }

    /// The most bytes the store's engine file may take (its journal beside
    /// it takes at most 4 MiB more). No limit by default.
    ///
    /// What the cap guarantees, and no more:
    /// - the engine's file never grows past `bytes`;
    /// - a write that would need it to fails with
    ///   [`StorageFailure::DiskFull`], as on a full disk, and is not
    ///   applied, in whole (a transaction's other rows included);
    /// - every write acknowledged before or after a refusal is kept.
    ///
    /// The cap is on the file, not on the data: a write that fits in room
    /// the file already has is taken, so a write can succeed right after
    /// another was refused (a smaller one, one that reuses pages a delete
    /// or an overwrite freed, or one that fits once the engine, opened
    /// again after the refusal, has laid its free pages out anew). The
    /// engine writes pages anew rather than in place, so the file reaches
    /// the cap well before the rows add up to it, and a delete needs room
    /// too: a store at its cap may refuse deletes as well, until
    /// [`LocalStorage::set_max_size`] raises the cap.
    pub fn max_size(mut self, bytes: u64) -> LocalStorageBuilder {
        self.max_size = Some(bytes);
        self
    }

    /// The most memory the engine keeps of the store's file: the pages it
    /// read last, and the pages written since the last checkpoint (which
    /// take at most half of it; past that they are written to the file
    /// early). [`DEFAULT_CACHE_SIZE`] (64 MiB) by default. A store larger
    /// than its cache still reads at the speed of the operating system's
    /// own cache of the file, one copy more per page; a smaller cache only
    /// costs time, never a result (0 is taken too: every page is then read
    /// from the file and written to it at once). See [Memory](crate#memory).
    pub fn cache_size(mut self, bytes: usize) -> LocalStorageBuilder {
        self.cache_size = bytes;
        self
    }

    /// Whether an open reads the whole engine file first and checks every
    /// page against its checksum (on by default).
    ///
    /// The engine trusts a file it closed cleanly. A file damaged since
    /// (a disk's bit rot, a copy cut short, an edit by another program)
    /// would be trusted too: a damaged page of the engine's tree can hide
    /// entries from reads without an error, and the engine's first write
    /// could put a page where a live one is, damaging more, or fail in a
    /// way that ends the process. With the check, such a file is refused
    /// at the open as [`StorageFailure::Damaged`]. A read-only open checks
    /// the file without writing it.
    ///
    /// To get what a damaged store still holds, open it
    /// [read-only](LocalStorageBuilder::read_only) without the check: each
    /// row, blob and message is still checked as it is read (a damaged one
    /// is an error, never a wrong value), though entries under a damaged
    /// page may be missing; [`LocalStorage::check`] names the damage.
    /// Opening a damaged store for writing without the check is for
    /// getting rid of a damaged row by its keys, at the risks above.
    ///
    /// The check costs about as long as reading the file from the
    /// operating system's cache once (some 25 ms for 100,000 rows of 150
    /// bytes; more from a cold disk). Turn it off only for a store too
    /// large to read at each start, on storage you trust.
    pub fn verify_on_open(mut self, verify: bool) -> LocalStorageBuilder {
        self.verify_on_open = verify;
        self
    }

    /// Opens the store read-only: for a store on read-only media, a backup,
    /// or a look at a store another program owns while it is closed. Reads of
    /// tables, blobs and queues work; every write (queue reads that take
    /// messages included) fails with [`StorageFailure::ReadOnly`].
    ///
    /// Nothing in the directory is created or changed, so the store must
    /// exist: a missing one is [`StorageFailure::Io`]. A store that was not
    /// closed cleanly (its process was killed) is recovered in memory: the
    /// engine's repair and the writes its journal holds are applied to a
    /// copy of the pages they change, kept in memory while the store is
    /// open, and the files are left as they were; the store then reads as a
    /// writable open would have recovered it. A store open for writing in
    /// another process is [`StorageFailure::Locked`]. The open checks the
    /// file's pages as an open for writing does, without writing it
    /// ([`verify_on_open`](LocalStorageBuilder::verify_on_open)).
    pub fn read_only(mut self, read_only: bool) -> LocalStorageBuilder {
        self.read_only = read_only;
        self
    }

    /// Changes nothing: every open after a crash is quick now.
    ///
    /// This once made the engine save its record of free space with every
    /// commit, at the cost of a second sync, so that the first open after a
    /// crash would not read the whole file. Since the store keeps a journal
    /// (see [Durability](crate#durability)), the engine commits durably only
    /// at checkpoints, which always save that record: the open after a crash
    /// needs no repair, and writes pay nothing for it (every open still
    /// reads the file once to check its pages, unless
    /// [`verify_on_open`](LocalStorageBuilder::verify_on_open) is off).
    #[deprecated(
        since = "0.1.0",
        note = "every open after a crash is quick now; the setting changes nothing"
    )]
    pub fn quick_recovery(mut self, quick: bool) -> LocalStorageBuilder {
        self.quick_recovery = quick;
        self
    }

    /// Opens a store whose journal is gone though it was not closed
    /// cleanly, without the writes acknowledged since its last checkpoint
    /// (they were in the journal, and are lost): a store refuses to open
    /// so by default. For a journal found damaged, moved away on purpose.
    pub fn accept_lost_journal(mut self, accept: bool) -> LocalStorageBuilder {
        self.lost_journal_accepted = accept;
        self
    }

    /// Opens the store in `dir`, creating the directory and the store if
    /// needed (unless [`read_only`](LocalStorageBuilder::read_only)). The
    /// directory above `dir` must exist: a path whose parent is missing (a
    /// typo in it, say) is refused with [`StorageFailure::Io`], and nothing
    /// is created.
    ///
    /// A store whose own files disagree is refused with
    /// [`StorageFailure::Damaged`], never opened as another: its engine's
    /// file missing while its journal is there (a new, empty store would
    /// take its place), or its journal missing while the engine says it
    /// was not closed cleanly (the writes acknowledged since the last
    /// checkpoint would be lost; see
    /// [`accept_lost_journal`](LocalStorageBuilder::accept_lost_journal)).
    ///
    /// The open reads and syncs files on the calling thread, and its check
    /// of the file's pages reads the whole file: in async code where other
    /// tasks run meanwhile, call it through `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    /// [`Error::Storage`]: [`StorageFailure::Locked`] if another handle or
    /// process has it open, [`StorageFailure::Io`] if the directory cannot be
    /// created or read, [`StorageFailure::Damaged`] if its file is not a
    /// store or fails the check of its pages
    /// ([`verify_on_open`](LocalStorageBuilder::verify_on_open)).
    pub fn open(self, dir: impl AsRef<Path>) -> Result<LocalStorage> {
        self.open_in(dir.as_ref().to_path_buf(), None)
    }

    /// Opens a store in a new temporary directory, removed when the last
    /// clone of the handle is dropped: for tests and examples.
    ///
    /// # Errors
    /// As [`open`](LocalStorageBuilder::open).
    pub fn temporary(self) -> Result<LocalStorage> {
        let dir = tempfile::Builder::new()
            .prefix("tablekit-local-")
            .tempdir()
            .map_err(|e| io_error(&std::env::temp_dir(), &e))?;
        self.open_in(dir.path().to_path_buf(), Some(dir))
    }

    fn open_in(self, dir: PathBuf, temporary: Option<tempfile::TempDir>) -> Result<LocalStorage> {
        ready_store_file(&dir, self.read_only)?;
        let max_size = self
            .max_size
            .map(|max| Arc::new(std::sync::atomic::AtomicU64::new(max)));
        let (db, journal, replayed) = if self.read_only {
            (
                open_read_only(
                    &dir,
                    self.cache_size,
                    self.lost_journal_accepted,
                    self.verify_on_open,
                )?,
                None,
                0,
            )
        } else {
            let (db, discard) = open_engine(
                &dir,
                max_size.as_ref(),
                self.cache_size,
                self.verify_on_open,
            )?;
            let (journal, replayed) = recover(&dir, &db, self.lost_journal_accepted)?;
            (Engine::Writable(db), Some((journal, discard)), replayed)
        };
        let (journal, discard) = journal.unzip();
        let mut storage = LocalStorage {
            writer: None,
            shared: Arc::new(Shared {
                db: parking_lot::RwLock::new(Some(Arc::new(db))),
                read_only: self.read_only,
                needs_reopen: AtomicBool::new(false),
                max_size,
                cache_size: self.cache_size,
                path: dir,
                table_deletion_delay: self.table_deletion_delay,
                clock: self.clock,
                engine_failed: AtomicBool::new(false),
                skip_damaged: self.skip_damaged_rows,
                skipped: parking_lot::Mutex::default(),
                stats: writer::Counters::default(),
                last_ticks: std::sync::atomic::AtomicI64::new(i64::MIN),
                journal: parking_lot::Mutex::new(journal),
                published: parking_lot::RwLock::new(None),
                reads: parking_lot::RwLock::new(()),
                names: parking_lot::RwLock::default(),
                kept: kept::Kept::default(),
                unsynced: std::sync::atomic::AtomicUsize::new(0),
                held: std::sync::atomic::AtomicU64::new(0),
                #[cfg(test)]
                failing_syncs: std::sync::atomic::AtomicUsize::new(0),
                #[cfg(test)]
                wall_ticks: std::sync::atomic::AtomicI64::new(i64::MIN),
                discard: parking_lot::Mutex::new(discard),
                _temporary: temporary,
            }),
        };
        storage
            .shared
            .stats
            .replayed
            .store(replayed, Ordering::Relaxed);
        // A read-only store has them: every open for writing made them.
        if !self.read_only {
            storage.create_system_tables()?;
            storage.publish()?;
            let thread = LocalStorage {
                writer: None,
                shared: Arc::clone(&storage.shared),
            };
            let writer =
                writer::Writer::start(thread).map_err(|e| io_error(&storage.shared.path, &e))?;
            storage.writer = Some(Arc::new(writer));
        }
        Ok(storage)
    }
}

impl LocalStorage {
    /// Opens the store in `dir` with the default settings, creating the
    /// directory (in one that exists) and the store if needed. See
    /// [`LocalStorageBuilder::open`].
    ///
    /// # Errors
    /// As [`LocalStorageBuilder::open`].
    pub fn open(dir: impl AsRef<Path>) -> Result<LocalStorage> {
        LocalStorage::builder().open(dir)
    }

    /// Opens the store in `dir` read-only, with the default settings. See
    /// [`LocalStorageBuilder::read_only`].
    ///
    /// # Errors
    /// As [`LocalStorageBuilder::open`], and as
    /// [`LocalStorageBuilder::read_only`] says.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<LocalStorage> {
        LocalStorage::builder().read_only(true).open(dir)
    }

    /// A store in a new temporary directory, removed when the last clone is
    /// dropped. See [`LocalStorageBuilder::temporary`].
    ///
    /// # Errors
    /// As [`LocalStorageBuilder::open`].
    pub fn temporary() -> Result<LocalStorage> {
        LocalStorage::builder().temporary()
    }

    /// Configures a store.
    pub fn builder() -> LocalStorageBuilder {
        LocalStorageBuilder {
            table_deletion_delay: Duration::from_secs(40),
            clock: Arc::new(SystemClock),
            max_size: None,
            cache_size: DEFAULT_CACHE_SIZE,
            verify_on_open: true,
            read_only: false,
            quick_recovery: false,
            skip_damaged_rows: false,
            lost_journal_accepted: false,
        }
    }

    /// The damaged rows queries passed over, in key order, for a store
    /// opened with [`LocalStorageBuilder::skip_damaged_rows`] (none
    /// otherwise).
    pub fn skipped_rows(&self) -> Vec<SkippedRow> {
        self.shared.skipped.lock().iter().cloned().collect()
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The clock the queues run on.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.shared.clock)
    }

    /// Creates the tables every transaction may open, so that readers never
    /// meet a missing one.
    fn create_system_tables(&self) -> Result<()> {
        let txn = self.begin_write()?;
        (|| -> Result<(), redb::Error> {
            // Committed durably with the tables, before any journal
            // record: from here a missing journal may hold lost writes.
            mark_in_use(&txn, true)?;
            tables::create_system_tables(&txn)?;
            names::create_system_tables(&txn)?;
            blobs::create_system_tables(&txn)?;
            queues::create_system_tables(&txn)?;
            Ok(())
        })()
        .map_err(|e| self.error(e))?;
        self.commit(txn)
    }

    fn begin_write(&self) -> Result<redb::WriteTransaction> {
        match &*self.engine()? {
            Engine::Writable(db) => {
                let mut txn = db.begin_write().map_err(|e| self.error(e.into()))?;
                // A durable commit is a checkpoint (see [`journal`]): rare,
                // so it always saves what a quick recovery needs.
                txn.set_quick_repair(true);
                Ok(txn)
            }
            Engine::ReadOnly(_) | Engine::Recovered(_) => Err(self.read_only_error()),
        }
    }

    /// The error of a write to a store opened read-only.
    fn read_only_error(&self) -> Error {
        Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: StorageFailure::ReadOnly,
            message: "the store was opened read-only".into(),
        }
    }

    /// The engine, opened again first if a write failed for the file: the
    /// engine refuses every write after such a failure, and only a new
    /// handle on the file takes writes again (once there is room). An
    /// operation still under way on the old handle holds the file; the
    /// engine is then opened again by a later operation.
    fn engine(&self) -> Result<Arc<Engine>> {
        if self.shared.needs_reopen.load(Ordering::Acquire) {
            self.reopen()?;
        }
        match &*self.shared.db.read() {
            Some(db) => Ok(Arc::clone(db)),
            None => Err(self.not_reopened()),
        }
    }

    /// Opens the engine again (see [`engine`](LocalStorage::engine)).
    fn reopen(&self) -> Result<()> {
        let mut slot = self.shared.db.write();
        if !self.shared.needs_reopen.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.shared.unsynced.load(Ordering::Acquire) > 0 {
            // The writer's groups under way settle first.
            return Err(self.not_reopened());
        }
        // Closing the old engine ends every snapshot of it: reads under way
        // end first (new ones wait for `slot`).
        let Some(_no_reads) = self.shared.reads.try_write_for(WAIT_TO_REOPEN) else {
            return Err(self.not_reopened());
        };
        if let Some(db) = slot.take()
            && let Err(db) = Arc::try_unwrap(db)
        {
            // Still in use by an operation under way.
            *slot = Some(db);
            return Err(self.not_reopened());
        }
        // The old engine's last snapshot holds its file open. From here to
        // the new engine, readers find no engine and wait for it.
        self.publish_snapshot(None);
        let (db, discard) = open_engine(
            &self.shared.path,
            self.shared.max_size.as_ref(),
            self.shared.cache_size,
            // The file was this handle's own a moment ago: the engine's own
            // recovery answers for the write that failed, and a check of
            // every page would hold up the operation that reopens (on an
            // async worker, perhaps) for a read of the whole file.
            false,
        )?;
        *self.shared.discard.lock() = Some(discard);
        self.forget_learned();
        // The engine opened again holds its last checkpoint: the journal
        // brings it back to every acknowledged write.
        let mut journal = self.shared.journal.lock();
        *journal = None;
        let (recovered, replayed) = recover(&self.shared.path, &db, false)?;
        *journal = Some(recovered);
        self.shared
            .stats
            .replayed
            .store(replayed, Ordering::Relaxed);
        let snapshot = db.begin_read().map_err(|e| self.error(e.into()))?;
        self.publish_snapshot(Some(snapshot::Published::new(snapshot)));
        *slot = Some(Arc::new(Engine::Writable(db)));
        self.shared.needs_reopen.store(false, Ordering::Release);
        Ok(())
    }

    /// Drops the engine's commits that the journal does not hold durably:
    /// the engine writes nothing more, and the next operation opens it
    /// again, on its last checkpoint and the journal's records.
    fn discard_unsynced(&self) {
        self.forget_learned();
        if let Some(discard) = &*self.shared.discard.lock() {
            discard.discard();
        }
        self.shared.needs_reopen.store(true, Ordering::Release);
    }

    /// The error while the engine waits to be opened again.
    fn not_reopened(&self) -> Error {
        Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: StorageFailure::DiskFull,
            message: "a write failed for the store's file (no space left, or a sync of \
                      its journal failed); the store takes writes again once there is \
                      room and the operations under way have ended"
                .into(),
        }
    }

    /// Changes the most bytes the store's file may take (see
    /// [`LocalStorageBuilder::max_size`]); `None` if the store was opened
    /// without a cap, which cannot be added. Writes refused at the old cap
    /// are taken again once it is raised.
    pub fn set_max_size(&self, bytes: u64) -> Option<()> {
        let max = self.shared.max_size.as_ref()?;
        max.store(bytes, Ordering::Relaxed);
        Some(())
    }

    /// Commits durably: the write is on disk when this returns.
    fn commit(&self, txn: redb::WriteTransaction) -> Result<()> {
        txn.commit().map_err(|e| self.error(e.into()))
    }

    /// Runs one operation of the store, with the engine's panics contained
    /// ([`contain_panics`]). After a panic the engine's state is not
    /// trusted: this and every later operation of the handle fail with
    /// [`StorageFailure::Damaged`].
    fn guarded<T>(&self, operation: impl FnOnce() -> Result<T>) -> Result<T> {
        let refused = || Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: StorageFailure::Damaged,
            message: "an earlier operation found the file damaged; open the store again".into(),
        };
        if self.shared.engine_failed.load(Ordering::Acquire) {
            return Err(refused());
        }
        contain_panics(operation).unwrap_or_else(|panic| {
            self.shared.engine_failed.store(true, Ordering::Release);
            Err(damaged_by(&self.shared.path, &panic))
        })
    }

    /// The engine's error as tablekit's. An error of the file's I/O leaves
    /// the engine refusing writes: it is opened again by the next operation.
    fn error(&self, error: redb::Error) -> Error {
        // A read-only engine never wrote, so it has nothing to refuse.
        let engine_refuses =
            !self.shared.read_only && matches!(error, redb::Error::Io(_) | redb::Error::PreviousIo);
        let error = storage_error(&self.shared.path, error);
        if engine_refuses {
            self.shared.needs_reopen.store(true, Ordering::Release);
        }
        error
    }

    /// The error for a stored record that does not read back.
    fn damaged(&self, what: &str) -> Error {
        Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: StorageFailure::Damaged,
            message: format!("{what} does not decode"),
        }
    }
}
