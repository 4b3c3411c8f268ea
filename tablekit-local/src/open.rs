//! Opening a store: the engine file made atomically, its format and journal checked, and what a crash left replayed.

use super::*;

/// Opens the engine read-only on the store's file in `dir`, keeping at most
/// `cache_size` bytes of it in memory. A store that was not closed cleanly
/// (the engine needs its repair, or the journal holds writes the engine's
/// file does not) is recovered in memory ([`recover_in_memory`]).
pub(super) fn open_read_only(
    dir: &Path,
    cache_size: usize,
    lost_journal_accepted: bool,
    verify: bool,
) -> Result<Engine> {
    let file = dir.join(FILE_NAME);
    let db = contain_panics(|| {
        Database::builder()
            .set_cache_size(cache_size)
            .open_read_only(&file)
    })
    .map_err(|panic| damaged_by(dir, &panic))?;
    match db {
        Ok(db) => {
            // The engine's read-only open checks nothing: before anything
            // is read, a second engine checks the file while this one
            // holds its lock, and is let go.
            if verify {
                verify_pages(dir, cache_size)?;
            }
            let checkpoint = contain_panics(|| checkpoint_of(dir, &db))
                .map_err(|panic| damaged_by(dir, &panic))??;
            contain_panics(|| journal_present(dir, &db, lost_journal_accepted))
                .map_err(|panic| damaged_by(dir, &panic))??;
            // Writes of the journal not in the engine's file yet.
            if journal::Journal::has_records_after(dir, checkpoint)
                .map_err(|e| io_error(dir, &e))?
            {
                drop(db);
                // Checked above already.
                return recover_in_memory(dir, cache_size, lost_journal_accepted, false);
            }
            Ok(Engine::ReadOnly(db))
        }
        Err(redb::DatabaseError::RepairAborted) => {
            recover_in_memory(dir, cache_size, lost_journal_accepted, verify)
        }
        Err(e) => Err(storage_error(dir, e.into())),
    }
}

/// Recovers the store in `dir` as a writable open would, in memory alone:
/// the engine runs on its file through an [`overlay::Overlay`], which
/// keeps what it writes (its repair, the journal's records applied again)
/// in memory and never writes the file. Reads then see the store as
/// recovered, and the directory is left as it was.
pub(super) fn recover_in_memory(
    dir: &Path,
    cache_size: usize,
    lost_journal_accepted: bool,
    verify: bool,
) -> Result<Engine> {
    contain_panics(|| {
        let db = engine_in_memory(dir, cache_size, verify)?;
        let checkpoint = checkpoint_of(dir, &db)?;
        journal_present(dir, &db, lost_journal_accepted)?;
        let records =
            journal::Journal::records_after(dir, checkpoint).map_err(|e| journal_error(dir, &e))?;
        if !records.is_empty() {
            let mut txn = db.begin_write().map_err(|e| storage_error(dir, e.into()))?;
            apply_records(dir, &txn, &records)?;
            set_durability(dir, &mut txn, redb::Durability::None)?;
            txn.commit().map_err(|e| storage_error(dir, e.into()))?;
        }
        tracing::info!(
            path = %dir.display(),
            records = records.len(),
            "the store was not closed cleanly: it was recovered in memory for a read-only open"
        );
        Ok(Engine::Recovered(db))
    })
    .map_err(|panic| damaged_by(dir, &panic))?
}

/// The engine on the store's file in `dir` through an
/// [`overlay::Overlay`]: what it writes stays in memory. With `verify`, it
/// checks every page of the file as it opens (and refuses a damaged file).
fn engine_in_memory(dir: &Path, cache_size: usize, verify: bool) -> Result<Database> {
    let path = dir.join(FILE_NAME);
    let file = std::fs::File::open(&path).map_err(|e| io_error(dir, &e))?;
    let backend = overlay::Overlay::new(file).map_err(|e| io_error(dir, &e))?;
    Database::builder()
        .set_cache_size(cache_size)
        .set_check_integrity_on_open(verify)
        .create_with_backend(backend)
        .map_err(|e| open_error(dir, e, verify))
}

