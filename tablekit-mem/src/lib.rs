//! # tablekit-mem
//!
//! The in-memory reference backend of [tablekit](https://docs.rs/tablekit): it behaves like
//! Azure Table Storage, and like the real service (not the Azurite emulator)
//! where the two differ:
//! - every limit, checked by tablekit's shared validator;
//! - keys sorted by UTF-16 code units, table names case-insensitive;
//! - ETags and Timestamps in the service's format, new and later on every write,
//!   one timestamp for all entities of a batch;
//! - replace drops properties not sent, merge keeps them; `If-Match` with the
//!   service's error for each case;
//! - batches atomic, all or nothing, with the failing operation's index;
//! - at most 1,000 rows per page, opaque continuation tokens;
//! - filters evaluated by the service's rules (see [`tablekit_core::filter::Filter::matches`]);
//! - a deleted table's name stays unusable for 40 seconds
//!   ([`MemBackendBuilder::table_deletion_delay`]).
//!
//! [`MemBlobStore`] is its blob store, and [`MemQueueStore`] its queue
//! store, on a clock that tests can move by hand.
//!
//! [`MemBackendBuilder::adversarial`] makes it return short and empty pages
//! that still carry continuation tokens, as the real service may;
//! [`tablekit_core::layer::FaultInjection`] adds failures and latency.
//!
//! Clones share the same data; the backend is thread-safe and never holds a
//! lock across an `.await`.
//!
//! ```
//! use tablekit::{Entity, TableBackend, TableBackendExt};
//! use tablekit_mem::MemBackend;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let backend = MemBackend::new();
//! backend.create_table("orders").await?;
//! backend.insert_entity("orders", &Entity::new("customer1", "order1").with("Total", 12.5)).await?;
//! let order = backend.get_entity("orders", "customer1", "order1", &Default::default()).await?;
//! assert!(order.etag.is_some());
//! # Ok(())
//! # }
//! ```

mod blob;
mod codec;
mod listing;
mod queue;
mod store;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tablekit_core::validate;
use tablekit_core::{
    BatchOperation, ContinuationToken, DateTime, ETag, Entity, EntityWrite, Error, GetOptions,
    ListTablesOptions, Query, QueryOrder, QueryPage, Result, TablePage,
};

pub use blob::MemBlobStore;
use codec::{Names, Row, Selection};
pub use queue::MemQueueStore;
use store::{Partition, State, Table, scan, with_folded};
use tablekit_core::backend::RowVisitor;
use tablekit_core::backend::sorted::{
    Decision, RowFilter, RowLender, StoredRow, continuation_token, decide, encode_key, key_ranges,
    resume_at,
};

/// How the backend misbehaves in adversarial mode, within what the service
/// allows: pages shorter than asked, empty pages that still carry a
/// continuation token, pages that end at partition boundaries; and, with
/// [`unsorted`](Adversarial::unsorted), rows in no key order, as Cosmos DB
/// for Table returns them.
#[derive(Debug, Clone, PartialEq)]
pub struct Adversarial {
    /// Seed of the generator that picks page sizes: the same seed gives the
    /// same pages for the same calls.
    pub seed: u64,
    /// Probability that a page that could hold rows comes back empty.
    pub empty_page_probability: f64,
    /// Largest page returned, whatever `top` asks.
    pub max_page_size: u32,
    /// Probability that a page ends where the PartitionKey changes.
    pub partition_break_probability: f64,
    /// Returns query results in an order of the seed's choosing, not by key,
    /// across pages and partitions, and says so in
    /// [`query_order`](tablekit_core::TableBackend::query_order)
    /// ([`QueryOrder::Unspecified`]). Continuation tokens still resume where
    /// the last page stopped. This is Cosmos DB for Table's behaviour, which
    /// promises no order.
    pub unsorted: bool,
}

