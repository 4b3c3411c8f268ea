//! The table backend: one engine table per table, a catalogue of names, and
//! the names deleted recently.

use std::ops::Bound;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use redb::{ReadableTable, TableDefinition};

use crate::logged::Txn;
use tablekit_core::backend::sorted::{
    Decision, RowFilter, StoredRow, continuation_token, decide, decode_key, key_ranges, resume_at,
};
use tablekit_core::telemetry::StoreInfo;
use tablekit_core::validate::limits::MAX_PAGE_SIZE;
use tablekit_core::{
    BatchOperation, ContinuationToken, ETag, Entity, EntityWrite, Error, GetOptions, IfMatch,
    ListTablesOptions, Properties, Query, QueryOrder, QueryPage, Result, RowVisitor, TablePage,
    UpdateMode,
};

use crate::LocalStorage;
use crate::names::{NameOf, SnapshotNames, TxnNames};
use crate::rows::{
    RowReader, encode_row, entity, etag_of, key_bounds, row_key, row_properties, row_ticks,
};
use crate::seal::checked;
use crate::snapshot::{Rows, Snapshot};

/// Tables by lower-cased name (names compare case-insensitively), with the
/// name as created.
const TABLES: TableDefinition<'static, &str, &str> = TableDefinition::new("tables");
/// Recently deleted tables, by lower-cased name: milliseconds since the Unix
/// epoch at deletion (wall-clock time, as it must hold across restarts).
const DELETED: TableDefinition<'static, &str, u64> = TableDefinition::new("tables_deleted");

/// The engine table holding the rows of the table whose folded name is `folded`.
fn rows_name(folded: &str) -> String {
    format!("rows/{folded}")
}

fn rows_table(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// The names of the engine tables [`create_system_tables`] makes, for the
/// check of the engine's list of its tables.
pub(crate) fn system_tables() -> [String; 2] {
    use redb::TableHandle;
    [TABLES.name().to_owned(), DELETED.name().to_owned()]
}

pub(crate) fn create_system_tables(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(TABLES)?;
    txn.open_table(DELETED)?;
    Ok(())
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A stored row as [`decide`] reads it.
struct Stored<'a, N> {
    row: &'a [u8],
    storage: &'a LocalStorage,
    names: &'a N,
}

impl<N: NameOf> StoredRow for Stored<'_, N> {
    fn etag(&self) -> ETag {
        etag_of(row_ticks(self.row).unwrap_or(i64::MIN))
    }

    fn etag_is(&self, tag: &ETag) -> bool {
        row_ticks(self.row)
            .and_then(|ticks| tablekit_core::DateTime::from_ticks(ticks).ok())
            .is_some_and(|t| tag.is_of_timestamp(t))
    }

    fn properties(&self) -> Result<Properties> {
        row_properties(self.row, None, self.names).ok_or_else(|| {
            self.names
                .or_damaged(|| self.storage.damaged("a stored row"))
        })
    }
}

impl LocalStorage {
    /// The folded name of an existing table, or the error for a missing one
    /// ("being deleted" within the delay of its deletion, as the service says).
    fn existing_table(
        &self,
        catalogue: &impl ReadableTable<&'static str, &'static str>,
        deleted: &impl ReadableTable<&'static str, u64>,
        table: &str,
    ) -> Result<String> {
        let folded = table.to_ascii_lowercase();
        let found = catalogue
            .get(folded.as_str())
            .map_err(|e| self.error(e.into()))?;
        if found.is_some() {
            return Ok(folded);
        }
        let at = deleted
            .get(folded.as_str())
            .map_err(|e| self.error(e.into()))?;
        let delay = self.shared.table_deletion_delay.as_millis() as u64;
        match at.map(|at| at.value()) {
            Some(at) if unix_millis().saturating_sub(at) < delay => Err(Error::TableBeingDeleted {
                table: table.into(),
            }),
            _ => Err(Error::TableNotFound {
                table: table.into(),
            }),
        }
    }