/// Checks every page of the store's file in `dir` against its checksum,
/// as an open for writing does, without writing the file.
fn verify_pages(dir: &Path, cache_size: usize) -> Result<()> {
    contain_panics(|| engine_in_memory(dir, cache_size, true).map(drop))
        .map_err(|panic| damaged_by(dir, &panic))?
}

/// The error of an engine's open: a file that fails the check of its pages
/// is refused with the ways to what it still holds.
fn open_error(dir: &Path, error: redb::DatabaseError, verify: bool) -> Error {
    match error {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(what)) if verify => {
            failed_verification(dir, &what)
        }
        e => storage_error(dir, e.into()),
    }
}

/// The error of a journal that cannot be read: damage where its records
/// do not read, else the file system's.
pub(super) fn journal_error(dir: &Path, e: &std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::InvalidData => Error::Storage {
            path: dir.display().to_string(),
            failure: StorageFailure::Damaged,
            message: e.to_string(),
        },
        _ => io_error(dir, e),
    }
}

/// Applies the journal's `records` again, in order, in `txn`.
pub(super) fn apply_records(
    dir: &Path,
    txn: &redb::WriteTransaction,
    records: &[journal::Record],
) -> Result<()> {
    for record in records {
        logged::replay(txn, &record.changes).map_err(|e| match e {
            logged::ReplayError::Engine(e) => storage_error(dir, e),
            logged::ReplayError::Malformed(what) => Error::Storage {
                path: dir.display().to_string(),
                failure: StorageFailure::Damaged,
                message: format!(
                    "record {} of the journal holds {what}; the journal is damaged",
                    record.number
                ),
            },
        })?;
    }
    Ok(())
}

/// Where the store keeps the number of the last journal record its engine
/// holds durably (see [`journal`]).
pub(super) const CHECKPOINT: &str = "journal";

/// Where the store keeps the number of its format ([`FORMAT`]), written
/// when it is made.
pub(super) const FORMAT_KEY: &str = "format";

/// The format of the stores this version makes and reads: the layout of
/// rows ([`rows`]), of property names ([`names`]), of blobs and of queue
/// messages. A change to any of them that an older version would misread
/// takes the next number.
pub(super) const FORMAT: i64 = 2;

/// The error for a store of another format than [`FORMAT`] (`None` for a
/// store made before formats were numbered).
pub(super) fn other_format(dir: &Path, format: Option<i64>) -> Error {
    let made = match format {
        Some(format) => format!("format {format}"),
        None => "a format older than 2".to_owned(),
    };
    Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Format,
        message: format!(
            "the store was made in {made}, and this version of tablekit-local reads format \
             {FORMAT} only; copy its data with the version that made it"
        ),
    }
}

/// The number of the last journal record the engine holds durably: 0 for a
/// store that never had one. A store of another format than [`FORMAT`] is
/// refused here, before anything of it is read or replayed.
///
/// Every store of every format has had [`META`] since its first open (a
/// store of format 2 from the commit that made it, with its format in it).
/// Settings that are missing, or that read as no store writes them
/// ([`settings_look_whole`]), are no state a store ever committed: the
/// engine recovered, after a crash that tore its file, to pages that were
/// never one state, say, or the file is not a store's. That is refused as
/// damage, never as a store of an older format, which would send its user
/// to look for the version that made it.
pub(super) fn checkpoint_of(dir: &Path, db: &impl ReadableDatabase) -> Result<u64> {
    let txn = db.begin_read().map_err(|e| storage_error(dir, e.into()))?;
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => return Err(no_settings(dir)),
        Err(e) => return Err(storage_error(dir, e.into())),
    };
    let format = meta
        .get(FORMAT_KEY)
        .map_err(|e| storage_error(dir, e.into()))?
        .map(|v| v.value());
    if format != Some(FORMAT) {
        if format.is_none() && !settings_look_whole(&meta) {
            return Err(no_settings(dir));
        }
        return Err(other_format(dir, format));
    }
    let stored = meta
        .get(CHECKPOINT)
        .map_err(|e| storage_error(dir, e.into()))?
        .map_or(0, |v| v.value());
    u64::try_from(stored).map_err(|_| Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Damaged,
        message: format!("the journal's checkpoint is {stored}"),
    })
}

