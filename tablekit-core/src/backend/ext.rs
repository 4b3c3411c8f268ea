//! [`TableBackendExt`]: conveniences over any [`TableBackend`], built from
//! its one-request methods.

use futures::FutureExt as _;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use super::{EntityWrite, GetOptions, Query, TableBackend, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};

/// Conveniences implemented for every [`TableBackend`], `dyn` ones included.
///
/// ```
/// # async fn demo(backend: &dyn tablekit::TableBackend) -> tablekit::Result<()> {
/// use futures::TryStreamExt;
/// use tablekit::{Query, TableBackendExt, filter::Filter};
/// let query = Query::new().filter(Filter::partition_key().eq("sales"));
/// let all: Vec<_> = backend.query_stream("people", query).try_collect().await?;
/// # Ok(()) }
/// ```
pub trait TableBackendExt: TableBackend {
    /// Every entity of a query in key order (PartitionKey, then RowKey),
    /// following continuation tokens across short and empty pages. A row the
    /// store returned that cannot be read is an [`Error::UndecodableRow`]
    /// item, and the stream goes on after it.
    ///
    /// On a store that does not sort query results
    /// ([`QueryOrder::Unspecified`](super::QueryOrder::Unspecified), Cosmos DB
    /// for Table) the stream reads every page of the query before its first
    /// row, and sorts the rows: the order holds, at the cost of holding the
    /// whole result in memory.
    fn query_stream<'a>(&'a self, table: &'a str, query: Query) -> BoxStream<'a, Result<Entity>> {
        struct State {
            query: Query,
            done: bool,
        }
        let pages = stream::try_unfold(State { query, done: false }, move |mut state| async move {
            if state.done {
                return Ok::<_, Error>(None);
            }
            let mut page =
                crate::order::ordered_page(self, table, state.query.clone(), true).await?;
            state.done = page.continuation.is_none();
            state.query.continuation = page.continuation.take();
            Ok(Some((stream::iter(page.into_rows()), state)))
        });
        pages.try_flatten().boxed()
    }

    /// Inserts a new entity and returns its ETag: a
    /// [`write_entity`](TableBackend::write_entity) of
    /// [`EntityWrite::Insert`]. REST: `POST /t`.
    ///
    /// Errors: [`EntityAlreadyExists`](Error::EntityAlreadyExists),
    /// [`TableNotFound`](Error::TableNotFound), validation errors.
    fn insert_entity<'a>(
        &'a self,
        table: &'a str,
        entity: &'a Entity,
    ) -> impl Future<Output = Result<ETag>> + Send + 'a {
        written(self.write_entity(table, EntityWrite::Insert(entity)))
    }

    /// Replaces or merges an existing entity if `if_match` holds, returning
    /// the new ETag: [`EntityWrite::Update`]. REST: `PUT` (replace) or
    /// `MERGE` `/t(…)` with `If-Match`.
    ///
    /// Errors: [`EntityNotFound`](Error::EntityNotFound) (also with
    /// `IfMatch::Any`), [`PreconditionFailed`](Error::PreconditionFailed).
    fn update_entity<'a>(
        &'a self,
        table: &'a str,
        entity: &'a Entity,
        mode: UpdateMode,
        if_match: &'a IfMatch,
    ) -> impl Future<Output = Result<ETag>> + Send + 'a {
        written(self.write_entity(table, EntityWrite::Update(entity, mode, if_match)))
    }

    /// Inserts the entity, or replaces or merges it if it exists:
    /// [`EntityWrite::Upsert`]. REST: `PUT` or `MERGE` `/t(…)` without
    /// `If-Match`.
    fn upsert_entity<'a>(
        &'a self,
        table: &'a str,
        entity: &'a Entity,
        mode: UpdateMode,
    ) -> impl Future<Output = Result<ETag>> + Send + 'a {
        written(self.write_entity(table, EntityWrite::Upsert(entity, mode)))
    }

    /// Deletes an entity if `if_match` holds: [`EntityWrite::Delete`].
    /// REST: `DELETE /t(…)` with `If-Match`.
    ///
    /// Errors: [`EntityNotFound`](Error::EntityNotFound),
    /// [`PreconditionFailed`](Error::PreconditionFailed).
    fn delete_entity<'a>(
        &'a self,
        table: &'a str,
        partition_key: &'a str,
        row_key: &'a str,
        if_match: &'a IfMatch,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        self.write_entity(table, EntityWrite::Delete(partition_key, row_key, if_match))
            .map(|written| written.map(drop))
    }

    /// Every entity of a query, collected.
    fn query_all<'a>(
        &'a self,
        table: &'a str,
        query: Query,
    ) -> futures::future::BoxFuture<'a, Result<Vec<Entity>>> {
        self.query_stream(table, query).try_collect().boxed()
    }

    /// A point read that returns `None` for a missing entity.
    fn try_get_entity<'a>(
        &'a self,
        table: &'a str,
        partition_key: &'a str,
        row_key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<Entity>>> {
        async move {
            match self
                .get_entity(table, partition_key, row_key, &GetOptions::default())
                .await
            {
                Ok(entity) => Ok(Some(entity)),
                Err(Error::EntityNotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
        .boxed()
    }

    /// Creates the table unless it exists; `true` if it was created.
    fn create_table_if_not_exists<'a>(
        &'a self,
        table: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<bool>> {
        async move {
            match self.create_table(table).await {
                Ok(()) => Ok(true),
                Err(Error::TableAlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        }
        .boxed()
    }
}

impl<T: TableBackend + ?Sized> TableBackendExt for T {}

/// The ETag of a write that is not a delete: a backend that gives none
/// breaks the contract, which is reported rather than made up. (The
/// backend's future is the only one boxed.)
fn written<'a>(
    write: impl Future<Output = Result<Option<ETag>>> + Send + 'a,
) -> impl Future<Output = Result<ETag>> + Send + 'a {
    write.map(|written| {
        written?.ok_or_else(|| Error::Decode {
            message: "the backend gave no ETag for a write".into(),
        })
    })
}
