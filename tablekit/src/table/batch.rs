//! Atomic batches of typed writes in one partition.

use super::{Loaded, Table};
use crate::backend::{BatchOperation, TableBackend, UpdateMode};
use crate::entity::{ETag, IfMatch};
use crate::error::Result;
use crate::schema::{self, KeyArg, TableEntity};

/// A wide entity is already written in a transaction of its own parts; it
/// cannot join another batch.
fn refuse_wide<T: TableEntity>() -> Result<()> {
    if T::WIDE {
        return Err(crate::Error::NotSupported {
            operation: "batches of wide entities (each is its own transaction)",
        });
    }
    Ok(())
}

/// An entity's index rows are planned from its stored state, which a batch
/// built ahead of its submission does not hold.
fn refuse_indexed<T: TableEntity>() -> Result<()> {
    if !T::INDEXES.is_empty() {
        return Err(crate::Error::NotSupported {
            operation: "batched writes of entities with indexes (write them through Table or the BulkWriter, each in a transaction with its index rows)",
        });
    }
    Ok(())
}

/// An entity with offloaded fields is written by the blob protocol (blob
/// first, then the row), which a batch of rows cannot follow.
fn refuse_offload<T: TableEntity>() -> Result<()> {
    if !T::BLOB_FIELDS.is_empty() {
        return Err(crate::Error::NotSupported {
            operation: "batched writes of entities with offloaded fields (write them through Table or the BulkWriter)",
        });
    }
    Ok(())
}

/// An entity group transaction of typed writes: up to 100 operations on one
/// partition, applied all or none. A failing operation is reported as
/// [`BatchFailed`](crate::Error::BatchFailed) with its index in the order the
/// operations were added.
///
/// Adding an operation only builds its row; the batch rules are checked when
/// it is [submitted](TableBatch::submit).
#[must_use = "a batch does nothing until it is submitted"]
pub struct TableBatch<T> {
    table: Table<T>,
    operations: Vec<BatchOperation>,
}

impl<T: TableEntity> TableBatch<T> {
    pub(super) fn new(table: Table<T>) -> TableBatch<T> {
        TableBatch {
            table,
            operations: Vec::new(),
        }
    }

    fn push_write(
        &mut self,
        value: &T,
        write: impl FnOnce(crate::Entity) -> BatchOperation,
    ) -> Result<&mut Self> {
        refuse_wide::<T>()?;
        refuse_offload::<T>()?;
        refuse_indexed::<T>()?;
        let entity = schema::to_entity(value)?;
        self.operations.push(write(entity));
        Ok(self)
    }

    /// Inserts a new entity.
    pub fn insert(&mut self, value: &T) -> Result<&mut Self> {
        self.push_write(value, BatchOperation::Insert)
    }

    /// Replaces an entity if it is still the version read.
    pub fn replace(&mut self, loaded: &Loaded<T>) -> Result<&mut Self> {
        let if_match = IfMatch::ETag(loaded.etag.clone());
        self.push_write(&loaded.value, |entity| BatchOperation::Update {
            entity,
            mode: UpdateMode::Replace,
            if_match,
        })
    }

    /// Merges into an entity if it is still the version read.
    pub fn merge(&mut self, loaded: &Loaded<T>) -> Result<&mut Self> {
        let if_match = IfMatch::ETag(loaded.etag.clone());
        self.push_write(&loaded.value, |entity| BatchOperation::Update {
            entity,
            mode: UpdateMode::Merge,
            if_match,
        })
    }

    /// Inserts or replaces.
    pub fn upsert(&mut self, value: &T) -> Result<&mut Self> {
        self.push_write(value, |entity| BatchOperation::Upsert {
            entity,
            mode: UpdateMode::Replace,
        })
    }

    /// Replaces the stored entity whatever its version (`If-Match: *`); the
    /// batch fails if there is none.
    pub fn replace_unconditionally(&mut self, value: &T) -> Result<&mut Self> {
        self.push_write(value, |entity| BatchOperation::Update {
            entity,
            mode: UpdateMode::Replace,
            if_match: IfMatch::Any,
        })
    }

    /// Merges into the stored entity whatever its version (`If-Match: *`);
    /// the batch fails if there is none.
    pub fn merge_unconditionally(&mut self, value: &T) -> Result<&mut Self> {
        self.push_write(value, |entity| BatchOperation::Update {
            entity,
            mode: UpdateMode::Merge,
            if_match: IfMatch::Any,
        })
    }

    /// Inserts or merges.
    pub fn upsert_merge(&mut self, value: &T) -> Result<&mut Self> {
        self.push_write(value, |entity| BatchOperation::Upsert {
            entity,
            mode: UpdateMode::Merge,
        })
    }

    /// Deletes an entity if it is still the version read.
    pub fn delete(&mut self, loaded: &Loaded<T>) -> Result<&mut Self> {
        refuse_wide::<T>()?;
        refuse_indexed::<T>()?;
        self.operations.push(BatchOperation::Delete {
            partition_key: schema::partition_key_of(&loaded.value)?,
            row_key: schema::row_key_of(&loaded.value)?,
            if_match: IfMatch::ETag(loaded.etag.clone()),
        });
        Ok(self)
    }

    /// Deletes the entity with these keys whatever its version.
    pub fn delete_unconditionally(
        &mut self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
    ) -> Result<&mut Self> {
        refuse_wide::<T>()?;
        refuse_indexed::<T>()?;
        let (partition_key, row_key) = schema::encode_keys::<T>(&pk, &rk)?;
        self.operations.push(BatchOperation::Delete {
            partition_key,
            row_key,
            if_match: IfMatch::Any,
        });
        Ok(self)
    }

    /// Adds a raw operation, for rows of other kinds in the same partition.
    pub fn push(&mut self, operation: BatchOperation) -> &mut Self {
        self.operations.push(operation);
        self
    }

    /// How many operations the batch holds.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// The operations, as they will be sent.
    pub fn operations(&self) -> &[BatchOperation] {
        &self.operations
    }

    /// Runs the batch atomically; one ETag per operation (`None` for deletes).
    pub async fn submit(self) -> Result<Vec<Option<ETag>>> {
        use tracing::Instrument as _;
        let span = super::op_span("batch", self.table.name(), T::KIND, None);
        self.table
            .backend()
            .submit_transaction(self.table.name(), &self.operations)
            .instrument(span)
            .await
    }
}
