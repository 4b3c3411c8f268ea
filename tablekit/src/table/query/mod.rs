//! Typed queries: partitions, key ranges and prefixes, field filters,
//! projections, limits, resumable pages.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use futures::stream::{BoxStream, StreamExt, TryStreamExt};

use super::read::{load_stored, read_rows_page};
use super::{Loaded, Table, load};
use crate::backend::{ContinuationToken, Query, RowRef, fitted};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::key::{KeyPrefix, RowKeyLayout, prefix_range};
use crate::schema::{self, KIND_PROPERTY, KeyArg, RowRule, TableEntity, VERSION_PROPERTY};
use crate::validate::limits::MAX_PAGE_SIZE;

mod cursor;
pub use cursor::*;
mod row_errors;
pub use row_errors::*;

/// A query over the entities of one type. Built from [`Table::query`]; run
/// with [`stream`](TableQuery::stream), [`collect`](TableQuery::collect) or
/// one [`page`](TableQuery::page) at a time.
///
/// Without a RowKey condition, a query of a kind reads only that kind's rows.
/// Key conditions become `PartitionKey`/`RowKey` comparisons, so the store
/// reads only the matching range.
pub struct TableQuery<T, P = T> {
    table: Table<T>,
    partition: Option<Filter>,
    /// The logical partition of a sharded kind (one whose descriptor has a partition rule), whose
    /// shards are read at once and merged.
    shards_of: Option<String>,
    rows: Option<Filter>,
    filter: Option<Filter>,
    limit: Option<usize>,
    page_size: Option<u32>,
    resume: Option<ContinuationToken>,
    row_errors: RowErrors,
    after: Option<Cursor>,
    /// Wide entities only: start after the entity with these stored keys
    /// (a wide migration's checkpoint).
    after_entity: Option<(String, String)>,
    _projection: PhantomData<fn() -> P>,
}

pub(crate) fn range_filter<V: Into<crate::value::Value>>(
    column: impl Fn() -> crate::filter::Prop,
    start: Bound<V>,
    end: Bound<V>,
) -> Option<Filter> {
    let lower = match start {
        Bound::Included(k) => Some(column().ge(k)),
        Bound::Excluded(k) => Some(column().gt(k)),
        Bound::Unbounded => None,
    };
    let upper = match end {
        Bound::Included(k) => Some(column().le(k)),
        Bound::Excluded(k) => Some(column().lt(k)),
        Bound::Unbounded => None,
    };
    match (lower, upper) {
        (Some(l), Some(u)) => Some(l & u),
        (l, u) => l.or(u),
    }
}

fn and(a: Option<Filter>, b: Option<Filter>) -> Option<Filter> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a & b),
        (a, b) => a.or(b),
    }
}

impl<T: TableEntity> TableQuery<T, T> {
    pub(super) fn new(table: Table<T>) -> TableQuery<T, T> {
        TableQuery {
            table,
            partition: None,
            shards_of: None,
            rows: None,
            filter: None,
            limit: None,
            page_size: None,
            resume: None,
            after: None,
            after_entity: None,
            row_errors: RowErrors::Fail,
            _projection: PhantomData,
        }
    }
}

impl<T: TableEntity, P: TableEntity> TableQuery<T, P> {
    /// The rows' RowKey bounds in `layout`, laid out with its kind tags;
    /// an open end is the end of the kind's range.
    fn row_bounds(
        layout: &RowKeyLayout,
        start: Bound<String>,
        end: Bound<String>,
    ) -> (Bound<String>, Bound<String>) {
        match layout.prefix() {
            None => (start, end),
            Some(kind_start) => {
                let kind_end = crate::keyorder::prefix_end(&kind_start);
                let start = match start {
                    Bound::Unbounded => Bound::Included(kind_start),
                    bound => bound,
                };
                let end = match (end, kind_end) {
                    (Bound::Unbounded, Some(kind_end)) => Bound::Excluded(kind_end),
                    (bound, _) => bound,
                };
                (start, end)
            }
        }
    }

