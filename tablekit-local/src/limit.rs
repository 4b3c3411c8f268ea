//! The engine's file backend: redb's own, with a cap on the file's size
//! (every write past it refused as a full disk refuses it) and a switch
//! that refuses every write from the moment it is thrown, so that an engine
//! about to be dropped writes nothing more: see [`Discard::discard`].

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::StorageBackend;
use redb::backends::FileBackend;

use crate::io_error;

#[derive(Debug)]
pub(crate) struct EngineFile {
    inner: FileBackend,
    /// The cap, shared with the store's handle, which may raise it.
    max: Option<Arc<AtomicU64>>,
    /// Thrown by [`Discard::discard`].
    discarded: Arc<AtomicBool>,
}

/// Throws the switch of one [`EngineFile`].
#[derive(Debug, Clone)]
pub(crate) struct Discard(Arc<AtomicBool>);

impl Discard {
    /// Refuses every later write to the engine's file. The engine commits
    /// without a sync of its own between checkpoints, and writes such
    /// commits durably when it is dropped: an engine holding a commit the
    /// journal failed to make durable must not, since that write was
    /// refused to its caller. Its file stays as the last checkpoint left it
    /// (the commits since are in pages its header does not point to), and
    /// the engine opened again on it replays the journal.
    pub(crate) fn discard(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl EngineFile {
    pub(crate) fn open(
        path: &Path,
        max: Option<Arc<AtomicU64>>,
    ) -> tablekit_core::Result<(EngineFile, Discard)> {
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_error(path, &e))?;
        let inner = FileBackend::new(file).map_err(|e| crate::storage_error(path, e.into()))?;
        let discarded = Arc::new(AtomicBool::new(false));
        let switch = Discard(Arc::clone(&discarded));
        Ok((
            EngineFile {
                inner,
                max,
                discarded,
            },
            switch,
        ))
    }

    fn check(&self, end: u64) -> io::Result<()> {
        if self.discarded.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "the engine's commits since its last checkpoint were discarded",
            ));
        }
        let Some(max) = &self.max else {
            return Ok(());
        };
        let max = max.load(Ordering::Relaxed);
        if end > max {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("the store may take at most {max} bytes"),
            ));
        }
        Ok(())
    }
}

// Every method forwarded, so the file backend's locking holds as it is.
#[deny(clippy::missing_trait_methods)]
impl StorageBackend for EngineFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check(len)?;
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.check(0)?;
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check(offset.saturating_add(data.len() as u64))?;
        self.inner.write(offset, data)
    }

    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }

    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.query_lock_range(start, end)
    }
}
