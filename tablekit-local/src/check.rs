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

/// Whether an engine table a walk opens may be missing: the system tables
/// of a store last opened for writing by an older version may lack one,
/// but a catalogued table's rows exist exactly while the table does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Missing means never written: nothing to read.
    Optional,
    /// Missing means damage.
    Required,
}

/// Every entry of the engine table `definition`, each passed to `each`;
/// an entry the engine cannot read, or a panic of the engine on a bad page,
/// is recorded as damage of `place` and ends the walk of this table (the
/// others are still read).
///
/// The engine does not check its pages' checksums on a read, so a damaged
/// page of its tree can hide entries without an error. The walk checks the
/// tree's shape as it goes: the keys come in order, each entry is found
/// again by its key with the same value (a lookup goes down the tree's
/// inner pages by their keys, which a walk does not read), and the entries
/// met are as many as the engine counts for the table.
pub(crate) fn walk<K, V>(
    txn: &redb::ReadTransaction,
    definition: TableDefinition<'_, K, V>,
    presence: Presence,
    place: &str,
    report: &mut CheckReport,
    mut each: impl FnMut(&mut CheckReport, K::SelfType<'_>, V::SelfType<'_>),
) where
    K: redb::Key + 'static,
    V: redb::Value + 'static,
{
    type Walked = std::result::Result<Option<String>, redb::Error>;
    let walked = crate::panics::contain_panics(|| -> Walked {
        let table = match txn.open_table(definition) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) if presence == Presence::Optional => {
                return Ok(None);
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {
                return Ok(Some("the engine has no table for it".to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        // The last key met, in one buffer for the whole walk.
        let mut previous: Vec<u8> = Vec::new();
        let mut met = 0u64;
        for item in table.iter()? {
            let (key, value) = item?;
            met += 1;
            let key_value = key.value();
            let key_bytes = K::as_bytes(&key_value);
            if met > 1 && K::compare(&previous, key_bytes.as_ref()) != std::cmp::Ordering::Less {
                return Ok(Some("its entries are out of order".to_owned()));
            }
            let found_again = table.get(key.value())?.is_some_and(|found| {
                V::as_bytes(&found.value()).as_ref() == V::as_bytes(&value.value()).as_ref()
            });
            if !found_again {
                return Ok(Some(
                    "an entry met in order is not found by its key".to_owned(),
                ));
            }
            previous.clear();
            previous.extend_from_slice(key_bytes.as_ref());
            each(report, key.value(), value.value());
        }
        let counted = redb::ReadableTableMetadata::len(&table)?;
        if counted != met {
            return Ok(Some(format!(
                "{met} entries read where the engine counts {counted}"
            )));
        }
        Ok(None)
    });
    match walked {
        Ok(Ok(None)) => {}
        Ok(Ok(Some(shape))) => {
            report.damage(place, format!("the engine's tree is damaged: {shape}"))
        }
        Ok(Err(e)) => report.damage(place, format!("the storage engine could not read it: {e}")),
        Err(panic) => report.damage(place, format!("the storage engine failed on it: {panic}")),
    }
}

/// The engine's list of its tables, checked: each table listed is found
/// again by its name, and each is one the store keeps (`kept`). A damaged
/// page of that list can rename a table (its rows would seem gone, the
/// table empty) or lose one from lookups alone.
pub(crate) fn engine_tables(
    txn: &redb::ReadTransaction,
    kept: &dyn Fn(&str) -> bool,
    report: &mut CheckReport,
) {
    let place = "the engine's list of its tables";
    let listed =
        crate::panics::contain_panics(|| -> std::result::Result<Vec<String>, redb::Error> {
            use redb::TableHandle;
            let mut shape = Vec::new();
            if txn.list_multimap_tables()?.next().is_some() {
                shape.push("it lists a kind of table no store makes".to_owned());
            }
            for handle in txn.list_tables()? {
                let name = handle.name().to_owned();
                if !kept(&name) {
                    shape.push(format!("it lists a table no store keeps ({name:?})"));
                } else if let Err(e) = txn.open_untyped_table(handle) {
                    shape.push(format!("the table {name:?} it lists does not open: {e}"));
                }
            }
            Ok(shape)
        });
    match listed {
        Ok(Ok(shape)) => {
            for shape in shape {
                report.damage(place, format!("the engine's tree is damaged: {shape}"));
            }
        }
        Ok(Err(e)) => report.damage(place, format!("the storage engine could not read it: {e}")),
        Err(panic) => report.damage(place, format!("the storage engine failed on it: {panic}")),
    }
}