impl Adversarial {
    /// The default misbehaviour, with rows in no key order
    /// ([`unsorted`](Adversarial::unsorted)).
    pub fn unsorted() -> Adversarial {
        Adversarial {
            unsorted: true,
            ..Adversarial::default()
        }
    }
}

impl Default for Adversarial {
    fn default() -> Adversarial {
        Adversarial {
            seed: 0x5EED,
            empty_page_probability: 0.25,
            max_page_size: 7,
            partition_break_probability: 0.5,
            unsorted: false,
        }
    }
}

#[derive(Debug)]
struct Config {
    adversarial: Option<Adversarial>,
    table_deletion_delay: Duration,
}

#[derive(Debug)]
struct Shared {
    state: RwLock<State>,
    config: Config,
    rng: Mutex<fastrand::Rng>,
}

/// The in-memory table backend. See the [crate documentation](crate).
#[derive(Debug, Clone)]
pub struct MemBackend {
    shared: Arc<Shared>,
}

/// Configures a [`MemBackend`].
#[derive(Debug, Clone)]
pub struct MemBackendBuilder {
    adversarial: Option<Adversarial>,
    table_deletion_delay: Duration,
}

impl MemBackendBuilder {
    /// Returns short and empty pages with continuation tokens (see [`Adversarial`]).
    pub fn adversarial(mut self, adversarial: Adversarial) -> MemBackendBuilder {
        self.adversarial = Some(adversarial);
        self
    }

    /// How long a deleted table's name answers
    /// [`TableBeingDeleted`](tablekit_core::Error::TableBeingDeleted). The service
    /// takes at least 40 seconds, the default; `Duration::ZERO` frees the name
    /// at once, as Azurite does.
    pub fn table_deletion_delay(mut self, delay: Duration) -> MemBackendBuilder {
        self.table_deletion_delay = delay;
        self
    }

    /// The backend.
    pub fn build(self) -> MemBackend {
        let seed = self.adversarial.as_ref().map_or(0, |a| a.seed);
        MemBackend {
            shared: Arc::new(Shared {
                state: RwLock::new(State::default()),
                config: Config {
                    adversarial: self.adversarial,
                    table_deletion_delay: self.table_deletion_delay,
                },
                rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            }),
        }
    }
}

impl Default for MemBackend {
    fn default() -> MemBackend {
        MemBackend::new()
    }
}

impl MemBackend {
    /// A backend with no tables, behaving like the service.
    pub fn new() -> MemBackend {
        MemBackend::builder().build()
    }

    /// Configures a backend.
    pub fn builder() -> MemBackendBuilder {
        MemBackendBuilder {
            adversarial: None,
            table_deletion_delay: Duration::from_secs(40),
        }
    }

    fn delay(&self) -> Duration {
        self.shared.config.table_deletion_delay
    }

    /// How many rows to put in the next page, and whether to stop at partition
    /// boundaries.
    fn page_plan(&self, top: Option<u32>) -> (usize, bool) {
        let asked = top.unwrap_or(validate::limits::MAX_PAGE_SIZE) as usize;
        match &self.shared.config.adversarial {
            None => (asked, false),
            Some(adv) => {
                let mut rng = self.shared.rng.lock();
                if rng.f64() < adv.empty_page_probability {
                    return (0, false);
                }
                let most = asked.min(adv.max_page_size.max(1) as usize);
                (
                    rng.usize(1..=most),
                    rng.f64() < adv.partition_break_probability,
                )
            }
        }
    }
}

