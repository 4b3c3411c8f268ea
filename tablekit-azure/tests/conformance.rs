//! The whole conformance suite against a real Azurite that the test process
//! starts itself (see `azurite/mod.rs`): never skipped.
//!
//! With `TABLEKIT_TEST_CONNECTION_STRING` set to an account's connection
//! string, the same suite runs against that account instead (every test
//! makes its own uniquely named tables and containers and removes them).

mod azurite;

use tablekit_azure::AzureTables;
use tablekit_azure::config::Account;

/// The variable that points the suite at a real account.
const REAL_ACCOUNT: &str = "TABLEKIT_TEST_CONNECTION_STRING";

/// The account under test: the real one when the environment names it,
/// else this process's Azurite.
fn target() -> Account {
    match std::env::var(REAL_ACCOUNT) {
        Ok(text) if !text.trim().is_empty() => Account::from_connection_string(&text)
            .unwrap_or_else(|e| panic!("{REAL_ACCOUNT} is not a usable connection string: {e}")),
        _ => azurite::account(),
    }
}

fn backend() -> AzureTables {
    AzureTables::new(target()).expect("a table client")
}

mod tables {
    use super::*;
    tablekit_conformance::table_conformance_tests!(backend());
}

fn blobs() -> tablekit_azure::AzureBlobs {
    tablekit_azure::AzureBlobs::new(target()).expect("a blob client")
}

mod blob_store {
    use super::*;
    tablekit_conformance::blob_conformance_tests!(blobs());
}

fn queues() -> (tablekit_azure::AzureQueues, tablekit_conformance::QueueTime) {
    let store = tablekit_azure::AzureQueues::new(target()).expect("a queue client");
    (store, tablekit_conformance::QueueTime::Real)
}

mod queue_store {
    use super::*;
    tablekit_conformance::queue_conformance_tests!(queues());
}

fn outbox_stores() -> (
    std::sync::Arc<dyn tablekit::TableBackend>,
    std::sync::Arc<dyn tablekit::QueueStore>,
    tablekit_conformance::QueueTime,
) {
    let (queues, time) = queues();
    (
        std::sync::Arc::new(backend()),
        std::sync::Arc::new(queues),
        time,
    )
}

mod outbox {
    use super::*;
    tablekit_conformance::outbox_conformance_tests!(outbox_stores());

    /// Hundreds of random runs of moves through the outbox on the REST
    /// path, with faults in the tables and the queue.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn outbox_model_three_hundred_runs() {
        let (tables, queues, time) = outbox_stores();
        let outcomes =
            tablekit_conformance::outbox_model_runs(tables, queues, time, 300, 4, 0xA2).await;
        println!("{outcomes:?}");
        assert!(outcomes.moved > 150, "{outcomes:?}");
    }

    /// Random runs of writes of every kind of a kind with a change feed,
    /// under faults, futures dropped at random polls, and two consumers
    /// that crash at random: each feed is its committed writes, and each
    /// consumer delivers all of it, in order per entity.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn change_feed_model_runs() {
        let outcomes =
            tablekit_conformance::change_feed_model_runs(outbox_stores().0, 3, 40, 0xC4A9).await;
        println!("{outcomes:?}");
        assert!(outcomes.changes > 60, "{outcomes:?}");
        assert!(outcomes.crashes > 6, "{outcomes:?}");
    }

    /// Hundreds of random runs of writes of an entity with indexes kept in
    /// another partition and another table, on the REST path.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn remote_index_model_three_hundred_runs() {
        let (tables, queues, _) = outbox_stores();
        let outcomes =
            tablekit_conformance::remote_index_model_runs(tables, queues, 300, 4, 0xA3).await;
        println!("{outcomes:?}");
        assert!(outcomes.moved > 300, "{outcomes:?}");
    }
}

mod typed {
    use std::sync::Arc;

    use tablekit::{BlobStore, TableBackend};

    use super::*;
    tablekit_conformance::typed_conformance_tests!(
        Arc::new(backend()) as Arc<dyn TableBackend>,
        Arc::new(blobs()) as Arc<dyn BlobStore>
    );
}

/// The index model test on the real REST path: 300 random sequences of
/// every write path with faults, each checked for index rows out of step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_model_three_hundred_runs() {
    use std::sync::Arc;
    let outcomes = tablekit_conformance::index_model_runs(Arc::new(backend()), 300, 6, 0xA2).await;
    eprintln!("{outcomes:?}");
    outcomes.assert_varied();
}

/// The same over entities whose index rows all live beside them (no index
/// entity): their deletes through a `Loaded` take the unplanned path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_index_model_three_hundred_runs() {
    use std::sync::Arc;
    use tablekit_conformance::{PlainStaff, index_model_runs_of};
    let outcomes = index_model_runs_of::<PlainStaff>(Arc::new(backend()), 300, 6, 0xA4).await;
    eprintln!("{outcomes:?}");
    outcomes.assert_varied();
}

/// A sample of the multi-row typed writes (one of each kind, and one of an
/// encrypted, indexed type), dropped after their k-th poll for every k until
/// they complete, on the REST path; after the upkeep, everything is back in
/// step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_safe_to_drop_at_every_poll() {
    use std::sync::Arc;
    let (queues, _) = queues();
    let outcomes = tablekit_conformance::writes_are_safe_to_drop(
        Arc::new(backend()),
        Arc::new(blobs()),
        Arc::new(queues),
        true,
    )
    .await;
    eprintln!("{} (path, k) cases: {:?}", outcomes.total(), outcomes.cases);
    assert_eq!(outcomes.cases.len(), 11, "{outcomes:?}");
}

/// Migrations dropped at random polls or stopped by faults and resumed from
/// their checkpoints, on Azurite: 100 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_model_runs() {
    use std::sync::Arc;
    let outcomes = tablekit_conformance::migration_model_runs(Arc::new(backend()), 100, 0xA5).await;
    eprintln!("{outcomes:?}");
    assert!(outcomes.dropped > 10, "{outcomes:?}");
    assert!(outcomes.resumed > 10, "{outcomes:?}");
}
