//! Runs the conformance suite from its data form, every test on one shared
//! backend and one shared blob store at once: tests make their own tables, so
//! they must not disturb each other.

use futures::future::join_all;
use tablekit_conformance::{BLOB_TESTS, TABLE_TESTS};
use tablekit_mem::{MemBackend, MemBlobStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_test_on_one_shared_backend_concurrently() {
    let backend = MemBackend::new();
    let blobs = MemBlobStore::new();
    assert!(
        TABLE_TESTS.len() >= 26,
        "the suite lists {} table tests",
        TABLE_TESTS.len()
    );
    let tables = TABLE_TESTS.iter().map(|(name, test)| {
        let backend = backend.clone();
        async move {
            test(&backend).await;
            *name
        }
    });
    let blob_runs = BLOB_TESTS.iter().map(|(_, test)| test(&blobs));
    let finished = join_all(tables).await;
    join_all(blob_runs).await;
    assert_eq!(finished.len(), TABLE_TESTS.len());
}
