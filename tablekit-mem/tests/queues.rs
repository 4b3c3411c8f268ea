//! What the in-memory queue store does beyond the conformance suite, where
//! it follows the service and Azurite does not: a deleted queue's name is
//! unusable for 30 seconds. And its clock: time passes only when moved.

use std::time::Duration;

use tablekit::Error;
use tablekit::clock::{Clock, ManualClock};
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::queue::{MessageTtl, PutMessageOptions, QueueStore};
use tablekit_mem::MemQueueStore;

#[tokio::test]
async fn a_deleted_queue_name_waits_thirty_seconds() {
    let clock = ManualClock::new();
    let queues = MemQueueStore::with_clock(clock.clone());
    assert!(queues.create_queue("gone").await.unwrap());
    queues.delete_queue("gone").await.unwrap();
    assert!(matches!(
        queues.create_queue("gone").await,
        Err(Error::QueueBeingDeleted { queue }) if queue == "gone"
    ));
    clock.advance(Duration::from_secs(29));
    assert!(matches!(
        queues.create_queue("gone").await,
        Err(Error::QueueBeingDeleted { .. })
    ));
    clock.advance(Duration::from_secs(1));
    assert!(queues.create_queue("gone").await.unwrap());
    assert_eq!(queues.len("gone"), Some(0), "a new queue holds nothing");
}

#[tokio::test]
async fn visibility_and_expiry_follow_the_clock_exactly() {
    let clock = ManualClock::new();
    let queues = MemQueueStore::with_clock(clock.clone());
    queues.create_queue("exact").await.unwrap();
    let start = clock.now();
    let options = PutMessageOptions::default().ttl(MessageTtl::After(Duration::from_secs(100)));
    let sent = queues.put_message("exact", "m", &options).await.unwrap();
    assert_eq!(sent.inserted, start);
    assert_eq!(sent.expires, start.saturating_add(Duration::from_secs(100)));
    let got = queues
        .get_messages("exact", 1, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        got[0].next_visible,
        start.saturating_add(Duration::from_secs(10))
    );
    clock.advance(Duration::from_secs(9));
    assert!(queues.peek_messages("exact", 1).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(1));
    assert_eq!(queues.peek_messages("exact", 1).await.unwrap().len(), 1);
    // An update may not hide a message past its expiry.
    assert!(matches!(
        queues
            .update_message(
                "exact",
                &got[0].id,
                &got[0].pop_receipt,
                Duration::from_secs(90),
                None
            )
            .await,
        Err(Error::Invalid(tablekit::InvalidInput::QueueDuration { .. }))
    ));
    clock.advance(Duration::from_secs(90));
    assert_eq!(queues.len("exact"), Some(0), "expired at its TTL");
}

