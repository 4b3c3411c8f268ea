//! The outbox record of a typed write whose indexes are kept elsewhere:
//! the write's sequence number, and the steps its record holds.

use std::sync::Arc;

use super::super::{Pending, RemoteState, State, Typed};
use crate::backend::TableBackend;
use crate::datetime::DateTime;
use crate::entity::Entity;
use crate::error::Result;
use crate::schema::{CompanionRows, TableEntity};
use crate::{pending, schema};

impl<T: TableEntity> Typed<'_, T> {
    /// The sequence number of this write and the RowKeys of its rows in
    /// the indexes kept elsewhere: one above the stored entity's, and above
    /// the fence of every row it newly writes (a row an earlier entity with
    /// these keys may have left a fence on).
    pub(super) async fn remote_state(
        &self,
        rows: &'static dyn CompanionRows,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        state: &State<'_>,
    ) -> Result<RemoteState> {
        let (pk, rk) = self.keys();
        let current = state.current.as_deref();
        let old_value = current
            .map(|current| schema::read_for_keys::<T>(&current.entity))
            .transpose()?;
        let new_value = self.new_value(current)?;
        let keys = |value: &Option<T>| -> Result<Vec<Option<String>>> {
            (0..rows.remote())
                .map(|i| {
                    // An empty key: an optional value that is `None`, no row.
                    value
                        .as_ref()
                        .map(|v| schema::remote_key(v, i, rk))
                        .transpose()
                        .map(|key| key.filter(|key| !key.is_empty()))
                })
                .collect()
        };
        let (old, new) = (keys(&old_value)?, keys(&new_value)?);
        let mut seq = match current {
            Some(current) => pending::seq_of(&current.entity),
            // No row to carry the number: an earlier life of the entity may
            // have left records whose steps are still to come.
            None => pending::pending_records(backend.as_ref(), table, pk, rk)
                .await?
                .iter()
                .map(|record| record.seq)
                .max()
                .unwrap_or(0),
        };
        // The fences of the rows it newly writes, read at once.
        let fences = (0..rows.remote()).filter_map(|i| {
            let key = new[i].as_ref()?;
            (old[i].as_ref() != Some(key)).then(|| {
                let (index_table, partition, fence) = rows.remote_place(i, table, pk, key, rk);
                async move {
                    pending::read_fence(backend.as_ref(), &index_table, &partition, &fence).await
                }
            })
        });
        for fence in futures::future::try_join_all(fences).await? {
            seq = seq.max(fence);
        }
        Ok(RemoteState {
            rows,
            table: table.to_owned(),
            seq: seq + 1,
            old,
            new,
        })
    }

    /// The outbox record of the steps of the indexes kept elsewhere, and
    /// the sequence number the entity's row takes.
    pub(super) fn remote_record(
        &self,
        remote: &RemoteState,
        new_row: Option<&Entity>,
        at: DateTime,
    ) -> Entity {
        let (pk, rk) = self.keys();
        let steps = remote.rows.remote_steps(
            &remote.table,
            (pk, rk),
            remote.seq,
            &remote.old,
            &remote.new,
            new_row,
            T::DESCRIPTOR.kind_properties,
        );
        let kind = remote.rows.record_kind();
        pending::record_row(&remote.table, pk, rk, remote.seq, at, kind, &steps)
    }
}
