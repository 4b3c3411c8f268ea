//! Conveniences over any [`TableBackend`], built from its one-request methods.

use futures::FutureExt as _;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use crate::backend::{BatchOperation, GetOptions, Query, TableBackend};
use crate::entity::{ETag, Entity};
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
    /// ([`QueryOrder::Unspecified`](crate::QueryOrder::Unspecified), Cosmos DB
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

/// Sends `operations` as one transaction, or one alone as its own request;
/// a failure is [`BatchFailed`](Error::BatchFailed) either way.
pub(crate) async fn send_operations(
    backend: &dyn TableBackend,
    table: &str,
    operations: &[BatchOperation],
) -> Result<Vec<Option<ETag>>> {
    match operations {
        [one] => write_one(backend, table, one.into())
            .await
            .map(|etag| vec![Some(etag)])
            .map_err(|e| e.in_batch(0)),
        _ => backend.submit_transaction(table, operations).await,
    }
}

/// Sends one write as its own request: the one place a single-row write
/// fans out to the contract's four methods (the backends fold them back
/// into [`Write`](crate::backend::sorted::Write)).
pub(crate) async fn write_one(
    backend: &dyn TableBackend,
    name: &str,
    write: crate::backend::sorted::Write<'_>,
) -> Result<ETag> {
    use crate::backend::sorted::Write;
    match write {
        Write::Insert(entity) => backend.insert_entity(name, entity).await,
        Write::Update(entity, mode, if_match) => {
            backend.update_entity(name, entity, mode, if_match).await
        }
        Write::Upsert(entity, mode) => backend.upsert_entity(name, entity, mode).await,
        Write::Delete(partition_key, row_key, if_match) => backend
            .delete_entity(name, partition_key, row_key, if_match)
            .await
            .map(|()| ETag::new("")),
    }
}

/// Refuses a transaction of more operations than the store takes.
pub(crate) fn too_many_operations(count: usize) -> crate::error::Error {
    crate::error::InvalidInput::BatchTooManyOperations {
        count,
        max: crate::validate::limits::MAX_BATCH_OPERATIONS,
    }
    .into()
}