/// The keys a store's settings ([`META`]) are ever written under, by any
/// format.
const SETTINGS: [&str; 5] = [
    FORMAT_KEY,
    CHECKPOINT,
    IN_USE,
    crate::ticks::TICKS,
    crate::blobs::BLOB_VERSION,
];

/// Whether settings without a format number read as a store of an older
/// format wrote them: at least one entry, each under a key a store writes
/// ([`SETTINGS`]). Pages that were never one state (a torn file the engine
/// recovered) read as no entry, as other keys, or not at all. Only asked of
/// settings that are refused anyway.
fn settings_look_whole(meta: &impl redb::ReadableTable<&'static str, i64>) -> bool {
    let read = contain_panics(|| -> Result<bool, redb::StorageError> {
        let mut any = false;
        for entry in meta.iter()? {
            let (key, _) = entry?;
            if !SETTINGS.contains(&key.value()) {
                return Ok(false);
            }
            any = true;
        }
        Ok(any)
    });
    matches!(read, Ok(Ok(true)))
}

/// The error for an engine without a store's settings, or with settings
/// no store wrote ([`checkpoint_of`]).
fn no_settings(dir: &Path) -> Error {
    Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Damaged,
        message: "the engine's file holds no store's settings (missing or unreadable): it is \
                  damaged (torn by a crash, say), or it is not a store's file"
            .into(),
    }
}

/// Where the store keeps whether its journal may hold writes its engine's
/// file does not: 1 from each writable open (committed durably before any
/// record is written), 0 after a clean close's checkpoint.
pub(super) const IN_USE: &str = "journal_in_use";

/// Refuses a store whose journal is missing while its engine says the
/// journal may hold acknowledged writes (it was not closed cleanly),
/// unless `accepted`.
pub(super) fn journal_present(
    dir: &Path,
    db: &impl ReadableDatabase,
    accepted: bool,
) -> Result<()> {
    if accepted || dir.join(journal::FILE_NAME).exists() {
        return Ok(());
    }
    let txn = db.begin_read().map_err(|e| storage_error(dir, e.into()))?;
    let in_use = match txn.open_table(META) {
        Ok(meta) => meta
            .get(IN_USE)
            .map_err(|e| storage_error(dir, e.into()))?
            .is_some_and(|v| v.value() != 0),
        Err(redb::TableError::TableDoesNotExist(_)) => false,
        Err(e) => return Err(storage_error(dir, e.into())),
    };
    if !in_use {
        return Ok(());
    }
    Err(Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Damaged,
        message: format!(
            "the store was not closed cleanly and its journal {} is missing: the writes \
             acknowledged since its last checkpoint were in it. Put the journal back, or open \
             the store with `LocalStorageBuilder::accept_lost_journal` to go on without them",
            journal::FILE_NAME
        ),
    })
}

/// Sets [`IN_USE`] in `txn`.
pub(super) fn mark_in_use(txn: &redb::WriteTransaction, in_use: bool) -> Result<(), redb::Error> {
    txn.open_table(META)?.insert(IN_USE, i64::from(in_use))?;
    Ok(())
}

/// Records in `txn` that the engine holds every journal record up to
/// `number`: committed durably, it is a checkpoint.
pub(super) fn mark_checkpoint(
    txn: &redb::WriteTransaction,
    number: u64,
) -> Result<(), redb::Error> {
    let number = i64::try_from(number).unwrap_or(i64::MAX);
    txn.open_table(META)?.insert(CHECKPOINT, number)?;
    Ok(())
}

