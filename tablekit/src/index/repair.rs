//! Verifying and repairing index rows of existing data: rows written before
//! an index was declared, or by clients other than tablekit.

use std::sync::Arc;

use futures::TryStreamExt;

use crate::backend::{BatchOperation, TableBackendExt, UpdateMode};
use crate::entity::{Entity, IfMatch, Properties};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::index::{self, IndexAudit};
use crate::schema::{self, KeyArg, TableEntity};
use crate::table::{Table, owned_query_stream};

/// One step of a table-wide index repair: what it found in the partitions
/// it went through, and where the next step starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexPass {
    /// What was found (and, for a repair, fixed).
    pub audit: IndexAudit,
    /// Partitions gone through.
    pub partitions: usize,
    /// Problems a concurrent writer settled before the repair could (the
    /// writer wrote the rows itself); nothing to do about them.
    pub raced: usize,
    /// The PartitionKey to resume after; `None` when the table is done.
    pub resume: Option<String>,
}

impl<T: TableEntity> Table<T> {
    /// Compares the index rows of partition `pk` with the entities of `T`
    /// in it, and reports what is missing, stale or left over. Reads the
    /// partition once; writes nothing.
    pub fn verify_indexes(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
    ) -> crate::error::Call<'_, IndexAudit> {
        let pk = schema::encode_partition_key::<T>(&pk);
        Box::pin(async move { self.audit_partition(&pk?).await })
    }

    /// The audit of the index rows of partition `pk`, read once.
    async fn audit_partition(&self, pk: &str) -> Result<IndexAudit> {
        let rows = self.partition_rows(pk).await?;
        Ok(index::audit::<T>(&rows))
    }

    /// [`verify_indexes`](Table::verify_indexes), then repairs what it
    /// found: missing and stale index rows are written, left-over ones
    /// deleted. Each repair is checked against the entity as it is then, and
    /// guarded by its ETag, so it never undoes a concurrent write (the
    /// entity's ETag changes: the guard is written with it). Running it
    /// again finds nothing: the repair is idempotent. Returns what was found.
    pub fn repair_indexes(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
    ) -> crate::error::Call<'_, IndexAudit> {
        let pk = schema::encode_partition_key::<T>(&pk);
        Box::pin(async move {
            let audit = self.audit_partition(&pk?).await?;
            self.repair(&audit).await?;
            Ok(audit)
        })
    }

    /// Verifies (and, with `repair`, repairs) the index rows of up to
    /// `partitions` partitions of the table, in PartitionKey order, after
    /// `resume` (the `resume` of the pass before; `None` to start). Store
    /// `resume` to go on later, after a crash included: a partition is done
    /// as a whole or not at all.
    pub async fn repair_all_indexes(
        &self,
        resume: Option<&str>,
        partitions: usize,
        repair: bool,
    ) -> Result<IndexPass> {
        let mut pass = IndexPass::default();
        let mut filter = Filter::row_key().ge("");
        if let Some(after) = resume {
            filter = Filter::partition_key().gt(after);
        }
        let mut rows = owned_query_stream(
            Arc::clone(&self.backend),
            self.name.to_string(),
            crate::backend::Query::new().filter(filter),
            "repair_indexes",
            T::DESCRIPTOR.kind,
        );
        let mut current: Vec<Entity> = Vec::new();
        let finish = |rows: &mut Vec<Entity>, pass: &mut IndexPass| -> IndexAudit {
            let audit = index::audit::<T>(rows);
            pass.partitions += 1;
            pass.resume = rows.first().map(|r| r.partition_key.clone());
            rows.clear();
            audit
        };
        while let Some(row) = rows.try_next().await? {
            if current
                .first()
                .is_some_and(|r| r.partition_key != row.partition_key)
            {
                if pass.partitions == partitions {
                    return Ok(pass);
                }
                let audit = finish(&mut current, &mut pass);
                if repair {
                    pass.raced += self.repair(&audit).await?;
                }
                merge(&mut pass.audit, audit);
                if pass.partitions == partitions {
                    return Ok(pass);
                }
            }
            current.push(row);
        }
        if !current.is_empty() && pass.partitions < partitions {
            let audit = finish(&mut current, &mut pass);
            if repair {
                pass.raced += self.repair(&audit).await?;
            }
            merge(&mut pass.audit, audit);
        }
        pass.resume = None;
        Ok(pass)
    }

    /// Every row of partition `pk`.
    async fn partition_rows(&self, pk: &str) -> Result<Vec<Entity>> {
        let query = crate::backend::Query::new().filter(Filter::partition_key().eq(pk));
        self.backend.query_all(&self.name, query).await
    }

    /// Fixes what `audit` found, each problem checked again first; returns
    /// how many a concurrent writer had settled.
    async fn repair(&self, audit: &IndexAudit) -> Result<usize> {
        let mut raced = 0;
        for row in audit.missing.iter().chain(&audit.stale) {
            let owner = match row.properties.get(index::ROW_PROPERTY) {
                Some(crate::value::Value::String(owner)) => Some(owner.as_str()),
                _ => None,
            };
            if !self
                .repair_row(&row.partition_key, &row.row_key, owner)
                .await?
            {
                raced += 1;
            }
        }
        for (pk, rk) in &audit.orphans {
            if !self.repair_row(pk, rk, None).await? {
                raced += 1;
            }
        }
        Ok(raced)
    }

    /// Brings the index row `(pk, key)` in step with the entity it names
    /// (or, when missing, `owner`): written as the entity has it, or
    /// deleted. `false` when a concurrent write changed the entity or the
    /// row first.
    async fn repair_row(&self, pk: &str, key: &str, owner: Option<&str>) -> Result<bool> {
        let found = self.backend.try_get_entity(&self.name, pk, key).await?;
        let Some(position) = super::local_indexes::<T>()
            .iter()
            .position(|def| def.layout.starts(key))
        else {
            return Ok(true);
        };
        let def = &super::local_indexes::<T>()[position];
        if def.list {
            return self.repair_list(pk, key).await;
        }
        let owner = match &found {
            Some(row) => index::pointed_row(def, row).ok(),
            None => owner.map(str::to_owned),
        };
        let current = match &owner {
            Some(owner) => self.read_current(pk, owner).await?,
            None => None,
        };
        let expected = match &current {
            Some(current) => {
                let owner_key =
                    schema::stored_local_keys::<T>(&current.entity)?.swap_remove(position);
                (owner_key == key).then(|| index::index_row::<T>(def, owner_key, &current.entity))
            }
            None => None,
        };
        let mut operations = Vec::new();
        if let (Some(current), Some(_)) = (&current, &expected) {
            // The guard: the entity as read, merged with nothing.
            let mut guard = Entity::new(pk, current.entity.row_key.clone());
            guard.properties = Properties::new();
            let guard_key = if T::DESCRIPTOR.wide() {
                crate::table::wide::part_key(&current.entity.row_key, 0)
            } else {
                current.entity.row_key.clone()
            };
            guard.row_key = guard_key;
            operations.push(BatchOperation::Update {
                entity: guard,
                mode: UpdateMode::Merge,
                if_match: IfMatch::ETag(current.etag.clone()),
            });
        }
        match (expected, &found) {
            (Some(want), Some(have)) => operations.push(BatchOperation::Update {
                entity: want,
                mode: UpdateMode::Replace,
                if_match: IfMatch::ETag(
                    have.etag
                        .clone()
                        .unwrap_or_else(|| crate::entity::ETag::new("")),
                ),
            }),
            (Some(want), None) => operations.push(BatchOperation::Insert(want)),
            (None, Some(have)) => operations.push(BatchOperation::Delete {
                partition_key: pk.to_owned(),
                row_key: key.to_owned(),
                if_match: IfMatch::ETag(
                    have.etag
                        .clone()
                        .unwrap_or_else(|| crate::entity::ETag::new("")),
                ),
            }),
            (None, None) => return Ok(true),
        }
        self.send_repair(&operations).await
    }
}

