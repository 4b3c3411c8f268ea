//! Rewriting the stored rows of older versions of an entity type as the
//! current version: [`Table::migrate`].

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::query::{RowErrors, SkippedRows, TableQuery};
use super::{Loaded, Table};
use crate::backend::ContinuationToken;
use crate::error::{Error, InvalidInput, Result};
use crate::pacing::Pacing;
use crate::schema::{KeyArg, TableEntity};

/// What a [`Migration`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// Rows found under a previous name of the kind (`previous_kinds`),
    /// before the rewrite: each is moved to the kind's own RowKey, in one
    /// transaction with its index rows, and counted in `upgraded` too.
    #[serde(default)]
    pub previous_kind: usize,
}

impl MigrationReport {
    fn add(&mut self, other: MigrationReport) {
        self.scanned += other.scanned;
        self.upgraded += other.upgraded;
        self.already_current += other.already_current;
        self.retried += other.retried;
        self.failed += other.failed;
        self.previous_kind += other.previous_kind;
        for (version, n) in other.by_version {
            *self.by_version.entry(version).or_default() += n;
        }
    }
}

/// Where a migration stands: the page it goes on from, and its report so
/// far. Handed out after every page
/// ([`on_checkpoint`](Migration::on_checkpoint)); a migration started again
/// with it ([`resume`](Migration::resume)) never reads the finished pages
/// again, and its report goes on counting. Serializable, to keep in a file
/// or a row between runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationCheckpoint {
    /// What the migration covers (table, type, scope), so that a checkpoint
    /// cannot resume another migration.
    scope: u64,
    /// The next page's continuation token; for a wide type, the stored
    /// keys of the last entity done. `None` when finished.
    next: Option<(String, Option<String>)>,
    /// The report so far.
    pub report: MigrationReport,
}

