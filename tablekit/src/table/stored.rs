//! The entity as it is stored, as reads and writes both see it: its state
//! read with one request ([`Current`]: the row, or a wide entity's parts
//! joined, and the ETag that guards a write over it), the row read with its
//! offloaded values, the RowKeys of a value's index rows, and the history a
//! row keeps of its writes.

use crate::backend::{GetOptions, TableBackend, TableBackendExt};
use crate::blob::BlobTarget;
use crate::entity::{ETag, Entity};
use crate::error::{Error, Result};
use crate::props::WRITES_PROPERTY;
use crate::schema::{self, TableEntity, local_slots};
use crate::table::Table;
use crate::value::Value;

/// The stored state of an entity.
pub(crate) struct Current {
    /// The logical row (a wide entity's parts joined), with its ETag.
    pub(crate) entity: Entity,
    /// The ETag that guards a write over it.
    pub(crate) etag: ETag,
    /// How many part rows a wide entity has (0 otherwise).
    pub(crate) parts: usize,
}

/// The RowKeys of the index rows of `value`, lowered to `row`, for a write
/// to plan with or a [`Loaded`](super::Loaded) to carry; `None` for a type
/// without indexes (or keys that do not encode, which the write reports
/// when it plans). A type with encrypted fields has them from its sealed
/// row, where they were computed with its keys.
pub(crate) fn new_index_keys<T: TableEntity>(value: &T, row: &Entity) -> Option<Vec<String>> {
    if local_slots::<T>() == 0 {
        return None;
    }
    if schema::encrypted::<T>().is_some() {
        return schema::stored_local_keys::<T>(row).ok();
    }
    schema::local_keys(value, &row.row_key).ok()
}

/// Whether `T` keeps index rows beside its entities (so a [`Loaded`](super::Loaded)
/// carries their RowKeys).
pub(crate) fn has_index_rows<T: TableEntity>() -> bool {
    local_slots::<T>() != 0
}

/// The history text of a row, if it has one.
pub(crate) fn writes_of(entity: &Entity) -> Option<&str> {
    writes_in(&entity.properties)
}

/// The history text in a row's properties, if they hold one.
pub(crate) fn writes_in(properties: &crate::entity::Properties) -> Option<&str> {
    match properties.get(WRITES_PROPERTY) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    }
}

/// The stored state of the entity `(pk, rk)` of `T` in `table`, read with
/// one request: a point read, or for a wide entity one query over its
/// parts. For a renamed kind whose entity is not found under its RowKey,
/// the RowKeys it had under each previous kind are read in turn: the state
/// found there is the entity's (its `entity.row_key` tells where it lies).
/// A function of the store and the table alone, for the planner.
pub(crate) async fn current_of<T: TableEntity>(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
    rk: &str,
) -> Result<Option<Current>> {
    let found = current_at::<T>(backend, table, pk, rk).await?;
    if found.is_some() || T::DESCRIPTOR.previous_kinds.is_empty() {
        return Ok(found);
    }
    for previous in T::DESCRIPTOR.previous_row_keys(rk) {
        if let Some(current) = Box::pin(current_at::<T>(backend, table, pk, &previous)).await? {
            return Ok(Some(current));
        }
    }
    Ok(None)
}

/// [`current_of`] at exactly `(pk, rk)`.
async fn current_at<T: TableEntity>(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
    rk: &str,
) -> Result<Option<Current>> {
    if let Some(rule) = T::DESCRIPTOR.rows {
        let query = crate::backend::Query::new().filter(rule.rows_filter(pk, rk));
        let rows = backend.query_all(table, query).await?;
        return Ok(rule.join(rk, rows)?.and_then(|(entity, parts)| {
            let etag = entity.etag.clone()?;
            Some(Current {
                entity,
                etag,
                parts,
            })
        }));
    }
    match backend
        .get_entity(table, pk, rk, &GetOptions::default())
        .await
    {
        Ok(entity) => {
            let etag = entity.etag.clone().unwrap_or_else(|| ETag::new(""));
            Ok(Some(Current {
                entity,
                etag,
                parts: 0,
            }))
        }
        Err(Error::EntityNotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl<T: TableEntity> Table<T> {
    /// The entity's stored state ([`current_of`]).
    pub(crate) async fn read_current(&self, pk: &str, rk: &str) -> Result<Option<Current>> {
        current_of::<T>(self.backend.as_ref(), &self.name, pk, rk).await
    }

    /// The row with its offloaded values fetched back and its encrypted
    /// ones opened, or `None`.
    pub(crate) async fn read_row(
        &self,
        pk: &str,
        rk: &str,
    ) -> Result<Option<crate::entity::Entity>> {
        let Some(mut entity) = self.read_stored(pk, rk).await? else {
            return Ok(None);
        };
        self.restore_blobs(&mut entity).await?;
        if crate::schema::encrypted::<T>().is_some() {
            // Boxed: a type without encrypted fields does not carry it.
            Box::pin(self.open(&mut entity, true)).await?;
        }
        Ok(Some(entity))
    }

    /// Fetches the blobs a row references back into it.
    pub(crate) async fn restore_blobs(&self, entity: &mut crate::entity::Entity) -> Result<()> {
        let Some(external) = T::DESCRIPTOR.external_values() else {
            return Ok(());
        };
        if !external.refers_out(entity)? {
            return Ok(());
        }
        external.bring_back(self.blob_target()?, entity).await
    }

    /// The table's blob store, or the error that says it has none.
    pub(crate) fn blob_target(&self) -> Result<&BlobTarget> {
        self.blobs.as_ref().ok_or(Error::NotSupported {
            operation: "blob fields without a blob store (see Table::with_blob_store)",
        })
    }

    /// The stored row as it is (for a wide entity: its parts joined), or `None`.
    pub(crate) async fn read_stored(
        &self,
        pk: &str,
        rk: &str,
    ) -> Result<Option<crate::entity::Entity>> {
        let keys = Some((pk, rk));
        super::operation(&*self.backend, "read", &self.name, T::DESCRIPTOR.kind, keys)
            .run(self.read_stored_unspanned(pk, rk))
            .await
    }

    async fn read_stored_unspanned(
        &self,
        pk: &str,
        rk: &str,
    ) -> Result<Option<crate::entity::Entity>> {
        Ok(self
            .read_current(pk, rk)
            .await?
            .map(|current| current.entity))
    }
}
