//! Compaction: the engine's file made as short as its data.
//!
//! The engine takes pages for a write before it frees the ones the write
//! replaced, and keeps a file's free pages for later writes instead of
//! giving them back: a store that has been written for a while holds free
//! space (a bulk load leaves next to none, but updates and deletes spread
//! over a store can leave its file twice as long as its pages, the engine
//! growing it by doubling). [`LocalStorage::compact`] moves every page to
//! the front of the file and cuts the free space off (the file's length
//! may stay longer, as a hole: see the method's docs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit_core::{Error, Result, StorageFailure};
use tokio::sync::oneshot;

use crate::snapshot::WAIT_FOR_READS;
use crate::writer::Message;
use crate::{Engine, FILE_NAME, LocalStorage, io_error};

/// What [`LocalStorage::compact`] did: the length of the engine's file
/// before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compaction {
    /// The file's length before, in bytes.
    pub before: u64,
    /// The file's length after, in bytes.
    pub after: u64,
}

impl LocalStorage {
    /// Gives the store's free space back: every page is moved to the front
    /// of the file, and the free space after them is cut off. The disk then
    /// holds the data alone. The file's length may stay longer than the
    /// data (the engine can grow the file again, by doubling, for its own
    /// bookkeeping), the rest being a hole that takes no room: after
    /// 400,000 writes over 100,000 rows here, one compaction left 705 bytes
    /// per row of length and 353 on disk.
    ///
    /// It runs on the store's writer thread, between two groups of writes,
    /// after a checkpoint: writes wait for it, and so do reads that start
    /// while it runs. It takes about as long as writing the store's data
    /// again (tens of milliseconds for 100,000 rows here). A crash during a
    /// compaction loses nothing: the engine moves pages in durable commits.
    ///
    /// # Errors
    /// [`StorageFailure::ReadOnly`] for a read-only store;
    /// [`StorageFailure::Locked`] if reads under way (a long
    /// [`check`](LocalStorage::check), say) do not end within two seconds;
    /// the engine's, as [`Error::Storage`].
    pub async fn compact(&self) -> Result<Compaction> {
        let (reply, answer) = oneshot::channel();
        self.send(Message::Between(Box::new(move |store: &LocalStorage| {
            // The caller may have stopped waiting.
            let _ = reply.send(store.compact_now());
        })))?;
        answer.await.map_err(|_| self.writer_gone())?
    }

    /// Compacts the engine's file, on the writer thread.
    fn compact_now(&self) -> Result<Compaction> {
        self.guarded(|| {
            self.checkpoint()?;
            let before = self.engine_file_len()?;
            // The snapshot shown to readers is a read under way too: the
            // engine holds nothing but durable state now, which readers
            // read until the compaction shows them its own.
            self.publish_snapshot(None);
            let compacted = self.compact_engine();
            self.publish()?;
            compacted?;
            Ok(Compaction {
                before,
                after: self.engine_file_len()?,
            })
        })
    }

    /// Compacts the engine, once reads under way have ended.
    fn compact_engine(&self) -> Result<()> {
        let mut slot = self.shared.db.write();
        let deadline = Instant::now() + WAIT_FOR_READS;
        loop {
            let Some(engine) = slot.as_mut() else {
                return Err(self.not_reopened());
            };
            // Readers hold the engine for a moment, and a read
            // transaction until it ends: new ones wait for `slot`.
            let compacted = match Arc::get_mut(engine) {
                Some(Engine::Writable(db)) => Some(db.compact()),
                Some(Engine::ReadOnly(_) | Engine::Recovered(_)) => {
                    return Err(self.read_only_error());
                }
                None => None,
            };
            match compacted {
                Some(Ok(_)) => break,
                None | Some(Err(redb::CompactionError::TransactionInProgress))
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                None | Some(Err(redb::CompactionError::TransactionInProgress)) => {
                    return Err(Error::Storage {
                        path: self.shared.path.display().to_string(),
                        failure: StorageFailure::Locked,
                        message: "reads under way did not end within two seconds; \
                                  compact the store again later"
                            .into(),
                    });
                }
                Some(Err(e)) => return Err(self.error(e.into())),
            }
        }
        Ok(())
    }

    /// The length of the engine's file.
    fn engine_file_len(&self) -> Result<u64> {
        let file = self.shared.path.join(FILE_NAME);
        std::fs::metadata(&file)
            .map(|m| m.len())
            .map_err(|e| io_error(&self.shared.path, &e))
    }
}
