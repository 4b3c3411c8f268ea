//! Reading a whole store to find damage: [`LocalStorage::check`], over
//! each module's own check and the engine's list of its tables.

use std::collections::HashSet;

use tablekit_core::{Error, Result, StorageFailure};

use crate::check::{self, CheckReport};
use crate::{LocalStorage, META, blobs, names, queues, tables};

impl LocalStorage {
    /// Reads everything the store holds and checks it: every table row
    /// against its checksum, every blob's properties against theirs and its
    /// bytes against their MD5, every queue message against its checksum,
    /// and the engine's pages as it walks them: the shape of each of its
    /// trees (keys in order, each entry found again by its key, as many
    /// entries as the engine counts) and its list of tables against the
    /// store's. Damage does not stop the check: each damaged piece is named
    /// in the report, and the rest is still read.
    ///
    /// It reads a snapshot (writes may go on meanwhile), on a blocking
    /// thread of the runtime, and takes about as long as reading the file.
    /// Open the store [read-only](LocalStorage::open_read_only) to check one
    /// no program has open; the `tablekit check` command does.
    ///
    /// # Errors
    /// [`Error::Storage`] when the store cannot be
    /// read at all (its engine does not open a snapshot).
    pub async fn check(&self) -> Result<CheckReport> {
        // It reads the whole file: on a thread of its own, not on one of
        // the async runtime's workers, which other tasks wait for.
        let store = self.clone();
        let read = move || {
            store.guarded(|| {
                let txn = store.begin_read()?;
                let mut report = CheckReport::default();
                let rows_tables = store.check_tables(&txn, &mut report);
                blobs::check(&txn, &mut report);
                queues::check(&txn, &mut report);
                let kept: HashSet<String> =
                    std::iter::once(redb::TableHandle::name(&META).to_owned())
                        .chain(tables::system_tables())
                        .chain(names::system_tables())
                        .chain(blobs::system_tables())
                        .chain(queues::system_tables())
                        .chain(rows_tables)
                        .collect();
                let kept = |name: &str| kept.contains(name);
                check::engine_tables(&txn, &kept, &mut report);
                Ok(report)
            })
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .spawn_blocking(read)
                .await
                .map_err(|e| Error::Storage {
                    path: self.shared.path.display().to_string(),
                    failure: StorageFailure::Io,
                    message: format!("the check did not run to its end: {e}"),
                })?,
            Err(_) => read(),
        }
    }
}
