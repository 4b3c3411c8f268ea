//! The backend contract: one async method per operation of the table store.
//!
//! Backends implement [`TableBackend`]; users usually call it through the
//! typed client or the conveniences of `tablekit::TableBackendExt`. The trait is
//! dyn-compatible (`Arc<dyn TableBackend>` works) and every method maps to
//! exactly one request of the Table service's REST API, named in its docs.
//!
//! # Contract for implementors
//! - Call the method's door check ([`door`]) on its input before acting,
//!   so bad input gets the same [`crate::InvalidInput`] everywhere.
//!   Backends never re-implement the rules, and keep only checks that are
//!   their own.
//! - Map every failure onto [`Error`](crate::Error) by meaning.
//! - Table names are case-insensitive for lookup; the case of creation is kept.
//! - Keys sort by UTF-16 code units ([`crate::keyorder`]).

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{InvalidInput, Result};
use crate::filter::Filter;
pub use crate::json::UndecodableRow;

/// How an update treats properties the stored entity has and the new one lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateMode {
    /// Replace the whole entity: properties not sent are removed.
    Replace,
    /// Merge: only the properties sent change; the others are kept.
    Merge,
}

/// Whether a store returns a query's rows in key order.
///
/// Azure Table Storage and Azurite return rows sorted by PartitionKey, then
/// RowKey, and continuation tokens resume in that order. Cosmos DB for Table
/// does not promise it: its pages may come in any order (users see them in
/// `Timestamp` order). tablekit keeps its key-order promises on both: on a
/// store whose order is [`Unspecified`](QueryOrder::Unspecified), every
/// ordered read collects the matching rows and sorts them on the client (see
/// `tablekit::TableBackendExt::query_stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum QueryOrder {
    /// Rows come sorted by PartitionKey, then RowKey, compared as UTF-16 code
    /// units; pages follow each other in that order.
    #[default]
    Keys,
    /// Rows come in an order the store does not promise, stable only in that
    /// continuation tokens resume where the last page stopped.
    Unspecified,
}

/// A position to resume a listing from. Opaque: pass back what a page gave.
///
/// It is made of the service's continuation values (`NextPartitionKey` and
/// `NextRowKey`, or `NextTableName` for table listings) and round-trips
/// through a string, so a query can be resumed later or elsewhere.
///
/// ```
/// use tablekit::ContinuationToken;
/// let token = ContinuationToken::new("1!8!cGFydA--", Some("1!4!cjE-".into()));
/// let text = token.to_string();
/// assert_eq!(text.parse::<ContinuationToken>()?, token);
/// # Ok::<(), tablekit::InvalidInput>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContinuationToken {
    next: String,
    next_row: Option<String>,
}

const TOKEN_PREFIX: &str = "tk1.";

impl ContinuationToken {
    /// A token from a backend's continuation values.
    pub fn new(next: impl Into<String>, next_row: Option<String>) -> ContinuationToken {
        ContinuationToken {
            next: next.into(),
            next_row,
        }
    }

    /// The service's `NextPartitionKey` (or `NextTableName` for table listings).
    pub fn next_partition_key(&self) -> &str {
        &self.next
    }

    /// The service's `NextRowKey`, when it sent one.
    pub fn next_row_key(&self) -> Option<&str> {
        self.next_row.as_deref()
    }
}

impl fmt::Display for ContinuationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(&self.next))?;
        if let Some(row) = &self.next_row {
            write!(f, ".{}", URL_SAFE_NO_PAD.encode(row))?;
        }
        Ok(())
    }
}

impl FromStr for ContinuationToken {
    type Err = InvalidInput;
    fn from_str(text: &str) -> Result<Self, InvalidInput> {
        let bad = |reason| InvalidInput::ContinuationToken { reason };
        let body = text
            .strip_prefix(TOKEN_PREFIX)
            .ok_or(bad("not a tablekit continuation token"))?;
        let decode = |part: &str| -> Result<String, InvalidInput> {
            let bytes = URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| bad("not base64"))?;
            String::from_utf8(bytes).map_err(|_| bad("not UTF-8"))
        };
        let mut parts = body.split('.');
        let next = decode(parts.next().unwrap_or_default())?;
        let next_row = parts.next().map(decode).transpose()?;
        if parts.next().is_some() {
            return Err(bad("too many parts"));
        }
        Ok(ContinuationToken { next, next_row })
    }
}

