//! Reading a whole store to find damage: the report of
//! [`LocalStorage::check`](crate::LocalStorage::check), and the walk of one
//! engine table.

use redb::{ReadableTable, TableDefinition};

/// One piece of a store found damaged by [`LocalStorage::check`](crate::LocalStorage::check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// What is damaged: a table's row, a blob, a queue message, or a part
    /// of the engine's file, named.
    pub place: String,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place, self.reason)
    }
}

/// A damaged row a query passed over, in a store opened with
/// [`LocalStorageBuilder::skip_damaged_rows`](crate::LocalStorageBuilder::skip_damaged_rows).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct SkippedRow {
    /// The table.
    pub table: String,
    /// The row's PartitionKey.
    pub partition_key: String,
    /// The row's RowKey.
    pub row_key: String,
}

impl std::fmt::Display for SkippedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "table `{}`, row ({:?}, {:?})",
            self.table, self.partition_key, self.row_key
        )
    }
}

/// What [`LocalStorage::check`](crate::LocalStorage::check) read, and the damage it found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Tables read.
    pub tables: usize,
    /// Table rows read (index rows, outbox records and fences are rows).
    pub rows: u64,
    /// Blob containers.
    pub containers: usize,
    /// Blobs read, bytes and properties.
    pub blobs: u64,
    /// Queues.
    pub queues: usize,
    /// Queue messages read.
    pub messages: u64,
    /// Every piece found damaged, in the order met.
    pub damaged: Vec<Damage>,
}

impl CheckReport {
    /// Whether nothing was found damaged.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty()
    }

    /// Records damage at `place`.
    pub(crate) fn damage(&mut self, place: impl Into<String>, reason: impl Into<String>) {
        self.damaged.push(Damage {
            place: place.into(),
            reason: reason.into(),
        });
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} tables ({} rows), {} containers ({} blobs), {} queues ({} messages): ",
            self.tables, self.rows, self.containers, self.blobs, self.queues, self.messages
        )?;
        match self.damaged.len() {
            0 => f.write_str("no damage found"),
            1 => f.write_str("1 piece damaged"),
            n => write!(f, "{n} pieces damaged"),
        }
    }
}

/// Every entry of the engine table `definition`, each passed to `each`;
/// an entry the engine cannot read, or a panic of the engine on a bad page,
/// is recorded as damage of `place` and ends the walk of this table (the
/// others are still read).
pub(crate) fn walk<K, V>(
    txn: &redb::ReadTransaction,
    definition: TableDefinition<'_, K, V>,
    place: &str,
    report: &mut CheckReport,
    mut each: impl FnMut(&mut CheckReport, K::SelfType<'_>, V::SelfType<'_>),
) where
    K: redb::Key + 'static,
    V: redb::Value + 'static,
{
    let walked = crate::panics::contain_panics(|| -> std::result::Result<(), redb::Error> {
        let table = match txn.open_table(definition) {
            Ok(table) => table,
            // A table never written has no engine table yet.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for item in table.iter()? {
            let (key, value) = item?;
            each(report, key.value(), value.value());
        }
        Ok(())
    });
    match walked {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report.damage(place, format!("the storage engine could not read it: {e}")),
        Err(panic) => report.damage(place, format!("the storage engine failed on it: {panic}")),
    }
}
