//! The typed client: [`Table<T>`] over any backend.
//!
//! ```
//! use tablekit::{Table, TableEntity};
//! use tablekit_mem::MemBackend;
//!
//! #[derive(TableEntity, Debug, Clone, PartialEq)]
//! #[tablekit(table = "People", kind = "PERSON")]
//! struct Person {
//!     #[tablekit(partition_key)]
//!     team: String,
//!     #[tablekit(row_key)]
//!     id: u32,
//!     name: String,
//!     age: Option<i32>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let people: Table<Person> = Table::new(MemBackend::new());
//! people.create_if_missing().await?;
//! people.insert(&Person { team: "core".into(), id: 7, name: "Ada".into(), age: None }).await?;
//!
//! let mut ada = people.get("core", 7).await?.expect("inserted");
//! ada.age = Some(36);
//! people.replace(&mut ada).await?; // guarded by the ETag read with `ada`, then refreshed
//!
//! let adults = people.query().partition("core").filter(Person::columns().age.ge(18)).collect().await?;
//! assert_eq!(adults.len(), 1);
//! # Ok(()) }
//! ```

mod batch;
mod bulk;
mod expiring;
mod loaded;
mod merge;
mod migrate;
pub mod offload;
pub(crate) mod query;
mod read;
mod sealed;
pub(crate) use sealed::finishes_reads;
mod spanning;
mod stored;
mod unknown;
pub mod wide;
mod write;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

pub use crate::pacing::Pacing;
pub use batch::{TableBatch, Transaction};
pub use bulk::{BulkFailure, BulkReport, BulkWriter};
pub use expiring::ExpirySweep;
pub use loaded::Loaded;
pub use migrate::{Migration, MigrationCheckpoint, MigrationJob, MigrationReport};
pub use query::{Cursor, CursorPage, RowErrors, RowFailure, SkippedRows, TableQuery};
use read::stored_version;
pub(crate) use read::{load, owned_query_stream, typed_query_stream};
pub(crate) use stored::{
    Current, current_of, has_index_rows, new_index_keys, writes_in, writes_of,
};
pub use write::update;
pub use write::update::UpdateOptions;
pub(crate) use write::{RACE_ATTEMPTS, plan, written_version};
use write::{RowWrite, Write, Written};

use crate::backend::{TableBackend, TableBackendExt, UpdateMode};
use crate::entity::{ETag, IfMatch};
use crate::error::{Call, Error, Result};
use crate::schema::{self, EntityKinds, KeyArg, TableEntity, UnknownKind};

