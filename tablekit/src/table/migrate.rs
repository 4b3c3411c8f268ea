//! Rewriting the stored rows of older versions of an entity type as the
//! current version: [`Table::migrate`].

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::query::{RowErrors, RowFailure, SkippedRows, TableQuery};
use super::{Loaded, Table};
use crate::backend::ContinuationToken;
use crate::error::{Error, InvalidInput, Result};
use crate::pacing::Pacing;
use crate::schema::{KeyArg, TableEntity};

mod rewrap;

/// What a [`Migration`] found and did. The counts stop at `usize::MAX`
/// rather than wrap.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(deny_unknown_fields)]
pub struct MigrationReport {
    /// Rows read.
    pub scanned: usize,
    /// Rows of an older version rewritten as the current one (in a dry run:
    /// that would be).
    pub upgraded: usize,
    /// Rows of the current version already, left as they were.
    pub already_current: usize,
    /// Rows another writer changed between the read and the rewrite: read
    /// again, and rewritten if still older.
    pub retried: usize,
    /// Rows that could not be read or rewritten.
    pub failed: usize,
    /// How many rows of each stored version were found, before the rewrite.
    pub by_version: BTreeMap<u32, usize>,
    /// Rows of the current version whose encrypted values were sealed
    /// under a key other than the table's current one: sealed again under
    /// it (a rotation), and counted in `upgraded` too.
    #[serde(default)]
    pub resealed: usize,
    /// Rows whose content key a [rewrap](Migration::rewrap_only) wrapped
    /// again under the table's current key, their values untouched (in a
    /// dry run: that would be).
    #[serde(default)]
    pub rewrapped: usize,
    /// Rows found under a previous name of the kind (`previous_kinds`),
    /// before the rewrite: each is moved to the kind's own RowKey, in one
    /// transaction with its index rows, and counted in `upgraded` too.
    #[serde(default)]
    pub previous_kind: usize,
    /// The first rows counted in `failed` (at most
    /// [`MigrationReport::KEPT_FAILURES`]), each with its keys and why it
    /// could not be read or rewritten.
    #[serde(default)]
    pub failures: Vec<RowFailure>,
}

impl MigrationReport {
    /// How many failures a report keeps: the first ones.
    pub const KEPT_FAILURES: usize = SkippedRows::KEPT_FAILURES;

    fn add(&mut self, other: MigrationReport) {
        self.scanned = self.scanned.saturating_add(other.scanned);
        self.upgraded = self.upgraded.saturating_add(other.upgraded);
        self.already_current = self.already_current.saturating_add(other.already_current);
        self.retried = self.retried.saturating_add(other.retried);
        self.failed = self.failed.saturating_add(other.failed);
        self.previous_kind = self.previous_kind.saturating_add(other.previous_kind);
        self.resealed = self.resealed.saturating_add(other.resealed);
        self.rewrapped = self.rewrapped.saturating_add(other.rewrapped);
        for (version, n) in other.by_version {
            let count = self.by_version.entry(version).or_default();
            *count = count.saturating_add(n);
        }
        for failure in other.failures {
            self.fail(failure);
        }
    }

    /// Keeps `failure`, while fewer than [`KEPT_FAILURES`](Self::KEPT_FAILURES)
    /// are kept (the count is `failed`'s).
    fn fail(&mut self, failure: RowFailure) {
        if self.failures.len() < Self::KEPT_FAILURES {
            self.failures.push(failure);
        }
    }
}

/// What a migration is, as its checkpoints name it: a checkpoint resumes
/// only the migration it was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MigrationJob {
    /// The table.
    pub table: String,
    /// The Rust type migrated to.
    pub type_name: String,
    /// Its kind, if it has one.
    pub kind: Option<String>,
    /// The version rows are rewritten as.
    pub version: u32,
    /// The oldest version it reads.
    pub min_version: u32,
    /// The filter of its scope (the kind's range and anything
    /// [`scope`](Migration::scope) adds), as the store is sent it.
    pub scope: Option<String>,
    /// Whether it is a [dry run](Migration::dry_run), which counts and
    /// writes nothing: its checkpoints resume dry runs alone, since a real
    /// run that went on after them would leave the rows they counted as
    /// they were.
    #[serde(default)]
    pub dry_run: bool,
    /// For a type with encrypted fields, the key rows are sealed under:
    /// the rows of other keys are sealed again under it.
    #[serde(default)]
    pub key_id: Option<String>,
    /// Whether it [rewraps](Migration::rewrap_only) content keys alone.
    #[serde(default)]
    pub rewrap_only: bool,
}

