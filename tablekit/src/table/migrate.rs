//! Rewriting the stored rows of older versions of an entity type as the
//! current version: [`Table::migrate`].

use std::collections::BTreeMap;

use futures::StreamExt;

use super::query::{RowErrors, TableQuery};
use super::{Loaded, Table};
use crate::error::{Error, Result};
use crate::schema::{KeyArg, TableEntity};

/// What a [`Migration`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
}

/// What a migration calls with its report after each row.
type Progress<'a> = Box<dyn FnMut(&MigrationReport) + Send + 'a>;

/// How many times a row another writer keeps changing is read again.
const ATTEMPTS: usize = 4;

/// A rewrite of the rows of older versions of `T` as its current version,
/// over the whole table or one partition; see [`Table::migrate`].
pub struct Migration<'a, T: TableEntity> {
    table: &'a Table<T>,
    query: TableQuery<T>,
    dry_run: bool,
    progress: Option<Progress<'a>>,
}

impl<T: TableEntity> Table<T> {
    /// Rewrites every row of an older version of `T` (one its
    /// `min_version`, its aliases or its `upgrade_from` chain reads) as the
    /// current version, so that old shapes leave the table.
    ///
    /// Each row is read as `T` (upgraded), and written back with a replace
    /// guarded by the ETag read, index rows included. A row another writer
    /// changed meanwhile is read again: that writer's version wins, and is
    /// rewritten only if it is still older. Rows of the current version are
    /// left untouched, so a migration may be run again, or stopped and run
    /// again, and finishes the same (there is no checkpoint: a run reads its
    /// whole scope again). Rows are rewritten one at a time.
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
    /// let done = items.migrate().on_progress(|r| println!("{} rows read", r.scanned)).run().await?;
    /// assert_eq!(done.failed, 0);
    /// # Ok(()) }
    /// ```
    pub fn migrate(&self) -> Migration<'_, T> {
        Migration {
            table: self,
            query: self.query(),
            dry_run: false,
            progress: None,
        }
    }
}

impl<'a, T: TableEntity> Migration<'a, T> {
    /// Keeps to one partition.
    pub fn partition(mut self, pk: impl KeyArg<T::PartitionKey>) -> Self {
        self.query = self.query.partition(pk);
        self
    }

    /// Counts, writes nothing: `upgraded` is how many rows would be.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// Calls `progress` with the report so far after each row.
    pub fn on_progress(mut self, progress: impl FnMut(&MigrationReport) + Send + 'a) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Runs the migration; the report of what it found and did.
    pub async fn run(mut self) -> Result<MigrationReport> {
        let mut report = MigrationReport::default();
        let query = std::mem::replace(&mut self.query, self.table.query());
        let mut rows = query.on_row_error(RowErrors::Yield).stream();
        while let Some(row) = rows.next().await {
            report.scanned += 1;
            match row {
                Ok(loaded) => self.migrate_row(loaded, &mut report).await,
                Err(e) if e.is_row_error() => report.failed += 1,
                Err(e) => return Err(e),
            }
            if let Some(progress) = &mut self.progress {
                progress(&report);
            }
        }
        Ok(report)
    }

    /// Rewrites one row if it is of an older version.
    async fn migrate_row(&self, mut loaded: Loaded<T>, report: &mut MigrationReport) {
        let Some(version) = Loaded::version(&loaded) else {
            report.already_current += 1;
            return;
        };
        *report.by_version.entry(version).or_default() += 1;
        if version >= T::VERSION {
            report.already_current += 1;
            return;
        }
        if self.dry_run {
            report.upgraded += 1;
            return;
        }
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
                                if Loaded::version(&again).is_some_and(|v| v < T::VERSION) =>
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
