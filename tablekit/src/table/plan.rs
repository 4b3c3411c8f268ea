//! Writes that span rows of one partition: a wide entity's parts, and an
//! entity's [index rows](crate::index), sent as one entity group transaction
//! guarded by the ETag of the entity's row.
//!
//! The transaction is planned from the entity's current state: the rows it
//! occupies now (its parts, its index rows) and the rows it will occupy.
//! That state is read first, unless the caller holds it (a [`Loaded`]
//! replaced or deleted as it was read, whose index rows are known), and the
//! ETag read guards the transaction, so a writer that raced this one makes it
//! fail as a whole and nothing is half written.
//!
//! Repairs happen on the way: an old index row found missing is not deleted
//! again; a unique index row that names no entity holding its value (left by
//! a writer other than tablekit) is taken over under its own ETag.
//!
//! [`Loaded`]: super::Loaded

use std::collections::{HashMap, HashSet};

use super::rows::RowWrite;
use super::{Table, UPDATE_ATTEMPTS, wide};
use crate::backend::{BatchOperation, GetOptions, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::ext::TableBackendExt;
use crate::index::{self, IndexDef};
use crate::schema::{self, TableEntity};
use crate::validate::limits::MAX_BATCH_OPERATIONS;

/// The stored state of an entity.
pub(super) struct Current {
    /// The logical row (a wide entity's parts joined), with its ETag.
    pub(super) entity: Entity,
    /// The ETag that guards a write over it.
    pub(super) etag: ETag,
    /// How many part rows a wide entity has (0 otherwise).
    pub(super) parts: usize,
}

/// What an operation of a planned transaction is for.
#[derive(Debug, Clone)]
enum Role {
    /// The entity's row, or one of its parts.
    Entity,
    /// Deletes the old row `key` of an index.
    IndexDelete(String),
    /// Writes the row `key` of index `index`.
    IndexWrite(usize, String),
}

impl<T: TableEntity> Table<T> {
    /// The entity's stored state, read with one request: a point read, or
    /// for a wide entity one query over its parts.
    pub(super) async fn read_current(&self, pk: &str, rk: &str) -> Result<Option<Current>> {
        if T::WIDE {
            let query = crate::Query::new().filter(wide::parts_filter(pk, rk));
            let rows = self.backend.query_all(&self.name, query).await?;
            return Ok(wide::join(rk, rows)?.and_then(|(entity, parts)| {
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

    /// Writes `entity` (the row as `write` sends it) with its parts and index
    /// rows in one transaction. `known` holds the RowKeys of the index rows
    /// of the version `write`'s ETag names, when the caller knows them.
    pub(super) async fn write_planned(
        &self,
        entity: &Entity,
        write: RowWrite,
        known: Option<&[String]>,
    ) -> Result<ETag> {
        let (pk, rk) = (entity.partition_key.as_str(), entity.row_key.as_str());
        let error = |make: fn(String, String, String) -> Error| {
            make(self.name.to_string(), pk.to_owned(), rk.to_owned())
        };
        let not_found = || {
            error(|table, partition_key, row_key| Error::EntityNotFound {
                table,
                partition_key,
                row_key,
            })
        };
        let precondition = || {
            error(|table, partition_key, row_key| Error::PreconditionFailed {
                table,
                partition_key,
                row_key,
            })
        };
        let exists = || {
            error(|table, partition_key, row_key| Error::EntityAlreadyExists {
                table,
                partition_key,
                row_key,
            })
        };
        // Old index rows found missing, and unique index rows to take over
        // under their ETag: what earlier attempts learned.
        let mut missing: HashSet<String> = HashSet::new();
        let mut take_over: HashMap<String, ETag> = HashMap::new();
        let mut last = None;
        for _ in 0..UPDATE_ATTEMPTS {
            // The state the transaction replaces, its guard, and whether a
            // lost race may be tried again.
            let use_known = !T::WIDE
                && matches!(
                    &write,
                    RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(_))
                        | RowWrite::Delete(IfMatch::ETag(_))
                );
            let (current, old_keys, guard, retry) = match (&write, known) {
                (RowWrite::Insert, _) => (None, None, None, false),
                (
                    RowWrite::Update(_, IfMatch::ETag(etag))
                    | RowWrite::Delete(IfMatch::ETag(etag)),
                    Some(keys),
                ) if use_known => (None, Some(keys.to_vec()), Some(etag.clone()), false),
                (write, _) => {
                    let current = self.read_current(pk, rk).await?;
                    let expected = match write {
                        RowWrite::Update(_, if_match) | RowWrite::Delete(if_match) => {
                            Some(if_match)
                        }
                        _ => None,
                    };
                    match current {
                        None if expected.is_some() => return Err(not_found()),
                        None => (None, None, None, true),
                        Some(current) => {
                            if let Some(IfMatch::ETag(expected)) = expected
                                && *expected != current.etag
                            {
                                return Err(precondition());
                            }
                            let keys = if T::INDEXES.is_empty() {
                                Vec::new()
                            } else {
                                let stored: T = index::decode_for_keys(&current.entity)?;
                                index::index_keys(&stored, rk)?
                            };
                            let guard = current.etag.clone();
                            let retry = !matches!(expected, Some(IfMatch::ETag(_)));
                            (Some(current), Some(keys), Some(guard), retry)
                        }
                    }
                }
            };
            if matches!(write, RowWrite::Insert) && T::WIDE {
                // A wide insert checks for parts first: part 0 alone
                // cannot tell an existing entity with other parts.
                if self.read_current(pk, rk).await?.is_some() {
                    return Err(exists());
                }
            }
            // The row to store.
            let new_row = match (&write, &current) {
                (RowWrite::Delete(_), _) => None,
                (
                    RowWrite::Update(UpdateMode::Merge, _) | RowWrite::Upsert(UpdateMode::Merge),
                    Some(current),
                ) => {
                    let mut merged = Entity::new(pk, rk);
                    merged.properties = wide::merge_into(
                        current.entity.properties.clone(),
                        entity.properties.clone(),
                    );
                    Some(merged)
                }
                _ => Some(entity.clone()),
            };
            let new_keys = match (&new_row, T::INDEXES.is_empty()) {
                (Some(row), false) => {
                    let value: T = index::decode_for_keys(row)?;
                    Some(index::index_keys(&value, rk)?)
                }
                (Some(_), true) => Some(Vec::new()),
                (None, _) => None,
            };
            // The entity's own operations.
            let guard_match = guard.clone().map(IfMatch::ETag);
            let mut operations = if T::WIDE {
                let parts = current.as_ref().map_or(0, |c| c.parts);
                match &new_row {
                    Some(row) => {
                        let bookkeeping = [schema::KIND_PROPERTY, schema::VERSION_PROPERTY];
                        wide::write_operations(
                            wide::split(row.clone(), &bookkeeping)?,
                            parts,
                            guard_match,
                        )
                    }
                    None => {
                        wide::delete_operations(pk, rk, parts, guard_match.unwrap_or(IfMatch::Any))
                    }
                }
            } else {
                vec![match (&new_row, guard_match) {
                    (Some(row), None) => BatchOperation::Insert(row.clone()),
                    (Some(row), Some(if_match)) => BatchOperation::Update {
                        entity: row.clone(),
                        mode: UpdateMode::Replace,
                        if_match,
                    },
                    (None, if_match) => BatchOperation::Delete {
                        partition_key: pk.to_owned(),
                        row_key: rk.to_owned(),
                        if_match: if_match.unwrap_or(IfMatch::Any),
                    },
                }]
            };
            let mut roles = vec![Role::Entity; operations.len()];
            for (i, def) in T::INDEXES.iter().enumerate() {
                let old = old_keys.as_ref().and_then(|keys| keys.get(i));
                let new = new_keys.as_ref().and_then(|keys| keys.get(i));
                if let Some(old) = old
                    && new != Some(old)
                    && !missing.contains(old)
                {
                    operations.push(BatchOperation::Delete {
                        partition_key: pk.to_owned(),
                        row_key: old.clone(),
                        if_match: IfMatch::Any,
                    });
                    roles.push(Role::IndexDelete(old.clone()));
                }
                if let (Some(new), Some(row)) = (new, &new_row) {
                    let mut logical = row.clone();
                    logical.row_key = rk.to_owned();
                    let index_row = index::index_row::<T>(def, new.clone(), &logical);
                    operations.push(match take_over.get(new) {
                        Some(etag) => BatchOperation::Update {
                            entity: index_row,
                            mode: UpdateMode::Replace,
                            if_match: IfMatch::ETag(etag.clone()),
                        },
                        None if def.unique && old != Some(new) => BatchOperation::Insert(index_row),
                        None => BatchOperation::Upsert {
                            entity: index_row,
                            mode: UpdateMode::Replace,
                        },
                    });
                    roles.push(Role::IndexWrite(i, new.clone()));
                }
            }
            if operations.len() > MAX_BATCH_OPERATIONS {
                return Err(index::too_many_operations(operations.len()));
            }
            let sent = match operations.len() {
                // One row alone needs no transaction.
                1 => self
                    .write_one(&operations[0])
                    .await
                    .map_err(|e| e.in_batch(0)),
                _ => self
                    .backend
                    .submit_transaction(&self.name, &operations)
                    .await
                    .map(|etags| {
                        etags
                            .into_iter()
                            .next()
                            .flatten()
                            .unwrap_or_else(|| ETag::new(""))
                    }),
            };
            let (at, source) = match sent {
                Ok(etag) => return Ok(etag),
                Err(Error::BatchFailed { index, source }) => (index, *source),
                Err(e) => return Err(e),
            };
            match (roles.get(at), source) {
                (
                    Some(Role::Entity),
                    Error::PreconditionFailed { .. } | Error::EntityAlreadyExists { .. },
                ) if retry => {
                    last = Some(precondition());
                }
                (Some(Role::Entity), Error::PreconditionFailed { .. }) => {
                    return Err(precondition());
                }
                (Some(Role::Entity), Error::EntityAlreadyExists { .. }) => return Err(exists()),
                (Some(Role::Entity), Error::EntityNotFound { .. }) if retry => {
                    last = Some(not_found())
                }
                (Some(Role::Entity), Error::EntityNotFound { .. }) => {
                    // The version read was deleted meanwhile.
                    return Err(if guard.is_some() {
                        precondition()
                    } else {
                        not_found()
                    });
                }
                (Some(Role::IndexDelete(key)), Error::EntityNotFound { .. }) => {
                    missing.insert(key.clone());
                    last = Some(precondition());
                }
                (Some(Role::IndexWrite(i, key)), Error::EntityAlreadyExists { .. }) => {
                    let def = &T::INDEXES[*i];
                    if let Some(etag) = self.claim_unique(def, *i, key, pk, rk).await? {
                        take_over.insert(key.clone(), etag);
                    }
                    last = Some(precondition());
                }
                (
                    Some(Role::IndexWrite(_, key)),
                    Error::PreconditionFailed { .. } | Error::EntityNotFound { .. },
                ) => {
                    // A row to take over changed or went: look again.
                    take_over.remove(key);
                    last = Some(precondition());
                }
                (_, source) => return Err(source),
            }
        }
        Err(last.unwrap_or(Error::Transient {
            message: "write made no attempt".into(),
        }))
    }

    /// Sends one operation as its own request.
    async fn write_one(&self, operation: &BatchOperation) -> Result<ETag> {
        let name = &self.name;
        match operation {
            BatchOperation::Insert(entity) => self.backend.insert_entity(name, entity).await,
            BatchOperation::Update {
                entity,
                mode,
                if_match,
            } => {
                self.backend
                    .update_entity(name, entity, *mode, if_match)
                    .await
            }
            BatchOperation::Upsert { entity, mode } => {
                self.backend.upsert_entity(name, entity, *mode).await
            }
            BatchOperation::Delete {
                partition_key,
                row_key,
                if_match,
            } => self
                .backend
                .delete_entity(name, partition_key, row_key, if_match)
                .await
                .map(|()| ETag::new("")),
        }
    }

    /// Decides about a unique index row `key` that already exists when the
    /// entity `(pk, rk)` wants it: its own row, or a row naming an entity
    /// that does not hold the value, is taken over under the returned ETag;
    /// a row of another entity holding the value is a
    /// [`UniqueViolation`](Error::UniqueViolation). `None`: the row is gone.
    async fn claim_unique(
        &self,
        def: &'static IndexDef,
        i: usize,
        key: &str,
        pk: &str,
        rk: &str,
    ) -> Result<Option<ETag>> {
        let row = match self
            .backend
            .get_entity(
                &self.name,
                pk,
                key,
                &GetOptions::default().select([index::ROW_PROPERTY]),
            )
            .await
        {
            Ok(row) => row,
            Err(Error::EntityNotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let etag = row.etag.clone().unwrap_or_else(|| ETag::new(""));
        let holder = match row.properties.get(index::ROW_PROPERTY) {
            Some(crate::Value::String(holder)) => holder.clone(),
            _ => return Ok(Some(etag)),
        };
        if holder == rk {
            return Ok(Some(etag));
        }
        let holds = match self.read_current(pk, &holder).await? {
            Some(current) => match index::decode_for_keys::<T>(&current.entity) {
                Ok(value) => index::index_key(&value, i, &holder)? == key,
                // Not an entity of this type: it cannot hold the value.
                Err(_) => false,
            },
            None => false,
        };
        if holds {
            return Err(Error::UniqueViolation {
                table: self.name.to_string(),
                partition_key: pk.to_owned(),
                index: def.name,
                value: index::value_of(def, key).to_owned(),
                held_by: holder,
            });
        }
        Ok(Some(etag))
    }
}