impl MigrationJob {
    /// The first of what `self` names that differs from `current`, as
    /// the error a resume from it is refused with.
    fn differs(&self, current: &MigrationJob) -> Option<InvalidInput> {
        let text = |v: &dyn std::fmt::Debug| format!("{v:?}");
        let fields: [(&'static str, String, String); 9] = [
            ("table", text(&self.table), text(&current.table)),
            ("type", text(&self.type_name), text(&current.type_name)),
            ("kind", text(&self.kind), text(&current.kind)),
            ("version", text(&self.version), text(&current.version)),
            (
                "oldest version",
                text(&self.min_version),
                text(&current.min_version),
            ),
            ("scope", text(&self.scope), text(&current.scope)),
            ("dry run", text(&self.dry_run), text(&current.dry_run)),
            ("key", text(&self.key_id), text(&current.key_id)),
            (
                "rewrap",
                text(&self.rewrap_only),
                text(&current.rewrap_only),
            ),
        ];
        InvalidInput::first_mismatch("migration", fields)
    }
}

/// Where a migration stands in its scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Position {
    /// Every page is done.
    Finished,
    /// The next page's continuation token (next PartitionKey and RowKey);
    /// for a wide type, the stored keys of the last entity done.
    At {
        partition_key: String,
        row_key: Option<String>,
    },
}

/// Where a migration stands: the page it goes on from, and its report so
/// far. Handed out after every page
/// ([`on_checkpoint`](Migration::on_checkpoint)); a migration started again
/// with it ([`resume`](Migration::resume)) never reads the finished pages
/// again, and its report goes on counting. Serializable, to keep in a file
/// or a row between runs.
///
/// Every member must be there, and no other: a text that is cut short or
/// edited is refused when read, never taken as finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationCheckpoint {
    /// The migration it belongs to.
    job: MigrationJob,
    /// Where it stands.
    position: Position,
    /// The report so far.
    pub report: MigrationReport,
}

impl MigrationCheckpoint {
    /// Whether the migration it was taken from had finished.
    pub fn is_finished(&self) -> bool {
        self.position == Position::Finished
    }

    /// The migration it belongs to.
    pub fn job(&self) -> &MigrationJob {
        &self.job
    }

    /// A checkpoint of `job` at `next` (`None`: finished).
    fn new(
        job: &MigrationJob,
        next: Option<(String, Option<String>)>,
        report: &MigrationReport,
    ) -> MigrationCheckpoint {
        MigrationCheckpoint {
            job: job.clone(),
            position: match next {
                None => Position::Finished,
                Some((partition_key, row_key)) => Position::At {
                    partition_key,
                    row_key,
                },
            },
            report: report.clone(),
        }
    }
}

/// Where a migration run starts.
enum Start {
    /// The checkpoint resumed was taken at the end: nothing is left.
    Finished(MigrationReport),
    /// The report so far, and the checkpoint's position (none afresh).
    From(MigrationReport, Option<(String, Option<String>)>),
}

/// What a migration calls with its report after each page.
type Progress<'a> = Box<dyn FnMut(&MigrationReport) + Send + 'a>;
/// What a migration calls with its checkpoint after each page.
type OnCheckpoint<'a> = Box<dyn FnMut(&MigrationCheckpoint) + Send + 'a>;
/// How a migration narrows the query it reads.
type Scope<'a, T> = Box<dyn Fn(TableQuery<T>) -> TableQuery<T> + Send + Sync + 'a>;

/// How many times a row another writer keeps changing is read again.
const ATTEMPTS: usize = 4;

