//! What a query does with a row it cannot read: fail, or skip it and count it.

use super::*;

/// What a typed query does with a row it cannot read as its type: a row the
/// store returned that is no valid entity
/// ([`Error::UndecodableRow`](crate::Error::UndecodableRow)), or one that
/// does not fit the type ([`Error::Schema`](crate::Error::Schema)).
///
/// ```
/// # #[derive(tablekit::TableEntity)] #[tablekit(table = "People")]
/// # struct Person { #[tablekit(partition_key)] team: String, #[tablekit(row_key)] id: u32 }
/// # async fn demo(people: tablekit::Table<Person>) -> tablekit::Result<()> {
/// use tablekit::table::{RowErrors, SkippedRows};
/// let skipped = SkippedRows::default();
/// let readable = people
///     .query()
///     .on_row_error(RowErrors::Skip(skipped.clone()))
///     .collect()
///     .await?;
/// println!("{} people, {} rows left out", readable.len(), skipped.count());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub enum RowErrors {
    /// Fail with the first such row; the query ends there (the default).
    #[default]
    Fail,
    /// Leave such rows out, counting them.
    Skip(SkippedRows),
    /// Hand each such row's error to the caller as an item of the stream,
    /// and go on with the next row.
    Yield,
}

/// How many rows a query with [`RowErrors::Skip`] left out, and why the
/// first of them were; clones share them.
#[derive(Debug, Clone, Default)]
pub struct SkippedRows(std::sync::Arc<Skipped>);

/// What [`SkippedRows`] shares.
#[derive(Debug, Default)]
pub(super) struct Skipped {
    pub(super) count: std::sync::atomic::AtomicUsize,
    pub(super) first: parking_lot::Mutex<Vec<RowFailure>>,
}

impl SkippedRows {
    /// How many failures [`SkippedRows::failures`] keeps: the first ones.
    pub const KEPT_FAILURES: usize = 100;

    /// How many rows were left out so far.
    pub fn count(&self) -> usize {
        self.0.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The first rows left out (at most
    /// [`KEPT_FAILURES`](SkippedRows::KEPT_FAILURES)), in the order met,
    /// each with its keys where the error names them, and the error.
    pub fn failures(&self) -> Vec<RowFailure> {
        self.0.first.lock().clone()
    }

    fn add(&self, error: &Error) {
        self.0
            .count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut first = self.0.first.lock();
        if first.len() < Self::KEPT_FAILURES {
            first.push(RowFailure::of(error));
        }
    }
}

/// A row that could not be read or written, and why: what a long job (a
/// migration, a query that skips rows) reports of the rows it passed over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowFailure {
    /// The row's PartitionKey, where known.
    pub partition_key: Option<String>,
    /// The row's RowKey, where known.
    pub row_key: Option<String>,
    /// What went wrong, as the error says it.
    pub error: String,
}

impl RowFailure {
    /// The failure `error` describes, with the keys it names.
    pub fn of(error: &Error) -> RowFailure {
        let (partition_key, row_key) = error.row_keys();
        RowFailure {
            partition_key: partition_key.map(str::to_owned),
            row_key: row_key.map(str::to_owned),
            error: error.to_string(),
        }
    }

    /// The failure of the row `(partition_key, row_key)`.
    pub(crate) fn at(partition_key: &str, row_key: &str, error: &Error) -> RowFailure {
        RowFailure {
            partition_key: Some(partition_key.to_owned()),
            row_key: Some(row_key.to_owned()),
            error: error.to_string(),
        }
    }
}

impl std::fmt::Display for RowFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.partition_key, &self.row_key) {
            (Some(pk), Some(rk)) => write!(f, "row ({pk:?}, {rk:?}): {}", self.error),
            (None, Some(rk)) => write!(f, "row {rk:?}: {}", self.error),
            _ => f.write_str(&self.error),
        }
    }
}

/// Adds a row read to `items`, or, by `policy`, leaves out a row that could
/// not be read (counting it) or fails with it; every error but a row's
/// fails.
pub(super) fn keep<P>(
    items: &mut Vec<Loaded<P>>,
    loaded: Result<Loaded<P>>,
    policy: &RowErrors,
) -> Result<()> {
    match (loaded, policy) {
        (Ok(item), _) => items.push(item),
        (Err(e), RowErrors::Skip(skipped)) if e.is_row_error() => skipped.add(&e),
        (Err(e), _) => return Err(e),
    }
    Ok(())
}

/// Applies `policy` to a stream of typed rows: every error but a row's ends
/// the stream anyway; a row's error ends it, is left out, or is passed on.
pub(super) fn with_row_errors<P: Send + 'static>(
    rows: BoxStream<'static, Result<Loaded<P>>>,
    policy: RowErrors,
) -> BoxStream<'static, Result<Loaded<P>>> {
    rows.scan(false, move |ended, row| {
        let item = if *ended {
            None
        } else {
            match row {
                Ok(row) => Some(Some(Ok(row))),
                Err(e) if e.is_row_error() => match &policy {
                    RowErrors::Fail => {
                        *ended = true;
                        Some(Some(Err(e)))
                    }
                    RowErrors::Skip(skipped) => {
                        skipped.add(&e);
                        Some(None)
                    }
                    RowErrors::Yield => Some(Some(Err(e))),
                },
                Err(e) => {
                    *ended = true;
                    Some(Some(Err(e)))
                }
            }
        };
        futures::future::ready(item)
    })
    .filter_map(futures::future::ready)
    .boxed()
}
