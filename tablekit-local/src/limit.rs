//! A cap on the size of the store's file: the engine's file backend, with
//! every write past the cap refused as a full disk refuses it.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::StorageBackend;
use redb::backends::FileBackend;

use crate::io_error;

#[derive(Debug)]
pub(crate) struct SizeLimit {
    inner: FileBackend,
    /// The cap, shared with the store's handle, which may raise it.
    max: Arc<AtomicU64>,
}

impl SizeLimit {
    pub(crate) fn open(path: &Path, max: Arc<AtomicU64>) -> tablekit::Result<SizeLimit> {
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_error(path, &e))?;
        let inner = FileBackend::new(file).map_err(|e| crate::storage_error(path, e.into()))?;
        Ok(SizeLimit { inner, max })
    }

    fn check(&self, end: u64) -> io::Result<()> {
        let max = self.max.load(Ordering::Relaxed);
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
impl StorageBackend for SizeLimit {
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
