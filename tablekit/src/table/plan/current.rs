//! The stored state of an entity, as a write plans from it: read with one
//! request.

use super::Current;
use crate::backend::GetOptions;
use crate::entity::ETag;
use crate::error::{Error, Result};
use crate::ext::TableBackendExt;
use crate::schema::TableEntity;
use crate::table::Table;

impl<T: TableEntity> Table<T> {
    /// The entity's stored state, read with one request: a point read, or
    /// for a wide entity one query over its parts. For a renamed kind whose
    /// entity is not found under its RowKey, the RowKeys it had under each
    /// previous kind are read in turn: the state found there is the
    /// entity's (its `entity.row_key` tells where it lies).
    pub(crate) async fn read_current(&self, pk: &str, rk: &str) -> Result<Option<Current>> {
        let found = self.read_current_at(pk, rk).await?;
        if found.is_some() || T::DESCRIPTOR.previous_kinds.is_empty() {
            return Ok(found);
        }
        for previous in T::DESCRIPTOR.previous_row_keys(rk) {
            if let Some(current) = Box::pin(self.read_current_at(pk, &previous)).await? {
                return Ok(Some(current));
            }
        }
        Ok(None)
    }

    /// [`read_current`](Table::read_current) at exactly `(pk, rk)`.
    async fn read_current_at(&self, pk: &str, rk: &str) -> Result<Option<Current>> {
        if let Some(rule) = T::DESCRIPTOR.rows {
            let query = crate::backend::Query::new().filter(rule.rows_filter(pk, rk));
            let rows = self.backend.query_all(&self.name, query).await?;
            return Ok(rule.join(rk, rows)?.and_then(|(entity, parts)| {
                let etag = entity.etag.clone()?;
                Some(Current {
                    entity,
                    etag,
                    parts,
                })
            }));
        }
        match self
            .backend
            .get_entity(&self.name, pk, rk, &GetOptions::default())
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
}