/// A rewrite of the rows of older versions of `T` as its current version,
/// over the whole table, a partition, or any scope a query can name; see
/// [`Table::migrate`].
pub struct Migration<'a, T: TableEntity> {
    table: &'a Table<T>,
    scope: Scope<'a, T>,
    dry_run: bool,
    progress: Option<Progress<'a>>,
    on_checkpoint: Option<OnCheckpoint<'a>>,
    resume: Option<MigrationCheckpoint>,
    parallelism: usize,
    pacing: Option<Pacing>,
    rewrap_only: bool,
}

impl<T: TableEntity> Table<T> {
    /// Rewrites every row of an older version of `T` (one its
    /// `min_version`, its aliases or its `upgrade_from` chain reads) as the
    /// current version, so that old shapes leave the table.
    ///
    /// The rows are read a page at a time. Each row is read as `T`
    /// (upgraded) and written back guarded by the ETag read, index rows
    /// included; the rows of one partition go in transactions together, a
    /// few partitions at once ([`parallelism`](Migration::parallelism)),
    /// paced like the bulk writer. A row another writer changed meanwhile is
    /// read again: that writer's version wins, and is rewritten only if it
    /// is still older. Rows of the current version are left untouched, so
    /// a migration may be run again and finishes the same.
    ///
    /// For a renamed kind (`previous_kinds`), the rows still under an old
    /// name are rewritten too, whatever their version: each moves to the
    /// kind's own RowKey in one transaction with its index rows
    /// ([`MigrationReport::previous_kind`] counts them). A moved row is met
    /// again under the new name later in the same run, and counted there as
    /// current.
    ///
    /// After each page it hands out a [`MigrationCheckpoint`]: a migration
    /// that stopped (a crash, a deploy) starts again from its last one and
    /// does not read the finished pages again. Entities of wide types, whose
    /// parts a page may split, are read as a stream and rewritten one at a
    /// time, with a checkpoint after each entity; a run resumed from one
    /// reads on after that entity.
    ///
    /// ```
    /// # use tablekit::{Table, TableEntity};
    /// # #[derive(TableEntity, Clone)]
    /// # #[tablekit(table = "Items", kind = "ITEM", version = 2, min_version = 1)]
    /// # struct Item { #[tablekit(partition_key)] shop: String, #[tablekit(row_key)] sku: u32, #[tablekit(default)] stock: u32 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// # let items: Table<Item> = Table::new(tablekit_mem::MemBackend::new());
    /// # items.create_if_missing().await?;
    /// let counted = items.migrate().dry_run().run().await?;
    /// println!("rows per version: {:?}", counted.by_version);
    /// let mut last = None;
    /// let done = items
    ///     .migrate()
    ///     .on_progress(|r| println!("{} rows read", r.scanned))
    ///     .on_checkpoint(|c| last = Some(c.clone())) // keep it, to resume
    ///     .run()
    ///     .await?;
    /// assert_eq!(done.failed, 0);
    /// assert!(last.is_some_and(|c| c.is_finished()));
    /// # Ok(()) }
    /// ```
    pub fn migrate(&self) -> Migration<'_, T> {
        Migration {
            table: self,
            scope: Box::new(|q| q),
            dry_run: false,
            progress: None,
            on_checkpoint: None,
            resume: None,
            parallelism: 4,
            rewrap_only: false,
            pacing: Some(
                self.backend()
                    .pacing()
                    .unwrap_or_else(Pacing::service_targets),
            ),
        }
    }
}

impl<'a, T: TableEntity> Migration<'a, T> {
    /// Keeps to one partition.
    pub fn partition(self, pk: impl KeyArg<T::PartitionKey>) -> Self {
        let mut key = String::new();
        pk.write_key_arg(&mut key);
        self.scope(move |q| q.partition_encoded(key.clone()))
    }

