//! Reads through an [index](crate::index).

use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt, TryStreamExt};

use crate::backend::GetOptions;
use crate::entity::Entity;
use crate::error::{Call, Error, Result};
use crate::filter::Filter;
use crate::index::{self, Index, IndexDef, NonUnique, RemoteIndex, RemoteIndexDef, Unique};
use crate::key::{KeyPrefix, KeyTuple, prefix_range};
use crate::schema::{self, KeyArg, TableEntity};
use crate::table::{Cursor, Loaded, Table, owned_query_stream};

/// Reads `T` through one of its indexes, as `Q` (`T` itself, or a
/// projection of it made with [`project`](IndexReader::project)). Made by
/// [`Table::index`].
///
/// Every read names the partition: an index lives in it. Results come in
/// the order of the index values, then (for a non-unique index) of the
/// entities' RowKeys.
///
/// Requests: when the index rows hold every field `Q` needs, a read is
/// served from them alone ([`get`](IndexReader::get) is one request; a
/// stream one request per page of 1,000). Otherwise each index row found is
/// followed to its entity with one point read.
pub struct IndexReader<T, V, U, Q = T> {
    pub(super) table: Table<T>,
    pub(super) def: &'static IndexDef,
    position: usize,
    /// Where the rows are, for an index kept in another partition or table.
    remote: Option<&'static RemoteIndexDef>,
    _marker: PhantomData<super::Marker<(V, U, Q)>>,
}

impl<T: TableEntity> Table<T> {
    /// Reads through `index`, a field of `T::indexes()`:
    /// `staff.index(Employee::indexes().email).get("Sales", "jonesj@contoso.com")`.
    pub fn index<V, U>(&self, index: Index<T, V, U>) -> IndexReader<T, V, U> {
        IndexReader {
            table: self.clone(),
            def: index.def(),
            position: index.position(),
            remote: None,
            _marker: PhantomData,
        }
    }

    /// Reads through `index`, an index kept in another partition or table
    /// (a field of `T::indexes()` declared with `partition` or `table`), as
    /// [`index`](Table::index) reads the others. Its rows are written after
    /// the entity, through the [outbox](crate::outbox): a read may miss a
    /// change for as long as its steps wait. An index row whose entity no
    /// longer holds its value is left out when it is followed; one served
    /// alone (every field copied) shows the value its row was written with.
    /// The partition named is the entity's.
    pub fn remote_index<V>(&self, index: RemoteIndex<T, V>) -> IndexReader<T, V, NonUnique> {
        let remote = index.def();
        IndexReader {
            table: self.clone(),
            def: &remote.index,
            position: index.position(),
            remote: Some(remote),
            _marker: PhantomData,
        }
    }
}

impl<T, V, U, Q> IndexReader<T, V, U, Q>
where
    T: TableEntity,
    V: KeyTuple,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// Every entity whose value is `value`, in RowKey order (at most one for
    /// a unique index).
    pub fn find(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> BoxStream<'static, Result<Q>> {
        self.stream(&pk, self.value_bounds(value))
    }

    /// Every entity whose value starts with the components of `prefix` (the
    /// first fields of a compound index), in value order.
    pub fn prefix<P>(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        prefix: P,
    ) -> BoxStream<'static, Result<Q>>
    where
        V: KeyPrefix<P>,
    {
        self.stream(&pk, self.prefix_bounds(prefix))
    }

    /// Every entity whose value lies in `[from, to)`, in value order.
    pub fn range(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        from: impl KeyArg<V>,
        to: impl KeyArg<V>,
    ) -> BoxStream<'static, Result<Q>> {
        self.stream(&pk, self.range_bounds(from, to))
    }

    /// The index RowKeys of the entities whose value is `value`.
    fn value_bounds(&self, value: impl KeyArg<V>) -> (Bound<String>, Bound<String>) {
        let mut key = String::new();
        value.write_laid_out(&self.def.layout, &mut key);
        self.key_bounds(key)
    }

    /// The index RowKeys of the values that start with `prefix`.
    fn prefix_bounds<P>(&self, prefix: P) -> (Bound<String>, Bound<String>)
    where
        V: KeyPrefix<P>,
    {
        let mut encoded = String::new();
        <V as KeyPrefix<P>>::write_prefix(&prefix, &self.def.layout, &mut encoded);
        let (start, end) = prefix_range(encoded, <V as KeyPrefix<P>>::last_separator());
        (Bound::Included(start), Bound::Excluded(end))
    }

    /// The index RowKeys of the values in `[from, to)`.
    fn range_bounds(
        &self,
        from: impl KeyArg<V>,
        to: impl KeyArg<V>,
    ) -> (Bound<String>, Bound<String>) {
        let (mut start, mut end) = (String::new(), String::new());
        from.write_laid_out(&self.def.layout, &mut start);
        to.write_laid_out(&self.def.layout, &mut end);
        (Bound::Included(start), Bound::Excluded(end))
    }

    /// The entities of the index rows of `pk` within `bounds`.
    fn stream(
        &self,
        pk: &impl KeyArg<T::PartitionKey>,
        (start, end): (Bound<String>, Bound<String>),
    ) -> BoxStream<'static, Result<Q>> {
        match schema::encode_partition_key::<T>(pk) {
            Ok(pk) => self.rows(pk, start, end),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        }
    }
}