impl MemBackend {
    /// One page of `query` in key order, from `resume`: each row of its
    /// ranges that meets its filter (asked with only the properties it
    /// compares read) given to `take`, with the lender to lend it with,
    /// its stored keys and the table's names; the page's continuation
    /// token. An error of `take` ends the page.
    fn sorted_page(
        &self,
        table: &str,
        query: &Query,
        resume: Option<(Vec<u8>, Vec<u8>)>,
        mut take: impl FnMut(&mut RowLender, (&[u8], &[u8]), &Row, &Names) -> Result<()>,
    ) -> Result<Option<ContinuationToken>> {
        let (limit, break_at_partition) = self.page_plan(query.top);
        let (pk_range, rk_range) = key_ranges(query.filter.as_ref());
        let state = self.shared.state.read();
        let t = state.table(table, self.delay())?;
        let filter = row_filter(query, &t.names);
        let mut lender = RowLender::default();
        let (mut taken, mut last_pk) = (0, None);
        for (pk, rk, row) in scan(t, &pk_range, &rk_range, resume.as_ref()) {
            if taken >= limit || (break_at_partition && last_pk.is_some_and(|last| last != pk)) {
                return Ok(Some(continuation_token(pk, rk)));
            }
            last_pk = Some(pk);
            if meets(&mut lender, (pk, rk), row, &t.names, filter.as_ref())? {
                take(&mut lender, (pk, rk), row, &t.names)?;
                taken += 1;
            }
        }
        Ok(None)
    }

    /// The seed of the unsorted order, in that adversarial mode.
    fn unsorted_seed(&self) -> Option<u64> {
        let adversarial = self.shared.config.adversarial.as_ref()?;
        adversarial.unsorted.then_some(adversarial.seed)
    }

    /// A page of a query in unsorted mode: the matching rows ordered by a
    /// hash of the seed and their keys, so any two rows may come in either
    /// order, whatever their partitions. A token names the next row's keys,
    /// from which its place in that order follows.
    fn query_unsorted(
        &self,
        table: &str,
        query: &Query,
        resume: Option<(Vec<u8>, Vec<u8>)>,
        seed: u64,
    ) -> Result<QueryPage> {
        let place = |pk: &[u8], rk: &[u8]| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            (seed, pk, rk).hash(&mut hasher);
            hasher.finish()
        };
        let (limit, _) = self.page_plan(query.top);
        let (pk_range, rk_range) = key_ranges(query.filter.as_ref());
        let state = self.shared.state.read();
        let t = state.table(table, self.delay())?;
        let mut rows: Vec<_> = scan(t, &pk_range, &rk_range, None)
            .map(|(pk, rk, row)| ((place(pk, rk), pk, rk), row))
            .collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let start = match &resume {
            Some((pk, rk)) => {
                let at = (place(pk, rk), pk.as_slice(), rk.as_slice());
                rows.partition_point(|(key, _)| *key < at)
            }
            None => 0,
        };
        let mut entities = Vec::new();
        let mut continuation = None;
        for &((_, pk, rk), row) in &rows[start..] {
            if entities.len() >= limit {
                continuation = Some(continuation_token(pk, rk));
                break;
            }
            let entity = row.entity(pk, rk, &t.names, None);
            if query.filter.as_ref().is_none_or(|f| f.matches(&entity)) {
                entities.push(selected(entity, query.select.as_deref()));
            }
        }
        Ok(QueryPage::new(entities, continuation))
    }
}

/// `entity` with only the `$select`ed properties (the keys always).
fn selected(mut entity: Entity, select: Option<&[String]>) -> Entity {
    if let Some(select) = select {
        entity
            .properties
            .retain(|name, _| select.iter().any(|s| s == name));
        if !select.iter().any(|s| s == "Timestamp") {
            entity.timestamp = None;
        }
    }
    entity
}

fn etag_of(ticks: i64) -> ETag {
    ETag::from_timestamp(DateTime::from_ticks(ticks).unwrap_or(DateTime::MIN))
}

/// What a write does to one row, decided before anything changes.
enum Change {
    Put(Row),
    Remove,
}

/// A stored row with its table's names, as [`decide`] reads it.
struct Stored<'a>(&'a Row, &'a Names);

impl StoredRow for Stored<'_> {
    fn etag(&self) -> ETag {
        etag_of(self.0.ticks())
    }

    fn etag_is(&self, tag: &ETag) -> bool {
        DateTime::from_ticks(self.0.ticks()).is_ok_and(|t| tag.is_of_timestamp(t))
    }

    fn properties(&self) -> Result<tablekit_core::Properties> {
        Ok(self.0.properties(self.1, None))
    }
}

