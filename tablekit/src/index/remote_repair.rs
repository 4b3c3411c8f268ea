//! Verifying and rebuilding the indexes kept in other partitions or tables.

use std::collections::BTreeMap;

use crate::backend::{BatchOperation, EntityWrite, TableBackendExt, UpdateMode};
use crate::entity::{Entity, IfMatch};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::index::{self, RemoteIndexDef};
use crate::pending::{self, Step, StepOp};
use crate::schema::{self, KeyArg, TableEntity};
use crate::table::Table;
use crate::value::Value;

/// What [`Table::verify_remote_indexes`] found for one partition's
/// entities: where their rows in the indexes kept elsewhere differ from
/// what the entities ask for.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RemoteAudit {
    /// Rows an entity should have that are not there: `(table, row)`.
    pub missing: Vec<(String, Entity)>,
    /// Rows there with other content than their entity's: `(table, row as
    /// it should be)`.
    pub stale: Vec<(String, Entity)>,
    /// Rows no entity of the partition should have: `(table, PartitionKey,
    /// RowKey)`.
    pub orphans: Vec<(String, String, String)>,
    /// Outbox records still pending in the partition: until they are
    /// finished, differences may be steps on their way, not faults.
    pub pending: usize,
}

impl RemoteAudit {
    /// Whether every row is in step and nothing is pending.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.stale.is_empty()
            && self.orphans.is_empty()
            && self.pending == 0
    }
}

fn sorted(entity: &Entity) -> Vec<(&str, &Value)> {
    let mut props: Vec<(&str, &Value)> = entity.properties.iter().collect();
    props.sort_by(|a, b| a.0.cmp(b.0));
    props
}

/// One step of a table-wide check of the indexes kept elsewhere: what it
/// found in the partitions it went through, and where the next starts.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RemotePass {
    /// What was found (and, for a repair, fixed), all partitions together.
    pub audit: RemoteAudit,
    /// Partitions of entities gone through.
    pub partitions: usize,
    /// The PartitionKey to resume after; `None` when the table is done.
    pub resume: Option<String>,
}

/// A place an index's rows for one source partition live in.
struct Place {
    def: &'static RemoteIndexDef,
    table: String,
    partition: String,
}