impl<T, V, U, Q> IndexReader<T, V, U, Q>
where
    T: TableEntity,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// The same reads, as the projection `P` (a type with
    /// `#[tablekit(projection_of = T)]`): served from the index rows when
    /// they copy every field of `P`.
    pub fn project<P>(self) -> IndexReader<T, V, U, P>
    where
        P: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
    {
        IndexReader {
            table: self.table,
            def: self.def,
            position: self.position,
            remote: self.remote,
            _marker: PhantomData,
        }
    }

    /// Whether an index row holds every property `Q` reads.
    fn served_by_index_rows(&self) -> bool {
        if self.def.list || schema::expiry_property::<T>().is_some() {
            // An index row does not say whether its entity has expired.
            return false;
        }
        if self.def.copy.is_none() {
            return true;
        }
        let mut names = Vec::new();
        (Q::DESCRIPTOR.property_names)(&mut names) && names.iter().all(|name| self.def.copies(name))
    }

    /// The index RowKeys of the entities whose value's key (the index's
    /// RowKey, without an entity's) is `key`.
    pub(super) fn key_bounds(&self, key: String) -> (Bound<String>, Bound<String>) {
        // A unique index row and an index entity end with the value; the
        // others go on with the entity's RowKey.
        let end = if self.def.unique || self.def.list {
            Bound::Excluded(format!("{key}\0"))
        } else {
            crate::keyorder::prefix_end(&key).map_or(Bound::Unbounded, Bound::Excluded)
        };
        (Bound::Included(key), end)
    }

    /// The index rows of `pk` in `[start, end)`, read as `Q`.
    pub(super) fn rows(
        &self,
        pk: String,
        start: Bound<String>,
        end: Bound<String>,
    ) -> BoxStream<'static, Result<Q>> {
        let (index_table, index_pk) = self.place(&pk);
        let query = crate::backend::Query::new().filter(self.bounds_filter(&index_pk, start, end));
        let rows = owned_query_stream(
            Arc::clone(&self.table.backend),
            index_table,
            query,
            "index",
            T::DESCRIPTOR.kind,
        );
        let table = self.table.clone();
        let (def, position, served) = (self.def, self.position, self.served_by_index_rows());
        let remote = self.remote;
        rows.and_then(move |row| {
            let table = table.clone();
            async move {
                if def.list {
                    // An index entity: each entity it lists, followed.
                    let mut found = Vec::new();
                    for rk in index::list_members(&row) {
                        let mut pointer =
                            Entity::new(row.partition_key.clone(), row.row_key.clone());
                        pointer.properties.insert(index::ROW_PROPERTY, rk);
                        if let Some(value) = table
                            .read_indexed::<Q>(def, position, false, pointer, remote)
                            .await?
                        {
                            found.push(Ok(value));
                        }
                    }
                    return Ok(futures::stream::iter(found));
                }
                let value = table
                    .read_indexed::<Q>(def, position, served, row, remote)
                    .await?;
                Ok(futures::stream::iter(
                    value.map(Ok).into_iter().collect::<Vec<_>>(),
                ))
            }
        })
        .try_flatten()
        .boxed()
    }

    /// At most `n` entities of the index rows of the encoded PartitionKey
    /// `pk` in `[start, end)`, after the cursor.
    pub(super) async fn page(
        &self,
        pk: String,
        (start, end): (Bound<String>, Bound<String>),
        n: usize,
        after: Option<&Cursor>,
    ) -> Result<IndexPage<Q>> {
        let max = crate::validate::limits::MAX_PAGE_SIZE as usize;
        if n == 0 || n > max {
            return Err(crate::error::InvalidInput::TopOutOfRange {
                top: u32::try_from(n).unwrap_or(u32::MAX),
                max: max as u32,
            }
            .into());
        }
        if self.def.list {
            return Err(Error::NotSupported {
                operation: "pages through a list index (stream them with find, prefix or range)",
            });
        }
        // A cursor belongs to the index, the partition and the bounds it
        // was made for.
        let print = crate::table::query::fingerprint(&format!(
            "index\n{}\n{}\n{}\n{pk}\n{start:?}\n{end:?}\n{}",
            self.table.name,
            std::any::type_name::<T>(),
            self.def.name,
            std::any::type_name::<Q>(),
        ));
        let start = match after {
            None => start,
            Some(cursor) => {
                let (fingerprint, row_key) = cursor.position();
                if fingerprint != print {
                    return Err(crate::error::InvalidInput::Cursor {
                        reason: "it belongs to another query",
                    }
                    .into());
                }
                // A page's cursor is a row of its range: one before the
                // range's start would widen it (a city's page listing
                // another city's entities).
                let after_start = match &start {
                    Bound::Included(s) | Bound::Excluded(s) => row_key >= s.as_str(),
                    Bound::Unbounded => true,
                };
                let before_end = match &end {
                    Bound::Included(e) => row_key <= e.as_str(),
                    Bound::Excluded(e) => row_key < e.as_str(),
                    Bound::Unbounded => true,
                };
                if !(after_start && before_end) {
                    return Err(crate::error::InvalidInput::Cursor {
                        reason: "it points outside its query's range",
                    }
                    .into());
                }
                Bound::Excluded(row_key.to_owned())
            }
        };
        let (index_table, index_pk) = self.place(&pk);
        let query = crate::backend::Query::new().filter(self.bounds_filter(&index_pk, start, end));
        let mut rows: Vec<Entity> = owned_query_stream(
            Arc::clone(&self.table.backend),
            index_table,
            query,
            "index_page",
            T::DESCRIPTOR.kind,
        )
        .take(n + 1)
        .try_collect()
        .await?;
        let next = if rows.len() > n {
            rows.truncate(n);
            rows.last()
                .map(|row| Cursor::at(print, &row.partition_key, &row.row_key))
        } else {
            None
        };
        let served = self.served_by_index_rows();
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            if let Some(item) = self
                .table
                .read_indexed::<Q>(self.def, self.position, served, row, self.remote)
                .await?
            {
                items.push(item);
            }
        }
        Ok(IndexPage { items, next })
    }

    /// The filter of the rows of partition `pk` between `start` and `end`,
    /// never outside the index's own rows.
    /// The table and partition of the index rows of the entities of `pk`.
    fn place(&self, pk: &str) -> (String, String) {
        match self.remote {
            Some(remote) => remote.place(&self.table.name, pk),
            None => (self.table.name.to_string(), pk.to_owned()),
        }
    }

    fn bounds_filter(&self, pk: &str, start: Bound<String>, end: Bound<String>) -> Filter {
        let index_start = self.def.prefix();
        let index_end = crate::keyorder::prefix_end(&index_start);
        let filter = Filter::partition_key().eq(pk);
        let filter = match start {
            Bound::Included(s) => filter & Filter::row_key().ge(s.max(index_start)),
            Bound::Excluded(s) if s >= index_start => filter & Filter::row_key().gt(s),
            _ => filter & Filter::row_key().ge(index_start),
        };
        match (end, index_end) {
            (Bound::Excluded(e), Some(ie)) => filter & Filter::row_key().lt(e.min(ie)),
            (_, Some(ie)) => filter & Filter::row_key().lt(ie),
            (Bound::Excluded(e), None) => filter & Filter::row_key().lt(e),
            (_, None) => filter,
        }
    }

    /// The unique index row at the encoded keys `(pk, key)`, with its
    /// RowKey, or `None`.
    pub(super) async fn unique_row(
        &self,
        (pk, key): (String, String),
        options: GetOptions,
    ) -> Result<Option<(Entity, String)>> {
        match self
            .table
            .backend
            .get_entity(&self.table.name, &pk, &key, &options)
            .await
        {
            Ok(row) => Ok(Some((row, key))),
            Err(Error::EntityNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl<T, V, Q> IndexReader<T, V, Unique, Q>
where
    T: TableEntity,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// [`get`](IndexReader::get) of the unique index row at `keys` (the
    /// encoded PartitionKey, and the RowKey).
    pub(super) async fn get_at(&self, keys: (String, String)) -> Result<Option<Q>> {
        let Some((row, _)) = self.unique_row(keys, GetOptions::default()).await? else {
            return Ok(None);
        };
        let served = self.served_by_index_rows();
        (self.table)
            .read_indexed::<Q>(self.def, self.position, served, row, None)
            .await
    }

    /// [`get_loaded`](IndexReader::get_loaded) of the unique index row at
    /// `keys`.
    pub(super) async fn loaded_at(&self, keys: (String, String)) -> Result<Option<Loaded<T>>> {
        let pointer = GetOptions::default().select([index::ROW_PROPERTY]);
        let Some((row, key)) = self.unique_row(keys, pointer).await? else {
            return Ok(None);
        };
        let rk = index::pointed_row(self.def, &row)?;
        let Some(loaded) = self.table.read_loaded(&row.partition_key, &rk).await? else {
            return Ok(None);
        };
        // A writer may have moved the value since the index row was read.
        let held = self.table.index_key_of(&loaded, self.position, &rk).await?;
        Ok((held == key).then_some(loaded))
    }
}

impl<T: TableEntity, V, U, Q> Clone for IndexReader<T, V, U, Q> {
    fn clone(&self) -> Self {
        IndexReader {
            table: self.table.clone(),
            def: self.def,
            position: self.position,
            remote: self.remote,
            _marker: PhantomData,
        }
    }
}

/// One page of at most N entities read through an index, and the cursor
/// after its last index row: [`IndexReader::find_page`],
/// [`prefix_page`](IndexReader::prefix_page), [`range_page`](IndexReader::range_page).
#[derive(Debug)]
pub struct IndexPage<Q> {
    /// The entities, in index order.
    pub items: Vec<Q>,
    /// Where the next page starts; `None` when no index row follows.
    pub next: Option<Cursor>,
}

impl<T, V, U, Q> IndexReader<T, V, U, Q>
where
    T: TableEntity,
    V: KeyTuple,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// [`find`](IndexReader::find) a page at a time: at most `n` entities
    /// (up to 1,000), after `after` (the `next` of the page before). A page
    /// may hold fewer than `n` entities and still have a `next`, when an
    /// entity left the value between the reads of its index row and of
    /// itself. Not for `list` indexes (their rows hold many entities each):
    /// stream those with `find`.
    pub fn find_page(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
        n: usize,
        after: Option<&Cursor>,
    ) -> Call<'_, IndexPage<Q>> {
        let pk = schema::encode_partition_key::<T>(&pk);
        let bounds = self.value_bounds(value);
        let after = after.cloned();
        Box::pin(async move { self.page(pk?, bounds, n, after.as_ref()).await })
    }

    /// [`prefix`](IndexReader::prefix) a page at a time (see
    /// [`find_page`](IndexReader::find_page)).
    pub fn prefix_page<P>(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        prefix: P,
        n: usize,
        after: Option<&Cursor>,
    ) -> Call<'_, IndexPage<Q>>
    where
        V: KeyPrefix<P>,
    {
        let pk = schema::encode_partition_key::<T>(&pk);
        let bounds = self.prefix_bounds(prefix);
        let after = after.cloned();
        Box::pin(async move { self.page(pk?, bounds, n, after.as_ref()).await })
    }

    /// [`range`](IndexReader::range) a page at a time (see
    /// [`find_page`](IndexReader::find_page)).
    pub fn range_page(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        from: impl KeyArg<V>,
        to: impl KeyArg<V>,
        n: usize,
        after: Option<&Cursor>,
    ) -> Call<'_, IndexPage<Q>> {
        let pk = schema::encode_partition_key::<T>(&pk);
        let bounds = self.range_bounds(from, to);
        let after = after.cloned();
        Box::pin(async move { self.page(pk?, bounds, n, after.as_ref()).await })
    }
}

