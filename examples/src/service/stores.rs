//! The stores the service runs on, and the names of what it keeps there.

use std::sync::Arc;

use tablekit::{BlobStore, Error, QueueStore, TableBackend};

/// The stores the service runs on.
#[derive(Clone)]
pub struct Stores {
    /// The table store.
    pub tables: Arc<dyn TableBackend>,
    /// The blob store, for attachments.
    pub blobs: Arc<dyn BlobStore>,
    /// The queue store, for the outbox.
    pub queues: Arc<dyn QueueStore>,
}

impl Stores {
    /// In-memory stores.
    pub fn in_memory() -> Stores {
        Stores {
            tables: Arc::new(tablekit_mem::MemBackend::new()),
            blobs: Arc::new(tablekit_mem::MemBlobStore::new()),
            queues: Arc::new(tablekit_mem::MemQueueStore::new()),
        }
    }

    /// The stores a connection string names (see [`tablekit_stores`]):
    /// `UseLocalStorage=./data`, `UseMemoryStorage=true`,
    /// `UseDevelopmentStorage=true` for Azurite, or an account's.
    pub fn connect(connection: &str) -> Result<Stores, Error> {
        Ok(Stores::from(tablekit_stores::Stores::open(connection)?))
    }

    /// The stores `TABLEKIT_CONNECTION_STRING` names, or by default the
    /// local directory [`DEFAULT_STORAGE`], kept across restarts; and where
    /// the data lives, to print at start.
    pub fn from_env() -> Result<(Stores, String), Error> {
        if std::env::var_os("TABLEKIT_CONNECTION_STRING").is_none() {
            // The service's own place: its parent is made here (a store is
            // made only in a directory that exists, so that a typo in a
            // path someone gives makes nothing).
            std::fs::create_dir_all(DEFAULT_PARENT).map_err(|e| Error::Storage {
                path: DEFAULT_PARENT.to_owned(),
                failure: tablekit::StorageFailure::Io,
                message: e.to_string(),
            })?;
        }
        Stores::from_env_or(DEFAULT_STORAGE)
    }

    /// The stores `TABLEKIT_CONNECTION_STRING` names, or those of `default`.
    pub fn from_env_or(default: &str) -> Result<(Stores, String), Error> {
        let stores = tablekit_stores::Stores::from_env("TABLEKIT_CONNECTION_STRING", default)?;
        let location = stores.location().to_string();
        Ok((Stores::from(stores), location))
    }
}

/// Where the service keeps its data unless told otherwise: a directory
/// under the working directory.
pub const DEFAULT_STORAGE: &str = "UseLocalStorage=./tablekit-data/service";

/// The directory that holds [`DEFAULT_STORAGE`]'s, made at start when
/// missing.
const DEFAULT_PARENT: &str = "./tablekit-data";

impl From<tablekit_stores::Stores> for Stores {
    fn from(stores: tablekit_stores::Stores) -> Stores {
        Stores {
            tables: stores.tables,
            blobs: stores.blobs,
            queues: stores.queues,
        }
    }
}

/// The names of what the service keeps in its stores.
#[derive(Debug, Clone)]
pub struct Names {
    /// The table of tenants' data.
    pub table: String,
    /// The prefix of the audit log's daily tables (letters and digits).
    pub audit: String,
    /// The blob container of attachments.
    pub container: String,
    /// The outbox's queue.
    pub queue: String,
}

impl Default for Names {
    fn default() -> Names {
        Names {
            table: "Shop".into(),
            audit: "Audit".into(),
            container: "attachments".into(),
            queue: "shop-outbox".into(),
        }
    }
}

impl Names {
    /// Names of their own, for a run that shares an account with others.
    pub fn unique(tag: &str) -> Names {
        let n = fastrand_suffix();
        Names {
            table: format!("Shop{tag}{n}"),
            audit: format!("Audit{tag}{n}x"),
            container: format!("attachments-{}-{n}", tag.to_ascii_lowercase()),
            queue: format!("shop-outbox-{}-{n}", tag.to_ascii_lowercase()),
        }
    }
}

fn fastrand_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}{nanos:09}", std::process::id())
}
