//! The whole conformance suite on the local backend: tables, blobs and
//! queues, the typed API and its patterns, the outbox, the model runs with
//! faults and the cancellation harness. Each test runs on a store of its
//! own in a temporary directory.

use std::sync::Arc;

use tablekit::clock::ManualClock;
use tablekit::{BlobStore, QueueStore, TableBackend};
use tablekit_conformance::QueueTime;
use tablekit_local::LocalStorage;

fn store() -> LocalStorage {
    LocalStorage::temporary().expect("a temporary store")
}

/// A store that keeps nothing of its file in memory: each read goes to the
/// file, and each page written goes there before the next checkpoint.
fn uncached() -> LocalStorage {
    LocalStorage::builder()
        .cache_size(0)
        .temporary()
        .expect("a temporary store")
}

/// A store whose queues run on a clock the tests move by hand.
fn queues() -> (LocalStorage, QueueTime) {
    queues_on(LocalStorage::builder())
}

/// [`queues`], the store opened by `builder`.
fn queues_on(builder: tablekit_local::LocalStorageBuilder) -> (LocalStorage, QueueTime) {
    let clock = ManualClock::new();
    let store = builder
        .clock(clock.clone())
        .temporary()
        .expect("a temporary store");
    (store, QueueTime::Manual(clock))
}

mod direct {
    use super::*;
    tablekit_conformance::table_conformance_tests!(store());
    tablekit_conformance::blob_conformance_tests!(store());
    tablekit_conformance::queue_conformance_tests!(queues());
}

mod real_time {
    use super::*;
    tablekit_conformance::queue_conformance_tests!((store(), QueueTime::Real));
}

/// Through `Arc<dyn …>`, on stores without a cache.
mod through_arc_dyn {
    use super::*;
    tablekit_conformance::table_conformance_tests!(Arc::new(uncached()) as Arc<dyn TableBackend>);
    tablekit_conformance::blob_conformance_tests!(Arc::new(uncached()) as Arc<dyn BlobStore>);
    tablekit_conformance::queue_conformance_tests!({
        let (store, time) = queues_on(LocalStorage::builder().cache_size(0));
        (Arc::new(store) as Arc<dyn QueueStore>, time)
    });
}

mod typed {
    use super::*;
    tablekit_conformance::typed_conformance_tests!(
        Arc::new(store()) as Arc<dyn TableBackend>,
        Arc::new(store()) as Arc<dyn BlobStore>
    );
}

mod outbox {
    use super::*;

    fn stores() -> (Arc<dyn TableBackend>, Arc<dyn QueueStore>, QueueTime) {
        let (store, time) = queues();
        (Arc::new(store.clone()), Arc::new(store), time)
    }

    tablekit_conformance::outbox_conformance_tests!(stores());

    /// Random runs of moves through the outbox, with faults in the tables
    /// and the queue, duplicate notices and poison.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn outbox_model_runs() {
        let (tables, queues, time) = stores();
        let outcomes =
            tablekit_conformance::outbox_model_runs(tables, queues, time, 300, 6, 0x0B0C).await;
        println!("{outcomes:?}");
        assert!(outcomes.moved > 100, "{outcomes:?}");
        assert!(outcomes.refused > 10, "{outcomes:?}");
    }

    /// Random runs of writes of every kind of a kind with a change feed,
    /// under faults, futures dropped at random polls, and two consumers
    /// that crash at random: each feed is its committed writes, and each
    /// consumer delivers all of it, in order per entity.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn change_feed_model_runs() {
        let outcomes =
            tablekit_conformance::change_feed_model_runs(stores().0, 12, 60, 0xC4A9).await;
        println!("{outcomes:?}");
        assert!(outcomes.changes > 360, "{outcomes:?}");
        assert!(outcomes.crashes > 24, "{outcomes:?}");
    }

    /// Random runs of writes of an entity with indexes kept in another
    /// partition and another table, with faults.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn remote_index_model_runs() {
        let (tables, queues, _) = stores();
        let outcomes =
            tablekit_conformance::remote_index_model_runs(tables, queues, 300, 6, 0xC17E).await;
        println!("{outcomes:?}");
        assert!(outcomes.moved > 300, "{outcomes:?}");
        assert!(outcomes.refused > 100, "{outcomes:?}");
    }
}

/// Random sequences of every write path with faults, each checked for index
/// rows out of step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_model_runs() {
    let outcomes =
        tablekit_conformance::index_model_runs(Arc::new(store()), 1_000, 8, 0x5EED).await;
    eprintln!("{outcomes:?}");
    outcomes.assert_varied();
}

/// Every multi-row typed write, dropped after its k-th poll for every k
/// until it completes; after the upkeep, everything is back in step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_safe_to_drop_at_every_poll() {
    let store = store();
    let outcomes = tablekit_conformance::writes_are_safe_to_drop(
        Arc::new(store.clone()),
        Arc::new(store.clone()),
        Arc::new(store),
        false,
    )
    .await;
    eprintln!("{} (path, k) cases: {:?}", outcomes.total(), outcomes.cases);
    assert!(outcomes.cases.len() >= 20, "{outcomes:?}");
    assert!(outcomes.total() > 150, "{outcomes:?}");
}

/// Migrations dropped at random polls or stopped by faults and resumed from
/// their checkpoints: 300 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_model_runs() {
    let outcomes = tablekit_conformance::migration_model_runs(Arc::new(store()), 300, 0x10C).await;
    eprintln!("{outcomes:?}");
    assert!(outcomes.dropped > 30, "{outcomes:?}");
    assert!(outcomes.resumed > 30, "{outcomes:?}");
}