/// Decides the change one write makes, or its error, without changing
/// anything; `existing` is the stored row at the write's keys, if any.
fn change(
    names: &mut Names,
    existing: Option<&Row>,
    write: EntityWrite<'_>,
    ticks: i64,
    table: &str,
) -> Result<Change> {
    let stored = existing.map(|row| Stored(row, names));
    Ok(
        match decide(table, write, stored.as_ref().map(|s| s as &dyn StoredRow))? {
            Decision::Put(properties) => Change::Put(Row::encode(ticks, &properties, names)),
            Decision::Remove => Change::Remove,
        },
    )
}

/// Applies a decided change at the stored keys `pk`, `rk`.
fn apply(partitions: &mut BTreeMap<Box<[u8]>, Partition>, pk: &[u8], rk: &[u8], change: Change) {
    match change {
        Change::Put(row) => {
            let partition = match partitions.get_mut(pk) {
                Some(p) => p,
                None => partitions.entry(pk.into()).or_default(),
            };
            match partition.get_mut(rk) {
                Some(slot) => *slot = row,
                None => {
                    partition.insert(rk.into(), row);
                }
            }
        }
        Change::Remove => {
            if let Some(partition) = partitions.get_mut(pk) {
                partition.remove(rk);
                if partition.is_empty() {
                    partitions.remove(pk);
                }
            }
        }
    }
}

impl MemBackend {
    /// Validates and applies one write, returning the new ETag.
    fn write(&self, table: &str, op: EntityWrite<'_>) -> Result<ETag> {
        let delay = self.delay();
        let mut state = self.shared.state.write();
        let ticks = state.next_ticks();
        let Table {
            names, partitions, ..
        } = state.table_mut(table, delay)?;
        let (pk, rk) = op.keys();
        let (pk, rk) = (encode_key(pk), encode_key(rk));
        // One lookup of the partition and one of the row serve both the
        // decision and the change.
        match partitions.get_mut(pk.as_ref()) {
            Some(partition) => {
                let slot = partition.get_mut(rk.as_ref());
                match (change(names, slot.as_deref(), op, ticks, table)?, slot) {
                    (Change::Put(row), Some(slot)) => *slot = row,
                    (Change::Put(row), None) => {
                        partition.insert(rk.into(), row);
                    }
                    (Change::Remove, _) => {
                        partition.remove(rk.as_ref());
                        if partition.is_empty() {
                            partitions.remove(pk.as_ref());
                        }
                    }
                }
            }
            None => {
                if let Change::Put(row) = change(names, None, op, ticks, table)? {
                    partitions.insert(pk.into(), Partition::from([(rk.into(), row)]));
                }
            }
        }
        Ok(etag_of(ticks))
    }
}

tablekit_core::serve!(MemBackend, info: |this| tablekit_core::layer::RawTables::store_info(this), contracts: [TableBackend]);

impl tablekit_core::layer::RawTables for MemBackend {
    async fn create_table(&self, table: &str) -> Result<()> {
        let mut state = self.shared.state.write();
        let delay = self.delay();
        with_folded(table, |key| {
            if state.tables.contains_key(key) {
                return Err(Error::TableAlreadyExists {
                    table: table.into(),
                });
            }
            if state
                .deleted
                .get(key)
                .is_some_and(|at| at.elapsed() < delay)
            {
                return Err(Error::TableBeingDeleted {
                    table: table.into(),
                });
            }
            state.deleted.remove(key);
            state.tables.insert(
                key.into(),
                Table {
                    name: table.into(),
                    names: Default::default(),
                    partitions: Default::default(),
                },
            );
            Ok(())
        })
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        let mut state = self.shared.state.write();
        let delay = self.delay();
        state.table(table, delay)?;
        with_folded(table, |key| {
            state.tables.remove(key);
            state.deleted.insert(key.into(), std::time::Instant::now());
        });
        Ok(())
    }

