//! Copying tables between any two stores, and to and from JSON Lines.
//!
//! The Table service has no backup of its own. [`Copier`] copies tables
//! from one [`TableBackend`] to another (Azure to a local directory, Azurite
//! to memory, one account to another), by name or prefix, optionally
//! filtered, paced like the bulk writer, with bounded parallelism, and
//! resumable: after every page it hands the caller a [`Checkpoint`] to keep,
//! and a copy started again from it never reads the finished pages again.
//! [`copy_container`] copies a blob container, [`copy_queue`] the messages
//! of a queue. [`export_table`] and
//! [`import_table`] write and read a table as JSON Lines: one row per line,
//! in the service's wire form with its type annotations
//! (`"Count@odata.type":"Edm.Int64"`), so every value keeps its type.
//!
//! Rows keep their keys and every property. The Timestamp is the store's
//! own: the target gives each row the time it was written there.
//!
//! A row already at the target is a conflict unless it holds the same
//! properties (a row an interrupted copy wrote): [`Conflict`] says whether
//! to fail (the default), skip it, or overwrite it.
//!
//! ```
//! use std::sync::Arc;
//! use tablekit::copy::{Copier, Conflict};
//! use tablekit::{Entity, TableBackend, TableBackendExt};
//! use tablekit_mem::MemBackend;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let source = Arc::new(MemBackend::new());
//! source.create_table("Orders").await?;
//! source.insert_entity("Orders", &Entity::new("c1", "o1").with("Total", 12.5)).await?;
//! let target = Arc::new(MemBackend::new());
//! let report = Copier::new(source, target.clone())
//!     .prefix("Ord")
//!     .conflict(Conflict::Skip)
//!     .run()
//!     .await?;
//! assert_eq!(report.written, 1);
//! assert!(target.get_entity("Orders", "c1", "o1", &Default::default()).await.is_ok());
//! # Ok(())
//! # }
//! ```

mod rows;

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use crate::backend::{ContinuationToken, ListTablesOptions, Query, TableBackend};
use crate::blob::{BlobStore, BlobStoreExt, ListBlobsOptions, PutCondition};
use crate::datetime::DateTime;
use crate::entity::Entity;
use crate::error::{Error, InvalidInput, Result};
use crate::filter::Filter;
use crate::queue::{MessageTtl, PutMessageOptions, QueueStore};
use crate::table::Pacing;
pub use rows::WriteCounts;
use rows::{RowWriter, same_properties};

/// What to do with a row the target already holds with other properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Conflict {
    /// Stop with [`Error::EntityAlreadyExists`], naming the row.
    #[default]
    Fail,
    /// Keep the target's row, and count it as skipped.
    Skip,
    /// Replace the target's row with the source's.
    Overwrite,
}

/// Where a copy stands: the copy it belongs to, and for each table the
/// page it resumes at, or done. Serializable, so a caller can keep it in a
/// file between runs; a text with a member it does not know is refused.
///
/// A copy resumes only from its own checkpoints: one of a copy between
/// other stores, of other tables or with another filter is refused with
/// [`InvalidInput::CheckpointMismatch`], saying what differs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The copy it was taken from; `None` only in the empty checkpoint a
    /// copy starts from.
    pub job: Option<CopyJob>,
    /// By table name.
    pub tables: BTreeMap<String, TableCheckpoint>,
}

/// What a copy is, as its checkpoints name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CopyJob {
    /// The source, as [`Copier::stores`] names it.
    pub source: String,
    /// The target, as [`Copier::stores`] names it.
    pub target: String,
    /// The tables taken: every one, those of a prefix, or those named.
    pub tables: String,
    /// The filter of the rows copied, as the store is sent it.
    pub filter: Option<String>,
}

