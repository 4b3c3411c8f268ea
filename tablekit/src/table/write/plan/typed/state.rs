//! The state a typed write is planned from: the entity as stored (read,
//! or known from what the caller holds), the ETag that guards the write,
//! and the index entities it changes.

use std::borrow::Cow;
use std::sync::Arc;

use super::super::{Learned, Pending, State, Typed};
use super::{any_listed, local_slots_of};
use crate::backend::{TableBackend, TableBackendExt, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::schema::{Sharing, TableEntity, companions, local_slots, remote_slots};
use crate::table::write::RowWrite;
use crate::table::{Current, current_of};
use crate::{pending, schema};

impl<T: TableEntity> Typed<'_, T> {
    /// The row a merge of this write over `current` leaves.
    pub(super) fn merged_over(&self, current: &Current) -> Entity {
        let (pk, rk) = self.keys();
        let mut merged = Entity::new(pk, rk);
        // Overlays the write's properties on the stored ones, as a merge does.
        merged.properties = current.entity.properties.clone();
        for (name, value) in self.entity.properties.clone() {
            merged.properties.insert(name, value);
        }
        merged
    }

    /// The state, with the index entities the write changes.
    pub(super) async fn read_state(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        learned: &Learned,
    ) -> Result<State<'_>> {
        let mut state = self.base_state(backend, table, learned).await?;
        if let Some(rows) = companions::<T>().filter(|rows| rows.remote() != 0) {
            let remote = self.remote_state(rows, backend, table, &state).await?;
            state.remote = Some(Box::new(remote));
        }
        if !any_listed::<T>() {
            return Ok(state);
        }
        let (pk, rk) = self.keys();
        let new_keys = match (&self.write, &state.current) {
            (RowWrite::Delete(_), _) => None,
            _ if self.new_keys.is_some() => self.new_keys.as_deref().map(<[String]>::to_vec),
            (write, Some(current)) if write.is_merge() => {
                Some(schema::stored_local_keys::<T>(&self.merged_over(current))?)
            }
            _ => Some(schema::stored_local_keys::<T>(&self.entity)?),
        };
        // A renamed kind's entity moving to its own RowKey changes its entry
        // in an index entity even where the value stays.
        let renamed = state
            .current
            .as_ref()
            .is_some_and(|current| current.entity.row_key != rk);
        for (i, rows) in local_slots_of::<T>() {
            if rows.sharing(i) != Sharing::Listed {
                continue;
            }
            // (An empty key: no row, for a value that is `None`.)
            let old = state
                .old_keys
                .as_ref()
                .and_then(|keys| keys.get(i))
                .filter(|key| !key.is_empty())
                .cloned();
            let new = new_keys
                .as_ref()
                .and_then(|keys| keys.get(i))
                .filter(|key| !key.is_empty())
                .cloned();
            if old == new && !renamed {
                continue;
            }
            let same = old == new;
            for key in [old, (!same).then_some(new).flatten()]
                .into_iter()
                .flatten()
            {
                let row = backend.try_get_entity(table, pk, &key).await?;
                let stored = row.map(|row| {
                    let etag = row.etag.clone().unwrap_or_else(|| ETag::new(""));
                    (etag, pending::lists::list_members(&row))
                });
                state.lists.retain(|(k, _)| *k != key);
                state.lists.push((key, stored));
            }
        }
        Ok(state)
    }

    /// The value the write leaves, `None` for a delete.
    pub(super) fn new_value(&self, current: Option<&Current>) -> Result<Option<T>> {
        Ok(match (&self.write, current) {
            (RowWrite::Delete(_), _) => None,
            (write, Some(current)) if write.is_merge() => {
                Some(schema::read_for_keys::<T>(&self.merged_over(current))?)
            }
            _ => Some(schema::read_for_keys::<T>(&self.entity)?),
        })
    }

    /// The entity's own state when it is known without reading: nothing
    /// is needed, or the write is an insert, or the caller holds the
    /// version it writes over with its index rows.
    pub(super) fn known_base(&self, learned: &Learned) -> Option<State<'_>> {
        if !Self::needs_state() {
            return Some(State::none(None));
        }
        // A renamed kind's entity may lie under a previous kind's RowKey,
        // even for an insert: it is always looked for.
        if !T::DESCRIPTOR.previous_kinds.is_empty() {
            return None;
        }
        // A merge that moves no index value needs nothing stored: its
        // index rows are merged with the same values as the entity.
        let merge_in_place = matches!(
            &self.write,
            RowWrite::Update(UpdateMode::Merge, IfMatch::ETag(_))
        ) && !learned.read
            && self.new_keys.is_some()
            && self.new_keys.as_deref() == self.known.as_deref();
        let use_known = !T::DESCRIPTOR.wide()
            && remote_slots::<T>() == 0
            && (merge_in_place
                || matches!(
                    &self.write,
                    RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(_))
                        | RowWrite::Delete(IfMatch::ETag(_))
                ));
        // The value a change feed records as the previous one is read, as
        // is the row whose offloaded values a write replaces.
        let needs = T::DESCRIPTOR.write_needs();
        let use_known = use_known && !needs.previous && !needs.blobs;
        match (&self.write, &self.known) {
            (RowWrite::Insert, _) => Some(State::none(None)),
            (
                RowWrite::Update(_, IfMatch::ETag(etag)) | RowWrite::Delete(IfMatch::ETag(etag)),
                Some(keys),
            ) if use_known => Some(State {
                old_keys: Some(Cow::Borrowed(keys)),
                ..State::none(Some(Cow::Borrowed(etag)))
            }),
            _ => None,
        }
    }

    /// The entity's own state: what is stored, or what the caller knows.
    pub(super) async fn base_state(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        learned: &Learned,
    ) -> Result<State<'_>> {
        if let Some(state) = self.known_base(learned) {
            return Ok(state);
        }
        let (pk, rk) = (
            self.entity.partition_key.as_str(),
            self.entity.row_key.as_str(),
        );
        let current = current_of::<T>(backend.as_ref(), table, pk, rk).await?;
        let expected = match &self.write {
            RowWrite::Update(_, if_match) | RowWrite::Delete(if_match) => Some(if_match),
            _ => None,
        };
        let Some(current) = current else {
            if expected.is_some() {
                return Err(self.error(table, |table, partition_key, row_key| {
                    Error::EntityNotFound {
                        table,
                        partition_key,
                        row_key,
                    }
                }));
            }
            return Ok(State {
                current: None,
                old_keys: None,
                guard: None,
                retry: true,
                lists: Vec::new(),
                remote: None,
            });
        };
        // Only a renamed kind's insert reads: it finds its entity under a
        // previous kind's RowKey.
        if matches!(self.write, RowWrite::Insert) {
            return Err(self.error(table, |table, partition_key, row_key| {
                Error::EntityAlreadyExists {
                    table,
                    partition_key,
                    row_key,
                }
            }));
        }
        if let Some(IfMatch::ETag(expected)) = expected
            && *expected != current.etag
        {
            return Err(self.error(table, |table, partition_key, row_key| {
                Error::PreconditionFailed {
                    table,
                    partition_key,
                    row_key,
                }
            }));
        }
        let keys = if local_slots::<T>() == 0 {
            Vec::new()
        } else {
            // Under the RowKey the entity lies at (a previous kind's, for a
            // renamed kind's row not moved yet).
            schema::stored_local_keys::<T>(&current.entity)?
        };
        Ok(State {
            guard: Some(Cow::Owned(current.etag.clone())),
            old_keys: Some(Cow::Owned(keys)),
            current: Some(Box::new(current)),
            retry: !matches!(expected, Some(IfMatch::ETag(_))),
            lists: Vec::new(),
            remote: None,
        })
    }
}
