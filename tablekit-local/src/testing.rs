//! What the crate's unit tests share.

use tablekit_core::TableBackend;

use crate::LocalStorage;

/// A runtime on the test's own thread.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime, and a temporary store holding the empty table `table`.
pub(crate) fn store_with_table(table: &str) -> (tokio::runtime::Runtime, LocalStorage) {
    let runtime = runtime();
    let store = LocalStorage::temporary().unwrap();
    runtime.block_on(store.create_table(table)).unwrap();
    (runtime, store)
}