impl CopyJob {
    /// The first of what `self` names that differs from `current`, as the
    /// error a resume from it is refused with.
    fn differs(&self, current: &CopyJob) -> Option<InvalidInput> {
        let fields: [(&'static str, String, String); 4] = [
            (
                "source",
                format!("{:?}", self.source),
                format!("{:?}", current.source),
            ),
            (
                "target",
                format!("{:?}", self.target),
                format!("{:?}", current.target),
            ),
            ("tables", self.tables.clone(), current.tables.clone()),
            (
                "filter",
                format!("{:?}", self.filter),
                format!("{:?}", current.filter),
            ),
        ];
        InvalidInput::first_mismatch("copy", fields)
    }
}

/// Where the copy of one table stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TableCheckpoint {
    /// Resume at the page this continuation token names (next PartitionKey,
    /// next RowKey).
    At(String, Option<String>),
    /// Every row is copied.
    Done,
}

/// How far a copy has come, given to the progress callback after each page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyProgress {
    /// The table the page was of.
    pub table: String,
    /// Rows read from the source, over every table.
    pub read: u64,
    /// Rows written to the target.
    pub written: u64,
    /// Rows the target already held with the same properties.
    pub already_there: u64,
    /// Rows the target held with other properties, left as they were
    /// ([`Conflict::Skip`]).
    pub skipped: u64,
    /// Tables finished.
    pub tables_done: usize,
}

/// What a finished copy did: the last [`CopyProgress`], and the tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Rows read from the source.
    pub read: u64,
    /// Rows written to the target.
    pub written: u64,
    /// Rows the target already held with the same properties.
    pub already_there: u64,
    /// Rows left as the target held them ([`Conflict::Skip`]).
    pub skipped: u64,
    /// The tables copied, by name.
    pub tables: Vec<String>,
}

type Callback<T> = Arc<dyn Fn(&T) + Send + Sync>;

/// Which tables a copy takes.
#[derive(Debug, Clone)]
enum Selection {
    All,
    Prefix(String),
    Names(Vec<String>),
}

/// Copies tables from one store to another. See the [module
/// documentation](self).
#[derive(Clone)]
pub struct Copier {
    source: Arc<dyn TableBackend>,
    target: Arc<dyn TableBackend>,
    /// The names of the two stores, for the checkpoints.
    names: (String, String),
    selection: Selection,
    filter: Option<Filter>,
    conflict: Conflict,
    parallelism: usize,
    pacing: Option<Pacing>,
    resume: Checkpoint,
    on_checkpoint: Option<Callback<Checkpoint>>,
    on_progress: Option<Callback<CopyProgress>>,
}

impl std::fmt::Debug for Copier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Copier")
            .field("selection", &self.selection)
            .field("filter", &self.filter)
            .field("conflict", &self.conflict)
            .field("parallelism", &self.parallelism)
            .finish_non_exhaustive()
    }
}

impl Copier {
    /// A copy of every table of `source` into `target`.
    pub fn new(source: Arc<dyn TableBackend>, target: Arc<dyn TableBackend>) -> Copier {
        let pacing = target.pacing().unwrap_or_else(Pacing::service_targets);
        Copier {
            source,
            target,
            names: (String::new(), String::new()),
            selection: Selection::All,
            filter: None,
            conflict: Conflict::default(),
            parallelism: 4,
            pacing: Some(pacing),
            resume: Checkpoint::default(),
            on_checkpoint: None,
            on_progress: None,
        }
    }

    /// Names the source and the target in the checkpoints, so that a
    /// checkpoint of a copy between other stores is refused (the
    /// `tablekit` program names them by where their data lives). Unnamed,
    /// both are `""`.
    pub fn stores(mut self, source: impl Into<String>, target: impl Into<String>) -> Copier {
        self.names = (source.into(), target.into());
        self
    }