    /// The RowKey condition of a typed range, built for each layout `T`'s
    /// rows are stored in, and joined with `or`: `None` when one is open.
    fn rows_in(range: impl Fn(&RowKeyLayout) -> Option<Filter>) -> Option<Filter> {
        let mut all: Option<Filter> = None;
        for (layout, _) in T::DESCRIPTOR.stored_layouts() {
            let one = range(&layout)?;
            all = Some(match all {
                Some(all) => all | one,
                None => one,
            });
        }
        all
    }

    /// Only the partition with this key.
    pub fn partition(self, pk: impl KeyArg<T::PartitionKey>) -> Self {
        let mut key = String::new();
        pk.write_key_arg(&mut key);
        self.partition_encoded(key)
    }

    /// [`partition`](TableQuery::partition) by the encoded key.
    pub(crate) fn partition_encoded(mut self, key: String) -> Self {
        if let Some(rule) = T::DESCRIPTOR.partitions {
            // Every shard, for `to_query`; reads query each shard on its own.
            self.partition = rule
                .stored(&key)
                .into_iter()
                .map(|stored| Filter::partition_key().eq(stored))
                .reduce(|a, b| a | b);
            self.shards_of = Some(key);
        } else {
            self.partition = Some(Filter::partition_key().eq(key));
        }
        self
    }

    /// Only partitions whose hierarchical key starts with `prefix` (for
    /// example the tenant of a tenant > user > session key): the leading
    /// component alone (`partition_prefix("acme")`) or a tuple of leading
    /// components (`partition_prefix(("acme", "alice"))`), borrowed or
    /// owned. The range stays inside the prefix: tenant `a` never reads
    /// tenant `a b`.
    pub fn partition_prefix<Q>(mut self, prefix: Q) -> Self
    where
        T::PartitionKey: KeyPrefix<Q>,
    {
        let mut encoded = String::new();
        <T::PartitionKey as KeyPrefix<Q>>::write_prefix(&prefix, &RowKeyLayout::NONE, &mut encoded);
        let (start, end) =
            prefix_range(encoded, <T::PartitionKey as KeyPrefix<Q>>::last_separator());
        self.partition = Some(Filter::partition_key().ge(start) & Filter::partition_key().lt(end));
        self.shards_of = None;
        self
    }

    /// Only rows whose typed RowKey lies in `range` (`100..=199`, `..key`, …).
    pub fn rows(mut self, range: impl RangeBounds<T::RowKey>) -> Self {
        self.rows = Self::rows_in(|layout| {
            let encode = |b: Bound<&T::RowKey>| b.map(|key| layout.encode(key));
            let (start, end) = Self::row_bounds(
                layout,
                encode(range.start_bound()),
                encode(range.end_bound()),
            );
            range_filter(Filter::row_key, start, end)
        });
        self
    }

    /// Only rows whose compound RowKey starts with `prefix` (all reviews of
    /// one employee, say): the leading component alone (`row_prefix(123u32)`)
    /// or a tuple of leading components.
    pub fn row_prefix<Q>(mut self, prefix: Q) -> Self
    where
        T::RowKey: KeyPrefix<Q>,
    {
        self.rows = Self::rows_in(|layout| {
            let (start, end) = Self::prefix_bounds(layout, &prefix);
            range_filter(Filter::row_key, Bound::Included(start), end)
        });
        self
    }

    /// Only rows whose leading RowKey components lie in `range`, whatever
    /// follows them: the newest entries of a log keyed by
    /// `(InvertedTime, u32)` from a time on is `row_prefix_range(InvertedTime(t)..)`,
    /// with no sentinel for the second component. Each bound is a prefix, as
    /// [`row_prefix`](TableQuery::row_prefix) takes: an included end takes
    /// every key that starts with it, an excluded start none of them.
    pub fn row_prefix_range<Q>(mut self, range: impl RangeBounds<Q>) -> Self
    where
        T::RowKey: KeyPrefix<Q>,
    {
        self.rows = Self::rows_in(|layout| {
            let start = match range.start_bound() {
                Bound::Included(q) => Bound::Included(Self::prefix_bounds(layout, q).0),
                Bound::Excluded(q) => match Self::prefix_bounds(layout, q).1 {
                    Bound::Excluded(end) => Bound::Included(end),
                    // No key sorts after every key that starts with `q`.
                    _ => return Some(Filter::row_key().lt("")),
                },
                Bound::Unbounded => Bound::Unbounded,
            };
            let end = match range.end_bound() {
                Bound::Included(q) => Self::prefix_bounds(layout, q).1,
                Bound::Excluded(q) => Bound::Excluded(Self::prefix_bounds(layout, q).0),
                Bound::Unbounded => Bound::Unbounded,
            };
            let (start, end) = Self::row_bounds(layout, start, end);
            range_filter(Filter::row_key, start, end)
        });
        self
    }