    async fn list_tables(&self, options: &ListTablesOptions) -> Result<TablePage> {
        let limit = options.page_size();
        let start = options
            .continuation
            .as_ref()
            .map(|t| t.next_partition_key().to_ascii_lowercase());
        let prefix = options.prefix.as_deref().unwrap_or("");
        let state = self.shared.state.read();
        let mut names: Vec<(&str, &str)> = state
            .tables
            .iter()
            .filter(|(key, _)| start.as_deref().is_none_or(|s| &***key >= s))
            .filter(|(_, t)| t.name.starts_with(prefix))
            .map(|(key, t)| (&**key, t.name.as_str()))
            .collect();
        names.sort_unstable();
        let continuation = names
            .get(limit)
            .map(|(key, _)| ContinuationToken::new(*key, None));
        let tables = names
            .into_iter()
            .take(limit)
            .map(|(_, name)| name.to_owned())
            .collect();
        Ok(TablePage {
            tables,
            continuation,
        })
    }

    async fn get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        options: &GetOptions,
    ) -> Result<Entity> {
        let state = self.shared.state.read();
        let t = state.table(table, self.delay())?;
        let pk = encode_key(partition_key);
        let rk = encode_key(row_key);
        let row = t
            .partitions
            .get(pk.as_ref())
            .and_then(|p| p.get(rk.as_ref()))
            .ok_or_else(|| Error::EntityNotFound {
                table: table.into(),
                partition_key: partition_key.into(),
                row_key: row_key.into(),
            })?;
        let selection = options.select.as_ref().map(|s| Selection::new(s, &t.names));
        Ok(row.entity(&pk, &rk, &t.names, selection.as_ref()))
    }

    async fn query_entities(&self, table: &str, query: &Query) -> Result<QueryPage> {
        let resume = query.continuation.as_ref().map(resume_at).transpose()?;
        if let Some(seed) = self.unsorted_seed() {
            return self.query_unsorted(table, query, resume, seed);
        }
        let mut entities = Vec::new();
        let continuation = self.sorted_page(table, query, resume, |_, (pk, rk), row, names| {
            // Made an entity only once it matched.
            let entity = row.entity(pk, rk, names, None);
            entities.push(selected(entity, query.select.as_deref()));
            Ok(())
        })?;
        Ok(QueryPage::new(entities, continuation))
    }

    fn reads_rows(&self, query: &Query) -> bool {
        // Rows are passed in key order with every property (a filter is
        // evaluated on the row as it is passed).
        query.select.is_none() && self.unsorted_seed().is_none()
    }

    async fn read_rows(
        &self,
        table: &str,
        query: &Query,
        read: &mut RowVisitor<'_>,
    ) -> Result<Option<ContinuationToken>> {
        // A query `reads_rows` refuses never comes here (`Served` refuses it).
        let resume = query.continuation.as_ref().map(resume_at).transpose()?;
        self.sorted_page(table, query, resume, |lender, keys, row, names| {
            lend(lender, keys, row, names, read)
        })
    }

    async fn read_row(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        read: &mut RowVisitor<'_>,
    ) -> Result<bool> {
        let state = self.shared.state.read();
        let t = state.table(table, self.delay())?;
        let (pk, rk) = (encode_key(partition_key), encode_key(row_key));
        let Some(row) = t
            .partitions
            .get(pk.as_ref())
            .and_then(|p| p.get(rk.as_ref()))
        else {
            return Ok(false);
        };
        lend(&mut RowLender::default(), (&pk, &rk), row, &t.names, read)?;
        Ok(true)
    }

    fn store_info(&self) -> tablekit_core::telemetry::StoreInfo {
        store_info()
    }

    fn query_order(&self) -> QueryOrder {
        match self.unsorted_seed() {
            Some(_) => QueryOrder::Unspecified,
            None => QueryOrder::Keys,
        }
    }

    async fn write_entity(&self, table: &str, write: EntityWrite<'_>) -> Result<Option<ETag>> {
        let etag = self.write(table, write)?;
        Ok(write.entity().map(|_| etag))
    }

    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[BatchOperation],
    ) -> Result<Vec<Option<ETag>>> {
        let mut state = self.shared.state.write();
        let delay = self.delay();
        // One timestamp for the whole batch, as the live service gives.
        let ticks = state.next_ticks();
        let Table {
            names, partitions, ..
        } = state.table_mut(table, delay).map_err(|e| e.in_batch(0))?;
        // Decide every change first; apply only when all succeed (atomicity).
        // Each entity appears once, so no decision depends on another.
        let pk = encode_key(operations[0].keys().0);
        let partition = partitions.get(pk.as_ref());
        let mut changes = Vec::with_capacity(operations.len());
        for (index, op) in operations.iter().enumerate() {
            let rk = encode_key(op.keys().1);
            let existing = partition.and_then(|p| p.get(rk.as_ref()));
            let change =
                change(names, existing, op.into(), ticks, table).map_err(|e| e.in_batch(index))?;
            changes.push((rk, change));
        }
        let etag = etag_of(ticks);
        let mut etags = Vec::with_capacity(operations.len());
        for (rk, change) in changes {
            etags.push(matches!(change, Change::Put(_)).then(|| etag.clone()));
            apply(partitions, &pk, &rk, change);
        }
        Ok(etags)
    }
}