/// A typed view of one table, for the entities of one type.
///
/// # Rows that expire
/// A type declared `#[tablekit(time_to_live = "30m")]` has entities that
/// expire 30 minutes after their last typed write: each write stamps its
/// time, by the table's clock, in
/// [`LAST_WRITE_PROPERTY`](schema::LAST_WRITE_PROPERTY) (a migration keeps
/// the stamp, and `merge_element` does not count as a write). A type whose
/// `DateTime` (or `Option<DateTime>`) field is marked `#[tablekit(expires)]`
/// has entities that expire at that time (`None` never expires).
///
/// From the instant an entity expires, by the table's clock
/// ([`with_clock`](Table::with_clock)), no typed read sees it: `get` and
/// `exists` answer as for a missing one; queries, pages, counts and
/// projections leave it out (the store is asked for live rows alone);
/// reads of a partition of several kinds pass it by; `update` finds no
/// entity. Its keys are free: `insert` (a transaction's, the bulk
/// writer's) writes a new entity in its place. A write through a value
/// read before the entity expired still applies, as its ETag names that
/// version, and writes that read nothing (upserts, unconditional updates,
/// deletes by key) act on the row as stored. Untyped access (the backend,
/// copies, exports) shows the row as stored; [`schema::expired`] tells
/// whether it has expired.
///
/// A time to live changed in the code applies at once to the reads of
/// every stored entity. To have the sweep delete them at their new time,
/// and to give a time to live to rows written before the type had one
/// (they never expire until written again), raise the type's version and
/// run its [migration](Table::migrate): it stamps rows without a write
/// time with its own, keeps the others', and indexes each at its new time.
/// A time to live removed applies at once too (the rows never expire);
/// the migration then takes the write times out of the rows and drops the
/// expiry index rows nothing reads any more.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use tablekit::clock::{Clock, ManualClock};
/// use tablekit::{DateTime, Table, TableEntity};
///
/// #[derive(TableEntity, Debug)]
/// #[tablekit(table = "Sessions")]
/// struct Session {
///     #[tablekit(partition_key)]
///     user: String,
///     #[tablekit(row_key)]
///     id: String,
///     #[tablekit(expires)]
///     expires_at: DateTime,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
/// let clock = ManualClock::new();
/// let sessions: Table<Session> =
///     Table::new(tablekit_mem::MemBackend::new()).with_clock(Arc::new(clock.clone()));
/// # sessions.create_if_missing().await?;
/// let expires_at = clock.now().saturating_add(Duration::from_secs(30 * 60));
/// sessions.insert(&Session { user: "ada".into(), id: "s1".into(), expires_at }).await?;
/// assert!(sessions.get("ada", "s1").await?.is_some());
/// clock.advance(Duration::from_secs(30 * 60));
/// assert!(sessions.get("ada", "s1").await?.is_none());
/// # Ok(()) }
/// ```
///
/// Expired entities are deleted by [`sweep_expired`](Table::sweep_expired),
/// which the [upkeep](crate::upkeep) calls every round: each write of an
/// entity that expires first puts a row in its type's expiry index (the
/// entities by hour of expiry), so a sweep reads only the rows that are
/// due, never the table. It deletes each entity under the ETag it read,
/// so one written again meanwhile stays. On Cosmos DB for Table with the
/// container's own time to live on, the two do not fight: a row the
/// service deleted first is gone for the sweep as for any reader (a
/// missing entity or index row is passed by), and the service's deletes
/// follow its own clock, not the type's.
///
/// An entity that expires takes its other rows with it:
/// - **Indexes.** Lookups (unique, plain, copied, listed, kept in another
///   partition or table) pass an expired entity by, as reads do. An expired
///   entity holds no unique value: a write (single, `update`, a
///   transaction) refused for a value an expired entity holds deletes that
///   entity first and goes again; so does an insert over its keys. The
///   sweep deletes each entity with its index rows, as a typed delete does.
/// - **Change feed.** Each of those deletes is recorded as a
///   [`Delete`](crate::changes::ChangeOp::Delete) whose
///   [`expired`](crate::changes::Change::expired) is `true`, so a consumer
///   (a projection, another store) can tell an expiry from a user's
///   delete.
/// - **Offloaded values** (`blob`, `offload`) and the parts of a `wide`
///   entity are deleted with it.
pub struct Table<T> {
    pub(crate) backend: Arc<dyn TableBackend>,
    pub(crate) name: Arc<str>,
    pub(crate) blobs: Option<crate::blob::BlobTarget>,
    pub(crate) record_writes: bool,
    pub(crate) outbox: Option<Arc<dyn crate::pending::Announce>>,
    pub(crate) clock: Arc<dyn crate::clock::Clock>,
    /// The keys of encrypted fields (`with_encryption`).
    pub(crate) keys: Option<Arc<dyn tablekit_encrypt::KeyResolver>>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Table<T> {
    fn clone(&self) -> Self {
        Table {
            backend: Arc::clone(&self.backend),
            name: Arc::clone(&self.name),
            blobs: self.blobs.clone(),
            record_writes: self.record_writes,
            outbox: self.outbox.clone(),
            clock: Arc::clone(&self.clock),
            keys: self.keys.clone(),
            _type: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Table<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T> Table<T> {
    /// The table `name` on a shared backend (several kinds, one table).
    pub fn from_arc(backend: Arc<dyn TableBackend>, name: &str) -> Table<T> {
        Table {
            backend,
            name: name.into(),
            blobs: None,
            record_writes: true,
            outbox: None,
            clock: Arc::new(crate::clock::SystemClock),
            keys: None,
            _type: PhantomData,
        }
    }

    /// The same table and backend, for entities of another type (another kind
    /// sharing the table, or an [`EntityKinds`] enum over several).
    pub fn of<U>(&self) -> Table<U> {
        Table {
            backend: Arc::clone(&self.backend),
            name: Arc::clone(&self.name),
            blobs: self.blobs.clone(),
            record_writes: self.record_writes,
            outbox: self.outbox.clone(),
            clock: Arc::clone(&self.clock),
            keys: self.keys.clone(),
            _type: PhantomData,
        }
    }

    /// Takes the time from `clock` (when outbox records are written, for
    /// the sweeper), instead of the system's.
    pub fn with_clock(mut self, clock: Arc<dyn crate::clock::Clock>) -> Table<T> {
        self.clock = clock;
        self
    }

    /// Seals the entity's encrypted fields (`#[tablekit(encrypted)]`) with
    /// keys from `keys` before each write, and opens them after each read
    /// (see [`encryption`](crate::encryption)). A table of a type with
    /// encrypted fields and no keys refuses to write or read them
    /// ([`EncryptionError::NoKeys`](crate::encryption::EncryptionError::NoKeys)).
    /// [`of`](Table::of) and [`named`](Table::named) keep the keys.
    pub fn with_encryption(mut self, keys: Arc<dyn tablekit_encrypt::KeyResolver>) -> Table<T> {
        self.keys = Some(keys);
        self
    }

    /// Writes rows without the short history of tagged writes that lets a
    /// write whose answer was lost be settled by reading the row back (the
    /// `_Writes` property; see [`update::WRITES_PROPERTY`]). For tables that
    /// other clients read and that should hold only the entity's own
    /// properties. A lost answer then reaches the caller as
    /// [`Error::OutcomeUnknown`] wherever the row alone cannot tell.
    pub fn without_write_history(mut self) -> Table<T> {
        self.record_writes = false;
        self
    }

    /// The same backend and entity type, on the table `name` chosen at run
    /// time (one table per tenant or per day, say).
    ///
    /// ```
    /// # use tablekit::{Table, TableEntity};
    /// # #[derive(TableEntity)] #[tablekit(table = "Audit")]
    /// # struct Event { #[tablekit(partition_key)] day: String, #[tablekit(row_key)] seq: u32 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// let audit: Table<Event> = Table::new(tablekit_mem::MemBackend::new());
    /// let today = audit.named("Audit20261123");
    /// today.create_if_missing().await?;
    /// assert!(today.delete_table().await?);
    /// # Ok(()) }
    /// ```
    pub fn named(&self, name: &str) -> Table<T> {
        let mut table = self.clone();
        table.name = name.into();
        table
    }

    /// Deletes the whole table; `false` if there was none (or it is being
    /// deleted already). Its name stays taken while the store removes it
    /// (about 40 s on the service).
    pub async fn delete_table(&self) -> Result<bool> {
        match self.backend.delete_table(&self.name).await {
            Ok(()) => Ok(true),
            Err(Error::TableNotFound { .. } | Error::TableBeingDeleted { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Finishes the pending work (outbox records) of `(pk, rk)` after the
    /// transaction that wrote it committed, in a task of its own (see
    /// `pending::finish_after_commit`).
    pub(crate) async fn finish_after_commit(&self, pk: &str, rk: &str) {
        // Boxed: the writes that call this hold a pointer in their state,
        // not the steps' whole future.
        Box::pin(crate::pending::finish_after_commit(
            &self.backend,
            &self.name,
            self.outbox.as_ref(),
            pk,
            rk,
        ))
        .await;
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether offloaded values have a blob store to go to.
    pub(crate) fn has_blob_store(&self) -> bool {
        self.blobs.is_some()
    }

    /// The clock the table reads the time from.
    pub(crate) fn clock(&self) -> &Arc<dyn crate::clock::Clock> {
        &self.clock
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn TableBackend> {
        &self.backend
    }

    /// Creates the table unless it exists, and the blob container its
    /// offloaded values go to ([`with_blob_store`](Table::with_blob_store))
    /// unless that exists; `true` if the table was created.
    pub async fn create_if_missing(&self) -> Result<bool> {
        let created = self.backend.create_table_if_not_exists(&self.name).await?;
        if let Some(blobs) = &self.blobs {
            use crate::blob::BlobStoreExt;
            blobs
                .store()
                .create_container_if_not_exists(blobs.container())
                .await?;
        }
        Ok(created)
    }
}

/// A typed operation `op` on `table` of `backend`, observed
/// ([`crate::telemetry`]): its span, outcome and duration, with the kind,
/// and the keys where there are some (recorded only when asked for).
pub(crate) fn operation(
    backend: &dyn TableBackend,
    op: &'static str,
    table: &str,
    kind: Option<&str>,
    keys: Option<(&str, &str)>,
) -> crate::telemetry::Call {
    let call = crate::telemetry::Call::operation(|| backend.store_info(), op, table).kind(kind);
    match keys {
        Some((pk, rk)) => call.keys(pk, rk),
        None => call,
    }
}

impl<K: EntityKinds> Table<K> {
    /// Every row of the partition, read as the variant of its kind, in key
    /// order; rows of other kinds fail or are skipped as `unknown` says.
    pub fn read_partition(
        &self,
        pk: impl KeyArg<K::PartitionKey>,
        unknown: UnknownKind,
    ) -> futures::stream::BoxStream<'static, Result<Loaded<K>>> {
        let mut key = String::new();
        pk.write_key_arg(&mut key);
        let query =
            crate::backend::Query::new().filter(crate::filter::Filter::partition_key().eq(key));
        self.read_kinds(query, unknown)
    }

    /// A collection: the row of `H` (a kind declared with
    /// `#[tablekit(collection)]`) with these keys and every row nested under
    /// it (kinds declared with `parent = H`, their own children, …), read
    /// with one range query, in key order: each row right before the rows
    /// nested under it. Rows of kinds that are no variant of `K` fail or are
    /// skipped as `unknown` says.
    ///
    /// ```
    /// use futures::TryStreamExt;
    /// use tablekit::{EntityKinds, Table, TableEntity, UnknownKind};
    ///
    /// #[derive(TableEntity)]
    /// #[tablekit(table = "Shop", kind = "C", collection)]
    /// struct Customer {
    ///     #[tablekit(partition_key)]
    ///     tenant: String,
    ///     #[tablekit(row_key)]
    ///     customer: String,
    ///     name: String,
    /// }
    ///
    /// #[derive(TableEntity)]
    /// #[tablekit(table = "Shop", kind = "ORD", parent = Customer)]
    /// struct Order {
    ///     #[tablekit(partition_key)]
    ///     tenant: String,
    ///     #[tablekit(row_key = 0)]
    ///     customer: String,
    ///     #[tablekit(row_key = 1)]
    ///     order: u32,
    ///     total: i64,
    /// }
    ///
    /// #[derive(EntityKinds)]
    /// enum CustomerRows {
    ///     Customer(Customer),
    ///     Order(Order),
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// let shop: Table<Customer> = Table::new(tablekit_mem::MemBackend::new());
    /// shop.create_if_missing().await?;
    /// shop.insert(&Customer { tenant: "acme".into(), customer: "C42".into(), name: "Ada".into() }).await?;
    /// let orders = shop.of::<Order>();
    /// orders.insert(&Order { tenant: "acme".into(), customer: "C42".into(), order: 7, total: 1200 }).await?;
    /// // Stored as `C_C42|` and `C_C42|ORD_0000000007`: side by side.
    /// let rows: Vec<_> = shop
    ///     .of::<CustomerRows>()
    ///     .read_collection::<Customer>("acme", "C42", UnknownKind::Fail)
    ///     .try_collect()
    ///     .await?;
    /// assert!(matches!(&*rows[0], CustomerRows::Customer(c) if c.name == "Ada"));
    /// assert!(matches!(&*rows[1], CustomerRows::Order(o) if o.total == 1200));
    /// # Ok(()) }
    /// ```
    pub fn read_collection<H: TableEntity>(
        &self,
        pk: impl KeyArg<H::PartitionKey>,
        rk: impl KeyArg<H::RowKey>,
        unknown: UnknownKind,
    ) -> futures::stream::BoxStream<'static, Result<Loaded<K>>> {
        const {
            assert!(
                H::DESCRIPTOR.row_key_layout.heads_collection(),
                "read_collection reads the rows nested under a kind declared with `collection`"
            )
        };
        use crate::filter::Filter;
        let mut partition = String::new();
        pk.write_key_arg(&mut partition);
        // From the head's own row to the end of the keys that start with
        // its key and a separator: the rows nested under it.
        let (mut own, mut inner) = (String::new(), String::new());
        rk.write_laid_out(&H::DESCRIPTOR.row_key_layout, &mut own);
        rk.write_laid_out(&H::DESCRIPTOR.row_key_layout.opened(), &mut inner);
        let separator = inner.chars().last().unwrap_or(crate::key::TAG_SEPARATOR);
        let (_, end) = crate::key::prefix_range(inner, separator);
        let query = crate::backend::Query::new().filter(
            Filter::partition_key().eq(partition)
                & Filter::row_key().ge(own)
                & Filter::row_key().lt(end),
        );
        self.read_kinds(query, unknown)
    }

    /// The rows of `query`, each read as the variant of its kind.
    fn read_kinds(
        &self,
        query: crate::backend::Query,
        unknown: UnknownKind,
    ) -> futures::stream::BoxStream<'static, Result<Loaded<K>>> {
        let now = self.clock.now();
        // Index rows copy their entity (the entity itself is read); outbox
        // records and fences are no entities; an expired entity is not there.
        let borrowed = move |row: crate::backend::RowRef<'_>| {
            if crate::pending::is_bookkeeping((&row).into()) || K::row_expired(&row, now) {
                return None;
            }
            let (etag, timestamp) = (row.etag.clone(), Some(row.timestamp));
            let writes = writes_in(row.properties).map(str::to_owned);
            let version =
                schema::stored_version(row.properties).and_then(|v| u32::try_from(v).ok());
            let row_key = row.row_key;
            match K::from_row(row) {
                Some(value) => {
                    Some(value.map(|value| kind_loaded(value, etag, timestamp, writes, version)))
                }
                None => unknown_row(unknown, row_key.to_owned()),
            }
        };
        let owned = move |mut entity: crate::entity::Entity| {
            if crate::pending::is_bookkeeping_row(&entity) || K::expired(&entity, now) {
                return None;
            }
            let (etag, timestamp) = (entity.etag.take(), entity.timestamp);
            let writes = writes_of(&entity).map(str::to_owned);
            let version = stored_version(&entity);
            let etag = etag.unwrap_or_else(|| ETag::new(""));
            match K::from_entity_owned(entity) {
                Ok(value) => {
                    Some(value.map(|value| kind_loaded(value, etag, timestamp, writes, version)))
                }
                Err(entity) => unknown_row(unknown, entity.row_key),
            }
        };
        let backend = Arc::clone(&self.backend);
        let reads = read::RowReads { borrowed, owned };
        read::rows_stream(
            backend,
            self.name.to_string(),
            query,
            ("read_kinds", None),
            reads,
        )
    }
}

/// A value of one of several kinds, read with its row's version
/// (written through the variant's own type, which reads the row again to
/// write it).
fn kind_loaded<K>(
    value: K,
    etag: ETag,
    timestamp: Option<crate::datetime::DateTime>,
    writes: Option<String>,
    version: Option<u32>,
) -> Loaded<K> {
    Loaded {
        value,
        etag,
        timestamp,
        stamp_in_etag: false,
        writes,
        index_keys: loaded::IndexKeys::Unknown,
        version,
        previous_kind: None,
        unknown: crate::entity::Properties::new(),
        sealed_under: None,
        keeps_last_write: false,
    }
}

/// What a read of several kinds does with a row of none of them
/// (`unknown`): leaves it out, or fails.
fn unknown_row<K: EntityKinds>(unknown: UnknownKind, row_key: String) -> Option<Result<Loaded<K>>> {
    match unknown {
        UnknownKind::Skip => None,
        UnknownKind::Fail => Some(Err(crate::error::SchemaError::UnknownKind {
            expected: K::KINDS,
            row_key,
        }
        .into())),
    }
}

impl<T: TableEntity> Table<T> {
    /// The table `T::DESCRIPTOR.table` on `backend`.
    pub fn new(backend: impl TableBackend + 'static) -> Table<T> {
        Table::from_arc(Arc::new(backend), T::DESCRIPTOR.table)
    }

    /// Reads the entity with these keys; `None` if there is none.
    ///
    /// A row of another kind or an unsupported version under the same keys is
    /// an error, never a wrong value. A wide entity is read with one range
    /// query over its parts.
    pub fn get(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
    ) -> Call<'_, Option<Loaded<T>>> {
        let keys = schema::encode_keys::<T>(&pk, &rk);
        Box::pin(async move {
            let (pk, rk) = keys?;
            self.read_loaded(&pk, &rk).await
        })
    }

    /// Whether an entity with these keys exists: one point read that asks
    /// for the keys only.
    pub fn exists(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
    ) -> Call<'_, bool> {
        let keys = schema::encode_keys::<T>(&pk, &rk);
        Box::pin(async move {
            let (pk, rk) = keys?;
            if T::DESCRIPTOR.wide() {
                let row = self.read_stored(&pk, &rk).await?;
                return Ok(row.is_some_and(|row| !self.has_expired(&row.properties)));
            }
            if schema::expiry_property::<T>().is_some() {
                // Read with its expiry time, which says whether it is there.
                let row = self.read_stored(&pk, &rk).await?;
                return Ok(row.is_some_and(|row| !self.has_expired(&row.properties)));
            }
            self.row_under_any_name(&pk, &rk).await
        })
    }

    /// Inserts a new entity; fails with
    /// [`EntityAlreadyExists`](Error::EntityAlreadyExists) if its keys are
    /// taken. An entity that has [expired](Table#rows-that-expire) does not
    /// hold its keys: the new one takes its place.
    pub async fn insert(&self, value: &T) -> Result<ETag> {
        match self.enter(Write::Insert(value)).await {
            Err(taken @ Error::EntityAlreadyExists { .. })
                if schema::expiry_property::<T>().is_some() =>
            {
                self.insert_over_expired(value, taken).await
            }
            other => other.map(Written::etag),
        }
    }

    /// Replaces the stored entity if it is still the version that was read;
    /// otherwise fails with [`PreconditionFailed`](Error::PreconditionFailed).
    /// On success `loaded` holds the new version's ETag and Timestamp, so it
    /// can be written again.
    ///
    /// The properties of the row read that the type has no field for are
    /// written back unchanged (see [`Loaded::unknown_properties`]).
    pub async fn replace(&self, loaded: &mut Loaded<T>) -> Result<ETag> {
        let write = Write::Loaded(loaded, UpdateMode::Replace);
        self.enter(write).await.map(Written::etag)
    }

    /// Merges into the stored entity if it is still the version that was read
    /// (fields that are `None` keep their stored values). On success `loaded`
    /// holds the new version's ETag and Timestamp.
    pub async fn merge(&self, loaded: &mut Loaded<T>) -> Result<ETag> {
        let write = Write::Loaded(loaded, UpdateMode::Merge);
        self.enter(write).await.map(Written::etag)
    }

    /// Replaces the stored entity whatever its version (`If-Match: *`). The
    /// row then holds exactly the properties of `value`: columns the type
    /// does not know are removed (a [`replace`](Table::replace) through
    /// what was read keeps them).
    pub async fn replace_unconditionally(&self, value: &T) -> Result<ETag> {
        let write = RowWrite::Update(UpdateMode::Replace, IfMatch::Any);
        let unknown = crate::entity::Properties::new();
        self.enter(Write::Put(value, write, &unknown))
            .await
            .map(Written::etag)
    }

    /// Merges into the stored entity whatever its version (`If-Match: *`).
    pub async fn merge_unconditionally(&self, value: &T) -> Result<ETag> {
        let write = RowWrite::Update(UpdateMode::Merge, IfMatch::Any);
        let unknown = crate::entity::Properties::new();
        self.enter(Write::Put(value, write, &unknown))
            .await
            .map(Written::etag)
    }

    /// Inserts the entity or replaces the stored one. A replaced row then
    /// holds exactly the properties of `value`: columns the type does not
    /// know are removed ([`upsert_merge`](Table::upsert_merge) keeps them).
    pub async fn upsert(&self, value: &T) -> Result<ETag> {
        let write = RowWrite::Upsert(UpdateMode::Replace);
        let unknown = crate::entity::Properties::new();
        self.enter(Write::Put(value, write, &unknown))
            .await
            .map(Written::etag)
    }

    /// Inserts the entity or merges it into the stored one.
    pub async fn upsert_merge(&self, value: &T) -> Result<ETag> {
        let write = RowWrite::Upsert(UpdateMode::Merge);
        let unknown = crate::entity::Properties::new();
        self.enter(Write::Put(value, write, &unknown))
            .await
            .map(Written::etag)
    }

    /// Merges one element of a data series into the stored entity
    /// (`Meter::columns().hourly.at(5)`), leaving every other property as it
    /// is; guarded by `if_match` (`IfMatch::Any` to write whatever the version).
    pub fn merge_element<'a, E: schema::PropertyValue>(
        &'a self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
        element: &schema::Element<E>,
        value: &E,
        if_match: &IfMatch,
    ) -> Call<'a, ETag> {
        // The row is made now: the future holds nothing of the arguments.
        let row = write::element_row::<T, E>(&pk, &rk, element, value);
        let if_match = if_match.clone();
        Box::pin(async move {
            let write = Write::Element(row?, if_match);
            self.enter(write).await.map(Written::etag)
        })
    }

    /// Deletes the stored entity if it is still the version that was read.
    pub async fn delete(&self, loaded: &Loaded<T>) -> Result<()> {
        self.enter(Write::Delete(loaded)).await.map(drop)
    }

    /// Deletes the entity with these keys whatever its version; fails with
    /// [`EntityNotFound`](Error::EntityNotFound) if there is none.
    pub fn delete_unconditionally(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
    ) -> Call<'_, ()> {
        let keys = schema::encode_keys::<T>(&pk, &rk);
        Box::pin(async move {
            let (pk, rk) = keys?;
            self.enter(Write::DeleteKeys(pk, rk)).await.map(drop)
        })
    }

    /// A query over this table's entities of type `T`.
    pub fn query(&self) -> TableQuery<T> {
        TableQuery::new(self.clone())
    }

    /// An atomic batch in one partition.
    pub fn batch(&self) -> TableBatch<T> {
        TableBatch::new(self.clone())
    }

    /// A non-atomic bulk writer: groups by partition, runs batches of up to
    /// 100 with bounded parallelism, reports each failed item.
    pub fn bulk(&self) -> BulkWriter<T> {
        BulkWriter::new(self.clone())
    }
}