/// A query of entities: filter, projection, page size and where to resume.
///
/// ```
/// use tablekit::{Query, filter::Filter};
/// let q = Query::new()
///     .filter(Filter::partition_key().eq("sales"))
///     .select(["Name", "Age"])
///     .top(100);
/// assert_eq!(q.top, Some(100));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Query {
    /// `$filter`: which entities; all when `None`.
    pub filter: Option<Filter>,
    /// `$select`: which properties to return; all when `None`. The keys always
    /// come back.
    pub select: Option<Vec<String>>,
    /// `$top`: at most this many entities in one page (1–1,000; the service
    /// never returns more than 1,000).
    pub top: Option<u32>,
    /// Where to resume, from a previous page.
    pub continuation: Option<ContinuationToken>,
}

impl Query {
    /// All entities, all properties.
    pub fn new() -> Query {
        Query::default()
    }

    /// Sets the filter.
    pub fn filter(mut self, filter: Filter) -> Query {
        self.filter = Some(filter);
        self
    }

    /// Sets the projection.
    pub fn select<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Query {
        self.select = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the page size.
    pub fn top(mut self, top: u32) -> Query {
        self.top = Some(top);
        self
    }

    /// Resumes from a token.
    pub fn continuation(mut self, token: Option<ContinuationToken>) -> Query {
        self.continuation = token;
        self
    }
}

/// One page of query results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryPage {
    /// The entities of this page, in key order. May be empty even when more
    /// follow.
    pub entities: Vec<Entity>,
    /// Where the next page starts; `None` when this was the last page.
    pub continuation: Option<ContinuationToken>,
    /// Rows the store returned that could not be read as entities (a value
    /// outside the documented range, say, which an emulator accepted). They
    /// do not cost the page its other rows.
    pub undecodable: Vec<UndecodableRow>,
}

/// A row as a store holds it, borrowed by the reader given to
/// [`TableBackend::read_rows`]: its keys, its version and its properties,
/// without an [`Entity`] made of them. The typed reads take each value they
/// read out of [`properties`](RowRef::properties), so a row's values are
/// moved, not copied, from the store's decoding into the typed value.
#[derive(Debug)]
#[non_exhaustive]
pub struct RowRef<'r> {
    /// The PartitionKey.
    pub partition_key: &'r str,
    /// The RowKey.
    pub row_key: &'r str,
    /// The ETag of the stored version.
    pub etag: &'r ETag,
    /// The time of the row's last write (its Timestamp).
    pub timestamp: DateTime,
    /// The custom properties. The reader may take values out; whatever it
    /// leaves is the backend's again once the reader returns.
    pub properties: &'r mut crate::entity::Properties,
}

impl<'r> RowRef<'r> {
    /// A row of these keys, version and properties.
    pub fn new(
        partition_key: &'r str,
        row_key: &'r str,
        etag: &'r ETag,
        timestamp: DateTime,
        properties: &'r mut crate::entity::Properties,
    ) -> RowRef<'r> {
        RowRef {
            partition_key,
            row_key,
            etag,
            timestamp,
            properties,
        }
    }
}

impl<'a> From<&'a RowRef<'_>> for crate::filter::RowView<'a> {
    /// The row as a filter sees it ([`Filter::matches_row`]).
    fn from(row: &'a RowRef<'_>) -> crate::filter::RowView<'a> {
        crate::filter::RowView {
            partition_key: row.partition_key,
            row_key: row.row_key,
            timestamp: Some(row.timestamp),
            properties: row.properties,
        }
    }
}

/// The reader [`TableBackend::read_rows`] passes each row to, by reference: an error it
/// returns ends the page, and is what the read returns.
pub type RowVisitor<'a> = dyn FnMut(RowRef<'_>) -> Result<()> + Send + 'a;

/// `items` with room a read reserved and did not fill given back, when it
/// is more than the items hold: a short page read into room for a whole
/// one keeps only its own. A vector grown by doubling (which starts at
/// room for 4) is never shrunk.
#[doc(hidden)]
pub fn fitted<T>(mut items: Vec<T>) -> Vec<T> {
    if items.capacity() > 2 * items.len().max(4) {
        items.shrink_to_fit();
    }
    items
}

