//! Shared helpers of the examples.

use std::sync::Arc;

use tablekit::{BlobStore, Error, QueueStore, TableBackend};

/// Where an example keeps its table: the in-memory backend by default, or
/// the stores `TABLEKIT_CONNECTION_STRING` names (see [`tablekit_stores`]:
/// `UseLocalStorage=./data`, `UseDevelopmentStorage=true` for Azurite, an
/// account's), where the table gets a name of its own that the example
/// deletes at the end.
pub struct Store {
    /// The backend.
    pub backend: Arc<dyn TableBackend>,
    /// The table's name.
    pub table: String,
    /// Whether the table outlives the program (delete it when done).
    pub remote: bool,
    /// The queue service of the same stores.
    pub queues: Arc<dyn QueueStore>,
    /// The blob service of the same stores.
    pub blobs: Arc<dyn BlobStore>,
}

/// The store for a table named `table`.
pub fn store(table: &str) -> Result<Store, Error> {
    let stores =
        tablekit_stores::Stores::from_env("TABLEKIT_CONNECTION_STRING", "UseMemoryStorage=true")?;
    let remote = *stores.location() != tablekit_stores::Location::Memory;
    if remote {
        println!("== on {}", stores.location());
    }
    Ok(Store {
        backend: stores.tables,
        table: if remote {
            format!("{table}{:08}", std::process::id())
        } else {
            table.to_owned()
        },
        remote,
        queues: stores.queues,
        blobs: stores.blobs,
    })
}
pub mod service;