    /// The rows of `table` in a read transaction. A table's rows exist
    /// exactly while the table does (both are made and dropped in one
    /// transaction), so the catalogue is read only to say why one is missing.
    /// The snapshot keeps the tables it opened (see
    /// [`Published`](crate::snapshot::Published)).
    pub(crate) fn rows_to_read(&self, txn: &Snapshot<'_>, table: &str) -> Result<Arc<Rows>> {
        if let Some(rows) = txn.opened_rows(table) {
            return Ok(rows);
        }
        let name = rows_name(&table.to_ascii_lowercase());
        match txn.open_table(rows_table(&name)) {
            Ok(rows) => {
                let rows = Arc::new(rows);
                txn.keep_rows(table, &rows);
                Ok(rows)
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {
                let catalogue = txn.open_table(TABLES).map_err(|e| self.error(e.into()))?;
                let deleted = txn.open_table(DELETED).map_err(|e| self.error(e.into()))?;
                self.existing_table(&catalogue, &deleted, table)?;
                Err(self.damaged("a table without its rows"))
            }
            Err(e) => Err(self.error(e.into())),
        }
    }

    /// Decides and applies `writes` to `table` in one engine transaction, all
    /// or none, with one timestamp; returns the transaction's ETag and each
    /// write's. In a `batch`, the errors of the table and of each write name
    /// the write they belong to.
    fn apply(
        &self,
        txn: &Txn<'_>,
        table: &str,
        writes: &[EntityWrite<'_>],
        batch: bool,
    ) -> Result<(ETag, Vec<Option<ETag>>)> {
        let in_batch = |index: usize| move |e: Error| if batch { e.in_batch(index) } else { e };
        let folded = self.table_to_write(txn, table, in_batch(0))?;
        // The transaction's time, taken by its first change: a write refused
        // before it changes anything leaves the transaction unchanged, and
        // the engine then gives back no room it took (see `stamp`).
        let mut stamp = None;
        let names = TxnNames::new(self, txn);
        let mut etags = Vec::with_capacity(writes.len());
        {
            let name = rows_name(&folded);
            let mut rows = txn
                .open_table(rows_table(&name))
                .map_err(|e| self.error(e.into()))?;
            let keys: Vec<Vec<u8>> = writes.iter().map(write_key).collect();
            let held = held_keys(&*rows, writes, &keys).map_err(|e| self.error(e.into()))?;
            for (index, (write, key)) in writes.iter().zip(&keys).enumerate() {
                let (pk, rk) = write.keys();
                if let EntityWrite::Upsert(entity, UpdateMode::Replace) = write {
                    // Needs nothing of the stored row but whether it is
                    // sound: written at once, and what it replaced looked at
                    // after. A damaged one fails the job, and the writer
                    // drops the transaction (see `crate::writer`).
                    let props = &entity.properties;
                    let ids = ids_of(&names, props).map_err(in_batch(index))?;
                    let (ticks, etag) = self.stamp(txn, &mut stamp)?;
                    let row = encode_row(key, *ticks, props, &ids);
                    let replaced = rows
                        .insert_seeing(key.as_slice(), row.as_slice(), |old| {
                            checked(key, old).is_some()
                        })
                        .map_err(|e| self.error(e.into()))?;
                    if replaced == Some(false) {
                        return Err(in_batch(index)(self.damaged_row(table, pk, rk)));
                    }
                    etags.push(Some(etag.clone()));
                    continue;
                }
                // An insert whose key the job's scan found free needs no
                // lookup of its own.
                let free = matches!(write, EntityWrite::Insert(_))
                    && held.as_ref().is_some_and(|held| !held.contains(key));
                let existing = if free {
                    None
                } else {
                    rows.get(key.as_slice())
                        .map_err(|e| self.error(e.into()))?
                        .map(|row| row.value().to_vec())
                };
                let existing = match existing.as_deref().map(|row| checked(key, row)) {
                    // A damaged row is deleted by its keys alone, unread: the
                    // way out of damage that names the row.
                    Some(None) if matches!(write, EntityWrite::Delete(_, _, IfMatch::Any)) => {
                        rows.remove(key.as_slice())
                            .map_err(|e| self.error(e.into()))?;
                        etags.push(None);
                        continue;
                    }
                    Some(None) => return Err(in_batch(index)(self.damaged_row(table, pk, rk))),
                    Some(Some(row)) => Some(row),
                    None => None,
                };
                let stored = existing.map(|row| Stored {
                    row,
                    storage: self,
                    names: &names,
                });
                let decision = decide(table, *write, stored.as_ref().map(|s| s as &dyn StoredRow))
                    .map_err(in_batch(index))?;
                match decision {
                    Decision::Put(props) => {
                        let ids = ids_of(&names, &props).map_err(in_batch(index))?;
                        let (ticks, etag) = self.stamp(txn, &mut stamp)?;
                        let row = encode_row(key, *ticks, &props, &ids);
                        rows.insert(key.as_slice(), row.as_slice())
                            .map_err(|e| self.error(e.into()))?;
                        etags.push(Some(etag.clone()));
                    }
                    Decision::Remove => {
                        rows.remove(key.as_slice())
                            .map_err(|e| self.error(e.into()))?;
                        etags.push(None);
                    }
                }
            }
        }
        let (_, etag) = self.stamp(txn, &mut stamp)?;
        Ok((etag.clone(), etags))
    }

    /// The folded name of `table`, to write in `txn`; its absence is the
    /// error `missing` makes of it (the first operation's, in a
    /// transaction).
    fn table_to_write(
        &self,
        txn: &Txn<'_>,
        table: &str,
        missing: impl FnOnce(Error) -> Error,
    ) -> Result<String> {
        let catalogue = txn.open_table(TABLES).map_err(|e| self.error(e.into()))?;
        let folded = table.to_ascii_lowercase();
        let found = catalogue.get(folded.as_str());
        if found.map_err(|e| self.error(e.into()))?.is_some() {
            return Ok(folded);
        }
        // Only a missing table needs the deleted ones, to say why.
        let deleted = txn.open_table(DELETED).map_err(|e| self.error(e.into()))?;
        self.existing_table(&*catalogue, &*deleted, table)
            .map_err(missing)
    }

    /// The time of the transaction `txn` and its ETag, kept in `slot`:
    /// taken ([`next_ticks`](LocalStorage::next_ticks)) when first asked
    /// for. Taking it may change the store's bound on the times given, so
    /// `apply` asks only once a write of the transaction passed its checks.
    fn stamp<'s>(
        &self,
        txn: &Txn<'_>,
        slot: &'s mut Option<(i64, ETag)>,
    ) -> Result<&'s (i64, ETag)> {
        if slot.is_none() {
            let ticks = self.next_ticks(txn)?;
            *slot = Some((ticks, etag_of(ticks)));
        }
        Ok(slot.as_ref().expect("taken above"))
    }

