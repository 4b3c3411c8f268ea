//! The rotation that rewraps: each row's content key, wrapped under an
//! older key-encryption key, is unwrapped and wrapped again under the
//! current one, and its envelope merged back, with the copies its index
//! rows hold, under the row's ETag. The values are not touched.

use futures::StreamExt;

use super::{Migration, MigrationCheckpoint, MigrationReport, Start};
use crate::backend::{BatchOperation, ContinuationToken, GetOptions, UpdateMode};
use crate::entity::{Entity, IfMatch};
use crate::error::{Error, Result};
use crate::pacing::Pacing;
use crate::schema::{Sharing, TableEntity, companions};
use crate::table::query::RowFailure;
use crate::value::Value;
use tablekit_encrypt::{ENVELOPE_PROPERTY, Envelope};

impl<T: TableEntity> Migration<'_, T> {
    /// Makes the migration a rotation that rewraps content keys alone: each
    /// row sealed under a key-encryption key other than the table's current
    /// one has its content key wrapped again under the current key, and its
    /// envelope (and the copies its index rows hold) merged back in one
    /// transaction, guarded by the row's ETag. The ciphertexts stay as they
    /// are: two requests per row, whatever its size, and no value is
    /// decrypted. (Without it, the migration reads every row and seals it
    /// again under a new content key: the re-encrypting rotation.)
    ///
    /// Readers and writers go on meanwhile: the resolver knows both keys
    /// (a [`LocalKeys`](crate::encryption::LocalKeys) ring with the new key
    /// current), a row a writer changed is read again (and found sealed
    /// under the current key already), and checkpoints resume a rewrap
    /// alone. Once it has finished, the old key reads nothing the table
    /// holds. Change-feed rows recorded before keep the values as they
    /// were, under the key they were written with.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tablekit::encryption::{LocalKey, LocalKeys};
    /// # use tablekit::{Table, TableEntity};
    /// # #[derive(TableEntity)]
    /// # #[tablekit(table = "Staff", kind = "EMP")]
    /// # struct Employee { #[tablekit(partition_key)] team: String, #[tablekit(row_key)] id: u32, #[tablekit(encrypted)] email: String }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// let old = LocalKey::new("2026", [1; 32]);
    /// let staff: Table<Employee> = Table::new(tablekit_mem::MemBackend::new())
    ///     .with_encryption(Arc::new(old.clone()));
    /// staff.create_if_missing().await?;
    /// staff.insert(&Employee { team: "eng".into(), id: 1, email: "ada@example.com".into() }).await?;
    ///
    /// let both = LocalKeys::new(old).with(LocalKey::new("2027", [2; 32]), true);
    /// let staff = staff.with_encryption(Arc::new(both));
    /// let report = staff.migrate().rewrap_only().run().await?;
    /// assert_eq!((report.rewrapped, report.failed), (1, 0));
    /// # Ok(()) }
    /// ```
    pub fn rewrap_only(mut self) -> Self {
        self.rewrap_only = true;
        self
    }

    /// Runs the rewrap, a page of envelopes at a time, a checkpoint after
    /// each.
    pub(super) async fn run_rewrap(mut self) -> Result<MigrationReport> {
        let Some(current) = self.table.current_key_id().map(str::to_owned) else {
            return Err(Error::NotSupported {
                operation: "a rewrap of a type without encrypted fields, or of a table given no keys",
            });
        };
        let job = self.job();
        let (mut report, mut token) = match self.start(&job)? {
            Start::Finished(report) => return Ok(report),
            Start::From(report, next) => {
                (report, next.map(|(pk, rk)| ContinuationToken::new(pk, rk)))
            }
        };
        let mut query = (self.scope)(self.table.query()).to_query();
        query.select = Some(vec![ENVELOPE_PROPERTY.to_owned()]);
        loop {
            query.continuation = token;
            let page = (self.table.backend())
                .query_entities(self.table.name(), &query)
                .await?;
            let mut done = MigrationReport {
                scanned: page.entities.len() + page.undecodable.len(),
                failed: page.undecodable.len(),
                ..MigrationReport::default()
            };
            let groups = futures::stream::iter(groups::<T>(page.entities))
                .map(|group| self.rewrap_group(group, &current))
                .buffer_unordered(self.parallelism);
            for group in groups.collect::<Vec<_>>().await {
                done.add(group);
            }
            report.add(done);
            token = page.continuation;
            let next = token.as_ref().map(|t| {
                let rk = t.next_row_key().map(str::to_owned);
                (t.next_partition_key().to_owned(), rk)
            });
            self.checkpoint(MigrationCheckpoint::new(&job, next, &report));
            if let Some(progress) = &mut self.progress {
                progress(&report);
            }
            if token.is_none() {
                return Ok(report);
            }
        }
    }

    /// Rewraps one row's content key (`row` holds its envelope alone), read
    /// again when another writer changed it first.
    async fn rewrap_row(&self, mut row: Entity, current: &str) -> MigrationReport {
        let mut report = MigrationReport::default();
        let (pk, rk) = (row.partition_key.clone(), row.row_key.clone());
        // Index rows found missing (the repair's work): not merged.
        let mut missing: Vec<String> = Vec::new();
        let mut last = None;
        for _ in 0..super::ATTEMPTS {
            let error = match self.rewrap_once(&row, current, &missing).await {
                Ok(true) => {
                    report.rewrapped += 1;
                    return report;
                }
                Ok(false) => {
                    report.already_current += 1;
                    return report;
                }
                Err(e) => e,
            };
            match error {
                // The row changed (or went) meanwhile: read again.
                Error::BatchFailed { index: 0, source }
                    if matches!(
                        *source,
                        Error::PreconditionFailed { .. } | Error::EntityNotFound { .. }
                    ) =>
                {
                    report.retried += 1;
                    let envelope = GetOptions::default().select([ENVELOPE_PROPERTY]);
                    match (self.table.backend())
                        .get_entity(self.table.name(), &pk, &rk, &envelope)
                        .await
                    {
                        Ok(again) => row = again,
                        Err(Error::EntityNotFound { .. }) => return report,
                        Err(e) => {
                            last = Some(e);
                            break;
                        }
                    }
                }
                Error::BatchFailed { index, source }
                    if matches!(*source, Error::EntityNotFound { .. }) =>
                {
                    // Numbered among the index rows it merged.
                    let merged = index_rows::<T>(&row)
                        .into_iter()
                        .filter(|k| !missing.contains(k));
                    let gone = merged.into_iter().nth(index - 1);
                    missing.extend(gone);
                }
                e => {
                    last = Some(e);
                    break;
                }
            }
        }
        report.failed += 1;
        if let Some(e) = last {
            report.fail(RowFailure::at(&pk, &rk, &e));
        }
        report
    }

    /// Rewraps the rows of one partition in one transaction; each on its
    /// own when that does not apply (a row changed meanwhile, an index row
    /// missing).
    async fn rewrap_group(&self, rows: Vec<Entity>, current: &str) -> MigrationReport {
        let mut report = MigrationReport::default();
        if rows.len() > 1 && !self.dry_run {
            let mut operations = Vec::new();
            let mut rewrapped = 0;
            let mut prepared = true;
            for row in &rows {
                match self.operations(row, current, &[]).await {
                    Ok(Some(ops)) => {
                        operations.extend(ops);
                        rewrapped += 1;
                    }
                    Ok(None) => {}
                    Err(_) => prepared = false,
                }
            }
            if prepared
                && (operations.is_empty() || self.submit(&operations, rewrapped).await.is_ok())
            {
                report.rewrapped = rewrapped;
                report.already_current = rows.len() - rewrapped;
                return report;
            }
        }
        for row in rows {
            report.add(self.rewrap_row(row, current).await);
        }
        report
    }

    /// One attempt: whether the row needed a rewrap (and got it).
    async fn rewrap_once(&self, row: &Entity, current: &str, missing: &[String]) -> Result<bool> {
        match self.operations(row, current, missing).await? {
            None => Ok(false),
            Some(_) if self.dry_run => Ok(true),
            Some(operations) => self.submit(&operations, 1).await.map(|()| true),
        }
    }

    /// Sends the merges of `rows` rows as one transaction, paced.
    async fn submit(&self, operations: &[BatchOperation], rows: usize) -> Result<()> {
        let partition = operations.first().map_or("", |op| op.keys().0);
        if let Some(pacing) = &self.pacing {
            Pacing::wait(pacing.reserve(partition, rows)).await;
        }
        crate::exec::submit_transaction(self.table.backend(), self.table.name(), operations)
            .await?;
        if let Some(pacing) = &self.pacing {
            pacing.accepted(partition, rows);
        }
        Ok(())
    }

    /// The merges that rewrap `row` (its envelope alone) and the copies its
    /// index rows hold (but those `missing`); `None` when it needs none (it
    /// is sealed under `current`, or holds nothing sealed). In a dry run,
    /// nothing is unwrapped.
    async fn operations(
        &self,
        row: &Entity,
        current: &str,
        missing: &[String],
    ) -> Result<Option<Vec<BatchOperation>>> {
        let envelope = match row.get(ENVELOPE_PROPERTY) {
            Some(Value::String(text)) => Envelope::from_text(text)?,
            None => return Ok(None),
            Some(other) => {
                return Err(tablekit_encrypt::EncryptionError::BadEnvelope {
                    reason: format!("it is {}, not a string", other.edm_type()),
                }
                .into());
            }
        };
        if envelope.key_id == current {
            return Ok(None);
        }
        if self.dry_run {
            return Ok(Some(Vec::new()));
        }
        let keys = (self.table.keys.as_deref()).expect("a table with a current key has keys");
        let content = keys.unwrap(&envelope.key_id, &envelope.wrapped).await?;
        let rewrapped = Envelope {
            key_id: current.to_owned(),
            wrapped: keys.wrap(current, &content).await?,
            ..envelope
        };
        let text = rewrapped.to_text();
        let merged = |row_key: &str, if_match: IfMatch| BatchOperation::Update {
            entity: Entity::new(&row.partition_key, row_key)
                .with(ENVELOPE_PROPERTY, Value::String(text.clone())),
            mode: UpdateMode::Merge,
            if_match,
        };
        let guard = row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        let mut operations = vec![merged(&row.row_key, guard)];
        // Every index row in its step: those found missing are the repair's.
        for key in index_rows::<T>(row) {
            if !missing.contains(&key) {
                operations.push(merged(&key, IfMatch::Any));
            }
        }
        Ok(Some(operations))
    }
}

