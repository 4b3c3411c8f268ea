//! Shared helpers of the examples.

use std::sync::Arc;

use tablekit::{Error, QueueStore, TableBackend};

/// Where an example keeps its table: the in-memory backend by default, or
/// the account `TABLEKIT_CONNECTION_STRING` names (for Azurite:
/// `UseDevelopmentStorage=true`), where the table gets a name of its own
/// that the example deletes at the end.
pub struct Store {
    /// The backend.
    pub backend: Arc<dyn TableBackend>,
    /// The table's name.
    pub table: String,
    /// Whether the table is in a real account (delete it when done).
    pub remote: bool,
    /// The queue service of the same account (in memory by default).
    pub queues: Arc<dyn QueueStore>,
}

/// The store for a table named `table`.
pub fn store(table: &str) -> Result<Store, Error> {
    match std::env::var("TABLEKIT_CONNECTION_STRING") {
        Ok(connection) => {
            let azure = tablekit_azure::AzureTables::from_connection_string(&connection)?;
            println!("== on {}", azure.account().table_endpoint);
            let queues = tablekit_azure::AzureQueues::new(azure.account().clone())?;
            Ok(Store {
                backend: Arc::new(azure),
                table: format!("{table}{:08}", std::process::id()),
                remote: true,
                queues: Arc::new(queues),
            })
        }
        Err(_) => Ok(Store {
            backend: Arc::new(tablekit_mem::MemBackend::new()),
            table: table.to_owned(),
            remote: false,
            queues: Arc::new(tablekit_mem::MemQueueStore::new()),
        }),
    }
}
pub mod service;