impl<T: TableEntity> Table<T> {
    /// Compares the rows of `T`'s indexes kept in other partitions or
    /// tables, for the entities of partition `pk`, with what those entities
    /// ask for. Reads the partition and each index's partition once; writes
    /// nothing.
    pub fn verify_remote_indexes(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
    ) -> crate::error::Call<'_, RemoteAudit> {
        let pk = schema::encode_partition_key::<T>(&pk);
        Box::pin(async move { Ok(self.remote_audit(&pk?).await?.0) })
    }

    /// [`verify_remote_indexes`](Table::verify_remote_indexes), then
    /// repairs: pending outbox records are finished first; then each entity
    /// whose rows are missing, stale or left over is written again as it is
    /// (its ETag guarding the write, so that a concurrent writer wins), with
    /// a sequence number above every fence of its rows, and its steps put
    /// every row right. Rows that belong to no entity of the partition are
    /// deleted the same way. Running it again finds nothing. Returns what
    /// was found.
    pub fn repair_remote_indexes(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
    ) -> crate::error::Call<'_, RemoteAudit> {
        let pk = schema::encode_partition_key::<T>(&pk);
        Box::pin(async move { self.repair_remote(&pk?).await })
    }

    /// [`repair_remote_indexes`](Table::repair_remote_indexes) of the
    /// encoded PartitionKey `pk`.
    async fn repair_remote(&self, pk: &str) -> Result<RemoteAudit> {
        let pk = pk.to_owned();
        let (found, _) = self.remote_audit(&pk).await?;
        // Records first: their steps may be all there is to it.
        let filter = Filter::partition_key()
            .eq(pk.as_str())
            .and(pending::row_key_prefix(pending::OUTBOX_PREFIX));
        let records = self
            .backend
            .query_all(&self.name, crate::backend::Query::new().filter(filter))
            .await?;
        for row in records.iter().filter(|row| pending::is_outbox_row(row)) {
            pending::finish_record(self.backend.as_ref(), &pending::Record::from_row(row)?).await?;
        }
        let (audit, entities) = self.remote_audit(&pk).await?;
        // Which entity each problem is about, by the RowKey its row names.
        let mut owners: BTreeMap<String, Vec<StepOp>> = BTreeMap::new();
        let mut fences: Vec<(String, String, String)> = Vec::new();
        let mut lists = Vec::new();
        for (table, row) in audit.missing.iter().chain(&audit.stale) {
            if row.properties.contains(index::LIST_FIRST_PROPERTY) {
                // An index entity, shared: written whole, as it should be.
                lists.push((table, row));
                continue;
            }
            let owner = owner_of(row);
            owners.entry(owner).or_default();
            fences.push((
                table.clone(),
                row.partition_key.clone(),
                row.row_key.clone(),
            ));
        }
        for (table, row) in lists {
            let upsert = EntityWrite::Upsert(row, UpdateMode::Replace);
            crate::exec::write_one(self.backend.as_ref(), table, upsert).await?;
        }
        let mut orphan_steps = Vec::new();
        for (table, partition, rk) in &audit.orphans {
            fences.push((table.clone(), partition.clone(), rk.clone()));
            orphan_steps.push((table.clone(), partition.clone(), rk.clone()));
        }
        // Above every fence touched, so that no step is skipped.
        let mut top = 0;
        for (table, partition, rk) in &fences {
            top = top.max(pending::read_fence(self.backend.as_ref(), table, partition, rk).await?);
        }
        for owner in owners.keys() {
            let Some(entity) = entities.get(owner) else {
                continue;
            };
            let seq = top.max(pending::seq_of(entity)) + 1;
            self.rewrite_remote(&pk, entity, seq).await?;
        }
        for (table, partition, rk) in orphan_steps {
            let step = Step {
                table,
                partition_key: partition,
                fence: rk.clone(),
                seq: top + 1,
                ops: vec![StepOp::Delete(rk)],
            };
            pending::apply_step(self.backend.as_ref(), &step).await?;
        }
        Ok(found)
    }

    /// Verifies (and, with `repair`, repairs) the indexes kept elsewhere of
    /// the entities of up to `partitions` partitions of the table, in
    /// PartitionKey order, after `resume` (the `resume` of the pass before;
    /// `None` to start). Store `resume` to go on later, after a crash
    /// included: a partition is done as a whole or not at all.
    pub async fn repair_all_remote_indexes(
        &self,
        resume: Option<&str>,
        partitions: usize,
        repair: bool,
    ) -> Result<RemotePass> {
        use futures::TryStreamExt;
        let mut pass = RemotePass::default();
        let filter = match resume {
            Some(after) => Filter::partition_key().gt(after),
            None => Filter::row_key().ge(""),
        };
        // The partitions that hold entities of `T`, in order: the keys are
        // enough to tell.
        let query = crate::backend::Query::new()
            .filter(filter)
            .select([crate::schema::KIND_PROPERTY]);
        let rows = self.backend.query_stream(&self.name, query);
        futures::pin_mut!(rows);
        let mut found: Vec<String> = Vec::new();
        while let Some(row) = rows.try_next().await? {
            if found.last() == Some(&row.partition_key) {
                continue;
            }
            let entity = !pending::is_bookkeeping_row(&row)
                && T::DESCRIPTOR.row_key_layout.starts(&row.row_key)
                && schema::is_kind::<T>(&row);
            if !entity {
                continue;
            }
            if found.len() == partitions {
                // One more partition exists: resume after the last done.
                pass.resume = found.last().cloned();
                break;
            }
            found.push(row.partition_key);
        }
        for pk in &found {
            let audit = if repair {
                self.repair_remote(pk).await?
            } else {
                self.remote_audit(pk).await?.0
            };
            pass.partitions += 1;
            pass.audit.missing.extend(audit.missing);
            pass.audit.stale.extend(audit.stale);
            pass.audit.orphans.extend(audit.orphans);
            pass.audit.pending += audit.pending;
        }
        Ok(pass)
    }

    /// Writes `entity`'s sequence number `seq` and an outbox record of
    /// steps that put its rows in every index kept elsewhere, guarded by
    /// its ETag, then finishes the record.
    async fn rewrite_remote(&self, pk: &str, entity: &Entity, seq: i64) -> Result<()> {
        let value: T = schema::read_for_keys(entity)?;
        let mut row = entity.clone();
        row.properties.insert(pending::SEQ_PROPERTY, seq);
        // From no rows to every row: each put, each list joined, all
        // fenced above what is there.
        let new = (0..super::remote_indexes::<T>().len())
            .map(|i| {
                schema::remote_key(&value, i, &entity.row_key)
                    .map(|key| Some(key).filter(|key| !key.is_empty()))
            })
            .collect::<Result<Vec<_>>>()?;
        let steps = index::remote_steps::<T>(
            &self.name,
            (pk, &entity.row_key),
            seq,
            (&vec![None; new.len()], &new),
            Some(&row),
        );
        let record = pending::record_row(
            &self.name,
            pk,
            &entity.row_key,
            seq,
            self.clock.now(),
            "repair",
            &steps,
        );
        let etag = entity.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        let mut seq_only = Entity::new(pk, entity.row_key.clone());
        seq_only.properties.insert(pending::SEQ_PROPERTY, seq);
        let operations = [
            BatchOperation::Update {
                entity: seq_only,
                mode: UpdateMode::Merge,
                if_match: etag,
            },
            BatchOperation::Insert(record),
        ];
        match crate::exec::send_operations(self.backend.as_ref(), &self.name, &operations).await {
            Ok(_) => {}
            // A writer changed the entity meanwhile: its own steps follow.
            Err(Error::BatchFailed { index: 0, .. }) => return Ok(()),
            Err(error) => return Err(error),
        }
        self.finish_after_commit(pk, &entity.row_key).await;
        Ok(())
    }

    /// What the remote indexes of partition `pk` should hold against what
    /// they hold, and the partition's entities by RowKey.
    async fn remote_audit(&self, pk: &str) -> Result<(RemoteAudit, BTreeMap<String, Entity>)> {
        let mut audit = RemoteAudit::default();
        let rows = self
            .backend
            .query_all(
                &self.name,
                crate::backend::Query::new().filter(Filter::partition_key().eq(pk)),
            )
            .await?;
        let mut entities = BTreeMap::new();
        let mut expected: BTreeMap<(String, String, String), Entity> = BTreeMap::new();
        // Index entities: the RowKeys each should list.
        let mut lists: BTreeMap<(String, String, String), (&RemoteIndexDef, Vec<String>)> =
            BTreeMap::new();
        for row in &rows {
            if pending::is_outbox_row(row) {
                audit.pending += 1;
                continue;
            }
            if pending::is_bookkeeping_row(row)
                || !schema::is_kind::<T>(row)
                || !T::DESCRIPTOR.row_key_layout.starts(&row.row_key)
            {
                continue;
            }
            let value: T = schema::read_for_keys(row)?;
            for (i, def) in super::remote_indexes::<T>().iter().enumerate() {
                let key = schema::remote_key(&value, i, &row.row_key)?;
                if key.is_empty() {
                    // No value, no row.
                    continue;
                }
                let (table, partition) = def.place(&self.name, pk);
                if def.index.list {
                    lists
                        .entry((table, partition, key))
                        .or_insert_with(|| (def, Vec::new()))
                        .1
                        .push(row.row_key.clone());
                    continue;
                }
                let mut index_row = index::index_row::<T>(&def.index, key.clone(), row);
                index_row.partition_key.clone_from(&partition);
                expected.insert((table, partition, key), index_row);
            }
            entities.insert(row.row_key.clone(), row.clone());
        }
        for ((table, partition, key), (def, mut members)) in lists {
            members.sort();
            let marker = T::DESCRIPTOR.kind_properties.then_some(def.index.name);
            let row =
                index::list_row_named(marker, &partition, &key, &members).map_err(|entries| {
                    crate::error::InvalidInput::IndexListFull {
                        index: def.index.name,
                        value: key.clone(),
                        entries,
                        max_chars: index::LIST_MAX_CHARS,
                    }
                })?;
            expected.insert((table, partition, key), row);
        }
        let places = super::remote_indexes::<T>().iter().map(|def| {
            let (table, partition) = def.place(&self.name, pk);
            Place {
                def,
                table,
                partition,
            }
        });
        for place in places {
            let filter = Filter::partition_key()
                .eq(place.partition.as_str())
                .and(pending::row_key_prefix(&place.def.index.prefix()));
            let found = self
                .backend
                .query_all(&place.table, crate::backend::Query::new().filter(filter))
                .await?;
            for row in found {
                let key = (
                    place.table.clone(),
                    place.partition.clone(),
                    row.row_key.clone(),
                );
                match expected.remove(&key) {
                    None => audit.orphans.push(key),
                    Some(want) if sorted(&row) != sorted(&want) => {
                        audit.stale.push((place.table.clone(), want));
                    }
                    Some(_) => {}
                }
            }
        }
        for ((table, _, _), row) in expected {
            audit.missing.push((table, row));
        }
        Ok((audit, entities))
    }
}

/// The RowKey of the entity an index row names.
fn owner_of(row: &Entity) -> String {
    match row.properties.get(index::ROW_PROPERTY) {
        Some(Value::String(owner)) => owner.clone(),
        _ => String::new(),
    }
}
