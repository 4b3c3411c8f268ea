//! The whole conformance suite on the in-memory backend: directly, in
//! adversarial mode, through `Arc<dyn …>` and `Box<dyn …>`, and through the
//! fault-injection layer (with latency, no faults).

use std::sync::Arc;
use std::time::Duration;

use tablekit::clock::ManualClock;
use tablekit::layer::FaultInjection;
use tablekit::{BlobStore, QueueStore, TableBackend};
use tablekit_conformance::QueueTime;
use tablekit_mem::{Adversarial, MemBackend, MemBlobStore, MemQueueStore};

/// A queue store on a clock the tests move by hand.
fn queues() -> (MemQueueStore, QueueTime) {
    let clock = ManualClock::new();
    (
        MemQueueStore::with_clock(clock.clone()),
        QueueTime::Manual(clock),
    )
}

/// A queue store on the system clock, whose tests wait for real.
fn real_time_queues() -> (MemQueueStore, QueueTime) {
    (MemQueueStore::new(), QueueTime::Real)
}

mod direct {
    use super::*;
    tablekit_conformance::table_conformance_tests!(MemBackend::new());
    tablekit_conformance::blob_conformance_tests!(MemBlobStore::new());
    tablekit_conformance::queue_conformance_tests!(queues());
}

mod real_time {
    use super::*;
    tablekit_conformance::queue_conformance_tests!(real_time_queues());
}

mod adversarial_pages {
    use super::*;
    tablekit_conformance::table_conformance_tests!(
        MemBackend::builder()
            .adversarial(Adversarial::default())
            .build()
    );
}

/// Rows in no key order, as Cosmos DB for Table returns them: the backend
/// suite still holds, as its reads go through tablekit's ordered reads.
mod unsorted_pages {
    use super::*;
    tablekit_conformance::table_conformance_tests!(
        MemBackend::builder()
            .adversarial(Adversarial::unsorted())
            .build()
    );
}

mod through_arc_dyn {
    use super::*;
    tablekit_conformance::table_conformance_tests!(
        Arc::new(MemBackend::new()) as Arc<dyn TableBackend>
    );
    tablekit_conformance::blob_conformance_tests!(
        Arc::new(MemBlobStore::new()) as Arc<dyn BlobStore>
    );
    tablekit_conformance::queue_conformance_tests!({
        let (store, time) = queues();
        (Arc::new(store) as Arc<dyn QueueStore>, time)
    });
}

mod through_box_dyn {
    use super::*;
    tablekit_conformance::table_conformance_tests!(
        Box::new(MemBackend::new()) as Box<dyn TableBackend>
    );
    tablekit_conformance::blob_conformance_tests!(
        Box::new(MemBlobStore::new()) as Box<dyn BlobStore>
    );
    tablekit_conformance::queue_conformance_tests!({
        let (store, time) = queues();
        (Box::new(store) as Box<dyn QueueStore>, time)
    });
}

mod through_fault_layer {
    use super::*;
    fn layered<B>(inner: B) -> FaultInjection<B> {
        let layer = FaultInjection::new(inner);
        layer.handle().set_latency(Some(Duration::from_micros(50)));
        layer
    }
    tablekit_conformance::table_conformance_tests!(layered(MemBackend::new()));
    tablekit_conformance::blob_conformance_tests!(layered(MemBlobStore::new()));
    tablekit_conformance::queue_conformance_tests!({
        let (store, time) = queues();
        (layered(store), time)
    });
}

mod typed {
    use super::*;
    tablekit_conformance::typed_conformance_tests!(
        Arc::new(MemBackend::new()) as Arc<dyn TableBackend>,
        Arc::new(MemBlobStore::new()) as Arc<dyn BlobStore>
    );
}

mod typed_adversarial {
    use super::*;
    tablekit_conformance::typed_conformance_tests!(
        Arc::new(
            MemBackend::builder()
                .adversarial(Adversarial::default())
                .build()
        ) as Arc<dyn TableBackend>,
        Arc::new(MemBlobStore::new()) as Arc<dyn BlobStore>
    );
}

/// Every key-order promise of the typed API (ranges, pages, cursors,
/// merged shards, time buckets, index reads, collections, wide entities) on
/// a store that returns rows in no key order.
mod typed_unsorted {
    use super::*;
    tablekit_conformance::typed_conformance_tests!(
        Arc::new(
            MemBackend::builder()
                .adversarial(Adversarial::unsorted())
                .build()
        ) as Arc<dyn TableBackend>,
        Arc::new(MemBlobStore::new()) as Arc<dyn BlobStore>
    );
}

/// The outbox's moves and sweeps on tables that return rows in no key order.
mod outbox_unsorted {
    use super::*;

    fn stores() -> (Arc<dyn TableBackend>, Arc<dyn QueueStore>, QueueTime) {
        let (queues, time) = queues();
        let tables = MemBackend::builder()
            .adversarial(Adversarial::unsorted())
            .build();
        (Arc::new(tables), Arc::new(queues), time)
    }

    tablekit_conformance::outbox_conformance_tests!(stores());
}

/// The index model test at full length: 10,000 random sequences of every
/// write path with faults, each checked for index rows out of step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_model_ten_thousand_runs() {
    let outcomes =
        tablekit_conformance::index_model_runs(Arc::new(MemBackend::new()), 10_000, 8, 0x5EED)
            .await;
    eprintln!("{outcomes:?}");
    outcomes.assert_varied();
}