/// Opens the journal of the store in `dir`, whose engine is `db`, applying
/// the records the engine does not hold yet: the writes acknowledged since
/// the last checkpoint, when the store was not closed cleanly. They are
/// committed without a sync and stay in the journal (see [`journal`]): the
/// commit needs no more room than they took before, so a store opened
/// again on a full disk reads all it acknowledged.
pub(super) fn recover(
    dir: &Path,
    db: &Database,
    lost_journal_accepted: bool,
) -> Result<(journal::Journal, u64)> {
    contain_panics(|| {
        let checkpoint = checkpoint_of(dir, db)?;
        journal_present(dir, db, lost_journal_accepted)?;
        let (mut journal, records) =
            journal::Journal::open(dir, checkpoint).map_err(|e| journal_error(dir, &e))?;
        journal.continue_after(checkpoint, &records);
        if records.is_empty() {
            return Ok((journal, 0));
        }
        let mut txn = db.begin_write().map_err(|e| storage_error(dir, e.into()))?;
        apply_records(dir, &txn, &records)?;
        set_durability(dir, &mut txn, redb::Durability::None)?;
        txn.commit().map_err(|e| storage_error(dir, e.into()))?;
        tracing::info!(
            path = %dir.display(),
            records = records.len(),
            "the store was not closed cleanly: its journal was applied again"
        );
        Ok((journal, records.len() as u64))
    })
    .map_err(|panic| damaged_by(dir, &panic))?
}

/// Sets how durably `txn` commits. The engine refuses only in modes the
/// store does not use (shared between processes, persistent savepoints).
pub(super) fn set_durability(
    dir: &Path,
    txn: &mut redb::WriteTransaction,
    durability: redb::Durability,
) -> Result<()> {
    txn.set_durability(durability).map_err(|e| Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Io,
        message: e.to_string(),
    })
}

/// Opens the engine on the store's file in `dir`, under the size cap
/// `max_size` if there is one, keeping at most `cache_size` bytes of it in
/// memory; with `verify`, the engine checks every page of the file before
/// it trusts its record of free space (see
/// [`LocalStorageBuilder::verify_on_open`]).
pub(super) fn open_engine(
    dir: &Path,
    max_size: Option<&Arc<std::sync::atomic::AtomicU64>>,
    cache_size: usize,
    verify: bool,
) -> Result<(Database, limit::Discard)> {
    let file = dir.join(FILE_NAME);
    let (backend, discard) = limit::EngineFile::open(&file, max_size.cloned())?;
    let db = contain_panics(|| {
        Database::builder()
            .set_cache_size(cache_size)
            .set_check_integrity_on_open(verify)
            .create_with_backend(backend)
    })
    .map_err(|panic| damaged_by(dir, &panic))?
    .map_err(|e| open_error(dir, e, verify))?;
    Ok((db, discard))
}

/// The refusal of a file whose pages fail the check of an open, with the
/// ways to what it still holds.
fn failed_verification(dir: &Path, what: &str) -> Error {
    Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Damaged,
        message: format!(
            "the engine's file fails the check of its pages ({what}): it is damaged, and is not \
             opened. To read what it still holds, open it read-only with \
             `LocalStorageBuilder::verify_on_open(false)` (`VerifyOnOpen=false` in a connection \
             string): each row, blob and message is still checked as it is read, though a \
             damaged page may hide entries. `tablekit check` names the damage, and `tablekit \
             copy --skip-damaged` copies what is left to a new store"
        ),
    }
}

/// The shortest file a store can be: the engine's header and its first
/// pages. A store's file is never shorter (a file cut short is damage).
pub(super) const MIN_FILE_LEN: u64 = 4096;