/// The filter each row of `query`'s ranges is asked of before it is read
/// ([`RowFilter`]), with the ids of the properties it compares (only those
/// are read to ask it); `None` for no filter, or one the ranges hold whole.
fn row_filter<'q>(query: &'q Query, names: &Names) -> Option<(RowFilter<'q>, Vec<u32>)> {
    let filter = RowFilter::new(query.filter.as_ref()?)?;
    let ids = (filter.properties().iter())
        // A name no row holds is missing from every row.
        .filter_map(|name| names.id(name))
        .collect();
    Some((filter, ids))
}

/// Whether `row`, stored under keys `keys`, meets the filter of
/// [`row_filter`] (`true` when there is none), asked with only the
/// properties it compares read.
fn meets(
    lender: &mut RowLender,
    keys: (&[u8], &[u8]),
    row: &Row,
    names: &Names,
    filter: Option<&(RowFilter<'_>, Vec<u32>)>,
) -> Result<bool> {
    let Some((filter, needed)) = filter else {
        return Ok(true);
    };
    let fill = |props: &mut _| {
        row.read_properties(names, Some(needed), props);
        Some(())
    };
    lender
        .meets(keys, row.ticks(), fill, filter)
        .ok_or_else(undecoded)
}

/// Lends `row`, stored under keys `keys`, to `read` by reference.
fn lend(
    lender: &mut RowLender,
    keys: (&[u8], &[u8]),
    row: &Row,
    names: &Names,
    read: &mut RowVisitor<'_>,
) -> Result<()> {
    let fill = |props: &mut _| {
        row.read_properties(names, None, props);
        Some(())
    };
    lender
        .lend(keys, row.ticks(), fill, read)
        .unwrap_or_else(|| Err(undecoded()))
}

/// The error of a row that does not decode: never, as rows are only ever
/// made by the backend's own encoding.
fn undecoded() -> Error {
    Error::Decode {
        message: "a row the in-memory backend stored does not decode".into(),
    }
}

/// What the in-memory stores are, for tablekit's spans and metrics.
fn store_info() -> tablekit_core::telemetry::StoreInfo {
    // `db.namespace`: the in-memory stores have no account or place of
    // their own; "memory" says where the data is.
    tablekit_core::telemetry::StoreInfo::embedded("tablekit.memory", "memory")
}