/// A get whose answer is lost still hid its messages: they come back after
/// the visibility timeout, counted twice.
#[tokio::test]
async fn a_lost_get_hides_until_the_timeout() {
    let clock = ManualClock::new();
    let layer = FaultInjection::new(MemQueueStore::with_clock(clock.clone()));
    layer.create_queue("lost").await.unwrap();
    layer
        .put_message("lost", "m", &PutMessageOptions::default())
        .await
        .unwrap();
    layer
        .handle()
        .inject(Injection::on(Operation::GetMessages).fault(Fault::LostResponse));
    assert!(matches!(
        layer.get_messages("lost", 1, Duration::from_secs(30)).await,
        Err(Error::OutcomeUnknown { .. })
    ));
    assert!(
        layer
            .get_messages("lost", 1, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty()
    );
    clock.advance(Duration::from_secs(30));
    let again = layer
        .get_messages("lost", 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(again[0].dequeue_count, 2);
}

mod worker {
    use std::sync::Arc;
    use std::time::Duration;

    use tablekit::clock::{Clock, ManualClock};
    use tablekit::layer::FaultInjection;
    use tablekit::outbox::{OutboxWorker, WorkerConfig};
    use tablekit::queue::{PutMessageOptions, QueueStore};
    use tablekit::{Entity, TableBackend, TableBackendExt};
    use tablekit_mem::{MemBackend, MemQueueStore};

    /// A notice for an entity of `table` with one record whose step is
    /// slow (the table answers late), on stores that run on `clock`.
    async fn slow_notice(clock: &ManualClock) -> (Arc<dyn TableBackend>, Arc<dyn QueueStore>) {
        let backend = MemBackend::new();
        backend.create_table("Slow").await.unwrap();
        let step = tablekit::outbox::Step {
            table: "Slow".into(),
            partition_key: "q".into(),
            fence: "r".into(),
            seq: 1,
            ops: vec![tablekit::outbox::StepOp::Put(
                Entity::new("q", "r").with("v", 1i64),
            )],
        };
        let record =
            tablekit_conformance::record_for_tests("Slow", "p", "e", 1, clock.now(), &[step]);
        backend.insert_entity("Slow", &record).await.unwrap();
        let slow = FaultInjection::new(backend);
        slow.handle().set_latency(Some(Duration::from_millis(300)));
        let queues = MemQueueStore::with_clock(clock.clone());
        queues.create_queue("slow").await.unwrap();
        queues.create_queue("slow-poison").await.unwrap();
        queues
            .put_message(
                "slow",
                r#"{"table":"Slow","pk":"p","rk":"e"}"#,
                &PutMessageOptions::default(),
            )
            .await
            .unwrap();
        (Arc::new(slow), Arc::new(queues))
    }

    /// A long step keeps its message hidden: the worker renews it every
    /// half of its visibility while it works, and deletes it at the end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn long_steps_renew_their_message() {
        let clock = ManualClock::new();
        let (tables, queues) = slow_notice(&clock).await;
        let worker = OutboxWorker::new(Arc::clone(&tables), Arc::clone(&queues), "slow")
            .config(WorkerConfig::default().visibility(Duration::from_secs(10)))
            .clock(Arc::new(clock.clone()));
        let working = tokio::spawn({
            let worker = worker.clone();
            async move { worker.run_once().await }
        });
        // While the step waits on the table, time passes: three times the
        // visibility, renewed every half of it.
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            clock.advance(Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(
                queues.peek_messages("slow", 1).await.unwrap().is_empty(),
                "the message stays hidden while the worker works"
            );
        }
        assert_eq!(working.await.unwrap().unwrap(), 1);
        assert_eq!(worker.stats().applied, 1);
        clock.advance(Duration::from_secs(60));
        assert!(
            queues.peek_messages("slow", 1).await.unwrap().is_empty(),
            "deleted when done, with its latest receipt"
        );
    }

    /// `run` stops when its shutdown future resolves, after the messages in
    /// hand; a run with nothing to do waits on the clock, not on a timer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn run_stops_gracefully() {
        let clock = ManualClock::new();
        let (tables, queues) = slow_notice(&clock).await;
        let worker = OutboxWorker::new(tables, queues, "slow").clock(Arc::new(clock.clone()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn({
            let worker = worker.clone();
            async move {
                worker
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await
            }
        });
        // The first batch (the slow notice) is handled before the stop.
        while worker.stats().applied == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
        assert_eq!(worker.stats().applied, 1);
    }

    /// A message whose visibility runs out while its worker is still at it
    /// is taken by a second worker: both finish it, and the newer step's
    /// value stands, whichever of them writes last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_taken_twice_converges() {
        let queue_clock = ManualClock::new();
        let backend = MemBackend::new();
        backend.create_table("Twice").await.unwrap();
        for seq in [1i64, 2] {
            let step = tablekit::outbox::Step {
                table: "Twice".into(),
                partition_key: "q".into(),
                fence: "r".into(),
                seq,
                ops: vec![tablekit::outbox::StepOp::Put(
                    Entity::new("q", "r").with("v", seq),
                )],
            };
            let record = tablekit_conformance::record_for_tests(
                "Twice",
                "p",
                "e",
                seq,
                queue_clock.now(),
                &[step],
            );
            backend.insert_entity("Twice", &record).await.unwrap();
        }
        let queues = MemQueueStore::with_clock(queue_clock.clone());
        queues.create_queue("twice").await.unwrap();
        queues
            .put_message(
                "twice",
                r#"{"table":"Twice","pk":"p","rk":"e"}"#,
                &PutMessageOptions::default(),
            )
            .await
            .unwrap();
        let queues: Arc<dyn QueueStore> = Arc::new(queues);
        // The first worker's table answers late, and its own clock stands
        // still: it never renews, so its message's visibility runs out.
        let slow = FaultInjection::new(backend.clone());
        slow.handle().set_latency(Some(Duration::from_millis(200)));
        let first = OutboxWorker::new(Arc::new(slow), Arc::clone(&queues), "twice")
            .config(WorkerConfig::default().visibility(Duration::from_secs(5)))
            .clock(Arc::new(ManualClock::new()));
        let second = OutboxWorker::new(Arc::new(backend.clone()), Arc::clone(&queues), "twice");
        let working = tokio::spawn({
            let first = first.clone();
            async move { first.run_once().await }
        });
        // The first worker has listed the records (its query answered at
        // 200 ms) and waits on its first fence read when the second takes
        // the message and finishes both records.
        tokio::time::sleep(Duration::from_millis(250)).await;
        queue_clock.advance(Duration::from_secs(5));
        assert_eq!(second.run_once().await.unwrap(), 1, "taken again");
        assert_eq!(working.await.unwrap().unwrap(), 1);
        assert_eq!((first.stats().applied, second.stats().applied), (1, 1));
        let row = backend
            .get_entity("Twice", "q", "r", &Default::default())
            .await
            .unwrap();
        assert_eq!(row.properties.get("v"), Some(&tablekit::Value::Int64(2)));
        let left = tablekit::outbox::pending_records(&backend, "Twice", "p", "e")
            .await
            .unwrap();
        assert!(left.is_empty(), "both records finished");
    }

    /// A poison message whose delete fails comes back and is set aside
    /// again: the poison queue holds it twice, under its one id, and the
    /// worker counts it once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_set_aside_twice_counts_once() {
        let clock = ManualClock::new();
        let store = MemQueueStore::with_clock(clock.clone());
        store.create_queue("twice").await.unwrap();
        store.create_queue("twice-poison").await.unwrap();
        store
            .put_message("twice", "not a notice", &PutMessageOptions::default())
            .await
            .unwrap();
        use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
        let layer = FaultInjection::new(store.clone());
        // The first delete of the original fails: it comes back.
        layer
            .handle()
            .inject(Injection::on(Operation::DeleteMessage).fault(Fault::Transient));
        let queues: Arc<dyn QueueStore> = Arc::new(layer);
        let backend = Arc::new(tablekit_mem::MemBackend::new());
        let worker = OutboxWorker::new(backend, queues, "twice")
            .config(WorkerConfig::default().visibility(Duration::from_secs(10)))
            .clock(Arc::new(clock.clone()));
        assert_eq!(worker.run_once().await.unwrap(), 1);
        clock.advance(Duration::from_secs(11));
        assert_eq!(worker.run_once().await.unwrap(), 1, "it came back");
        assert_eq!(store.len("twice"), Some(0), "set aside at last");
        let poison = store.peek_messages("twice-poison", 32).await.unwrap();
        assert_eq!(poison.len(), 2, "on the poison queue twice");
        let ids: std::collections::BTreeSet<String> = poison
            .iter()
            .map(|m| {
                let json: serde_json::Value = serde_json::from_str(&m.text).unwrap();
                json["id"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(ids.len(), 1, "under one id");
        assert_eq!(worker.stats().poisoned, 1, "counted once");
    }
}
