//! Where the typed layer and the patterns send writes to the store: the one
//! module of this crate that calls a backend's writes (`write_entity`,
//! `submit_transaction`). Everything above it (typed writes, planned
//! transactions, index repairs, the change feed, the upkeep's records,
//! copies) decides what to write and hands it here; a test holds that no
//! other file calls the store's writes.

use std::future::Future;

use crate::backend::{BatchOperation, TableBackend};
use crate::entity::ETag;
use crate::error::Result;

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
        _ => submit_transaction(backend, table, operations).await,
    }
}

/// Sends `operations` as one transaction, however many they are (a
/// transaction of one fails as the store says, not as a single write).
///
/// Not an `async fn`: it is the backend's future itself, no frame more.
pub(crate) fn submit_transaction<'a>(
    backend: &'a dyn TableBackend,
    table: &'a str,
    operations: &'a [BatchOperation],
) -> impl Future<Output = Result<Vec<Option<ETag>>>> + Send + 'a {
    backend.submit_transaction(table, operations)
}

/// Sends one write as its own request, giving the new ETag (an empty one
/// for a delete).
pub(crate) async fn write_one(
    backend: &dyn TableBackend,
    name: &str,
    write: crate::backend::EntityWrite<'_>,
) -> Result<ETag> {
    let written = backend.write_entity(name, write).await?;
    Ok(written.unwrap_or_else(|| ETag::new("")))
}

/// Refuses a transaction of more operations than the store takes.
pub(crate) fn too_many_operations(count: usize) -> crate::error::Error {
    crate::error::InvalidInput::BatchTooManyOperations {
        count,
        max: crate::validate::limits::MAX_BATCH_OPERATIONS,
    }
    .into()
}