    /// Copies the tables whose names start with `prefix` (ASCII letters and
    /// digits, as the service's prefixes).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Copier {
        self.selection = Selection::Prefix(prefix.into());
        self
    }

    /// Copies the table `name` (with any other tables named so).
    pub fn table(mut self, name: impl Into<String>) -> Copier {
        let name = name.into();
        match &mut self.selection {
            Selection::Names(names) => names.push(name),
            _ => self.selection = Selection::Names(vec![name]),
        }
        self
    }

    /// Copies only the rows `filter` matches, in every table.
    pub fn filter(mut self, filter: Filter) -> Copier {
        self.filter = Some(filter);
        self
    }

    /// What to do with a row the target holds with other properties.
    pub fn conflict(mut self, conflict: Conflict) -> Copier {
        self.conflict = conflict;
        self
    }

    /// At most `n` tables at once, and `n` transactions at once within one
    /// (4 by default; at least 1).
    pub fn parallelism(mut self, n: usize) -> Copier {
        self.parallelism = n.max(1);
        self
    }

    /// The rates the writes keep to (the service's targets by default).
    pub fn pacing(mut self, pacing: Pacing) -> Copier {
        self.pacing = Some(pacing);
        self
    }

    /// Writes as fast as the target takes them (a local or in-memory target).
    pub fn unpaced(mut self) -> Copier {
        self.pacing = None;
        self
    }

    /// Starts from `checkpoint`, as an earlier run of the same copy left it:
    /// finished tables are not read again, the others resume at their page.
    /// [`run`](Copier::run) refuses a checkpoint of another copy.
    pub fn resume(mut self, checkpoint: Checkpoint) -> Copier {
        self.resume = checkpoint;
        self
    }

    /// Called with the whole checkpoint after each page is written (keep it
    /// to resume after a crash).
    pub fn on_checkpoint(mut self, f: impl Fn(&Checkpoint) + Send + Sync + 'static) -> Copier {
        self.on_checkpoint = Some(Arc::new(f));
        self
    }

    /// Called after each page is written, with the totals so far.
    pub fn on_progress(mut self, f: impl Fn(&CopyProgress) + Send + Sync + 'static) -> Copier {
        self.on_progress = Some(Arc::new(f));
        self
    }

    /// The names of the tables this copy takes from the source.
    ///
    /// # Errors
    /// The source's, and [`Error::TableNotFound`] for a table named with
    /// [`table`](Copier::table) that the source lacks.
    pub async fn source_tables(&self) -> Result<Vec<String>> {
        let mut all = Vec::new();
        let mut options = ListTablesOptions::default();
        if let Selection::Prefix(prefix) = &self.selection {
            options = options.with_prefix(prefix.clone());
        }
        loop {
            let page = self.source.list_tables(&options).await?;
            all.extend(page.tables);
            match page.continuation {
                Some(token) => options.continuation = Some(token),
                None => break,
            }
        }
        match &self.selection {
            Selection::Names(names) => names
                .iter()
                .map(|name| {
                    all.iter()
                        .find(|t| t.eq_ignore_ascii_case(name))
                        .cloned()
                        .ok_or_else(|| Error::TableNotFound {
                            table: name.clone(),
                        })
                })
                .collect(),
            _ => Ok(all),
        }
    }

    /// Runs the copy to its end.
    ///
    /// # Errors
    /// The first error of either store, or of a row ([`Conflict::Fail`]
    /// gives [`Error::EntityAlreadyExists`]). The last checkpoint handed out
    /// resumes the copy.
    pub async fn run(&self) -> Result<CopyReport> {
        let resume = self.resumed()?;
        let tables = self.source_tables().await?;
        let state = Arc::new(parking_lot::Mutex::new((resume, CopyProgress::default())));
        stream::iter(tables.iter().cloned())
            .map(|table| self.copy_table(table, Arc::clone(&state)))
            .buffer_unordered(self.parallelism)
            .try_collect::<Vec<()>>()
            .await?;
        let (_, progress) = &*state.lock();
        Ok(CopyReport {
            read: progress.read,
            written: progress.written,
            already_there: progress.already_there,
            skipped: progress.skipped,
            tables,
        })
    }

    /// What this copy is, for its checkpoints.
    pub fn job(&self) -> CopyJob {
        CopyJob {
            source: self.names.0.clone(),
            target: self.names.1.clone(),
            tables: match &self.selection {
                Selection::All => "every table".to_owned(),
                Selection::Prefix(prefix) => format!("the tables starting with {prefix:?}"),
                Selection::Names(names) => format!("the tables {names:?}"),
            },
            filter: self.filter.as_ref().map(ToString::to_string),
        }
    }

    /// The checkpoint this copy starts from, with its job: refused if it
    /// belongs to another copy, or names tables but no copy.
    fn resumed(&self) -> Result<Checkpoint> {
        let job = self.job();
        match &self.resume.job {
            None if !self.resume.tables.is_empty() => {
                return Err(InvalidInput::CheckpointMismatch {
                    job: "copy",
                    field: "copy",
                    checkpoint: "none named".into(),
                    current: format!("{job:?}").into(),
                }
                .into());
            }
            Some(theirs) => {
                if let Some(differs) = theirs.differs(&job) {
                    return Err(differs.into());
                }
            }
            None => {}
        }
        Ok(Checkpoint {
            job: Some(job),
            tables: self.resume.tables.clone(),
        })
    }

    async fn copy_table(
        &self,
        table: String,
        state: Arc<parking_lot::Mutex<(Checkpoint, CopyProgress)>>,
    ) -> Result<()> {
        let mut token = match state.lock().0.tables.get(&table) {
            Some(TableCheckpoint::Done) => return Ok(()),
            Some(TableCheckpoint::At(pk, rk)) => {
                Some(ContinuationToken::new(pk.clone(), rk.clone()))
            }
            None => None,
        };
        create_if_missing(&*self.target, &table).await?;
        let writer = RowWriter {
            target: &*self.target,
            table: &table,
            conflict: self.conflict,
            parallelism: self.parallelism,
            pacing: self.pacing.as_ref(),
        };
        loop {
            if token.is_some() {
                crate::order::between_pages().await;
            }
            let mut query = Query::new().continuation(token.clone());
            if let Some(filter) = &self.filter {
                query = query.filter(filter.clone());
            }
            let page = self.source.query_entities(&table, &query).await?;
            let next = page.continuation.clone();
            let rows = page.into_rows().collect::<Result<Vec<Entity>>>()?;
            let read = rows.len() as u64;
            let counts = writer.write(rows).await?;
            let (checkpoint, progress) = {
                let mut state = state.lock();
                let (checkpoint, progress) = &mut *state;
                let at = match &next {
                    Some(t) => TableCheckpoint::At(
                        t.next_partition_key().to_owned(),
                        t.next_row_key().map(str::to_owned),
                    ),
                    None => TableCheckpoint::Done,
                };
                checkpoint.tables.insert(table.clone(), at);
                progress.table.clone_from(&table);
                progress.read = progress.read.saturating_add(read);
                progress.written = progress.written.saturating_add(counts.written);
                progress.already_there =
                    progress.already_there.saturating_add(counts.already_there);
                progress.skipped = progress.skipped.saturating_add(counts.skipped);
                if next.is_none() {
                    progress.tables_done += 1;
                }
                (checkpoint.clone(), progress.clone())
            };
            if let Some(f) = &self.on_checkpoint {
                f(&checkpoint);
            }
            if let Some(f) = &self.on_progress {
                f(&progress);
            }
            match next {
                Some(t) => token = Some(t),
                None => return Ok(()),
            }
        }
    }
}

