//! The typed read path's own work: whether a row lies under an entity's
//! keys, a row read as a value (`load`, which refuses a newer version of the
//! type), and the stream of a query's pages. The public read methods (`get`,
//! `exists`, `read_partition`, `read_collection`) are declared in `mod.rs`
//! beside `Table` itself, so that the compiler's messages name them
//! `Table::get`; rows are read in `stored.rs`, queries built in `query.rs`.

use std::sync::Arc;

use super::{
    Loaded, Table, has_index_rows, new_index_keys, operation, unknown, writes_of, written_version,
};
use crate::backend::TableBackend;
use crate::error::{Error, Result};
use crate::schema::{self, TableEntity};

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
    let timestamp = entity.timestamp;
    let writes = writes_of(&entity).map(str::to_owned);
    let row_key = has_index_rows::<T>().then(|| entity.row_key.clone());
    let version = stored_version(&entity);
    let previous_kind = if T::DESCRIPTOR.previous_kinds.is_empty() {
        None
    } else {
        T::DESCRIPTOR
            .layout_of(&entity.row_key)
            .and_then(|(_, kind)| kind)
    };
    let (value, leftover) = schema::from_entity_keeping(entity)?;
    let index_keys = row_key.and_then(|rk| new_index_keys(&value, &rk).map(Arc::from));
    Ok(Loaded {
        value,
        etag,
        timestamp,
        stamp_in_etag: false,
        writes,
        index_keys,
        version,
        previous_kind,
        unknown: unknown::unknown_of::<T>(leftover),
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