    /// Applies `operations` to `table` on the writer thread, all or none
    /// (see [`apply`](LocalStorage::apply)).
    async fn apply_owned(
        &self,
        table: &str,
        operations: Vec<BatchOperation>,
        batch: bool,
    ) -> Result<(ETag, Vec<Option<ETag>>)> {
        let table = table.to_owned();
        self.write(move |store, txn| {
            let writes: Vec<EntityWrite<'_>> = operations.iter().map(EntityWrite::from).collect();
            store.apply(txn, &table, &writes, batch)
        })
        .await
    }

    /// [`check`](LocalStorage::check)'s part for tables: every row of
    /// every table against its checksum, and decoded.
    /// Checks the catalogue of tables and each table's rows; returns the
    /// names of the engine tables that hold them.
    pub(crate) fn check_tables(
        &self,
        txn: &redb::ReadTransaction,
        report: &mut crate::check::CheckReport,
    ) -> Vec<String> {
        crate::names::check(txn, report);
        let property_names = SnapshotNames::new(self, txn);
        let mut names = Vec::new();
        crate::check::walk(
            txn,
            TABLES,
            crate::check::Presence::Optional,
            "the catalogue of tables",
            report,
            |_, folded, name| {
                names.push((folded.to_owned(), name.to_owned()));
            },
        );
        let mut engine_tables = Vec::with_capacity(names.len());
        for (folded, name) in names {
            report.tables += 1;
            let place = format!("table `{name}`");
            let engine = rows_name(&folded);
            crate::check::walk(
                txn,
                rows_table(&engine),
                crate::check::Presence::Required,
                &place,
                report,
                |report, key, value| {
                    report.rows += 1;
                    let read =
                        checked(key, value).and_then(|row| entity(key, row, None, &property_names));
                    if read.is_none() {
                        let keys = crate::rows::split_key(key).and_then(|(pk, rk)| {
                            Some((
                                tablekit_core::backend::sorted::decode_key(pk)?,
                                tablekit_core::backend::sorted::decode_key(rk)?,
                            ))
                        });
                        let place = match keys {
                            Some((pk, rk)) => format!("table `{name}`, row ({pk:?}, {rk:?})"),
                            None => format!("table `{name}`, a row whose key does not decode"),
                        };
                        report.damage(place, "does not match its checksum or does not decode");
                    }
                },
            );
            engine_tables.push(engine);
        }
        engine_tables
    }