/// Creates `table` unless it exists.
async fn create_if_missing(target: &dyn TableBackend, table: &str) -> Result<()> {
    match target.create_table(table).await {
        Ok(()) | Err(Error::TableAlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes every row of `table` that `filter` matches to `out` as JSON Lines
/// (one row's wire JSON per line, with type annotations); calls `progress`
/// with the rows written so far after each page. Returns the number of rows.
///
/// # Errors
/// The store's, and [`Error::Storage`] if `out` refuses a write.
pub async fn export_table(
    source: &dyn TableBackend,
    table: &str,
    filter: Option<&Filter>,
    out: &mut (dyn Write + Send),
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<u64> {
    let mut token = None;
    let mut rows = 0;
    let mut line = Vec::new();
    loop {
        if token.is_some() {
            crate::order::between_pages().await;
        }
        let mut query = Query::new().continuation(token);
        if let Some(filter) = filter {
            query = query.filter(filter.clone());
        }
        let page = source.query_entities(table, &query).await?;
        token = page.continuation.clone();
        for row in page.into_rows() {
            line.clear();
            crate::json::write(&row?, &mut line);
            line.push(b'\n');
            out.write_all(&line).map_err(|e| output_error(table, &e))?;
            rows += 1;
        }
        progress(rows);
        if token.is_none() {
            out.flush().map_err(|e| output_error(table, &e))?;
            return Ok(rows);
        }
    }
}

fn output_error(table: &str, error: &std::io::Error) -> Error {
    Error::Storage {
        path: format!("the export of `{table}`"),
        failure: if error.kind() == std::io::ErrorKind::StorageFull {
            crate::error::StorageFailure::DiskFull
        } else {
            crate::error::StorageFailure::Io
        },
        message: error.to_string(),
    }
}

/// Reads JSON Lines (as [`export_table`] writes them) into `table`,
/// creating it if needed, after skipping the first `skip` lines (those an
/// interrupted import finished).
///
/// Lines are read in chunks of 1,000. A chunk's rows go in transactions of
/// up to 100 rows of one partition, by the `conflict` policy, and then
/// `progress` is called with the lines done so far (a checkpoint: resume
/// with it as `skip`). The same row twice in the file follows the policy as
/// a row the table holds does: the later line replaces the earlier
/// ([`Conflict::Overwrite`]), is counted already there when it holds the
/// same properties, is skipped ([`Conflict::Skip`]), or stops the import
/// ([`Conflict::Fail`]).
///
/// A line that is not a row, or a row the store's rules refuse, stops the
/// import with an error naming the line (and the row's keys): every line
/// before it is written first, and `progress` reports them done, so an
/// import resumed after the line is fixed goes on from it. An error of the
/// store while it writes a chunk may leave some of that chunk's partitions
/// written; `progress` has not counted them, and a resumed import writes
/// them again by the policy (the same rows count as already there).
///
/// # Errors
/// The store's; [`Error::ImportText`] naming the line for a line that is
/// not a row or cannot be read; [`Error::ImportLine`] for a row that is not written (one that
/// breaks the store's rules, or a conflict under [`Conflict::Fail`]).
pub async fn import_table(
    target: &dyn TableBackend,
    table: &str,
    input: &mut (dyn BufRead + Send),
    conflict: Conflict,
    skip: u64,
    progress: &(dyn Fn(u64, WriteCounts) + Send + Sync),
) -> Result<WriteCounts> {
    create_if_missing(target, table).await?;
    let pacing = target.pacing().unwrap_or_else(Pacing::service_targets);
    let writer = RowWriter {
        target,
        table,
        conflict,
        parallelism: 4,
        pacing: Some(&pacing),
    };
    let mut counts = WriteCounts::default();
    let mut line_no = 0u64;
    let mut chunk = ImportChunk::default();
    let mut text = String::new();
    loop {
        text.clear();
        let read = input.read_line(&mut text).map_err(|e| Error::ImportText {
            table: table.to_owned(),
            line: line_no + 1,
            problem: format!("cannot be read: {e}"),
        })?;
        if read > 0 {
            line_no += 1;
            if line_no > skip && !text.trim().is_empty() {
                let added = parse_line(table, line_no, &text)
                    .and_then(|row| chunk.add(table, row, line_no, conflict));
                if let Err(e) = added {
                    // The lines before it are written, and said done.
                    counts += chunk.write(&writer).await?;
                    progress(line_no - 1, counts);
                    return Err(e);
                }
            }
        }
        if chunk.rows.len() >= 1000 || (read == 0 && !chunk.rows.is_empty()) {
            counts += chunk.write(&writer).await?;
            progress(line_no, counts);
            crate::order::between_pages().await;
        }
        if read == 0 {
            return Ok(counts);
        }
    }
}

/// One line of an import as a row, checked against the store's rules.
fn parse_line(table: &str, line: u64, text: &str) -> Result<Entity> {
    // Read as a row first, then checked as a write checks it, so a refused
    // row is named by its keys.
    let row = crate::json::row_from_str(text.trim_end()).map_err(|e| Error::ImportText {
        table: table.to_owned(),
        line,
        problem: format!("is not a row: {e}"),
    })?;
    crate::validate::entity(&row).map_err(|e| import_line(line, &row, e.into()))?;
    Ok(row)
}

/// The error of the row `row`, read from `line`.
fn import_line(line: u64, row: &Entity, error: Error) -> Error {
    Error::ImportLine {
        line,
        partition_key: row.partition_key.clone(),
        row_key: row.row_key.clone(),
        source: Box::new(error),
    }
}

/// The rows of up to 1,000 lines of an import, each row once.
#[derive(Default)]
struct ImportChunk {
    rows: Vec<Entity>,
    /// The line of each row.
    lines: Vec<u64>,
    /// Where each row's keys are in `rows`.
    at: std::collections::HashMap<(String, String), usize>,
    /// What the rows given twice did.
    counts: WriteCounts,
}

impl ImportChunk {
    /// Adds the row of `line`; a row given before in the chunk follows
    /// `conflict`, as a row the table holds does.
    fn add(&mut self, table: &str, row: Entity, line: u64, conflict: Conflict) -> Result<()> {
        let keys = (row.partition_key.clone(), row.row_key.clone());
        let Some(&earlier) = self.at.get(&keys) else {
            self.at.insert(keys, self.rows.len());
            self.rows.push(row);
            self.lines.push(line);
            return Ok(());
        };
        if conflict == Conflict::Overwrite {
            // Written, then written over by this line.
            self.counts.written += 1;
            self.rows[earlier] = row;
            self.lines[earlier] = line;
        } else if same_properties(&self.rows[earlier], &row) {
            self.counts.already_there += 1;
        } else if conflict == Conflict::Skip {
            self.counts.skipped += 1;
        } else {
            let taken = Error::EntityAlreadyExists {
                table: table.to_owned(),
                partition_key: row.partition_key.clone(),
                row_key: row.row_key.clone(),
            };
            return Err(import_line(line, &row, taken));
        }
        Ok(())
    }

    /// Writes the rows and empties the chunk; what was done. An error that
    /// names a row of the chunk names its line.
    async fn write(&mut self, writer: &RowWriter<'_>) -> Result<WriteCounts> {
        let chunk = std::mem::take(self);
        let mut counts = writer.write(chunk.rows).await.map_err(|e| {
            let (Some(pk), Some(rk)) = e.row_keys() else {
                return e;
            };
            let keys = (pk.to_owned(), rk.to_owned());
            match chunk.at.get(&keys) {
                Some(&index) => Error::ImportLine {
                    line: chunk.lines[index],
                    partition_key: keys.0,
                    row_key: keys.1,
                    source: Box::new(e),
                },
                None => e,
            }
        })?;
        counts += chunk.counts;
        Ok(counts)
    }
}

/// Copies every blob of `container` from `source` to `target`, creating the
/// container if needed; a blob the target holds with the same bytes (the
/// same length and MD5, both stores saying its MD5) is not copied again.
/// Returns the number of blobs copied.
///
/// # Errors
/// Either store's.
pub async fn copy_container(
    source: &dyn BlobStore,
    target: &dyn BlobStore,
    container: &str,
) -> Result<u64> {
    target.create_container_if_not_exists(container).await?;
    let mut options = ListBlobsOptions::default();
    let mut there = std::collections::HashMap::new();
    loop {
        let page = target.list_blobs(container, &options).await?;
        there.extend(
            page.blobs
                .into_iter()
                .map(|b| (b.name, (b.content_length, b.content_md5))),
        );
        match page.next_marker {
            Some(marker) => options.marker = Some(marker),
            None => break,
        }
    }
    let mut options = ListBlobsOptions::default();
    let mut copied = 0;
    loop {
        let page = source.list_blobs(container, &options).await?;
        for blob in page.blobs {
            // An MD5 of zeros is one the store does not know (a blob written
            // in blocks without one): never taken as the same bytes.
            let known = blob.content_md5 != [0; 16];
            if known && there.get(&blob.name) == Some(&(blob.content_length, blob.content_md5)) {
                continue;
            }
            let data = source.get_blob(container, &blob.name).await?.data;
            target
                .put_blob(container, &blob.name, data, &PutCondition::None)
                .await?;
            copied += 1;
        }
        match page.next_marker {
            Some(marker) => options.marker = Some(marker),
            None => return Ok(copied),
        }
        crate::order::between_pages().await;
    }
}

/// Copies the messages of `queue` from `source` to `target`, creating the
/// queue if needed; returns the number of messages copied. Each keeps its
/// text and its expiry (its id, insertion time and dequeue count are the
/// target's).
///
/// A queue can only be read whole by receiving its messages (a peek shows
/// 32 at most), so the copy receives each message once, hidden for
/// `visibility`, and makes it visible again at the end: the source keeps
/// every message, each with one more delivery in its dequeue count. Run it
/// while no consumer takes from the source, and give a `visibility` longer
/// than the copy takes (a message that comes back before the end is not
/// copied twice, but may be taken by a consumer meanwhile).
///
/// # Errors
/// Either store's.
pub async fn copy_queue(
    source: &dyn QueueStore,
    target: &dyn QueueStore,
    queue: &str,
    visibility: std::time::Duration,
) -> Result<u64> {
    target.create_queue(queue).await?;
    let mut seen = std::collections::HashSet::new();
    let mut held = Vec::new();
    let result = async {
        loop {
            let got = source
                .get_messages(queue, crate::queue::MAX_MESSAGES_PER_GET, visibility)
                .await?;
            if got.is_empty() {
                return Ok(());
            }
            crate::order::between_pages().await;
            let mut new = 0;
            for message in got {
                held.push((message.id.clone(), message.pop_receipt.clone()));
                if !seen.insert(message.id.clone()) {
                    continue;
                }
                new += 1;
                let ttl = if message.expires == DateTime::MAX {
                    MessageTtl::Never
                } else {
                    let left = message
                        .expires
                        .duration_since(DateTime::now())
                        .unwrap_or_default();
                    // Whole seconds, at least one: never shorter than it had.
                    MessageTtl::After(std::time::Duration::from_secs(
                        left.as_secs().max(1) + u64::from(left.subsec_nanos() > 0),
                    ))
                };
                target
                    .put_message(queue, &message.text, &PutMessageOptions::default().ttl(ttl))
                    .await?;
            }
            if new == 0 {
                return Ok(());
            }
        }
    }
    .await;
    // Visible again at the source, copied or not; the last receipt of each
    // delivery is the one that counts.
    for (id, receipt) in held.iter().rev() {
        match source
            .update_message(queue, id, receipt, std::time::Duration::ZERO, None)
            .await
        {
            Ok(_) | Err(Error::PopReceiptMismatch { .. } | Error::MessageNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    result.map(|()| seen.len() as u64)
}