    /// Keeps to the rows `scope` selects from the table's query: a
    /// partition, a partition prefix, a RowKey range, a filter.
    ///
    /// ```
    /// # use tablekit::{Table, TableEntity};
    /// # #[derive(TableEntity, Clone)]
    /// # #[tablekit(table = "Items", kind = "ITEM", version = 2, min_version = 1)]
    /// # struct Item { #[tablekit(partition_key)] shop: String, #[tablekit(row_key)] sku: u32 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// # let items: Table<Item> = Table::new(tablekit_mem::MemBackend::new());
    /// # items.create_if_missing().await?;
    /// items.migrate().scope(|q| q.partition("north").rows(100..200)).run().await?;
    /// # Ok(()) }
    /// ```
    pub fn scope(
        mut self,
        scope: impl Fn(TableQuery<T>) -> TableQuery<T> + Send + Sync + 'a,
    ) -> Self {
        let before = std::mem::replace(&mut self.scope, Box::new(|q| q));
        self.scope = Box::new(move |q| scope(before(q)));
        self
    }

    /// Counts, writes nothing: `upgraded` is how many rows would be.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// Calls `progress` with the report so far after each page (after each
    /// row, for wide entities).
    pub fn on_progress(mut self, progress: impl FnMut(&MigrationReport) + Send + 'a) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Calls `f` with a checkpoint after each page is rewritten; the last
    /// one [`is_finished`](MigrationCheckpoint::is_finished).
    pub fn on_checkpoint(mut self, f: impl FnMut(&MigrationCheckpoint) + Send + 'a) -> Self {
        self.on_checkpoint = Some(Box::new(f));
        self
    }

    /// Goes on from `checkpoint`, taken from a migration of the same table,
    /// type and scope, and a dry run's only by a dry run (another's is
    /// refused with [`InvalidInput::CheckpointMismatch`], which says what
    /// differs).
    pub fn resume(mut self, checkpoint: MigrationCheckpoint) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// At most `n` partitions rewritten at once (4 by default; at least 1).
    pub fn parallelism(mut self, n: usize) -> Self {
        self.parallelism = n.max(1);
        self
    }

    /// The rates the rewrites keep to (the service's targets by default).
    pub fn pacing(mut self, pacing: Pacing) -> Self {
        self.pacing = Some(pacing);
        self
    }

    /// Rewrites as fast as the store takes them.
    pub fn unpaced(mut self) -> Self {
        self.pacing = None;
        self
    }

    /// What this migration is, for its checkpoints.
    fn job(&self) -> MigrationJob {
        let query = (self.scope)(self.table.query()).to_query();
        MigrationJob {
            table: self.table.name().to_owned(),
            type_name: std::any::type_name::<T>().to_owned(),
            kind: T::DESCRIPTOR.kind.map(str::to_owned),
            version: T::DESCRIPTOR.version,
            min_version: T::DESCRIPTOR.min_version,
            scope: query.filter.map(|f| f.to_string()),
            dry_run: self.dry_run,
            key_id: self.table.current_key_id().map(str::to_owned),
            rewrap_only: self.rewrap_only,
        }
    }

    /// Runs the migration; the report of what it found and did (with a
    /// checkpoint's report added, when resumed).
    ///
    /// # Errors
    /// The store's, when a page cannot be read; [`InvalidInput::CheckpointMismatch`] for
    /// a checkpoint of another migration; [`Error::NotSupported`] for a
    /// migration (other than a dry run) through a projection, which would
    /// drop the fields it leaves out. A row that cannot be read or
    /// rewritten is counted in `failed`, not an error.
    pub async fn run(mut self) -> Result<MigrationReport> {
        // A projection's rows are its entity's: rewriting them through the
        // projection would drop the fields it leaves out.
        if T::DESCRIPTOR.base.is_some() && !self.dry_run {
            return Err(Error::NotSupported {
                operation: "a migration through a projection (migrate the entity it projects)",
            });
        }
        if self.rewrap_only {
            return self.run_rewrap().await;
        }
        if T::DESCRIPTOR.wide() {
            return self.run_streamed().await;
        }
        let job = self.job();
        let (mut report, token) = match self.start(&job)? {
            Start::Finished(report) => return Ok(report),
            Start::From(report, next) => {
                (report, next.map(|(pk, rk)| ContinuationToken::new(pk, rk)))
            }
        };
        let mut fetched = self.read_page(token).await;
        loop {
            let (items, next, skipped) = fetched?;
            let mut page = MigrationReport {
                scanned: items.len().saturating_add(skipped.count()),
                failed: skipped.count(),
                failures: skipped.failures(),
                ..MigrationReport::default()
            };
            // The next page is read while this one is rewritten.
            let rewritten = match &next {
                Some(token) => {
                    let (rewritten, more) = futures::join!(
                        self.rewrite_page(items),
                        self.read_page(Some(token.clone()))
                    );
                    fetched = more;
                    rewritten
                }
                None => {
                    fetched = Ok((Vec::new(), None, SkippedRows::default()));
                    self.rewrite_page(items).await
                }
            };
            page.add(rewritten);
            report.add(page);
            self.checkpoint(MigrationCheckpoint::new(
                &job,
                next.as_ref().map(|t| {
                    (
                        t.next_partition_key().to_owned(),
                        t.next_row_key().map(str::to_owned),
                    )
                }),
                &report,
            ));
            if let Some(progress) = &mut self.progress {
                progress(&report);
            }
            if next.is_none() {
                if !self.dry_run {
                    // A time to live removed (or moved) leaves index rows
                    // that nothing reads any more.
                    self.table.drop_stale_expiry_rows().await?;
                }
                return Ok(report);
            }
        }
    }

    /// Where a run starts: afresh, or from the checkpoint it resumes
    /// (refused if the checkpoint is of another migration).
    fn start(&mut self, job: &MigrationJob) -> Result<Start> {
        let Some(checkpoint) = self.resume.take() else {
            return Ok(Start::From(MigrationReport::default(), None));
        };
        if let Some(differs) = checkpoint.job.differs(job) {
            return Err(differs.into());
        }
        Ok(match checkpoint.position {
            Position::Finished => Start::Finished(checkpoint.report),
            Position::At {
                partition_key,
                row_key,
            } => Start::From(checkpoint.report, Some((partition_key, row_key))),
        })
    }

    /// One page of the scope, from `token`: its rows, the next page's token,
    /// and the rows that could not be read as the type.
    async fn read_page(
        &self,
        token: Option<ContinuationToken>,
    ) -> Result<(Vec<Loaded<T>>, Option<ContinuationToken>, SkippedRows)> {
        let skipped = SkippedRows::default();
        let mut query =
            (self.scope)(self.table.query()).on_row_error(RowErrors::Skip(skipped.clone()));
        if let Some(token) = token {
            query = query.resume(token);
        }
        let (items, next) = query.page().await?;
        Ok((items, next, skipped))
    }

    /// Rewrites the older rows of one page: by partition, a few at once.
    async fn rewrite_page(&self, items: Vec<Loaded<T>>) -> MigrationReport {
        let mut report = MigrationReport::default();
        let mut partitions: BTreeMap<String, Vec<Loaded<T>>> = BTreeMap::new();
        for mut loaded in items {
            let renamed = Loaded::previous_kind(&loaded).is_some();
            report.previous_kind += usize::from(renamed);
            let version = Loaded::version(&loaded);
            if let Some(version) = version {
                *report.by_version.entry(version).or_default() += 1;
            }
            let resealed = loaded
                .sealed_under
                .as_deref()
                .is_some_and(|key| Some(key) != self.table.current_key_id());
            report.resealed += usize::from(resealed);
            if !renamed && !resealed && version.is_none_or(|v| v >= T::DESCRIPTOR.version) {
                report.already_current += 1;
                continue;
            }
            if self.dry_run {
                report.upgraded += 1;
                continue;
            }
            if !crate::schema::has_time_to_live::<T>() {
                // The time of the last write is kept for a time to live
                // alone: one removed from the type goes from its rows.
                loaded.unknown.remove(crate::schema::LAST_WRITE_PROPERTY);
            }
            match crate::schema::partition_key_of(&*loaded) {
                Ok(pk) => partitions.entry(pk).or_default().push(loaded),
                Err(e) => {
                    report.failed += 1;
                    report.fail(RowFailure::of(&e));
                }
            }
        }
        // Each partition's rows in transactions where the type allows; the
        // transactions of the page a few at once.
        let needs = T::DESCRIPTOR.write_needs();
        // (Entities that expire and keep rows beside them go one by one:
        // each write stamps, keeps and indexes its expiry time itself.)
        let expiring = crate::schema::expiry_property::<T>().is_some() && needs.any();
        let batchable = !needs.blobs && !T::DESCRIPTOR.wide() && !expiring;
        let per_transaction = if batchable {
            // A transaction that records changes also moves the feed's head.
            let head = usize::from(needs.changes);
            ((100 - head) / (1 + needs.rows)).max(1)
        } else {
            1
        };
        let mut chunks = Vec::new();
        for (pk, rows) in partitions {
            let key: Arc<str> = format!("{}\u{0}{pk}", self.table.name()).into();
            let mut rows = rows.into_iter().peekable();
            while rows.peek().is_some() {
                let chunk: Vec<Loaded<T>> = rows.by_ref().take(per_transaction).collect();
                chunks.push((Arc::clone(&key), chunk));
            }
        }
        let done: Vec<MigrationReport> = futures::stream::iter(chunks)
            .map(|(key, chunk)| self.rewrite_chunk(key, chunk))
            .buffer_unordered(self.parallelism)
            .collect()
            .await;
        for partial in done {
            report.add(partial);
        }
        report
    }

    /// Rewrites the older rows of one chunk of a partition: in one
    /// transaction if it holds more than one and that applies, else each row
    /// on its own.
    async fn rewrite_chunk(&self, key: Arc<str>, chunk: Vec<Loaded<T>>) -> MigrationReport {
        let mut report = MigrationReport::default();
        if let Some(pacing) = &self.pacing {
            Pacing::wait(pacing.reserve(&key, chunk.len())).await;
        }
        if chunk.len() > 1 {
            match self.rewrite_together(&chunk).await {
                Ok(()) => {
                    if let Some(pacing) = &self.pacing {
                        pacing.accepted(&key, chunk.len());
                    }
                    report.upgraded += chunk.len();
                    return report;
                }
                Err(Error::Throttled { retry_after }) => {
                    let store = self.table.backend().store_info();
                    let now = std::time::Duration::ZERO;
                    crate::telemetry::throttled_here(&store, now, retry_after);
                    if let Some(pacing) = &self.pacing {
                        pacing.throttled(&key, chunk.len(), retry_after);
                    }
                }
                Err(_) => {}
            }
        }
        for loaded in chunk {
            self.migrate_row(loaded, &mut report).await;
        }
        report
    }

    /// Rewrites `chunk` in one transaction; its error if it did not apply
    /// (a row changed meanwhile, the rows do not fit one transaction, the
    /// store throttled it).
    async fn rewrite_together(&self, chunk: &[Loaded<T>]) -> Result<()> {
        if !T::DESCRIPTOR.write_needs().any() {
            // Rows alone: each built once and moved into its operation (a
            // transaction of typed writes keeps its writes, to plan them
            // again after a lost race, and so copies each row).
            let mut operations = Vec::with_capacity(chunk.len());
            for loaded in chunk {
                // Sealed again, under a new content key, for a type with
                // encrypted fields.
                let mut entity = self.table.row_of(&**loaded, false).await?;
                super::unknown::restore(&mut entity, Loaded::unknown_properties(loaded));
                super::unknown::keep_last_write(&mut entity, Loaded::unknown_properties(loaded));
                operations.push(crate::backend::BatchOperation::Update {
                    entity,
                    mode: crate::backend::UpdateMode::Replace,
                    if_match: crate::entity::IfMatch::ETag(Loaded::etag(loaded).clone()),
                });
            }
            let write = super::write::Write::Rows(&operations);
            return self.table.enter(write).await.map(drop);
        }
        let mut transaction = self.table.transaction();
        for loaded in chunk {
            transaction.replace(loaded)?;
        }
        let write = super::write::Write::Transaction(&transaction);
        self.table.enter(write).await.map(drop)
    }

    /// The migration of wide entities, whose parts a page may split: a
    /// stream, one entity at a time, with a checkpoint after each. A
    /// checkpoint names the last entity done, and a run resumed from it asks
    /// the store for the rows after that entity's parts only. (A sharded
    /// wide kind, whose stream merges its shards, takes no checkpoints: a run
    /// reads its whole scope again, rewriting only what is still older.)
    async fn run_streamed(mut self) -> Result<MigrationReport> {
        let job = self.job();
        let checkpoints = T::DESCRIPTOR.partitions.is_none();
        let mut query = (self.scope)(self.table.query());
        let mut report = match self.start(&job)? {
            Start::Finished(report) => return Ok(report),
            Start::From(report, Some((pk, Some(rk)))) if checkpoints => {
                query = query.after_entity(pk, rk);
                report
            }
            Start::From(report, _) => report,
        };
        let mut rows = query.on_row_error(RowErrors::Yield).stream();
        while let Some(row) = rows.next().await {
            report.scanned = report.scanned.saturating_add(1);
            let mut done = None;
            match row {
                Ok(loaded) => {
                    done = (crate::schema::partition_key_of(&*loaded).ok())
                        .zip(crate::schema::row_key_of(&*loaded).ok());
                    report.add(self.rewrite_page(vec![loaded]).await);
                }
                Err(e) if e.is_row_error() => {
                    report.failed = report.failed.saturating_add(1);
                    report.fail(RowFailure::of(&e));
                }
                Err(e) => return Err(e),
            }
            if let (Some((pk, rk)), true) = (done, checkpoints) {
                self.checkpoint(MigrationCheckpoint::new(
                    &job,
                    Some((pk, Some(rk))),
                    &report,
                ));
            }
            if let Some(progress) = &mut self.progress {
                progress(&report);
            }
        }
        self.checkpoint(MigrationCheckpoint::new(&job, None, &report));
        Ok(report)
    }

    fn checkpoint(&mut self, checkpoint: MigrationCheckpoint) {
        if let Some(f) = &mut self.on_checkpoint {
            f(&checkpoint);
        }
    }

    /// Rewrites one row if it is of an older version.
    async fn migrate_row(&self, mut loaded: Loaded<T>, report: &mut MigrationReport) {
        let keys = crate::schema::partition_key_of(&*loaded)
            .and_then(|pk| Ok((pk, crate::schema::row_key_of(&*loaded)?)));
        let (pk, rk) = match keys {
            Ok(keys) => keys,
            Err(e) => {
                report.failed += 1;
                report.fail(RowFailure::of(&e));
                return;
            }
        };
        let mut last = None;
        loaded.keeps_last_write = true;
        for _ in 0..ATTEMPTS {
            match self.table.replace(&mut loaded).await {
                Ok(_) => {
                    report.upgraded += 1;
                    return;
                }
                // Changed meanwhile, or moved to the kind's own RowKey
                // (a renamed kind) or deleted by another writer: read again.
                Err(e @ (Error::PreconditionFailed { .. } | Error::EntityNotFound { .. })) => {
                    report.retried += 1;
                    last = Some(e);
                    match self.table.read_row(&pk, &rk).await {
                        // Deleted meanwhile: nothing to rewrite.
                        Ok(None) => return,
                        Ok(Some(row)) => match super::load::<T>(row) {
                            Ok(again)
                                if Loaded::version(&again)
                                    .is_some_and(|v| v < T::DESCRIPTOR.version)
                                    || Loaded::previous_kind(&again).is_some() =>
                            {
                                loaded = again;
                            }
                            // Rewritten by its writer: done.
                            Ok(_) => {
                                report.already_current += 1;
                                return;
                            }
                            Err(e) => {
                                last = Some(e);
                                break;
                            }
                        },
                        Err(e) => {
                            last = Some(e);
                            break;
                        }
                    }
                }
                Err(e) => {
                    last = Some(e);
                    break;
                }
            }
        }
        report.failed += 1;
        if let Some(e) = last {
            report.fail(RowFailure::at(&pk, &rk, &e));
        }
    }
}