    /// The error for a row of `table` that fails its checksum or does not
    /// decode, naming it.
    fn damaged_row(&self, table: &str, pk: &str, rk: &str) -> Error {
        Error::Storage {
            path: self.shared.path.display().to_string(),
            failure: tablekit_core::StorageFailure::Damaged,
            message: format!(
                "the row ({pk:?}, {rk:?}) of table `{table}` does not match its checksum or does not \
                 decode; an unconditional delete by its keys removes it"
            ),
        }
    }

    /// Whether a query passes over the damaged row `(pk, rk)` of `table`
    /// (stored keys), as a store opened with
    /// [`skip_damaged_rows`](crate::LocalStorageBuilder::skip_damaged_rows)
    /// does; the row is then kept in its list and logged.
    fn passes_over(&self, table: &str, pk: &[u8], rk: &[u8]) -> bool {
        if !self.shared.skip_damaged {
            return false;
        }
        let text = |k| decode_key(k).unwrap_or_else(|| String::from_utf8_lossy(k).into_owned());
        let row = crate::check::SkippedRow {
            table: table.to_owned(),
            partition_key: text(pk),
            row_key: text(rk),
        };
        tracing::warn!(damaged = %row, "a damaged row was passed over");
        self.shared.skipped.lock().insert(row);
        true
    }
}

tablekit_core::serve!(LocalStorage, info: |this| tablekit_core::layer::RawTables::store_info(this), contracts: [TableBackend, BlobStore, QueueStore]);

impl tablekit_core::layer::RawTables for LocalStorage {
    async fn create_table(&self, table: &str) -> Result<()> {
        let folded = self.guarded(|| {
            let folded = table.to_ascii_lowercase();
            // Read-only: a table that exists is answered as one, so that a
            // program making its tables "if missing" opens the store.
            if self.shared.read_only {
                let txn = self.begin_read()?;
                let catalogue = txn.open_table(TABLES).map_err(|e| self.error(e.into()))?;
                if catalogue
                    .get(folded.as_str())
                    .map_err(|e| self.error(e.into()))?
                    .is_some()
                {
                    return Err(Error::TableAlreadyExists {
                        table: table.into(),
                    });
                }
            }
            Ok(folded)
        })?;
        let table = table.to_owned();
        self.write(move |store, txn| {
            let mut catalogue = txn.open_table(TABLES).map_err(|e| store.error(e.into()))?;
            let mut deleted = txn.open_table(DELETED).map_err(|e| store.error(e.into()))?;
            match store.existing_table(&*catalogue, &*deleted, &table) {
                Ok(_) => {
                    return Err(Error::TableAlreadyExists {
                        table: table.clone(),
                    });
                }
                Err(Error::TableNotFound { .. }) => {}
                Err(other) => return Err(other),
            }
            deleted
                .remove(folded.as_str())
                .map_err(|e| store.error(e.into()))?;
            catalogue
                .insert(folded.as_str(), table.as_str())
                .map_err(|e| store.error(e.into()))?;
            txn.open_table(rows_table(&rows_name(&folded)))
                .map_err(|e| store.error(e.into()))?;
            Ok(())
        })
        .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        let table = table.to_owned();
        self.write(move |store, txn| {
            let mut catalogue = txn.open_table(TABLES).map_err(|e| store.error(e.into()))?;
            let mut deleted = txn.open_table(DELETED).map_err(|e| store.error(e.into()))?;
            let folded = store.existing_table(&*catalogue, &*deleted, &table)?;
            catalogue
                .remove(folded.as_str())
                .map_err(|e| store.error(e.into()))?;
            deleted
                .insert(folded.as_str(), unix_millis())
                .map_err(|e| store.error(e.into()))?;
            txn.delete_table(rows_table(&rows_name(&folded)))
                .map_err(|e| store.error(e.into()))?;
            Ok(())
        })
        .await
    }