    /// The RowKey range `[start, end)` of the keys in `layout` that start
    /// with `prefix`.
    fn prefix_bounds<Q>(layout: &RowKeyLayout, prefix: &Q) -> (String, Bound<String>)
    where
        T::RowKey: KeyPrefix<Q>,
    {
        let mut encoded = String::new();
        <T::RowKey as KeyPrefix<Q>>::write_prefix(prefix, layout, &mut encoded);
        if layout.is_template() {
            // The components of a template before its last are fixed-width:
            // the keys that start with the prefix's text are exactly its own.
            let end = crate::keyorder::prefix_end(&encoded);
            (encoded, end.map_or(Bound::Unbounded, Bound::Excluded))
        } else {
            let (start, end) = prefix_range(encoded, <T::RowKey as KeyPrefix<Q>>::last_separator());
            (start, Bound::Excluded(end))
        }
    }

    /// Also requires `filter`, usually built from `T::columns()`. Several calls
    /// are joined with `and`.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = and(self.filter.take(), Some(filter));
        self
    }

    /// At most `n` entities in all.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// At most `n` entities per request (1–1,000).
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = Some(n);
        self
    }

    /// What to do with a row that cannot be read as the type (by default,
    /// [`RowErrors::Fail`]).
    pub fn on_row_error(mut self, policy: RowErrors) -> Self {
        self.row_errors = policy;
        self
    }

    /// Starts after the item a [`page_of`](TableQuery::page_of) cursor
    /// points at. The cursor must come from the same query; that is checked
    /// when the page is read.
    pub fn after(mut self, cursor: Cursor) -> Self {
        self.after = Some(cursor);
        self
    }

    /// Wide entities: starts after the entity whose stored keys are
    /// `(partition_key, row_key)`, asking the store for the rows after its
    /// parts only.
    pub(crate) fn after_entity(mut self, partition_key: String, row_key: String) -> Self {
        self.after_entity = Some((partition_key, row_key));
        self
    }

    /// Resumes where a previous [`page`](TableQuery::page) stopped.
    pub fn resume(mut self, token: ContinuationToken) -> Self {
        self.resume = Some(token);
        self
    }

    /// Reads only the fields of `Q`, a struct with a subset of `T`'s fields and
    /// the same keys and kind (`$select` on the wire). Declare it with
    /// `#[tablekit(projection_of = T)]`: its fields are then checked against
    /// `T`'s at compile time and stored under `T`'s names.
    pub fn project<Q>(self) -> TableQuery<T, Q>
    where
        Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
    {
        TableQuery {
            table: self.table,
            partition: self.partition,
            shards_of: self.shards_of,
            rows: self.rows,
            filter: self.filter,
            limit: self.limit,
            page_size: self.page_size,
            resume: self.resume,
            after: self.after,
            after_entity: self.after_entity,
            row_errors: self.row_errors,
            _projection: PhantomData,
        }
    }

    /// The backend query this builds.
    pub fn to_query(&self) -> Query {
        let after = self.after.as_ref().map(|cursor| {
            let (pk, rk) = (&cursor.partition_key, &cursor.row_key);
            Filter::partition_key().gt(pk.as_str())
                | (Filter::partition_key().eq(pk.as_str()) & Filter::row_key().gt(rk.as_str()))
        });
        let mut query = self.base_query();
        query.filter = and(query.filter, after);
        query
    }

    /// What a cursor ties to: the table, the types, the filter and the
    /// selection, without where a page starts or how large it is.
    fn fingerprint(&self) -> u64 {
        let query = self.base_query();
        fingerprint(&format!(
            "{}\n{}\n{}\n{:?}\n{:?}",
            self.table.name(),
            std::any::type_name::<T>(),
            std::any::type_name::<P>(),
            query.filter.map(|f| f.to_string()),
            query.select,
        ))
    }

    /// [`to_query`](TableQuery::to_query) without a cursor's start.
    fn base_query(&self) -> Query {
        self.base_query_in(self.partition.clone())
    }

    /// The query without the cursor's condition, over `partition`.
    fn base_query_in(&self, partition: Option<Filter>) -> Query {
        let kind_rows = match &self.rows {
            None => schema::kind_filter::<T>(),
            Some(rows) => and(Some(rows.clone()), schema::kind_property_filter::<T>()),
        };
        let filter = and(and(partition, kind_rows), self.filter.clone());
        // Expired rows are passed by where the store reads them.
        let filter = and(filter, self.table.live_filter());
        let top = match (self.page_size, self.limit) {
            (Some(size), _) => Some(size),
            (None, Some(limit)) => Some(limit.clamp(1, MAX_PAGE_SIZE as usize) as u32),
            (None, None) => None,
        };
        // A projection selects its fields, unless it has a series whose
        // elements cannot be listed: then it reads every property.
        let select = (std::any::TypeId::of::<P>() != std::any::TypeId::of::<T>())
            .then(|| {
                let mut names = Vec::new();
                let complete = (P::DESCRIPTOR.property_names)(&mut names);
                if P::DESCRIPTOR.kind.is_some() {
                    names.push(KIND_PROPERTY.to_owned());
                    names.push(VERSION_PROPERTY.to_owned());
                }
                if crate::schema::encrypted::<P>().is_some() {
                    names.push(tablekit_encrypt::ENVELOPE_PROPERTY.to_owned());
                    // And the old SDKs' metadata, for the rows they wrote.
                    names.push(tablekit_encrypt::LEGACY_METADATA.to_owned());
                    names.push(tablekit_encrypt::LEGACY_PROPERTIES.to_owned());
                }
                complete.then_some(names)
            })
            .flatten();
        let mut query = Query::new().continuation(self.resume.clone());
        query.filter = filter;
        query.select = select;
        query.top = top;
        query
    }

    /// Every matching entity in key order, following continuation tokens
    /// through short and empty pages, fetching a page only when the previous
    /// one is used up. On a store that does not sort query results (Cosmos DB
    /// for Table) it reads every page before the first row, and sorts them.
    pub fn stream(self) -> BoxStream<'static, Result<Loaded<P>>> {
        if let Some(rule) = P::DESCRIPTOR.rows {
            return self.stream_wide(rule);
        }
        let external = super::finishes_reads::<P>();
        let rows = match &self.shards_of {
            Some(pk) => self.sharded_rows(pk, |partition| self.base_query_in(partition)),
            None if !external => {
                let typed = super::typed_query_stream::<P>(
                    std::sync::Arc::clone(self.table.backend()),
                    self.table.name().to_owned(),
                    self.to_query(),
                    "query",
                    T::DESCRIPTOR.kind,
                );
                return with_row_errors(typed, self.row_errors)
                    .take(self.limit.unwrap_or(usize::MAX))
                    .boxed();
            }
            None => super::owned_query_stream(
                std::sync::Arc::clone(self.table.backend()),
                self.table.name().to_owned(),
                self.to_query(),
                "query",
                T::DESCRIPTOR.kind,
            ),
        };
        let typed = if external {
            // Values kept in blobs are read back, encrypted ones opened: a
            // table per row.
            let table = self.table.of::<P>();
            rows.and_then(move |entity| restore_and_load(table.clone(), entity))
                .boxed()
        } else {
            rows.map(|entity| entity.and_then(load::<P>)).boxed()
        };
        with_row_errors(typed, self.row_errors)
            .take(self.limit.unwrap_or(usize::MAX))
            .boxed()
    }

    /// Wide entities: the store sees parts, so the query reads the kind's rows
    /// of the chosen partitions, joins the parts of each entity, and applies
    /// the RowKey range and field filters to the joined entities.
    fn stream_wide(self, rule: &'static dyn RowRule) -> BoxStream<'static, Result<Loaded<P>>> {
        let kind_rows = schema::kind_filter::<T>();
        // After an entity: the rows past its parts, in its partition or a
        // later one.
        let after = self.after_entity.as_ref().map(|(pk, rk)| {
            let end = rule.rows_end(rk);
            Filter::partition_key().gt(pk.as_str())
                | (Filter::partition_key().eq(pk.as_str()) & Filter::row_key().ge(end))
        });
        let query_in = |partition| {
            let mut query = Query::new();
            query.filter = and(and(partition, kind_rows.clone()), after.clone());
            query
        };
        let rows = match &self.shards_of {
            Some(pk) => self.sharded_rows(pk, query_in),
            None => super::owned_query_stream(
                std::sync::Arc::clone(self.table.backend()),
                self.table.name().to_owned(),
                query_in(self.partition.clone()),
                "query",
                T::DESCRIPTOR.kind,
            ),
        };
        let client_filter = and(self.rows.clone(), self.filter.clone());
        // Expired entities too are passed by whole, once joined.
        let client_filter = and(client_filter, self.table.live_filter());
        let table = self.table.of::<P>();
        struct Grouping {
            rows: BoxStream<'static, Result<crate::entity::Entity>>,
            next: Option<crate::entity::Entity>,
        }
        let groups = futures::stream::try_unfold(
            Grouping { rows, next: None },
            move |mut state| async move {
                let first = match state.next.take() {
                    Some(row) => row,
                    None => match state.rows.try_next().await? {
                        Some(row) => row,
                        None => return Ok(None),
                    },
                };
                let base = rule
                    .entity_of(&first.row_key)
                    .unwrap_or(&first.row_key)
                    .to_owned();
                let pk = first.partition_key.clone();
                let mut group = vec![first];
                while let Some(row) = state.rows.try_next().await? {
                    if row.partition_key == pk
                        && rule.entity_of(&row.row_key) == Some(base.as_str())
                    {
                        group.push(row);
                    } else {
                        state.next = Some(row);
                        break;
                    }
                }
                Ok(Some(((base, group), state)))
            },
        );
        let row_errors = self.row_errors.clone();
        let typed = groups
            .try_filter_map(move |(base, group)| {
                let client_filter = client_filter.clone();
                let table = table.clone();
                async move {
                    let Some((entity, _)) = rule.join(&base, group)? else {
                        return Ok(None);
                    };
                    if client_filter.as_ref().is_some_and(|f| !f.matches(&entity)) {
                        return Ok(None);
                    }
                    restore_and_load(table, entity).await.map(Some)
                }
            })
            .boxed();
        with_row_errors(typed, row_errors)
            .take(self.limit.unwrap_or(usize::MAX))
            .boxed()
    }

    /// How many entities match, reading only their keys (`$select`) page by
    /// page: one request per 1,000 matches. Wide entities are counted whole.
    pub async fn count(self) -> Result<usize> {
        if P::DESCRIPTOR.wide() {
            return self
                .stream()
                .try_fold(0, |n, _| async move { Ok(n + 1) })
                .await;
        }
        let limit = self.limit.unwrap_or(usize::MAX);
        let queries = match &self.shards_of {
            Some(pk) => self.shard_queries(pk, |partition| self.base_query_in(partition))?,
            None => vec![self.to_query()],
        };
        let (backend, name) = (self.table.backend(), self.table.name());
        // Each shard counted at once; one query when not sharded.
        let counts = queries.into_iter().map(|mut query| async move {
            query.select = Some(vec!["PartitionKey".into(), "RowKey".into()]);
            let mut count = 0;
            loop {
                let page = crate::order::unordered_page(&**backend, name, query.clone()).await?;
                count += page.entities.len();
                match page.continuation {
                    Some(next) if count < limit => query.continuation = Some(next),
                    _ => return Ok::<_, crate::error::Error>(count),
                }
            }
        });
        let counts = futures::future::try_join_all(counts).await?;
        Ok(counts.into_iter().sum::<usize>().min(limit))
    }

    /// One query per shard of the sharded partition `pk`, each `query_in`
    /// its stored partition, starting after the cursor or at the
    /// continuation token's row.
    fn shard_queries(
        &self,
        pk: &str,
        query_in: impl Fn(Option<Filter>) -> Query,
    ) -> Result<Vec<Query>> {
        let mut start = self
            .after
            .as_ref()
            .map(|cursor| Filter::row_key().gt(cursor.row_key.as_str()));
        if let Some(token) = &self.resume {
            match token.next_row_key() {
                Some(rk) if token.next_partition_key() == pk => {
                    start = and(start, Some(Filter::row_key().ge(rk)));
                }
                _ => {
                    return Err(crate::error::InvalidInput::ContinuationToken {
                        reason: "it belongs to another partition or query",
                    }
                    .into());
                }
            }
        }
        let stored = T::DESCRIPTOR
            .partitions
            .map_or_else(|| vec![pk.to_owned()], |rule| rule.stored(pk));
        Ok(stored
            .into_iter()
            .map(|stored| {
                let mut query = query_in(Some(Filter::partition_key().eq(stored)));
                query.filter = and(query.filter.take(), start.clone());
                query.continuation = None;
                query
            })
            .collect())
    }

    /// The rows of the sharded partition `pk`: every shard read at once,
    /// merged in RowKey order.
    fn sharded_rows(
        &self,
        pk: &str,
        query_in: impl Fn(Option<Filter>) -> Query,
    ) -> BoxStream<'static, Result<crate::entity::Entity>> {
        match self.shard_queries(pk, query_in) {
            Ok(queries) => super::merge::merged_rows(
                std::sync::Arc::clone(self.table.backend()),
                self.table.name(),
                queries,
                T::DESCRIPTOR.kind,
            ),
            Err(e) => futures::stream::once(futures::future::ready(Err(e))).boxed(),
        }
    }

    /// Every matching entity, collected.
    pub async fn collect(self) -> Result<Vec<Loaded<P>>> {
        if P::DESCRIPTOR.wide() || self.shards_of.is_some() {
            return self.stream().try_collect().await;
        }
        // What `stream` does, page by page: each row is read where it lies
        // in its page, not moved through a stream's layers.
        let limit = self.limit.unwrap_or(usize::MAX);
        let mut items = Vec::new();
        if limit == 0 {
            return Ok(items);
        }
        let mut query = self.to_query();
        let backend = &**self.table.backend();
        let name = self.table.name();
        let table = self.table.of::<P>();
        let external = super::finishes_reads::<P>();
        // Whether the backend passes this query's rows by reference, asked once: the
        // pages of a backend that passes none are read as entities at once.
        let by_reference = !external && crate::order::rows_query(backend, &query).is_some();
        loop {
            if by_reference {
                // A backend that passes its rows by reference: each is read into its value
                // where it lies in the store's decoding, without an entity.
                let mut paged = query.clone();
                let top = paged.top.unwrap_or(MAX_PAGE_SIZE);
                let left = u32::try_from(limit - items.len()).unwrap_or(u32::MAX);
                paged.top = Some(top.min(left));
                if let Some(continuation) = self.borrowed_page(&paged, &mut items).await {
                    match continuation? {
                        Some(next) if items.len() < limit => query.continuation = Some(next),
                        _ => return Ok(fitted(items)),
                    }
                    continue;
                }
            }
            let mut page =
                super::read::read_page(backend, name, query.clone(), "query", T::DESCRIPTOR.kind)
                    .await?;
            let continuation = page.continuation.take();
            for row in page.into_rows() {
                if items.len() == limit {
                    return Ok(fitted(items));
                }
                let loaded = match row {
                    Ok(entity) if external => restore_and_load(table.clone(), entity).await,
                    Ok(entity) => load::<P>(entity),
                    Err(e) => Err(e),
                };
                keep(&mut items, loaded, &self.row_errors)?;
            }
            // Fitted here too: a page passed by reference may have reserved
            // room before the backend gave this one as entities.
            match continuation {
                Some(next) if items.len() < limit => query.continuation = Some(next),
                _ => return Ok(fitted(items)),
            }
        }
    }

    /// One page of `query` passed by reference by the backend
    /// ([`TableBackend::read_rows`](crate::TableBackend::read_rows)), each
    /// row read as `P` into `items` under the query's row-error policy: the
    /// page's token. `None`, having read nothing, when the backend does not
    /// pass the query's rows by reference.
    async fn borrowed_page(
        &self,
        query: &Query,
        items: &mut Vec<Loaded<P>>,
    ) -> Option<Result<Option<ContinuationToken>>> {
        // Room for the whole page first: a value is large (a few hundred
        // bytes), and a vector grown by doubling would copy the page's
        // values about twice over (see `fitted` for what a short page
        // gives back).
        items.reserve(query.top.unwrap_or(MAX_PAGE_SIZE) as usize);
        let policy = &self.row_errors;
        let mut read = |row: RowRef<'_>| keep(items, load_stored::<P>(row), policy);
        let (backend, name) = (&**self.table.backend(), self.table.name());
        read_rows_page(backend, name, query, "query", T::DESCRIPTOR.kind, &mut read).await
    }

    /// A page for a web API: at most `n` items (1 to 1,000), and a cursor
    /// after the last of them when more follow. A page is short only at the
    /// end, and never empty with a cursor. Pass the cursor to
    /// [`after`](TableQuery::after) on the same query for the next page; a
    /// cursor of another query is refused
    /// ([`InvalidInput::Cursor`](crate::InvalidInput::Cursor)). Reads up to
    /// `n + 1` items, following the store's pages as needed.
    ///
    /// ```
    /// # use tablekit::{Table, TableEntity};
    /// # #[derive(TableEntity)] #[tablekit(table = "Staff")]
    /// # struct Employee { #[tablekit(partition_key)] dept: String, #[tablekit(row_key)] id: u32 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// let staff: Table<Employee> = Table::new(tablekit_mem::MemBackend::new());
    /// staff.create_if_missing().await?;
    /// for id in 0..5 {
    ///     staff.insert(&Employee { dept: "Sales".into(), id }).await?;
    /// }
    /// let first = staff.query().partition("Sales").page_of(2).await?;
    /// let link = first.next.expect("more follow").to_string(); // into a URL
    /// let cursor = link.parse()?;
    /// let second = staff.query().partition("Sales").after(cursor).page_of(2).await?;
    /// assert_eq!(second.items.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 3]);
    /// # Ok(()) }
    /// ```
    pub async fn page_of(mut self, n: usize) -> Result<CursorPage<P>> {
        if n == 0 || n > MAX_PAGE_SIZE as usize {
            return Err(crate::error::InvalidInput::TopOutOfRange {
                top: u32::try_from(n).unwrap_or(u32::MAX),
                max: MAX_PAGE_SIZE,
            }
            .into());
        }
        if P::DESCRIPTOR.wide() {
            return Err(crate::error::Error::NotSupported {
                operation: "page_of() on wide entities (use stream())",
            });
        }
        let print = self.fingerprint();
        if self.after.as_ref().is_some_and(|c| c.fingerprint != print) {
            return Err(crate::error::InvalidInput::Cursor {
                reason: "it belongs to another query",
            }
            .into());
        }
        self.limit = Some(n + 1);
        self.page_size = None;
        self.resume = None;
        let mut items: Vec<Loaded<P>> = self.stream().try_collect().await?;
        let next = if items.len() > n {
            items.truncate(n);
            let last = &items[n - 1].value;
            Some(Cursor {
                fingerprint: print,
                partition_key: schema::partition_key_of(last)?,
                row_key: schema::row_key_of(last)?,
            })
        } else {
            None
        };
        Ok(CursorPage { items, next })
    }

    /// One request's worth of results and the token to resume after it (`None`
    /// at the end). The page may be short, or empty, while more follow. A row
    /// that cannot be read fails the page unless the query skips such rows
    /// ([`RowErrors::Skip`]; `Yield` fails here too, as a page holds values).
    ///
    /// Not offered for wide entities, whose parts may straddle pages: use
    /// [`stream`](TableQuery::stream).
    ///
    /// On a store that does not sort query results (Cosmos DB for Table,
    /// [`QueryOrder::Unspecified`](crate::QueryOrder::Unspecified)), a page
    /// still holds the first rows in key order: each call reads the rest of
    /// the query and sorts it, and its token names the next key. A token the
    /// store made is refused there
    /// ([`InvalidInput::ContinuationToken`](crate::InvalidInput::ContinuationToken)).
    pub async fn page(self) -> Result<(Vec<Loaded<P>>, Option<ContinuationToken>)> {
        if P::DESCRIPTOR.wide() {
            return Err(crate::error::Error::NotSupported {
                operation: "page() on wide entities (use stream())",
            });
        }
        let external = super::finishes_reads::<P>();
        if self.shards_of.is_none() && !external {
            // A backend that passes the query's rows by reference: each is read into its
            // value where it lies, without an entity.
            let mut items = Vec::new();
            if let Some(continuation) = self.borrowed_page(&self.to_query(), &mut items).await {
                return Ok((fitted(items), continuation?));
            }
        }
        let (rows, continuation) = match &self.shards_of {
            Some(pk) => self.sharded_page(pk).await?,
            None => {
                let query = self.to_query();
                let backend = &**self.table.backend();
                let name = self.table.name();
                let mut page = super::operation(backend, "query", name, T::DESCRIPTOR.kind, None)
                    .run_counted(
                        crate::order::ordered_page(backend, name, query, false),
                        |page| Some(page.entities.len()),
                    )
                    .await?;
                let continuation = page.continuation.take();
                (page.into_rows().collect::<Vec<_>>(), continuation)
            }
        };
        let table = self.table.of::<P>();
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            let loaded = match row {
                Ok(entity) => restore_and_load(table.clone(), entity).await,
                Err(e) => Err(e),
            };
            keep(&mut items, loaded, &self.row_errors)?;
        }
        Ok((items, continuation))
    }
}