impl MigrationCheckpoint {
    /// Whether the migration it was taken from had finished.
    pub fn is_finished(&self) -> bool {
        self.next.is_none()
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
    /// type and scope (another's is refused with
    /// [`InvalidInput::Cursor`]).
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

    /// What this migration covers, for its checkpoints.
    fn scope_print(&self) -> u64 {
        let query = (self.scope)(self.table.query()).to_query();
        super::query::fingerprint(&format!(
            "migrate\n{}\n{}\n{:?}",
            self.table.name(),
            std::any::type_name::<T>(),
            query.filter.map(|f| f.to_string()),
        ))
    }

    /// Runs the migration; the report of what it found and did (with a
    /// checkpoint's report added, when resumed).
    ///
    /// # Errors
    /// The store's, when a page cannot be read; [`InvalidInput::Cursor`] for
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
        if T::DESCRIPTOR.wide() {
            return self.run_streamed().await;
        }
        let scope = self.scope_print();
        let (mut report, token) = match self.start(scope)? {
            Start::Finished(report) => return Ok(report),
            Start::From(report, next) => {
                (report, next.map(|(pk, rk)| ContinuationToken::new(pk, rk)))
            }
        };
        let mut fetched = self.read_page(token).await;
        loop {
            let (items, next, skipped) = fetched?;
            let mut page = MigrationReport {
                scanned: items.len() + skipped,
                failed: skipped,
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
                    fetched = Ok((Vec::new(), None, 0));
                    self.rewrite_page(items).await
                }
            };
            page.add(rewritten);
            report.add(page);
            self.checkpoint(MigrationCheckpoint {
                scope,
                next: next.as_ref().map(|t| {
                    (
                        t.next_partition_key().to_owned(),
                        t.next_row_key().map(str::to_owned),
                    )
                }),
                report: report.clone(),
            });
            if let Some(progress) = &mut self.progress {
                progress(&report);
            }
            if next.is_none() {
                return Ok(report);
            }
        }
    }

    /// Where a run starts: afresh, or from the checkpoint it resumes
    /// (refused if the checkpoint is of another migration).
    fn start(&mut self, scope: u64) -> Result<Start> {
        match self.resume.take() {
            None => Ok(Start::From(MigrationReport::default(), None)),
            Some(checkpoint) if checkpoint.scope != scope => Err(InvalidInput::Cursor {
                reason: "the checkpoint belongs to another migration",
            }
            .into()),
            Some(checkpoint) => Ok(match checkpoint.next {
                None => Start::Finished(checkpoint.report),
                Some(next) => Start::From(checkpoint.report, Some(next)),
            }),
        }
    }

    /// One page of the scope, from `token`: its rows, the next page's token,
    /// and how many rows could not be read as the type.
    async fn read_page(
        &self,
        token: Option<ContinuationToken>,
    ) -> Result<(Vec<Loaded<T>>, Option<ContinuationToken>, usize)> {
        let skipped = SkippedRows::default();
        let mut query =
            (self.scope)(self.table.query()).on_row_error(RowErrors::Skip(skipped.clone()));
        if let Some(token) = token {
            query = query.resume(token);
        }
        let (items, next) = query.page().await?;
        Ok((items, next, skipped.count()))
    }

    /// Rewrites the older rows of one page: by partition, a few at once.
    async fn rewrite_page(&self, items: Vec<Loaded<T>>) -> MigrationReport {
        let mut report = MigrationReport::default();
        let mut partitions: BTreeMap<String, Vec<Loaded<T>>> = BTreeMap::new();
        for loaded in items {
            let renamed = Loaded::previous_kind(&loaded).is_some();
            report.previous_kind += usize::from(renamed);
            let version = Loaded::version(&loaded);
            if let Some(version) = version {
                *report.by_version.entry(version).or_default() += 1;
            }
            if !renamed && version.is_none_or(|v| v >= T::DESCRIPTOR.version) {
                report.already_current += 1;
                continue;
            }
            if self.dry_run {
                report.upgraded += 1;
                continue;
            }
            match crate::schema::partition_key_of(&*loaded) {
                Ok(pk) => partitions.entry(pk).or_default().push(loaded),
                Err(_) => report.failed += 1,
            }
        }
        // Each partition's rows in transactions where the type allows; the
        // transactions of the page a few at once.
        let needs = T::DESCRIPTOR.write_needs();
        let batchable = !needs.blobs && !T::DESCRIPTOR.wide();
        let per_transaction = if batchable {
            (100 / (1 + needs.rows)).max(1)
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
            let operations = chunk
                .iter()
                .map(|loaded| {
                    let mut entity = crate::schema::to_entity(&**loaded)?;
                    super::unknown::restore(&mut entity, Loaded::unknown_properties(loaded));
                    Ok(crate::BatchOperation::Update {
                        entity,
                        mode: crate::UpdateMode::Replace,
                        if_match: crate::IfMatch::ETag(Loaded::etag(loaded).clone()),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            return crate::ext::send_operations(
                self.table.backend().as_ref(),
                self.table.name(),
                &operations,
            )
            .await
            .map(drop);
        }
        let mut transaction = self.table.transaction();
        for loaded in chunk {
            transaction.replace(loaded)?;
        }
        transaction.submit().await.map(drop)
    }

    /// The migration of wide entities, whose parts a page may split: a
    /// stream, one entity at a time, with a checkpoint after each. A
    /// checkpoint names the last entity done, and a run resumed from it asks
    /// the store for the rows after that entity's parts only. (A sharded
    /// wide kind, whose stream merges its shards, takes no checkpoints: a run
    /// reads its whole scope again, rewriting only what is still older.)
    async fn run_streamed(mut self) -> Result<MigrationReport> {
        let scope = self.scope_print();
        let checkpoints = T::DESCRIPTOR.partitions.is_none();
        let mut query = (self.scope)(self.table.query());
        let mut report = match self.start(scope)? {
            Start::Finished(report) => return Ok(report),
            Start::From(report, Some((pk, Some(rk)))) if checkpoints => {
                query = query.after_entity(pk, rk);
                report
            }
            Start::From(report, _) => report,
        };
        let mut rows = query.on_row_error(RowErrors::Yield).stream();
        while let Some(row) = rows.next().await {
            report.scanned += 1;
            let mut done = None;
            match row {
                Ok(loaded) => {
                    done = (crate::schema::partition_key_of(&*loaded).ok())
                        .zip(crate::schema::row_key_of(&*loaded).ok());
                    report.add(self.rewrite_page(vec![loaded]).await);
                }
                Err(e) if e.is_row_error() => report.failed += 1,
                Err(e) => return Err(e),
            }
            if let (Some((pk, rk)), true) = (done, checkpoints) {
                self.checkpoint(MigrationCheckpoint {
                    scope,
                    next: Some((pk, Some(rk))),
                    report: report.clone(),
                });
            }
            if let Some(progress) = &mut self.progress {
                progress(&report);
            }
        }
        self.checkpoint(MigrationCheckpoint {
            scope,
            next: None,
            report: report.clone(),
        });
        Ok(report)
    }

    fn checkpoint(&mut self, checkpoint: MigrationCheckpoint) {
        if let Some(f) = &mut self.on_checkpoint {
            f(&checkpoint);
        }
    }

    /// Rewrites one row if it is of an older version.
    async fn migrate_row(&self, mut loaded: Loaded<T>, report: &mut MigrationReport) {
        for _ in 0..ATTEMPTS {
            match self.table.replace(&mut loaded).await {
                Ok(_) => {
                    report.upgraded += 1;
                    return;
                }
                Err(Error::PreconditionFailed { .. }) => {
                    report.retried += 1;
                    let (pk, rk) = match (
                        crate::schema::partition_key_of(&*loaded),
                        crate::schema::row_key_of(&*loaded),
                    ) {
                        (Ok(pk), Ok(rk)) => (pk, rk),
                        _ => break,
                    };
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
                            Err(_) => break,
                        },
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        report.failed += 1;
    }
}