impl<T: TableEntity> Table<T> {
    /// Brings the index entity `(pk, key)` in step with the entities that
    /// hold its value, read afresh with it in one query: every change of
    /// who holds the value changes the index entity too, so writing under
    /// the ETag read never loses a concurrent change. `false` when one came
    /// first.
    async fn repair_list(&self, pk: &str, key: &str) -> Result<bool> {
        let rows = self.partition_rows(pk).await?;
        let found = rows.iter().find(|row| row.row_key == key);
        let audit = index::audit::<T>(&rows);
        let want = audit
            .missing
            .iter()
            .chain(&audit.stale)
            .find(|row| row.row_key == key);
        let guard = |have: &Entity| {
            IfMatch::ETag(
                have.etag
                    .clone()
                    .unwrap_or_else(|| crate::entity::ETag::new("")),
            )
        };
        let operation = match (want, found) {
            (Some(want), None) => BatchOperation::Insert(want.clone()),
            (Some(want), Some(have)) => BatchOperation::Update {
                entity: want.clone(),
                mode: UpdateMode::Replace,
                if_match: guard(have),
            },
            (None, Some(have)) if audit.orphans.iter().any(|(_, rk)| rk == key) => {
                BatchOperation::Delete {
                    partition_key: pk.to_owned(),
                    row_key: key.to_owned(),
                    if_match: guard(have),
                }
            }
            _ => return Ok(true),
        };
        self.send_repair(&[operation]).await
    }

    /// Sends a repair; `false` when a concurrent write changed a row it is
    /// guarded by (or wrote it) first.
    async fn send_repair(&self, operations: &[BatchOperation]) -> Result<bool> {
        let conflict = |e: &Error| {
            matches!(
                e,
                Error::PreconditionFailed { .. }
                    | Error::EntityNotFound { .. }
                    | Error::EntityAlreadyExists { .. }
            )
        };
        match crate::exec::send_operations(self.backend.as_ref(), &self.name, operations).await {
            Ok(_) => Ok(true),
            Err(Error::BatchFailed { source, .. }) if conflict(&source) => Ok(false),
            Err(Error::BatchFailed { source, .. }) => Err(*source),
            Err(e) => Err(e),
        }
    }
}

fn merge(into: &mut IndexAudit, from: IndexAudit) {
    into.missing.extend(from.missing);
    into.stale.extend(from.stale);
    into.orphans.extend(from.orphans);
    into.unreadable.extend(from.unreadable);
}