/// Fetches a row's offloaded values back, then reads it as `P`.
impl<T: TableEntity, P: TableEntity> TableQuery<T, P> {
    /// One page of the sharded partition `pk`: as many rows as a page of one
    /// partition holds, merged from every shard, and a token that resumes
    /// every shard at the first row not handed out.
    async fn sharded_page(
        &self,
        pk: &str,
    ) -> Result<(
        Vec<Result<crate::entity::Entity>>,
        Option<ContinuationToken>,
    )> {
        let size = match (self.page_size, self.limit) {
            (Some(size), _) => size as usize,
            (None, Some(limit)) => limit.clamp(1, MAX_PAGE_SIZE as usize),
            (None, None) => MAX_PAGE_SIZE as usize,
        };
        let mut rows = self.sharded_rows(pk, |partition| self.base_query_in(partition));
        let mut page = Vec::with_capacity(size.min(64));
        while let Some(row) = rows.next().await {
            match row {
                Err(e) if !e.is_row_error() => return Err(e),
                row if page.len() == size => {
                    let next = super::merge::row_key(&row).to_owned();
                    return Ok((page, Some(ContinuationToken::new(pk, Some(next)))));
                }
                row => page.push(row),
            }
        }
        Ok((page, None))
    }
}

/// Reads a row that needs the table's work first ([`finishes_reads`](super::finishes_reads)):
/// its offloaded values fetched back, its encrypted ones opened.
async fn restore_and_load<P: TableEntity>(
    table: Table<P>,
    mut entity: crate::entity::Entity,
) -> Result<Loaded<P>> {
    table.restore_blobs(&mut entity).await?;
    let sealed_under = table.open(&mut entity, true).await?;
    let mut loaded = load::<P>(entity)?;
    loaded.sealed_under = sealed_under.map(Into::into);
    Ok(loaded)
}