    async fn list_tables(&self, options: &ListTablesOptions) -> Result<TablePage> {
        self.guarded(|| {
            let limit = options.page_size();
            let prefix = options.prefix.as_deref().unwrap_or("");
            let start = options
                .continuation
                .as_ref()
                .map(|t| t.next_partition_key().to_ascii_lowercase());
            let txn = self.begin_read()?;
            let catalogue = txn.open_table(TABLES).map_err(|e| self.error(e.into()))?;
            let range = catalogue
                .range::<&str>((
                    start.as_deref().map_or(Bound::Unbounded, Bound::Included),
                    Bound::Unbounded,
                ))
                .map_err(|e| self.error(e.into()))?;
            let mut tables = Vec::new();
            let mut continuation = None;
            for item in range {
                let (key, name) = item.map_err(|e| self.error(e.into()))?;
                let name = name.value();
                if !name.starts_with(prefix) {
                    continue;
                }
                if tables.len() == limit {
                    continuation = Some(ContinuationToken::new(key.value(), None));
                    break;
                }
                tables.push(name.to_owned());
            }
            Ok(TablePage {
                tables,
                continuation,
            })
        })
    }

    async fn get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key_text: &str,
        options: &GetOptions,
    ) -> Result<Entity> {
        self.guarded(|| {
            let txn = self.begin_read()?;
            let rows = self.rows_to_read(&txn, table)?;
            let key = row_key(partition_key, row_key_text);
            let row = rows
                .get(key.as_slice())
                .map_err(|e| self.error(e.into()))?
                .ok_or_else(|| Error::EntityNotFound {
                    table: table.into(),
                    partition_key: partition_key.into(),
                    row_key: row_key_text.into(),
                })?;
            let damaged = || self.damaged_row(table, partition_key, row_key_text);
            let row = checked(&key, row.value()).ok_or_else(damaged)?;
            let names = SnapshotNames::new(self, &txn);
            entity(&key, row, options.select.as_deref(), &names)
                .ok_or_else(|| names.or_damaged(damaged))
        })
    }

    async fn query_entities(&self, table: &str, query: &Query) -> Result<QueryPage> {
        self.guarded(|| {
            // Room for the whole page first (an entity is over a hundred
            // bytes, and a vector grown by doubling copies them about twice
            // over); `QueryPage::new` gives back what a short page did not
            // fill.
            let mut entities = Vec::with_capacity(query.top.unwrap_or(MAX_PAGE_SIZE) as usize);
            let mut reader = RowReader::default();
            let filter = row_filter(query);
            let select = query.select.as_deref();
            let continuation = self.page_rows(table, query, |key, row, names| {
                // Made an entity only if it matches.
                if let Some(filter) = &filter
                    && !reader.meets(key, row, names, filter)?
                {
                    return Some(Ok(false));
                }
                let entity = reader.entity(key, row, None, names)?;
                entities.push(selected(entity, select));
                Some(Ok(true))
            })?;
            Ok(QueryPage::new(entities, continuation))
        })
    }

    fn reads_rows(&self, query: &Query) -> bool {
        // Rows are passed with every property (a filter is evaluated on the
        // row as it is passed): a query with a projection is not read so.
        query.select.is_none()
    }

    async fn read_rows(
        &self,
        table: &str,
        query: &Query,
        read: &mut RowVisitor<'_>,
    ) -> Result<Option<ContinuationToken>> {
        // A query `reads_rows` refuses (a projection) never comes here
        // (`Served` refuses it).
        let filter = row_filter(query);
        // A panic of `read` is the caller's: it is carried past the
        // engine's boundary (which takes a panic for a damaged file) and
        // raised again there.
        let mut panicked = None;
        let read = self.guarded(|| {
            let mut reader = RowReader::default();
            self.page_rows(table, query, |key, row, names| {
                if let Some(filter) = &filter
                    && !reader.meets(key, row, names, filter)?
                {
                    // Passed by the filter: not one of the page's rows.
                    return Some(Ok(false));
                }
                reader.with_row(key, row, names, |row| {
                    call_reader(read, row, &mut panicked).map(|()| true)
                })
            })
        });
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
        read
    }

    async fn read_row(
        &self,
        table: &str,
        partition_key: &str,
        row_key_text: &str,
        read: &mut RowVisitor<'_>,
    ) -> Result<bool> {
        // As in `read_rows`, a panic of `read` is carried past the engine's boundary.
        let mut panicked = None;
        let found = self.guarded(|| {
            let txn = self.begin_read()?;
            let rows = self.rows_to_read(&txn, table)?;
            let key = row_key(partition_key, row_key_text);
            let Some(row) = rows.get(key.as_slice()).map_err(|e| self.error(e.into()))? else {
                return Ok(false);
            };
            let damaged = || self.damaged_row(table, partition_key, row_key_text);
            let row = checked(&key, row.value()).ok_or_else(damaged)?;
            let names = SnapshotNames::new(self, &txn);
            RowReader::default()
                .with_row(&key, row, &names, |row| {
                    call_reader(read, row, &mut panicked)
                })
                .ok_or_else(|| names.or_damaged(damaged))?
                .map(|()| true)
        });
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
        found
    }

    fn query_order(&self) -> QueryOrder {
        QueryOrder::Keys
    }

    fn store_info(&self) -> StoreInfo {
        StoreInfo::embedded("tablekit.local", self.shared.path.display().to_string())
    }

    async fn write_entity(&self, table: &str, write: EntityWrite<'_>) -> Result<Option<ETag>> {
        let (etag, _) = self.apply_owned(table, vec![owned(write)], false).await?;
        Ok(write.entity().map(|_| etag))
    }

    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[BatchOperation],
    ) -> Result<Vec<Option<ETag>>> {
        Ok(self.apply_owned(table, operations.to_vec(), true).await?.1)
    }
}