/// Refuses to make a store in `dir` where its journal is: a journal
/// without its engine is a store whose engine's file was lost, never to be
/// made anew, empty, in its place.
pub(super) fn engine_not_lost(dir: &Path) -> Result<()> {
    if !dir.join(journal::FILE_NAME).exists() {
        return Ok(());
    }
    Err(Error::Storage {
        path: dir.display().to_string(),
        failure: StorageFailure::Damaged,
        message: format!(
            "the store's engine file {FILE_NAME} is missing while its journal {} is here: put \
             the engine's file back (a new, empty store would take its place), or remove the \
             journal too to start an empty store",
            journal::FILE_NAME
        ),
    })
}

/// The name a store is made under before it gets [`FILE_NAME`].
pub(super) const CREATING: &str = "tablekit.redb.creating";

/// Makes a new store's file whole under another name, then gives it its
/// name: a process killed at any moment of the creation leaves either no
/// store (and a leftover that the next open replaces) or a whole one, never
/// a file that does not open.
pub(super) fn create_atomically(dir: &Path, file: &Path) -> Result<()> {
    let creating = dir.join(CREATING);
    match std::fs::remove_file(&creating) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(dir, &e)),
    }
    {
        let db = Database::builder()
            .create(&creating)
            .map_err(|e| storage_error(dir, e.into()))?;
        let txn = db.begin_write().map_err(|e| storage_error(dir, e.into()))?;
        (|| -> Result<(), redb::Error> {
            txn.open_table(META)?.insert(FORMAT_KEY, FORMAT)?;
            Ok(())
        })()
        .map_err(|e| storage_error(dir, e))?;
        txn.commit().map_err(|e| storage_error(dir, e.into()))?;
    }
    std::fs::File::open(&creating)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_error(dir, &e))?;
    std::fs::rename(&creating, file).map_err(|e| io_error(dir, &e))?;
    // The new name is durable once the directory is.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, &e))
}

pub(super) fn damaged_by(path: &Path, panic: &str) -> Error {
    Error::Storage {
        path: path.display().to_string(),
        failure: StorageFailure::Damaged,
        message: format!("the storage engine failed on the file ({panic}); the file is damaged"),
    }
}

/// Readies the engine's file of the store in `dir`: made first (whole,
/// atomically) when a store opened for writing has none; refused when
/// `dir` is a file, when a read-only open finds no store, or when the file
/// is too short to be one.
pub(crate) fn ready_store_file(dir: &Path, read_only: bool) -> Result<()> {
    if dir.is_file() {
        return Err(Error::Storage {
            path: dir.display().to_string(),
            failure: StorageFailure::Io,
            message: "the path is a file; a store is a directory".into(),
        });
    }
    let file = dir.join(FILE_NAME);
    if read_only {
        if !file.exists() {
            return Err(Error::Storage {
                path: dir.display().to_string(),
                failure: StorageFailure::Io,
                message: format!(
                    "no store here ({FILE_NAME} is missing); a read-only open creates nothing"
                ),
            });
        }
    } else {
        make_store_dir(dir)?;
        if !file.exists() {
            engine_not_lost(dir)?;
            create_atomically(dir, &file)?;
        }
    }
    // A store is never empty: it was made whole before it got its name.
    let length = std::fs::metadata(&file)
        .map_err(|e| io_error(dir, &e))?
        .len();
    if length < MIN_FILE_LEN {
        return Err(Error::Storage {
            path: dir.display().to_string(),
            failure: StorageFailure::Damaged,
            message: format!("{FILE_NAME} is {length} bytes long: cut short, or not a store"),
        });
    }
    Ok(())
}

/// Makes the store's directory where it is missing, in a directory that
/// exists: a path whose parent is missing (a typo in it, say) is refused,
/// as SQLite refuses to make a file there, and nothing is created.
fn make_store_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(Error::Storage {
            path: dir.display().to_string(),
            failure: StorageFailure::Io,
            message: format!(
                "{} does not exist: a store is made in a directory that exists (make it first)",
                parent.display()
            ),
        });
    }
    match std::fs::create_dir(dir) {
        // Made meanwhile by another opener: as good.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        made => made.map_err(|e| io_error(dir, &e)),
    }
}