impl<T, V, Q> IndexReader<T, V, Unique, Q>
where
    T: TableEntity,
    V: KeyTuple,
    Q: TableEntity<PartitionKey = T::PartitionKey, RowKey = T::RowKey>,
{
    /// The entity whose value is `value`, or `None`: one point read when
    /// the index row holds every field `Q` needs, two otherwise.
    pub fn get(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> Call<'_, Option<Q>> {
        let keys = self.unique_keys(&pk, value);
        Box::pin(async move { self.get_at(keys?).await })
    }

    /// The entity whose value is `value`, read from its own row with the
    /// ETag that guards a write through it: two point reads.
    pub fn get_loaded(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> Call<'_, Option<Loaded<T>>> {
        let keys = self.unique_keys(&pk, value);
        Box::pin(async move { self.loaded_at(keys?).await })
    }

    /// The encoded PartitionKey of `pk` and the unique index row's RowKey
    /// of `value`.
    fn unique_keys(
        &self,
        pk: &impl KeyArg<T::PartitionKey>,
        value: impl KeyArg<V>,
    ) -> Result<(String, String)> {
        let pk = schema::encode_partition_key::<T>(pk)?;
        let mut key = String::new();
        value.write_laid_out(&self.def.layout, &mut key);
        Ok((pk, key))
    }
}

