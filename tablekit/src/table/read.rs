//! The typed read path's own work: whether a row lies under an entity's
//! keys, a row read as a value (`load`, which refuses a newer version of the
//! type), and the stream of a query's pages. The public read methods (`get`,
//! `exists`, `read_partition`, `read_collection`) are declared in `mod.rs`
//! beside `Table` itself, so that the compiler's messages name them
//! `Table::get`; rows are read in `stored.rs`, queries built in `query.rs`.

use std::sync::Arc;

use super::loaded::IndexKeys;
use super::{Loaded, Table, has_index_rows, operation, unknown, written_version};
use crate::backend::{ContinuationToken, RowRef, RowVisitor, TableBackend};
use crate::datetime::DateTime;
use crate::entity::{ETag, Properties};
use crate::error::{Error, Result};
use crate::props::WRITES_PROPERTY;
use crate::schema::{self, TableEntity};
use crate::value::Value;

impl<T: TableEntity> Table<T> {
    /// Whether a row lies at `(pk, rk)`, or, for a renamed kind, at the
    /// RowKey the entity had under a previous kind: one point read each,
    /// asking for the keys only.
    pub(super) async fn row_under_any_name(&self, pk: &str, rk: &str) -> Result<bool> {
        if self.row_at(pk, rk).await? {
            return Ok(true);
        }
        for previous in T::DESCRIPTOR.previous_row_keys(rk) {
            if self.row_at(pk, &previous).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The entity at `(pk, rk)` (encoded keys), as [`get`](Table::get)
    /// reads it: by reference where the type and the backend allow
    /// ([`get_by_reference`](Table::get_by_reference)), else from its row;
    /// `None` when there is none or it has expired.
    pub(crate) async fn read_loaded(&self, pk: &str, rk: &str) -> Result<Option<Loaded<T>>> {
        if let Some(read) = self.get_by_reference(pk, rk).await {
            return read;
        }
        let row = self.read_row(pk, rk).await?;
        row.filter(|row| !self.has_expired(&row.properties))
            .map(load)
            .transpose()
    }

    /// The entity at `(pk, rk)` read where the backend holds it
    /// ([`TableBackend::read_row`]), with no `Entity` made: `None` when the
    /// type or the backend does not read so (a wide entity, values kept
    /// outside the row or sealed, a renamed kind's RowKeys, a backend that
    /// passes no rows by reference).
    pub(crate) async fn get_by_reference(
        &self,
        pk: &str,
        rk: &str,
    ) -> Option<Result<Option<Loaded<T>>>> {
        if !self.reads_by_reference::<T>() {
            return None;
        }
        Some(self.read_live_row(pk, rk, load_stored::<T>).await)
    }

    /// [`get_by_reference`](Table::get_by_reference) for an index read of
    /// a projection `Q`: the live entity at `(pk, rk)` as `T` (from a copy
    /// of the row's values, for the index's check of its value) and as `Q`
    /// (taking them), read where the backend holds it, with no `Entity`
    /// made; `None` when either type or the backend does not read so.
    pub(crate) async fn get_projected_by_reference<Q: TableEntity>(
        &self,
        pk: &str,
        rk: &str,
    ) -> Option<Result<Option<(T, Q)>>> {
        if !self.reads_by_reference::<T>() || !self.reads_by_reference::<Q>() {
            return None;
        }
        let read_both = |row: RowRef<'_>| {
            let mut values = row.properties.clone();
            let whole = schema::read_entity::<T, _>(row.partition_key, row.row_key, &mut values)?;
            Ok((whole, schema::from_row::<Q>(row)?))
        };
        Some(self.read_live_row(pk, rk, read_both).await)
    }

    /// The row at `(pk, rk)` passed by reference to `take`, unless it has
    /// expired ([`TableBackend::read_row`], as one `read` operation): what
    /// `take` made of it, `None` when no live row is there. An error of
    /// `take` is returned once the read is over.
    async fn read_live_row<X: Send>(
        &self,
        pk: &str,
        rk: &str,
        mut take: impl FnMut(RowRef<'_>) -> Result<X> + Send,
    ) -> Result<Option<X>> {
        let mut taken = None;
        let mut read = |row: RowRef<'_>| {
            if !self.has_expired(row.properties) {
                taken = Some(take(row));
            }
            Ok(())
        };
        let keys = Some((pk, rk));
        operation(&*self.backend, "read", &self.name, T::DESCRIPTOR.kind, keys)
            .run(self.backend.read_row(&self.name, pk, rk, &mut read))
            .await?;
        taken.transpose()
    }

    /// Whether reads of `U` from this table's backend can take its rows
    /// where the backend holds them ([`TableBackend::read_row`]): not for a
    /// wide entity, values kept outside the row or sealed, a renamed kind's
    /// RowKeys, or a backend that passes no rows by reference.
    fn reads_by_reference<U: TableEntity>(&self) -> bool {
        let descriptor = &U::DESCRIPTOR;
        descriptor.rows.is_none()
            && descriptor.external_values().is_none()
            && schema::encrypted::<U>().is_none()
            && descriptor.previous_kinds.is_empty()
            && self.backend.reads_rows(&crate::backend::Query::new())
    }

    /// Whether a row lies at exactly `(pk, rk)`, read with its keys only.
    async fn row_at(&self, pk: &str, rk: &str) -> Result<bool> {
        let keys_only = crate::backend::GetOptions::default().select(["PartitionKey", "RowKey"]);
        match self
            .backend
            .get_entity(&self.name, pk, rk, &keys_only)
            .await
        {
            Ok(_) => Ok(true),
            Err(Error::EntityNotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Every entity of a query as a stream that owns what it needs; each page
/// is fetched as one operation `op` ([`operation`]).
pub(crate) fn owned_query_stream(
    backend: Arc<dyn TableBackend>,
    name: String,
    query: crate::backend::Query,
    op: &'static str,
    kind: Option<&'static str>,
) -> futures::stream::BoxStream<'static, Result<crate::entity::Entity>> {
    use futures::stream::{StreamExt, TryStreamExt};
    let pages = futures::stream::try_unfold(
        (backend, name, query, false),
        move |(backend, name, mut query, done)| async move {
            if done {
                return Ok::<_, Error>(None);
            }
            let mut page = read_page(&*backend, &name, query.clone(), op, kind).await?;
            let done = page.continuation.is_none();
            query.continuation = page.continuation.take();
            Ok(Some((
                futures::stream::iter(page.into_rows()),
                (backend, name, query, done),
            )))
        },
    );
    pages.try_flatten().boxed()
}

/// Every row of a query read as `P`, each page fetched as one operation
/// `op`: borrowed from the backend and read where it lies, when the backend passes
/// the query ([`TableBackend::read_rows`]), else read from its entities.
pub(crate) fn typed_query_stream<P: TableEntity>(
    backend: Arc<dyn TableBackend>,
    name: String,
    query: crate::backend::Query,
    op: &'static str,
    kind: Option<&'static str>,
) -> futures::stream::BoxStream<'static, Result<Loaded<P>>> {
    let reads = RowReads {
        borrowed: |row: RowRef<'_>| Some(load_stored::<P>(row)),
        owned: |entity| Some(load::<P>(entity)),
    };
    rows_stream(backend, name, query, (op, kind), reads)
}

/// How a stream of a query's rows reads each row, passed by reference
/// (`borrowed`) or as an entity (`owned`): the item it gives, or `None`
/// to leave the row out.
pub(crate) struct RowReads<B, O> {
    pub(crate) borrowed: B,
    pub(crate) owned: O,
}

/// Every row of a query read as `reads` says, each page fetched as one
/// operation (`op`, of `kind`): borrowed from the backend and read where
/// it lies, when the backend passes the query
/// ([`TableBackend::read_rows`]), else read from its entities.
pub(crate) fn rows_stream<X, B, O>(
    backend: Arc<dyn TableBackend>,
    name: String,
    query: crate::backend::Query,
    (op, kind): (&'static str, Option<&'static str>),
    reads: RowReads<B, O>,
) -> futures::stream::BoxStream<'static, Result<X>>
where
    X: Send + 'static,
    B: Fn(RowRef<'_>) -> Option<Result<X>> + Send + Sync + 'static,
    O: Fn(crate::entity::Entity) -> Option<Result<X>> + Send + Sync + 'static,
{
    use futures::stream::{StreamExt, TryStreamExt};
    let RowReads { borrowed, owned } = reads;
    let owned = Arc::new(owned);
    if crate::order::rows_query(&*backend, &query).is_none() {
        return owned_query_stream(backend, name, query, op, kind)
            .filter_map(move |entity| std::future::ready(read_owned(entity, &*owned)))
            .boxed();
    }
    let borrowed = Arc::new(borrowed);
    let pages = futures::stream::try_unfold(
        (backend, name, query, false),
        move |(backend, name, mut query, done)| {
            let (borrowed, owned) = (Arc::clone(&borrowed), Arc::clone(&owned));
            async move {
                if done {
                    return Ok::<_, Error>(None);
                }
                // Room for the whole page: the page is handed out and dropped,
                // never kept.
                let mut rows = Vec::with_capacity(
                    query.top.unwrap_or(crate::validate::limits::MAX_PAGE_SIZE) as usize,
                );
                let mut read = |row: RowRef<'_>| {
                    rows.extend(borrowed(row));
                    Ok(())
                };
                let next = match read_rows_page(&*backend, &name, &query, op, kind, &mut read).await
                {
                    Some(next) => next?,
                    None => {
                        // Not passed by reference after all (the backend decides per page):
                        // this page is read from its entities.
                        let mut page = read_page(&*backend, &name, query.clone(), op, kind).await?;
                        let next = page.continuation.take();
                        rows.extend(page.into_rows().filter_map(|row| read_owned(row, &*owned)));
                        next
                    }
                };
                let done = next.is_none();
                query.continuation = next;
                Ok(Some((
                    futures::stream::iter(rows),
                    (backend, name, query, done),
                )))
            }
        },
    );
    pages.try_flatten().boxed()
}

/// A row read as an entity, read as `owned` says ([`RowReads`]); an error
/// reading it is the item.
fn read_owned<X>(
    row: Result<crate::entity::Entity>,
    owned: &impl Fn(crate::entity::Entity) -> Option<Result<X>>,
) -> Option<Result<X>> {
    match row {
        Ok(entity) => owned(entity),
        Err(e) => Some(Err(e)),
    }
}

/// One page of `query` passed row by row to `read` (see
/// [`TableBackend::read_rows`]), fetched as one operation `op`
/// ([`operation`]): its continuation token. `None`, having read nothing,
/// when the backend does not read this query so.
pub(crate) async fn read_rows_page(
    backend: &dyn TableBackend,
    name: &str,
    query: &crate::backend::Query,
    op: &'static str,
    kind: Option<&'static str>,
    read: &mut RowVisitor<'_>,
) -> Option<Result<Option<ContinuationToken>>> {
    let (query, resuming) = crate::order::rows_query(backend, query)?;
    let rows = std::sync::atomic::AtomicUsize::new(0);
    let mut counted = |row: RowRef<'_>| {
        rows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        read(row)
    };
    let page = async {
        if resuming {
            crate::order::between_pages().await;
        }
        backend.read_rows(name, &query, &mut counted).await
    };
    Some(
        operation(backend, op, name, kind, None)
            .run_counted(page, |_| {
                Some(rows.load(std::sync::atomic::Ordering::Relaxed))
            })
            .await,
    )
}

/// One page of a query, in key order even on a store that does not sort
/// (see [`ordered_page`](crate::order::ordered_page)), fetched as one
/// operation `op` ([`operation`]).
pub(crate) async fn read_page(
    backend: &dyn TableBackend,
    name: &str,
    query: crate::backend::Query,
    op: &'static str,
    kind: Option<&'static str>,
) -> Result<crate::backend::QueryPage> {
    operation(backend, op, name, kind, None)
        .run_counted(
            crate::order::ordered_page(backend, name, query, true),
            |page| Some(page.entities.len()),
        )
        .await
}

/// Reads a row as a loaded value, moving its values into the result.
pub(crate) fn load<T: TableEntity>(mut entity: crate::entity::Entity) -> Result<Loaded<T>> {
    let etag = entity.etag.take().ok_or_else(|| Error::Decode {
        message: "the backend returned an entity without an ETag".into(),
    })?;
    let mut properties = std::mem::take(&mut entity.properties);
    load_parts(
        &entity.partition_key,
        &entity.row_key,
        etag,
        entity.timestamp,
        &mut properties,
    )
}

/// Reads a row a backend passes by reference ([`TableBackend::read_rows`]) as a loaded
/// value, moving its values into the result.
pub(crate) fn load_stored<T: TableEntity>(row: RowRef<'_>) -> Result<Loaded<T>> {
    load_parts(
        row.partition_key,
        row.row_key,
        row.etag.clone(),
        Some(row.timestamp),
        row.properties,
    )
}

/// [`load`] and [`load_stored`]: the value read from `properties`, taking
/// out what it reads and what the value keeps of the rest.
fn load_parts<T: TableEntity>(
    partition_key: &str,
    row_key: &str,
    etag: ETag,
    timestamp: Option<DateTime>,
    properties: &mut Properties,
) -> Result<Loaded<T>> {
    // Taken, not copied: the history is bookkeeping, which the value's
    // unknown properties leave out anyway.
    let writes = match properties.remove(WRITES_PROPERTY) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    let version = schema::stored_version(properties).and_then(|v| u32::try_from(v).ok());
    let previous_kind = if T::DESCRIPTOR.previous_kinds.is_empty() {
        None
    } else {
        T::DESCRIPTOR.layout_of(row_key).and_then(|(_, kind)| kind)
    };
    let value = schema::read_entity::<T, _>(partition_key, row_key, properties)?;
    // Computed only if a write through the value needs them. Those of a
    // type with encrypted fields were in the envelope, which opening the
    // row took out: a write reads them again.
    let index_keys = if has_index_rows::<T>() && schema::encrypted::<T>().is_none() {
        IndexKeys::AsRead {
            row_key: row_key.to_owned(),
            keys: |value, row_key| schema::local_keys(value, row_key).ok(),
        }
    } else {
        IndexKeys::Unknown
    };
    Ok(Loaded {
        value,
        etag,
        timestamp,
        stamp_in_etag: false,
        writes,
        index_keys,
        version,
        previous_kind,
        unknown: unknown::unknown_taken::<T>(properties),
        sealed_under: None,
        keeps_last_write: false,
    })
}

impl<T: TableEntity> Table<T> {
    /// Refuses a write of `T` over `stored` when a newer version of the
    /// type wrote it ([`Error::NewerVersion`]).
    pub(crate) fn refuse_newer(&self, stored: &crate::entity::Entity) -> Result<()> {
        let Some(writing) = written_version::<T>() else {
            return Ok(());
        };
        let Some(stored_version) = schema::stored_version(&stored.properties) else {
            return Ok(());
        };
        if stored_version > i64::from(writing) {
            return Err(Error::NewerVersion {
                table: self.name.to_string(),
                partition_key: stored.partition_key.clone(),
                row_key: stored.row_key.clone(),
                stored: stored_version,
                writing,
            });
        }
        Ok(())
    }
}

/// The schema version a row records (`_Version`), if it records one.
pub(super) fn stored_version(entity: &crate::entity::Entity) -> Option<u32> {
    schema::stored_version(&entity.properties).and_then(|v| u32::try_from(v).ok())
}