impl QueryPage {
    /// A page of `entities`, every row readable. A backend may read a page
    /// into room for a whole one: the room its entities do not fill is
    /// given back.
    pub fn new(entities: Vec<Entity>, continuation: Option<ContinuationToken>) -> QueryPage {
        QueryPage {
            entities: fitted(entities),
            continuation,
            undecodable: Vec::new(),
        }
    }

    /// The page's rows in key order: each entity, and each undecodable row
    /// as [`Error::UndecodableRow`](crate::Error::UndecodableRow).
    pub fn into_rows(self) -> impl Iterator<Item = Result<Entity>> + Send {
        // A page of readable rows alone (the usual one) is handed out as
        // it is, without first being copied into a vector of results.
        let (plain, mixed) = if self.undecodable.is_empty() {
            (Some(self.entities.into_iter().map(Ok)), None)
        } else {
            (None, Some(self.into_row_vec().into_iter()))
        };
        plain
            .into_iter()
            .flatten()
            .chain(mixed.into_iter().flatten())
    }

    /// [`into_rows`](QueryPage::into_rows), collected.
    #[doc(hidden)]
    pub fn into_row_vec(self) -> Vec<Result<Entity>> {
        let mut rows: Vec<Result<Entity>> = self.entities.into_iter().map(Ok).collect();
        if !self.undecodable.is_empty() {
            rows.extend(self.undecodable.into_iter().map(|row| Err(row.into())));
            let key = |row: &Result<Entity>| match row {
                Ok(e) => (e.partition_key.clone(), e.row_key.clone()),
                Err(crate::error::Error::UndecodableRow {
                    partition_key,
                    row_key,
                    ..
                }) => (partition_key.clone(), row_key.clone()),
                Err(_) => (String::new(), String::new()),
            };
            rows.sort_by(|a, b| {
                let (a, b) = (key(a), key(b));
                crate::keyorder::cmp_utf16(&a.0, &b.0)
                    .then_with(|| crate::keyorder::cmp_utf16(&a.1, &b.1))
            });
        }
        rows
    }
}

/// Options of a point read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetOptions {
    /// `$select`: which properties to return; all when `None`.
    pub select: Option<Vec<String>>,
}

impl GetOptions {
    /// Sets the projection.
    pub fn select<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> GetOptions {
        self.select = Some(names.into_iter().map(Into::into).collect());
        self
    }
}

/// Options of a table listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListTablesOptions {
    /// At most this many names in one page (1–1,000).
    pub top: Option<u32>,
    /// Where to resume, from a previous page.
    pub continuation: Option<ContinuationToken>,
    /// Only names that start with this text, compared case-sensitively (ASCII
    /// letters and digits, as table names are).
    pub prefix: Option<String>,
}

impl ListTablesOptions {
    /// The page size asked for: `top`, or 1,000 (once the
    /// [door check](door::list_tables) has held, at most 1,000).
    pub fn page_size(&self) -> usize {
        self.top
            .unwrap_or(crate::validate::limits::MAX_PAGE_SIZE)
            .min(crate::validate::limits::MAX_PAGE_SIZE) as usize
    }

    /// Only the tables whose names start with `prefix` (one table per day,
    /// say: `Audit2026`).
    ///
    /// ```
    /// use tablekit::ListTablesOptions;
    /// let days = ListTablesOptions::default().with_prefix("Audit2026");
    /// assert_eq!(days.prefix.as_deref(), Some("Audit2026"));
    /// ```
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> ListTablesOptions {
        self.prefix = Some(prefix.into());
        self
    }
}

/// One page of table names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TablePage {
    /// Table names as created, sorted.
    pub tables: Vec<String>,
    /// Where the next page starts; `None` when this was the last page.
    pub continuation: Option<ContinuationToken>,
}

/// One write of an entity group transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchOperation {
    /// Insert a new entity; fails if it exists.
    Insert(Entity),
    /// Replace or merge an existing entity under an `If-Match` condition.
    Update {
        /// The new entity (or the properties to merge).
        entity: Entity,
        /// Replace or merge.
        mode: UpdateMode,
        /// The condition.
        if_match: IfMatch,
    },
    /// Insert or replace, or insert or merge.
    Upsert {
        /// The entity.
        entity: Entity,
        /// Replace or merge if it exists.
        mode: UpdateMode,
    },
    /// Delete an existing entity under an `If-Match` condition.
    Delete {
        /// PartitionKey.
        partition_key: String,
        /// RowKey.
        row_key: String,
        /// The condition.
        if_match: IfMatch,
    },
}

