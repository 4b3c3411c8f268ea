//! The crate's own conveniences over any [`TableBackend`] (the public ones
//! are [`TableBackendExt`](crate::TableBackendExt)'s).

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
        _ => backend.submit_transaction(table, operations).await,
    }
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