/// The rows of a page in groups of one partition each, each group's
/// merges within one transaction.
fn groups<T: TableEntity>(rows: Vec<Entity>) -> Vec<Vec<Entity>> {
    let max = crate::validate::limits::MAX_BATCH_OPERATIONS;
    let mut groups: Vec<(usize, Vec<Entity>)> = Vec::new();
    for row in rows {
        let size = 1 + index_rows::<T>(&row).len();
        match groups.last_mut() {
            Some((n, group)) if group[0].partition_key == row.partition_key && *n + size <= max => {
                *n += size;
                group.push(row);
            }
            _ => groups.push((size, vec![row])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// The RowKeys of the index rows of `row` (its envelope alone) that copy
/// its envelope: those it records, but for index entities (which list
/// RowKeys and copy nothing).
fn index_rows<T: TableEntity>(row: &Entity) -> Vec<String> {
    let Some(Value::String(text)) = row.get(ENVELOPE_PROPERTY) else {
        return Vec::new();
    };
    let (Ok(envelope), Some(rows)) = (Envelope::from_text(text), companions::<T>()) else {
        return Vec::new();
    };
    (envelope.indexed.into_iter().enumerate())
        .filter(|(i, key)| {
            !key.is_empty() && *i < rows.local() && rows.sharing(*i) != Sharing::Listed
        })
        .map(|(_, key)| key)
        .collect()
}
