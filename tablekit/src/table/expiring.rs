//! Rows that expire, at the typed client's writes: an insert whose keys
//! an expired entity still holds takes its place. (Reads pass expired
//! entities by where they read them: see `schema::expired`.)

use super::Table;
use super::write::{RowWrite, Write, Written};
use crate::backend::UpdateMode;
use crate::entity::{ETag, IfMatch, Properties};
use crate::error::{Error, Result};
use crate::schema::{self, TableEntity};

/// How many times an insert over an expired entity reads and tries again
/// when another writer changes the row in between.
const RACES: usize = 4;

impl<T: TableEntity> Table<T> {
    /// The insert of `value` after the store refused it as `taken`: when
    /// the entity holding its keys has expired, `value` replaces it as a
    /// new entity (none of the expired row's properties is kept), guarded
    /// by the expired row's ETag; a live one leaves the refusal as it was.
    pub(super) async fn insert_over_expired(&self, value: &T, taken: Error) -> Result<ETag> {
        let (pk, rk) = (schema::partition_key_of(value)?, schema::row_key_of(value)?);
        let none = Properties::new();
        for _ in 0..RACES {
            let Some(stored) = self.read_stored(&pk, &rk).await? else {
                // Deleted meanwhile (by the upkeep, say): an insert again.
                match self.enter(Write::Insert(value)).await {
                    Err(Error::EntityAlreadyExists { .. }) => continue,
                    other => return other.map(Written::etag),
                }
            };
            if !schema::expired::<T, _>(&stored.properties, self.clock.now()) {
                return Err(taken);
            }
            let Some(etag) = stored.etag else {
                return Err(taken);
            };
            let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag));
            match self.enter(Write::Put(value, write, &none)).await {
                Err(Error::PreconditionFailed { .. } | Error::EntityNotFound { .. }) => continue,
                other => return other.map(Written::etag),
            }
        }
        Err(taken)
    }
}
