//! The row layer under [`Table`]: how one entity becomes the requests that
//! read and write it — one row, a wide entity's parts in one transaction,
//! and the protocol around them for values kept outside the row, which a
//! descriptor part provides ([`ExternalValues`](crate::schema::ExternalValues):
//! blob offload).

use std::sync::Arc;

use super::Table;
use crate::backend::{BatchOperation, UpdateMode};
use crate::blob::BlobTarget;
use crate::entity::{ETag, IfMatch};
use crate::error::{Error, Result};
use crate::schema::TableEntity;

/// Stands in for a missing blob store: every call is refused, so writing a
/// value that needs offloading without a store is a clear error.
#[derive(Debug)]
struct NoBlobStore;

#[async_trait::async_trait]
impl crate::blob::BlobStore for NoBlobStore {
    async fn create_container(&self, _: &str) -> Result<()> {
        Err(no_store())
    }
    async fn delete_container(&self, _: &str) -> Result<()> {
        Err(no_store())
    }
    async fn put_blob(
        &self,
        _: &str,
        _: &str,
        _: Vec<u8>,
        _: &crate::blob::PutCondition,
    ) -> Result<crate::blob::BlobProperties> {
        Err(no_store())
    }
    async fn get_blob(&self, _: &str, _: &str) -> Result<crate::blob::Blob> {
        Err(no_store())
    }
    async fn delete_blob(&self, _: &str, _: &str, _: Option<&ETag>) -> Result<()> {
        Err(no_store())
    }
    async fn list_blobs(
        &self,
        _: &str,
        _: &crate::blob::ListBlobsOptions,
    ) -> Result<crate::blob::BlobPage> {
        Err(no_store())
    }
}

fn no_store() -> Error {
    Error::NotSupported {
        operation: "offloading a value without a blob store (see Table::with_blob_store)",
    }
}

static NO_BLOBS: std::sync::OnceLock<BlobTarget> = std::sync::OnceLock::new();

/// What the caller knows of an entity's index rows, so that a write need
/// not read or decode to find them.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::table) struct IndexHint<'a> {
    /// The RowKeys of the index rows of the version the write's ETag names.
    pub(in crate::table) old: Option<&'a [String]>,
    /// The RowKeys of the index rows of the value written.
    pub(in crate::table) new: Option<&'a [String]>,
}

/// One write of one entity's row, as the table turns it into requests.
#[derive(Clone)]
pub(in crate::table) enum RowWrite {
    Insert,
    Update(UpdateMode, IfMatch),
    Upsert(UpdateMode),
    Delete(IfMatch),
}

impl RowWrite {
    /// Whether the write merges into the stored row.
    pub(in crate::table) fn is_merge(&self) -> bool {
        matches!(
            self,
            RowWrite::Update(UpdateMode::Merge, _) | RowWrite::Upsert(UpdateMode::Merge)
        )
    }

    /// What the write is called: the operation it is observed as, and the
    /// change it records (`insert`, `replace`, `merge`, `upsert`,
    /// `upsert_merge`, `delete`).
    pub(in crate::table) fn name(&self) -> &'static str {
        match self {
            RowWrite::Insert => "insert",
            RowWrite::Update(UpdateMode::Replace, _) => "replace",
            RowWrite::Update(UpdateMode::Merge, _) => "merge",
            RowWrite::Upsert(UpdateMode::Replace) => "upsert",
            RowWrite::Upsert(UpdateMode::Merge) => "upsert_merge",
            RowWrite::Delete(_) => "delete",
        }
    }

    /// The operation that makes this write of `entity` (of its keys alone,
    /// for a delete) as it is, with no other row.
    pub(in crate::table) fn operation(&self, entity: crate::entity::Entity) -> BatchOperation {
        match self {
            RowWrite::Insert => BatchOperation::Insert(entity),
            RowWrite::Update(mode, if_match) => BatchOperation::Update {
                entity,
                mode: *mode,
                if_match: if_match.clone(),
            },
            RowWrite::Upsert(mode) => BatchOperation::Upsert {
                entity,
                mode: *mode,
            },
            RowWrite::Delete(if_match) => BatchOperation::Delete {
                partition_key: entity.partition_key,
                row_key: entity.row_key,
                if_match: if_match.clone(),
            },
        }
    }
}

