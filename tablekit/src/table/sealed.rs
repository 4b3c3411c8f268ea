//! Encrypted fields at the typed client's edge: a row sealed after it is
//! lowered from its value, and opened before it is read as one (see
//! [`encryption`](crate::encryption)).

use super::Table;
use crate::entity::Entity;
use crate::error::EncryptionError;
use crate::error::Result;
use crate::schema::encrypted;
use crate::schema::{TableEntity, local_slots, sealed_slot};

/// Whether a row read as `T` needs work of the table before it is read
/// (offloaded values fetched, encrypted ones opened): such rows take the
/// owned path, one row at a time.
pub(crate) fn finishes_reads<T: TableEntity>() -> bool {
    T::DESCRIPTOR.external_values().is_some() || encrypted::<T>().is_some()
}

impl<T: TableEntity> Table<T> {
    /// Seals the encrypted properties of `row`, lowered from `value`, under
    /// a new content key, with the RowKeys of its index rows. Nothing for a
    /// type without any.
    pub(crate) async fn seal(&self, value: &T, row: &mut Entity) -> Result<()> {
        if encrypted::<T>().is_none() {
            return Ok(());
        }
        let indexed = match self.resolver()?.writes_old_format() {
            true => Vec::new(),
            false => self.index_keys_of(value, &row.row_key).await?,
        };
        self.seal_indexed(row, indexed).await
    }

    /// [`seal`](Self::seal) of a row lowered from a value of `T` and not
    /// sealed yet (as a transaction holds it until it is submitted), its
    /// write a merge when `merge` (see [`row_of`](Self::row_of)).
    pub(crate) async fn seal_lowered(&self, row: &mut Entity, merge: bool) -> Result<()> {
        if encrypted::<T>().is_none() {
            return Ok(());
        }
        Self::refuse_part_merge(row, merge)?;
        let indexed = match self.resolver()?.writes_old_format() {
            true => Vec::new(),
            false => {
                let sealed = (0..local_slots::<T>()).any(sealed_slot::<T>);
                let hash = self.index_key_if(sealed).await?;
                let value: T = crate::schema::from_entity(row)?;
                crate::schema::hashed_keys(&value, &row.row_key, hash.as_ref())?
            }
        };
        self.seal_indexed(row, indexed).await
    }

    /// Seals `row` with the RowKeys of its index rows, `indexed`.
    async fn seal_indexed(&self, row: &mut Entity, indexed: Vec<String>) -> Result<()> {
        let Some(properties) = encrypted::<T>() else {
            return Ok(());
        };
        let keys = self.resolver()?;
        if keys.writes_old_format() {
            // Rows of the old format record no index rows.
            if local_slots::<T>() != 0 {
                return Err(crate::error::Error::NotSupported {
                    operation: "the old SDKs' format for a type with indexes",
                });
            }
            return Ok(tablekit_encrypt::seal_legacy(row, properties, keys).await?);
        }
        tablekit_encrypt::seal_indexed(row, &self.name, properties, indexed, keys).await?;
        Ok(())
    }

    fn resolver(&self) -> Result<&dyn tablekit_encrypt::KeyResolver> {
        Ok(self.keys.as_deref().ok_or_else(|| self.no_keys())?)
    }

    /// The RowKeys of `value`'s index rows in its partition (under the
    /// entity's RowKey `row_key`), the values of encrypted fields hashed
    /// with the resolver's index key.
    pub(crate) async fn index_keys_of(&self, value: &T, row_key: &str) -> Result<Vec<String>> {
        let sealed = (0..local_slots::<T>()).any(sealed_slot::<T>);
        let hash = self.index_key_if(sealed).await?;
        crate::schema::hashed_keys(value, row_key, hash.as_ref())
    }

    /// The RowKey of `value`'s row in its index `slot` ([`index_keys_of`](Self::index_keys_of)
    /// of one index).
    pub(crate) async fn index_key_of(
        &self,
        value: &T,
        slot: usize,
        row_key: &str,
    ) -> Result<String> {
        let hash = self.index_key_if(sealed_slot::<T>(slot)).await?;
        crate::schema::hashed_key(value, slot, row_key, hash.as_ref())
    }

    async fn index_key_if(&self, sealed: bool) -> Result<Option<tablekit_encrypt::IndexKey>> {
        Ok(match sealed {
            true => Some(self.index_key().await?),
            false => None,
        })
    }

    /// The key that hashes the values of indexes on encrypted fields.
    pub(crate) async fn index_key(&self) -> Result<tablekit_encrypt::IndexKey> {
        Ok(self.resolver()?.index_key().await?)
    }

    /// Opens the encrypted properties of `row`, read to be a value of `T`:
    /// the id of the key its content key was wrapped with (`None` for a
    /// row with nothing sealed, and for a type without encrypted fields).
    /// A row read whole must hold every property its envelope lists; one
    /// read in part (a projection, an index row's copies) is not `whole`.
    pub(crate) async fn open(&self, row: &mut Entity, whole: bool) -> Result<Option<String>> {
        let Some(properties) = encrypted::<T>() else {
            return Ok(None);
        };
        let keys = self.keys.as_deref().ok_or_else(|| self.no_keys())?;
        if tablekit_encrypt::is_legacy(row) {
            // Written by the old Azure Storage SDKs: read, to be moved to
            // this format by a migration (its id never the current one).
            return Ok(tablekit_encrypt::open_legacy(row, &self.name, properties, keys).await?);
        }
        let opened = if whole && T::DESCRIPTOR.base.is_none() {
            tablekit_encrypt::open_entity(row, &self.name, properties, keys).await
        } else {
            tablekit_encrypt::open_selected(row, &self.name, properties, keys).await
        };
        Ok(opened?)
    }

    /// The id of the key new writes wrap their content keys with, for a
    /// type with encrypted fields on a table with keys.
    pub(crate) fn current_key_id(&self) -> Option<&str> {
        encrypted::<T>()?;
        Some(self.keys.as_deref()?.current_key_id())
    }

    /// The row of `value`, its encrypted fields sealed. A merge (`merge`)
    /// that holds some of the encrypted properties but not all is refused:
    /// their new content key would leave the others unreadable.
    pub(crate) async fn row_of(&self, value: &T, merge: bool) -> Result<Entity> {
        let mut row = crate::schema::to_entity_unsealed(value)?;
        // A time to live counts from each write.
        crate::schema::stamp_write::<T>(&mut row, self.clock.now());
        if encrypted::<T>().is_some() {
            Self::refuse_part_merge(&row, merge)?;
            // Boxed: a type without encrypted fields does not carry it.
            Box::pin(self.seal(value, &mut row)).await?;
        }
        Ok(row)
    }

    /// Refuses a merge of `row` (when `merge`) that holds some of the
    /// encrypted properties but not all.
    fn refuse_part_merge(row: &Entity, merge: bool) -> Result<()> {
        let properties = encrypted::<T>().unwrap_or_default();
        let held = properties
            .iter()
            .filter(|p| row.properties.contains(p))
            .count();
        if merge && held != 0 && held != properties.len() {
            return Err(crate::error::Error::NotSupported {
                operation: "a merge of some encrypted fields but not all (the others would no longer decrypt): replace the entity, or merge every encrypted field",
            });
        }
        Ok(())
    }

    fn no_keys(&self) -> EncryptionError {
        EncryptionError::NoKeys {
            table: self.name.to_string(),
        }
    }
}