impl BatchOperation {
    /// The operation's (PartitionKey, RowKey).
    pub fn keys(&self) -> (&str, &str) {
        match self {
            BatchOperation::Insert(e)
            | BatchOperation::Update { entity: e, .. }
            | BatchOperation::Upsert { entity: e, .. } => (&e.partition_key, &e.row_key),
            BatchOperation::Delete {
                partition_key,
                row_key,
                ..
            } => (partition_key, row_key),
        }
    }

    /// The entity written, if the operation writes one.
    pub fn entity(&self) -> Option<&Entity> {
        match self {
            BatchOperation::Insert(e)
            | BatchOperation::Update { entity: e, .. }
            | BatchOperation::Upsert { entity: e, .. } => Some(e),
            BatchOperation::Delete { .. } => None,
        }
    }
}

/// One write of one row, borrowing its parts: what
/// [`TableBackend::write_entity`] takes (a single write need not build a
/// [`BatchOperation`]).
#[derive(Debug, Clone, Copy)]
pub enum EntityWrite<'a> {
    /// Insert; fails if the row exists.
    Insert(&'a Entity),
    /// Replace or merge an existing row under a condition.
    Update(&'a Entity, UpdateMode, &'a IfMatch),
    /// Insert, or replace or merge an existing row.
    Upsert(&'a Entity, UpdateMode),
    /// Delete an existing row under a condition: PartitionKey, RowKey.
    Delete(&'a str, &'a str, &'a IfMatch),
}

impl<'a> EntityWrite<'a> {
    /// The write's (PartitionKey, RowKey).
    pub fn keys(self) -> (&'a str, &'a str) {
        match self {
            EntityWrite::Insert(e) | EntityWrite::Update(e, ..) | EntityWrite::Upsert(e, _) => {
                (&e.partition_key, &e.row_key)
            }
            EntityWrite::Delete(pk, rk, _) => (pk, rk),
        }
    }

    /// The operation the write is, as the [fault layer](crate::layer) and
    /// the telemetry name it: `InsertEntity`, `UpdateEntity`,
    /// `UpsertEntity` or `DeleteEntity`.
    pub fn operation(self) -> Operation {
        match self {
            EntityWrite::Insert(_) => Operation::InsertEntity,
            EntityWrite::Update(..) => Operation::UpdateEntity,
            EntityWrite::Upsert(..) => Operation::UpsertEntity,
            EntityWrite::Delete(..) => Operation::DeleteEntity,
        }
    }

    /// Whether sending the write twice is a case a transport meets (a
    /// resend after a proxy's 503): a conditional write or an insert, whose
    /// second copy meets the first's change. An upsert's does not show.
    pub fn resends(self) -> bool {
        !matches!(self, EntityWrite::Upsert(..))
    }

    /// The entity written; `None` for a delete.
    pub fn entity(self) -> Option<&'a Entity> {
        match self {
            EntityWrite::Insert(e) | EntityWrite::Update(e, ..) | EntityWrite::Upsert(e, _) => {
                Some(e)
            }
            EntityWrite::Delete(..) => None,
        }
    }

    /// Runs the shared validator on the write's entity or keys.
    ///
    /// # Errors
    /// The [`InvalidInput`] of the first rule broken.
    pub fn validate(self) -> Result<(), InvalidInput> {
        match self {
            EntityWrite::Insert(e) | EntityWrite::Update(e, ..) | EntityWrite::Upsert(e, _) => {
                crate::validate::entity(e)
            }
            EntityWrite::Delete(pk, rk, _) => crate::validate::keys(pk, rk),
        }
    }
}

impl<'a> From<&'a BatchOperation> for EntityWrite<'a> {
    fn from(op: &'a BatchOperation) -> EntityWrite<'a> {
        match op {
            BatchOperation::Insert(e) => EntityWrite::Insert(e),
            BatchOperation::Update {
                entity,
                mode,
                if_match,
            } => EntityWrite::Update(entity, *mode, if_match),
            BatchOperation::Upsert { entity, mode } => EntityWrite::Upsert(entity, *mode),
            BatchOperation::Delete {
                partition_key,
                row_key,
                if_match,
            } => EntityWrite::Delete(partition_key, row_key, if_match),
        }
    }
}

/// The table store, one method per REST operation.
///
/// # Contract
/// See the [module documentation](self). Each method's docs name the REST
/// request it is and the errors it gives.
#[async_trait]
pub trait TableBackend: Send + Sync + fmt::Debug {
    /// Creates a table. REST: `POST /Tables`.
    ///
    /// Errors: [`TableAlreadyExists`](crate::Error::TableAlreadyExists) (names
    /// compare case-insensitively), [`TableBeingDeleted`](crate::Error::TableBeingDeleted),
    /// [`InvalidInput::TableName`].
    async fn create_table(&self, table: &str) -> Result<()>;

    /// Deletes a table and everything in it. REST: `DELETE /Tables('t')`.
    ///
    /// Errors: [`TableNotFound`](crate::Error::TableNotFound).
    async fn delete_table(&self, table: &str) -> Result<()>;

    /// Lists tables, sorted by name, one page at a time. REST: `GET /Tables`
    /// with `$top` and `NextTableName`.
    async fn list_tables(&self, options: &ListTablesOptions) -> Result<TablePage>;

    /// Reads one entity. REST: `GET /t(PartitionKey='p',RowKey='r')` with `$select`.
    ///
    /// Errors: [`EntityNotFound`](crate::Error::EntityNotFound),
    /// [`TableNotFound`](crate::Error::TableNotFound).
    async fn get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        options: &GetOptions,
    ) -> Result<Entity>;

    /// Reads one page of a query. REST: `GET /t()` with `$filter`, `$select`,
    /// `$top`, `NextPartitionKey` and `NextRowKey`.
    ///
    /// A page holds at most 1,000 entities and may be short, or even empty,
    /// while a continuation token says more may follow: loop until it is `None`
    /// (or use `tablekit::TableBackendExt::query_stream`).
    ///
    /// The rows of a page come in the order of [`query_order`](TableBackend::query_order).
    async fn query_entities(&self, table: &str, query: &Query) -> Result<QueryPage>;

    /// Whether [`read_rows`](TableBackend::read_rows) reads `query`. `false`
    /// (the default) for every query: the caller then reads the page's
    /// entities instead. Asked only of a backend whose
    /// [`query_order`](TableBackend::query_order) is [`QueryOrder::Keys`],
    /// for queries of no projection (`select` is `None`). A wrapper that
    /// changes rows or pages must answer `false`, and one that forwards it
    /// must forward `read_rows` and `read_row` too.
    fn reads_rows(&self, query: &Query) -> bool {
        let _ = query;
        false
    }

    /// Reads one page of a query as [`query_entities`](TableBackend::query_entities)
    /// does, passing each row to `read` by reference, as the store holds it
    /// ([`RowRef`]) instead of returning entities; gives the page's
    /// continuation token. The typed reads use it, where
    /// [`reads_rows`](TableBackend::reads_rows) says so, to build their
    /// values without an [`Entity`] in between.
    ///
    /// `read` is given the rows `query_entities` would give, in key order,
    /// each as it would give it. An error of `read` ends the page and is
    /// returned as is; a panic of `read` is `read`'s own, and leaves the
    /// backend as it was.
    ///
    /// A query [`reads_rows`](TableBackend::reads_rows) does not accept is
    /// refused with [`Error::NotSupported`](crate::Error::NotSupported),
    /// nothing read; the default, for a backend that never reads rows so,
    /// refuses every query.
    async fn read_rows(
        &self,
        table: &str,
        query: &Query,
        read: &mut RowVisitor<'_>,
    ) -> Result<Option<ContinuationToken>> {
        let _ = (table, query, read);
        Err(crate::error::Error::NotSupported {
            operation: "read_rows",
        })
    }

    /// Reads the row at (`partition_key`, `row_key`) as
    /// [`get_entity`](TableBackend::get_entity) does, passing it to `read`
    /// by reference ([`RowRef`]) instead of returning an entity: `true` once
    /// `read` has read it, `false`, `read` not called, when no row is there
    /// (where `get_entity` fails with `EntityNotFound`). An error of `read`
    /// is returned as is; a panic of `read` is `read`'s own, and leaves the
    /// backend as it was.
    ///
    /// A backend whose [`reads_rows`](TableBackend::reads_rows) accepts a
    /// query of every row (`Query::new()`) must read its rows by key so
    /// too: the typed point reads then use it. The default, for a backend
    /// that never passes rows by reference, refuses with
    /// [`Error::NotSupported`](crate::Error::NotSupported), nothing read.
    async fn read_row(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        read: &mut RowVisitor<'_>,
    ) -> Result<bool> {
        let _ = (table, partition_key, row_key, read);
        Err(crate::error::Error::NotSupported {
            operation: "read_row",
        })
    }

    /// The order in which [`query_entities`](TableBackend::query_entities)
    /// returns rows. [`QueryOrder::Keys`] unless the backend says otherwise;
    /// a backend for a store that does not sort (Cosmos DB for Table) must
    /// answer [`QueryOrder::Unspecified`], and a wrapper must forward it.
    fn query_order(&self) -> QueryOrder {
        QueryOrder::Keys
    }

    /// The pacing of the account this backend writes to, shared by every
    /// writer of it ([`Pacing`](crate::pacing::Pacing)): the bulk writer,
    /// copies and migrations take it, so that their rates add up to what
    /// the account takes. `None` (the default) gives each writer its own.
    /// A wrapper must forward it.
    fn pacing(&self) -> Option<crate::pacing::Pacing> {
        None
    }

    /// What the store is, for the spans and metrics tablekit records
    /// ([`crate::telemetry`]). A wrapper must forward it.
    fn store_info(&self) -> crate::telemetry::StoreInfo {
        crate::telemetry::StoreInfo::unknown()
    }

    /// Writes one row, as [`EntityWrite`] says: inserts it (REST: `POST /t`),
    /// replaces or merges it under a condition (`PUT` or `MERGE /t(…)` with
    /// `If-Match`), inserts or replaces or merges it whatever is stored
    /// (`PUT` or `MERGE` without `If-Match`), or deletes it under a
    /// condition (`DELETE /t(…)` with `If-Match`). Returns the new version's
    /// ETag, `None` for a delete.
    ///
    /// Callers usually name the write with the methods of
    /// [`TableBackendExt`]: `insert_entity`,
    /// `update_entity`, `upsert_entity`, `delete_entity`.
    ///
    /// Errors: an insert over a row that exists,
    /// [`EntityAlreadyExists`](crate::Error::EntityAlreadyExists); an update
    /// or delete of a row that does not,
    /// [`EntityNotFound`](crate::Error::EntityNotFound) (also with
    /// `IfMatch::Any`); a condition that does not hold,
    /// [`PreconditionFailed`](crate::Error::PreconditionFailed);
    /// [`TableNotFound`](crate::Error::TableNotFound); validation errors.
    async fn write_entity(&self, table: &str, write: EntityWrite<'_>) -> Result<Option<ETag>>;

    /// Runs the operations as one entity group transaction: all are applied,
    /// in order, or none. Returns one ETag per operation (`None` for deletes).
    /// REST: `POST /$batch` with one change set.
    ///
    /// Errors: batch rules as [`Error::Invalid`](crate::Error::Invalid); the
    /// failure of one operation as [`BatchFailed`](crate::Error::BatchFailed)
    /// with its 0-based index.
    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[BatchOperation],
    ) -> Result<Vec<Option<ETag>>>;
}