/// The write as an operation that owns its entity or keys, to hand to the
/// writer thread.
fn owned(write: EntityWrite<'_>) -> BatchOperation {
    match write {
        EntityWrite::Insert(entity) => BatchOperation::Insert(entity.clone()),
        EntityWrite::Update(entity, mode, if_match) => BatchOperation::Update {
            entity: entity.clone(),
            mode,
            if_match: if_match.clone(),
        },
        EntityWrite::Upsert(entity, mode) => BatchOperation::Upsert {
            entity: entity.clone(),
            mode,
        },
        EntityWrite::Delete(partition_key, row_key, if_match) => BatchOperation::Delete {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            if_match: if_match.clone(),
        },
    }
}

impl LocalStorage {
    /// Reads a page of `query`: each row of its key range, checked against
    /// its checksum, is handed to `take` with the names to read it with.
    /// `take` answers whether the row is one of the page's (counted
    /// against the page's size), or `None` if the row does not read (it is
    /// damaged). Gives the page's continuation token.
    fn page_rows(
        &self,
        table: &str,
        query: &Query,
        mut take: impl FnMut(&[u8], &[u8], &SnapshotNames<'_>) -> Option<Result<bool>>,
    ) -> Result<Option<ContinuationToken>> {
        let resume = query.continuation.as_ref().map(resume_at).transpose()?;
        let limit = query.top.unwrap_or(MAX_PAGE_SIZE) as usize;
        let (pk_range, rk_range) = key_ranges(query.filter.as_ref());
        let txn = self.begin_read()?;
        let rows = self.rows_to_read(&txn, table)?;
        let Some(mut range) = key_bounds(&pk_range, &rk_range) else {
            return Ok(None);
        };
        if let Some((pk, rk)) = &resume {
            range = range.starting_at(&[pk.as_slice(), &[0], rk.as_slice()].concat());
        }
        let Some(bounds) = range.bounds() else {
            return Ok(None);
        };
        let range = rows
            .range::<&[u8]>(bounds)
            .map_err(|e| self.error(e.into()))?;
        let names = SnapshotNames::new(self, &txn);
        let mut taken = 0;
        for item in range {
            let (key, row) = item.map_err(|e| self.error(e.into()))?;
            let key = key.value();
            let (pk, rk) = crate::rows::split_key(key).ok_or_else(|| self.damaged("a row key"))?;
            if taken >= limit {
                return Ok(Some(continuation_token(pk, rk)));
            }
            // Rows outside the RowKey range are skipped undecoded.
            if !rk_range.contains(rk) {
                continue;
            }
            let damaged = || {
                let text = |k| decode_key(k).unwrap_or_default();
                self.damaged_row(table, &text(pk), &text(rk))
            };
            let Some(row) = checked(key, row.value()) else {
                if self.passes_over(table, pk, rk) {
                    continue;
                }
                return Err(damaged());
            };
            match take(key, row, &names) {
                Some(taken_now) => taken += usize::from(taken_now?),
                None if self.passes_over(table, pk, rk) => {}
                None => return Err(names.or_damaged(damaged)),
            }
        }
        Ok(None)
    }
}

/// The engine's key of the row `write` writes.
fn write_key(write: &EntityWrite<'_>) -> Vec<u8> {
    let (pk, rk) = write.keys();
    row_key(pk, rk)
}

/// The fewest inserts in one job whose keys are looked up in one pass
/// ([`held_keys`]).
const SCANNED_INSERTS: usize = 8;

/// For a job of many inserts: the keys among theirs that hold a row, read
/// in one pass over the range their keys span instead of a lookup each (a
/// load of new rows finds none, in one descent of the tree). `None` when
/// each is looked up alone: few inserts, a key the job names twice (its
/// own writes would change what the scan saw), or a range holding more
/// rows than twice what the job inserts.
fn held_keys(
    rows: &impl ReadableTable<&'static [u8], &'static [u8]>,
    writes: &[EntityWrite<'_>],
    keys: &[Vec<u8>],
) -> Result<Option<std::collections::HashSet<Vec<u8>>>, redb::StorageError> {
    let mut inserts: Vec<&[u8]> = (writes.iter().zip(keys))
        .filter(|(write, _)| matches!(write, EntityWrite::Insert(_)))
        .map(|(_, key)| key.as_slice())
        .collect();
    if inserts.len() < SCANNED_INSERTS {
        return Ok(None);
    }
    let mut all: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    all.sort_unstable();
    if all.windows(2).any(|pair| pair[0] == pair[1]) {
        return Ok(None);
    }
    inserts.sort_unstable();
    let (first, last) = (inserts[0], inserts[inserts.len() - 1]);
    let mut held = std::collections::HashSet::new();
    for (read, item) in rows.range::<&[u8]>(first..=last)?.enumerate() {
        if read >= 2 * inserts.len() {
            return Ok(None);
        }
        let (key, _) = item?;
        if inserts.binary_search(&key.value()).is_ok() {
            held.insert(key.value().to_vec());
        }
    }
    Ok(Some(held))
}

/// The id of each property name of `props` (`None` for a name the row
/// keeps itself), given now to names without one.
fn ids_of(names: &TxnNames<'_>, props: &Properties) -> Result<Vec<Option<u64>>> {
    props.iter().map(|(name, _)| names.id_of(name)).collect()
}

/// The filter each row of `query`'s range is asked of before it is read
/// (only the properties it compares are read to ask it, so a row it
/// passes by costs little; [`RowFilter`]); `None` for no filter, or one
/// the range holds whole.
fn row_filter(query: &Query) -> Option<RowFilter<'_>> {
    RowFilter::new(query.filter.as_ref()?)
}

/// Passes `row` to `read`, outside the engine's boundary
/// ([`crate::panics::outside`]); a panic of `read` is kept in `panicked`,
/// for the caller to raise again once out of the engine's work, and ends
/// that work as an error.
fn call_reader(
    read: &mut RowVisitor<'_>,
    row: tablekit_core::RowRef<'_>,
    panicked: &mut Option<Box<dyn std::any::Any + Send>>,
) -> Result<()> {
    let call = std::panic::AssertUnwindSafe(|| crate::panics::outside(|| read(row)));
    std::panic::catch_unwind(call).unwrap_or_else(|panic| {
        *panicked = Some(panic);
        Err(Error::NotSupported {
            operation: "a row reader that panics",
        })
    })
}

/// `entity` with only the `$select`ed properties (the keys always).
fn selected(mut entity: Entity, select: Option<&[String]>) -> Entity {
    if let Some(select) = select {
        entity
            .properties
            .retain(|name, _| select.iter().any(|s| s == name));
        if !select.iter().any(|s| s == "Timestamp") {
            entity.timestamp = None;
        }
    }
    entity
}