/// The same over entities whose index rows all live beside them (no index
/// entity): their deletes through a `Loaded` take the unplanned path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_index_model_ten_thousand_runs() {
    let outcomes = tablekit_conformance::index_model_runs_of::<tablekit_conformance::PlainStaff>(
        Arc::new(MemBackend::new()),
        10_000,
        8,
        0x5EEE,
    )
    .await;
    eprintln!("{outcomes:?}");
    outcomes.assert_varied();
}

mod outbox {
    use super::*;

    fn stores() -> (Arc<dyn TableBackend>, Arc<dyn QueueStore>, QueueTime) {
        let (queues, time) = queues();
        (Arc::new(MemBackend::new()), Arc::new(queues), time)
    }

    tablekit_conformance::outbox_conformance_tests!(stores());

    /// Thousands of random runs of moves through the outbox, with faults in
    /// the tables and the queue, duplicate notices and poison.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn outbox_model_two_thousand_runs() {
        let (tables, queues, time) = stores();
        let outcomes =
            tablekit_conformance::outbox_model_runs(tables, queues, time, 2000, 6, 0x0B0C).await;
        println!("{outcomes:?}");
        assert!(outcomes.moved > 1000, "{outcomes:?}");
        assert!(outcomes.unknown > 10, "{outcomes:?}");
        assert!(outcomes.refused > 100, "{outcomes:?}");
        // Writers that stopped after the copy: found in both for a while,
        // never in neither (the run asserts that after every move).
        assert!(outcomes.found_in_both > 10, "{outcomes:?}");
    }

    /// Random runs of writes of every kind of a kind with a change feed,
    /// under faults, futures dropped at random polls, and two consumers
    /// that crash at random: each feed is its committed writes, and each
    /// consumer delivers all of it, in order per entity.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn change_feed_model_runs() {
        let outcomes = tablekit_conformance::change_feed_model_runs(
            Arc::new(MemBackend::new()),
            60,
            80,
            0xC4A9,
        )
        .await;
        println!("{outcomes:?}");
        assert!(outcomes.changes > 2400, "{outcomes:?}");
        assert!(outcomes.crashes > 120, "{outcomes:?}");
    }

    /// Thousands of random runs of writes of an entity with indexes kept in
    /// another partition and another table, with faults.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn remote_index_model_two_thousand_runs() {
        let (tables, queues, _) = stores();
        let outcomes =
            tablekit_conformance::remote_index_model_runs(tables, queues, 2000, 6, 0xC17E).await;
        println!("{outcomes:?}");
        assert!(outcomes.moved > 3000, "{outcomes:?}");
        // Lost answers of upserts and unconditional deletes are settled
        // now: few stay unknown, and the faults show as refusals.
        assert!(outcomes.refused > 1000, "{outcomes:?}");
    }
}

/// Every multi-row typed write, dropped after its k-th poll for every k
/// until it completes; after the upkeep, everything is back in step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_safe_to_drop_at_every_poll() {
    let outcomes = tablekit_conformance::writes_are_safe_to_drop(
        Arc::new(MemBackend::new()),
        Arc::new(MemBlobStore::new()),
        Arc::new(MemQueueStore::new()),
        false,
    )
    .await;
    eprintln!("{} (path, k) cases: {:?}", outcomes.total(), outcomes.cases);
    assert!(outcomes.cases.len() >= 20, "{outcomes:?}");
    assert!(outcomes.total() > 150, "{outcomes:?}");
}

/// Migrations dropped at random polls or stopped by faults, resumed from
/// their checkpoints, with another writer between attempts: 2,000 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_model_two_thousand_runs() {
    let outcomes =
        tablekit_conformance::migration_model_runs(Arc::new(MemBackend::new()), 2000, 0x3161).await;
    eprintln!("{outcomes:?}");
    assert!(outcomes.dropped > 300, "{outcomes:?}");
    assert!(outcomes.stopped > 100, "{outcomes:?}");
    assert!(outcomes.resumed > 400, "{outcomes:?}");
    assert!(outcomes.changed_meanwhile > 1000, "{outcomes:?}");
}

/// The migration model on a store that pages adversarially (short and
/// empty pages), and on one that returns each page unsorted: 300 runs each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_model_runs_on_adversarial_pages() {
    for (adversarial, seed) in [
        (Adversarial::default(), 0xAD5),
        (Adversarial::unsorted(), 0x0450),
    ] {
        let backend = MemBackend::builder().adversarial(adversarial).build();
        let outcomes =
            tablekit_conformance::migration_model_runs(Arc::new(backend), 300, seed).await;
        eprintln!("{outcomes:?}");
        assert!(
            outcomes.dropped > 30 && outcomes.resumed > 30,
            "{outcomes:?}"
        );
    }
}

/// The typed reads take the in-memory rows by reference (`read_rows`),
/// in key order, through short pages too; a store in no key order, and a
/// projection, are read as entities.
#[test]
fn rows_are_passed_by_reference_where_they_come_in_key_order() {
    use tablekit::Query;
    let every = Query::new();
    let projected = Query::new().select(["n"]);
    assert!(MemBackend::new().reads_rows(&every));
    assert!(!MemBackend::new().reads_rows(&projected));
    let short_pages = MemBackend::builder()
        .adversarial(Adversarial::default())
        .build();
    assert!(short_pages.reads_rows(&every));
    let unsorted = MemBackend::builder()
        .adversarial(Adversarial::unsorted())
        .build();
    assert!(!unsorted.reads_rows(&every));
}