/// The methods of [`TableBackend`], listed once: every impl that only
/// passes calls on (the forwarding through `Arc`, `Box` and `&` below, and
/// the fault layer, [`crate::layer::FaultInjection`]) is generated from this
/// list by `$generate`. Each async method names its
/// [`Operation`] and whether the fault layer may
/// send it twice (`resend`) or not (`once`). The generated impls deny
/// `clippy::missing_trait_methods`, so a method missing here fails the
/// build.
#[doc(hidden)]
#[macro_export]
macro_rules! table_methods {
    ($($generate:tt)::+ ! ($($args:tt)*)) => {
        $($generate)::+! { $($args)*
            async create_table(table: &str) -> $crate::error::Result<()>, [$crate::backend::Operation::CreateTable], [false];
            async delete_table(table: &str) -> $crate::error::Result<()>, [$crate::backend::Operation::DeleteTable], [false];
            async list_tables(options: &$crate::backend::ListTablesOptions)
                -> $crate::error::Result<$crate::backend::TablePage>, [$crate::backend::Operation::ListTables], [false];
            async get_entity(
                table: &str,
                partition_key: &str,
                row_key: &str,
                options: &$crate::backend::GetOptions
            ) -> $crate::error::Result<$crate::entity::Entity>, [$crate::backend::Operation::GetEntity], [false];
            async query_entities(table: &str, query: &$crate::backend::Query)
                -> $crate::error::Result<$crate::backend::QueryPage>, [$crate::backend::Operation::QueryEntities], [false];
            async write_entity(table: &str, write: $crate::backend::EntityWrite<'_>)
                -> $crate::error::Result<Option<$crate::entity::ETag>>, [write.operation()], [write.resends()];
            async submit_transaction(table: &str, operations: &[$crate::backend::BatchOperation])
                -> $crate::error::Result<Vec<Option<$crate::entity::ETag>>>, [$crate::backend::Operation::SubmitTransaction], [true];
            async read_rows(
                table: &str,
                query: &$crate::backend::Query,
                read: &mut $crate::backend::RowVisitor<'_>
            ) -> $crate::error::Result<Option<$crate::backend::ContinuationToken>>, [$crate::backend::Operation::QueryEntities], [false];
            async read_row(
                table: &str,
                partition_key: &str,
                row_key: &str,
                read: &mut $crate::backend::RowVisitor<'_>
            ) -> $crate::error::Result<bool>, [$crate::backend::Operation::GetEntity], [false];
            sync reads_rows(query: &$crate::backend::Query) -> bool;
            sync query_order() -> $crate::backend::QueryOrder;
            sync pacing() -> Option<$crate::pacing::Pacing>;
            sync store_info() -> $crate::telemetry::StoreInfo;
        }
    };
}
pub(crate) use crate::table_methods;

/// Implements a contract (`TableBackend`, `BlobStore`, `QueueStore`) for
/// `Arc<T>`, `Box<T>` and `&T` by passing every call on to `T`, from the
/// contract's list of methods (see [`table_methods`]).
macro_rules! forward_impls {
    ($contract:ident $($list:tt)*) => {
        $crate::backend::forward_impls!(@impl $contract, std::sync::Arc<T>, $($list)*);
        $crate::backend::forward_impls!(@impl $contract, Box<T>, $($list)*);
        $crate::backend::forward_impls!(@impl $contract, &T, $($list)*);
    };
    (@impl $contract:ident, $wrapper:ty,
        $(async $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $out:ty, [$op:expr], [$($resend:tt)*];)*
        $(sync $sync:ident($($sarg:ident: $sty:ty),* $(,)?) -> $sync_out:ty;)*
    ) => {
        #[deny(clippy::missing_trait_methods)]
        #[async_trait::async_trait]
        impl<T: $contract + ?Sized> $contract for $wrapper {
            $(
                async fn $name(&self, $($arg: $ty),*) -> $out {
                    (**self).$name($($arg),*).await
                }
            )*
            $(
                fn $sync(&self, $($sarg: $sty),*) -> $sync_out {
                    (**self).$sync($($sarg),*)
                }
            )*
        }
    };
}
#[doc(hidden)]
pub(crate) use forward_impls;

table_methods!(forward_impls!(TableBackend));

pub mod door;
mod ext;
mod operation;
pub mod sorted;

pub use ext::TableBackendExt;
pub use operation::Operation;

/// Counts work that goes on after the future that started it was dropped:
/// the finishing steps of a typed write (which run as a task of their own),
/// or a write an embedded backend has handed to its writer thread. Such work
/// ends by itself; [`InFlight::count`] says how much of it runs, so that a
/// program shutting down, or a test, can wait for it before it looks at the
/// store.
///
/// A backend whose writes outlive their futures holds one `InFlight` per
/// write, from the moment the write is handed over until it has ended.
#[derive(Debug)]
pub struct InFlight(());

/// How many [`InFlight`]s live in this process.
static IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl InFlight {
    /// Counts one piece of work until the returned value is dropped.
    #[must_use = "the work is counted only while the returned value lives"]
    pub fn start() -> InFlight {
        IN_FLIGHT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(())
    }

    /// How many pieces of work are counted right now, in this process.
    pub fn count() -> usize {
        IN_FLIGHT.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The checks of requests that need the store's own types (the checks of
/// entities, keys, names and filters are in [`validate`](crate::validate)).
pub mod checks {
    use std::collections::HashMap;

    use super::{BatchOperation, Query};
    use crate::entity::Entity;
    use crate::error::{Error, InvalidInput};
    use crate::validate::limits::{
        BATCH_OPERATION_OVERHEAD, MAX_BATCH_OPERATIONS, MAX_BATCH_PAYLOAD, MAX_PAGE_SIZE,
    };
    use crate::validate::{entity, filter, keys, select_names};

    /// The payload size charged against a batch's 4 MiB: for each operation its
    /// JSON body, both keys (they appear in the operation's URL) and
    /// [`BATCH_OPERATION_OVERHEAD`] for its part headers.
    pub fn batch_payload_size(operations: &[BatchOperation]) -> usize {
        operations
            .iter()
            .map(|op| operation_payload(op, crate::json::encoded_len))
            .sum()
    }

    /// An upper bound of one operation's share of [`batch_payload_size`],
    /// found without serializing it (see [`crate::json::encoded_len_bound`]):
    /// batches filled by these bounds up to 4 MiB always pass the check.
    pub fn operation_payload_bound(operation: &BatchOperation) -> usize {
        operation_payload(operation, crate::json::encoded_len_bound)
    }

    fn operation_payload(operation: &BatchOperation, body_len: fn(&Entity) -> usize) -> usize {
        let (pk, rk) = operation.keys();
        operation.entity().map_or(0, body_len) + pk.len() + rk.len() + BATCH_OPERATION_OVERHEAD
    }

    /// Checks an entity group transaction: 1–100 operations, one PartitionKey,
    /// each entity at most once, each operation valid, payload at most 4 MiB.
    ///
    /// An operation that is invalid on its own is reported as
    /// [`Error::BatchFailed`] with its index; rules about the batch as a whole are
    /// plain [`Error::Invalid`].
    pub fn batch(operations: &[BatchOperation]) -> Result<(), Error> {
        let Some(first) = operations.first() else {
            return Err(InvalidInput::BatchEmpty.into());
        };
        if operations.len() > MAX_BATCH_OPERATIONS {
            return Err(InvalidInput::BatchTooManyOperations {
                count: operations.len(),
                max: MAX_BATCH_OPERATIONS,
            }
            .into());
        }
        let partition = first.keys().0;
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(operations.len());
        for (index, op) in operations.iter().enumerate() {
            let (pk, rk) = op.keys();
            if pk != partition {
                return Err(InvalidInput::BatchPartitionMismatch {
                    index,
                    expected: partition.to_owned(),
                    found: pk.to_owned(),
                }
                .into());
            }
            if let Some(first) = seen.insert(rk, index) {
                return Err(InvalidInput::BatchDuplicateEntity {
                    first,
                    index,
                    row_key: rk.to_owned(),
                }
                .into());
            }
        }
        for (index, op) in operations.iter().enumerate() {
            let checked = match op.entity() {
                Some(e) => entity(e),
                None => {
                    let (pk, rk) = op.keys();
                    keys(pk, rk)
                }
            };
            checked.map_err(|e| Error::from(e).in_batch(index))?;
        }
        // The cheap bound settles almost every batch; only one that might be
        // too large is serialized to count exactly.
        let bound: usize = operations.iter().map(operation_payload_bound).sum();
        if bound <= MAX_BATCH_PAYLOAD {
            return Ok(());
        }
        let size = batch_payload_size(operations);
        if size > MAX_BATCH_PAYLOAD {
            return Err(InvalidInput::BatchTooLarge {
                size,
                max: MAX_BATCH_PAYLOAD,
            }
            .into());
        }
        Ok(())
    }

    /// Checks a query: `top` in 1..=1000, at most 15 comparisons, valid selected
    /// property names.
    pub fn query(query: &Query) -> Result<(), InvalidInput> {
        if let Some(top) = query.top
            && (top == 0 || top > MAX_PAGE_SIZE)
        {
            return Err(InvalidInput::TopOutOfRange {
                top,
                max: MAX_PAGE_SIZE,
            });
        }
        if let Some(filter) = &query.filter {
            self::filter(filter)?;
        }
        if let Some(select) = &query.select {
            select_names(select)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_tokens_round_trip_and_reject_garbage() {
        for token in [
            ContinuationToken::new("", None),
            ContinuationToken::new("p.a/r?t", Some("r'ow\u{1F600}".into())),
            ContinuationToken::new("x", Some(String::new())),
        ] {
            assert_eq!(
                token.to_string().parse::<ContinuationToken>().unwrap(),
                token
            );
        }
        for bad in ["", "garbage", "tk1.!!", "tk1.YQ.YQ.YQ", "tk1._w"] {
            assert!(bad.parse::<ContinuationToken>().is_err(), "{bad}");
        }
    }
}