impl<T: TableEntity> Table<T> {
    /// Reads an index row as `Q`: from the row itself when it holds every
    /// field (`served`), else from the entity it names, which must still
    /// hold the row's value; `None` when it does not (a write moved it
    /// between the two reads).
    pub(super) async fn read_indexed<Q: TableEntity>(
        &self,
        def: &'static IndexDef,
        position: usize,
        served: bool,
        row: Entity,
        remote: Option<&'static RemoteIndexDef>,
    ) -> Result<Option<Q>> {
        // The entity's partition: the row's own, or the one it was kept
        // away from.
        let pk = match remote {
            None => row.partition_key.clone(),
            Some(remote) => match remote.source_partition(&row.partition_key) {
                Some(pk) => pk.to_owned(),
                None => return Ok(None),
            },
        };
        if served {
            let mut entity = index::as_entity_row::<T>(def, row)?;
            entity.partition_key = pk;
            self.restore_blobs(&mut entity).await?;
            // Sealed values are copied as they are, with the envelope:
            // under the entity's keys again, they open.
            self.open(&mut entity, false).await?;
            return schema::from_entity_owned(entity).map(Some);
        }
        let rk = index::pointed_row(def, &row)?;
        if let Some(read) = self.indexed_by_reference::<Q>(&pk, &rk).await {
            // Read where the store holds it, no entity made between.
            let Some((value, projected)) = read? else {
                return Ok(None);
            };
            let key = match remote {
                None => self.index_key_of(&value, position, &rk).await?,
                Some(_) => schema::remote_key(&value, position, &rk)?,
            };
            if key != row.row_key {
                return Ok(None);
            }
            if projected.is_some() {
                return Ok(projected);
            }
            // `Q` is `T` (`indexed_by_reference` read no projection only
            // then), so the cast always holds; it moves the value, with no
            // allocation.
            let mut value = Some(value);
            let value = (&mut value as &mut dyn std::any::Any).downcast_mut::<Option<Q>>();
            return Ok(value.and_then(Option::take));
        }
        let Some(entity) = self.read_row(&pk, &rk).await? else {
            return Ok(None);
        };
        if self.has_expired(&entity.properties) {
            return Ok(None);
        }
        let value: T = schema::from_entity(&entity)?;
        let key = match remote {
            None => self.index_key_of(&value, position, &rk).await?,
            Some(_) => schema::remote_key(&value, position, &rk)?,
        };
        if key != row.row_key {
            return Ok(None);
        }
        schema::from_entity_owned(entity).map(Some)
    }

    /// The live entity at `(pk, rk)` for an index read, read where the
    /// backend holds it ([`Table::get`]'s way): as `T`, and for a
    /// projection `Q` as `Q` too; `None` when it is read through an entity
    /// instead (a type or backend that does not read so).
    async fn indexed_by_reference<Q: TableEntity>(
        &self,
        pk: &str,
        rk: &str,
    ) -> Option<Result<Option<(T, Option<Q>)>>> {
        if std::any::TypeId::of::<Q>() != std::any::TypeId::of::<T>() {
            let read = self.get_projected_by_reference::<Q>(pk, rk).await?;
            return Some(read.map(|both| both.map(|(value, part)| (value, Some(part)))));
        }
        let read = self.get_by_reference(pk, rk).await?;
        Some(read.map(|loaded| loaded.map(|loaded| (Loaded::into_inner(loaded), None))))
    }
}