impl<T: TableEntity> Table<T> {
    /// Refuses writes through a type that may not write (see
    /// [`TableEntity::DESCRIPTOR.writable()`]).
    pub(in crate::table) fn refuse_unwritable() -> Result<()> {
        if T::DESCRIPTOR.writable() {
            return Ok(());
        }
        Err(Error::NotSupported {
            operation: "writes through a projection of an entity with indexes or encrypted fields (write the entity itself, so its index rows and sealed values change with it)",
        })
    }

    /// Sends `row` as `write` says: through the blob protocol when the type
    /// keeps values outside its rows, else as one request, or as a planned
    /// transaction when the type needs rows beside its own (parts, index
    /// rows, outbox records, a change feed). The row is the caller's, kept
    /// to send again or to settle a lost answer with: borrowed, not copied,
    /// unless the blob protocol must rewrite it.
    pub(in crate::table) async fn send_row(
        &self,
        row: &crate::entity::Entity,
        write: RowWrite,
        hint: IndexHint<'_>,
    ) -> Result<ETag> {
        if crate::schema::expiry_property::<T>().is_some() && !matches!(write, RowWrite::Delete(_))
        {
            // The expiry index row first, as a blob before the row that
            // names it: a stored entity always has one.
            Box::pin(self.index_expiry(row)).await?;
        }
        if let Some(external) = T::DESCRIPTOR.external_values() {
            // Boxed: the blob protocol's future is large, and a write
            // without blobs should not carry its room.
            return Box::pin(self.write_offloaded(external, row.clone(), write, hint)).await;
        }
        crate::telemetry::current_keys(&row.partition_key, &row.row_key);
        Self::refuse_unwritable()?;
        let needs = T::DESCRIPTOR.write_needs();
        if needs.planned || needs.follow_up {
            return self.write_planned(row, write, hint).await;
        }
        use crate::backend::EntityWrite;
        let write = match &write {
            RowWrite::Insert => EntityWrite::Insert(row),
            RowWrite::Update(mode, if_match) => EntityWrite::Update(row, *mode, if_match),
            RowWrite::Upsert(mode) => EntityWrite::Upsert(row, *mode),
            RowWrite::Delete(if_match) => {
                EntityWrite::Delete(&row.partition_key, &row.row_key, if_match)
            }
        };
        crate::exec::write_one(&*self.backend, &self.name, write).await
    }

    /// Writes a row of a type that keeps values outside its rows: the new
    /// values go out first; the row is then planned from the row as
    /// stored, whose ETag guards the write (a lost race plans again), and
    /// the values that row referred to are discarded once it commits (see
    /// `plan`).
    async fn write_offloaded(
        &self,
        external: &dyn crate::schema::ExternalValues,
        mut row: crate::entity::Entity,
        write: RowWrite,
        hint: IndexHint<'_>,
    ) -> Result<ETag> {
        Self::refuse_unwritable()?;
        // Out once: the values are new and unreferenced until a row names them.
        let written = match write {
            RowWrite::Delete(_) => Vec::new(),
            _ => {
                let target = self.blob_target_for(&row)?;
                external
                    .move_out(target, &self.name, T::DESCRIPTOR.kind, &mut row)
                    .await?
            }
        };
        crate::telemetry::current_keys(&row.partition_key, &row.row_key);
        // The index rows of the version replaced are read with it.
        let hint = IndexHint {
            old: None,
            new: hint.new,
        };
        let result = self.write_planned(&row, write, hint).await;
        match &result {
            // A refused write leaves its new values unreferenced: discard
            // them. After a lost response the row may have been written all
            // the same, and after a transient failure the caller may try
            // again: keep them, and let the sweep remove them if no row
            // refers to them.
            Err(e) if !e.is_transient() && !e.is_outcome_unknown() => {
                if let Some(target) = &self.blobs {
                    external.discard(target, &written).await;
                }
            }
            _ => {}
        }
        result
    }

    /// The blob store, when the row has a value to offload (a table without a
    /// store can still write small values of `offload` fields).
    pub(crate) fn blob_target_for(&self, row: &crate::entity::Entity) -> Result<&BlobTarget> {
        match &self.blobs {
            Some(target) => Ok(target),
            None if T::DESCRIPTOR
                .external_values()
                .is_some_and(|external| external.needs_store(row)) =>
            {
                self.blob_target()
            }
            None => Ok(NO_BLOBS.get_or_init(|| BlobTarget::new(Arc::new(NoBlobStore), "none"))),
        }
    }
}
