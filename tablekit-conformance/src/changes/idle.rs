//! What an idle change feed costs: a consumer's poll passes by the
//! partitions where nothing can have come, and instances keep their leases
//! with one write each, however many partitions there are.

use std::time::Duration;

use tablekit::clock::{Clock as _, ManualClock};
use tablekit::layer::FaultHandle;

use super::*;

/// How long after its announcement a change may still commit: a consumer
/// reads the partition until then.
const QUIET_AFTER: Duration = Duration::from_secs(5 * 60);

/// The reads through `handle`: point reads and queries.
fn reads(handle: &FaultHandle) -> (usize, usize) {
    (
        handle.calls(Operation::GetEntity),
        handle.calls(Operation::QueryEntities),
    )
}

/// The writes through `handle`, of every kind.
fn writes(handle: &FaultHandle) -> usize {
    Operation::ENTITY_OPERATIONS
        .into_iter()
        .filter(|operation| operation.is_write())
        .map(|operation| handle.calls(operation))
        .sum()
}

/// A poll of a feed where nothing came reads no partition: with 4
/// partitions and with 40, a change row put behind the library's back (no
/// announcement) in every partition goes unread, and the requests of an
/// idle poll (the consumer's registration, its checkpoints and the
/// directory, in pages) do not count the partitions. A change written
/// after, however long after, is read by the next poll.
pub async fn idle_polls_read_no_partition(backend: Arc<dyn TableBackend>) {
    use tablekit::TableBackendExt as _;
    for partitions in [4, 40] {
        let name = fresh_table(&*backend, "chgidle").await;
        let clock = ManualClock::new();
        let counted = FaultInjection::new(Arc::clone(&backend));
        let handle = counted.handle();
        let reader: Table<Order> =
            Table::from_arc(Arc::new(counted), &name).with_clock(Arc::new(clock.clone()));
        let writer: Table<Order> =
            Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
        let keys: Vec<String> = (0..partitions).map(|p| format!("p{p:02}")).collect();
        for pk in &keys {
            writer.insert(&order(pk, 1, 1)).await.expect("insert");
        }
        let consumer = reader
            .changes()
            .consumer("idle")
            .expect("consumer")
            .read_all_every(None);
        let first = consumer.poll(1000).await.expect("poll");
        assert_eq!(first.changes.len(), partitions);
        consumer.commit(&first).await.expect("commit");
        // Read once more after the announcements settled: quiet from then.
        clock.advance(QUIET_AFTER + Duration::from_secs(1));
        assert!(consumer.poll(1000).await.expect("poll").is_empty());
        // Change 2 of every partition, put without an announcement: a poll
        // that read any partition would find it.
        let probe = |pk: &str| {
            tablekit::Entity::new(pk, "~tk|change|0000000000000002")
                .with("_ChangeOp", "insert")
                .with("_ChangeRow", "00000009")
        };
        for pk in &keys {
            backend
                .insert_entity(&name, &probe(pk))
                .await
                .expect("probe");
        }
        let before = reads(&handle);
        for _ in 0..3 {
            clock.advance(Duration::from_secs(20));
            let idle = consumer.poll(1000).await.expect("poll");
            assert!(
                idle.is_empty(),
                "{partitions} partitions: {:?}",
                idle.changes
            );
        }
        let after = reads(&handle);
        let (gets, queries) = (after.0 - before.0, after.1 - before.1);
        assert_eq!(gets, 3, "one registration check a poll");
        assert!(
            queries < 3 * partitions,
            "{queries} queries in three idle polls of {partitions} partitions"
        );
        for pk in &keys {
            let key = "~tk|change|0000000000000002";
            backend
                .delete_entity(&name, pk, key, &IfMatch::Any)
                .await
                .expect("probe gone");
        }
        // A write long after is announced, and read by the next poll.
        writer.insert(&order("p01", 2, 2)).await.expect("insert");
        let next = consumer.poll(1000).await.expect("poll");
        let got: Vec<(String, u32)> = next
            .changes
            .iter()
            .map(|c| {
                (
                    c.id.partition_key.clone(),
                    c.value.as_ref().map_or(0, |o| o.id),
                )
            })
            .collect();
        assert_eq!(got, [("p01".to_owned(), 2)], "{partitions} partitions");
        backend.delete_table(&name).await.expect("delete table");
    }
}

/// A change sent soon after its partition was announced may commit late
/// (a slow request, or a writer whose clock is behind): a consumer reads
/// the partition on every poll until five minutes after the announcement,
/// and passes it by from then until the next one.
pub async fn partitions_are_read_until_their_announcement_settles(backend: Arc<dyn TableBackend>) {
    use tablekit::TableBackendExt as _;
    let name = fresh_table(&*backend, "chgsettle").await;
    let clock = ManualClock::new();
    // The writer's clock stays behind: its sends look prompt to it.
    let behind = ManualClock::at(clock.now());
    let reader: Table<Order> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    let writer: Table<Order> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(behind.clone()));
    writer.insert(&order("p", 1, 1)).await.expect("insert");
    let consumer = reader.changes().consumer("settle").expect("consumer");
    let first = consumer.poll(100).await.expect("poll");
    assert_eq!(first.changes.len(), 1);
    consumer.commit(&first).await.expect("commit");
    clock.advance(QUIET_AFTER - Duration::from_secs(10));
    assert!(consumer.poll(100).await.expect("poll").is_empty());
    // Two seconds after its announcement by its own clock: not announced
    // again, and committed late by the reader's.
    behind.advance(Duration::from_secs(2));
    writer.insert(&order("p", 2, 1)).await.expect("insert");
    let late = consumer.poll(100).await.expect("poll");
    assert_eq!(
        late.changes.len(),
        1,
        "a change committed inside the window is read"
    );
    consumer.commit(&late).await.expect("commit");
    clock.advance(Duration::from_secs(11));
    assert!(consumer.poll(100).await.expect("poll").is_empty());
    // Past the window, the partition is passed by: a change row put there
    // without an announcement goes unread.
    let probe = tablekit::Entity::new("p", "~tk|change|0000000000000003")
        .with("_ChangeOp", "insert")
        .with("_ChangeRow", "00000009");
    backend.insert_entity(&name, &probe).await.expect("probe");
    let passed = consumer.poll(100).await.expect("poll");
    assert!(passed.is_empty(), "{:?}", passed.changes);
    backend
        .delete_entity(&name, "p", &probe.row_key, &IfMatch::Any)
        .await
        .expect("probe gone");
    // Announced again once five seconds passed on the writer's clock.
    behind.advance(Duration::from_secs(10));
    writer.insert(&order("p", 3, 1)).await.expect("insert");
    let next = consumer.poll(100).await.expect("poll");
    assert_eq!(next.changes.len(), 1, "a change announced again is read");
    assert_eq!(next.changes[0].id.seq, 3);
    backend.delete_table(&name).await.expect("delete table");
}

/// Instances keep the partitions they hold with one write each per half
/// lease (their own row), however many partitions they hold; a lease row
/// is written only when a partition changes hands.
pub async fn leases_are_kept_with_one_write_per_instance(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgkeep").await;
    let clock = ManualClock::new();
    let writer: Table<Order> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    for p in 0..20 {
        writer
            .insert(&order(&format!("p{p:02}"), 1, 1))
            .await
            .expect("insert");
    }
    let lease = Duration::from_secs(30);
    let instance = |who: &str| {
        let counted = FaultInjection::new(Arc::clone(&backend));
        let handle = counted.handle();
        let t: Table<Order> =
            Table::from_arc(Arc::new(counted), &name).with_clock(Arc::new(clock.clone()));
        let consumer = t
            .changes()
            .consumer("keep")
            .expect("consumer")
            .leased(who, lease);
        (consumer, handle)
    };
    let (a, counted_a) = instance("a");
    let (b, counted_b) = instance("b \u{1F980}/#?");
    for who in [&a, &b, &a] {
        let batch = who.poll(100).await.expect("poll");
        who.commit(&batch).await.expect("commit");
    }
    let (held_a, held_b) = (a.held(), b.held());
    assert_eq!(
        (held_a.len(), held_b.len()),
        (10, 10),
        "{held_a:?} {held_b:?}"
    );
    for round in 0..8 {
        clock.advance(lease / 2 + Duration::from_secs(1));
        let before = writes(&counted_a) + writes(&counted_b);
        a.poll(100).await.expect("poll");
        b.poll(100).await.expect("poll");
        let written = writes(&counted_a) + writes(&counted_b) - before;
        assert_eq!(written, 2, "round {round}: one renewal per instance");
        assert_eq!((a.held(), b.held()), (held_a.clone(), held_b.clone()));
    }
    // `a` stops: once its row runs out, `b` holds everything.
    clock.advance(lease + Duration::from_secs(1));
    b.poll(100).await.expect("poll");
    assert_eq!(
        b.held().len(),
        20,
        "a stopped instance's partitions are taken over"
    );
    // Ten lease periods after its row ran out, a stopped instance's row is
    // deleted by another; a live one's is kept.
    let instances = || async {
        use tablekit::TableBackendExt as _;
        let filter = tablekit::filter::Filter::partition_key()
            .eq("~tk|changes")
            .and(tablekit::filter::Filter::row_key().gt("i|keep|"))
            .and(tablekit::filter::Filter::row_key().lt("i|keep}"));
        let rows = backend
            .query_all(&name, tablekit::Query::new().filter(filter))
            .await
            .expect("instance rows");
        rows.len()
    };
    assert_eq!(instances().await, 2);
    for _ in 0..22 {
        clock.advance(lease / 2);
        b.poll(100).await.expect("poll");
    }
    assert_eq!(instances().await, 1, "the stopped instance's row is gone");
    let (too_long, _) = instance(&"x".repeat(257));
    assert!(
        matches!(
            too_long.poll(100).await,
            Err(Error::Invalid(InvalidInput::ConsumerName { .. }))
        ),
        "an instance's name longer than 256 bytes is refused"
    );
    backend.delete_table(&name).await.expect("delete table");
}

/// A write dropped after each poll, into a partition a consumer has found
/// quiet (its announcement due again), either commits with its partition
/// announced first or does not commit: the consumer's next poll reads
/// every change that committed, each once, in order.
pub async fn writes_dropped_while_announcing_are_never_missed(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgdropann").await;
    let clock = ManualClock::new();
    let yielding = FaultInjection::new(Arc::clone(&backend));
    yielding.handle().set_yields(true);
    let writer: Table<Order> =
        Table::from_arc(Arc::new(yielding), &name).with_clock(Arc::new(clock.clone()));
    let reader: Table<Order> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    writer.insert(&order("p", 0, 0)).await.expect("insert");
    let consumer = reader
        .changes()
        .consumer("dropped")
        .expect("consumer")
        .read_all_every(None);
    let mut delivered: Vec<u64> = Vec::new();
    for k in 1.. {
        assert!(k < 200, "the write never completes");
        // Quiet: read to its end five minutes after its announcement.
        clock.advance(QUIET_AFTER + Duration::from_secs(1));
        for _ in 0..2 {
            let batch = consumer.poll(100).await.expect("poll");
            delivered.extend(batch.changes.iter().map(|c| c.id.seq));
            consumer.commit(&batch).await.expect("commit");
        }
        let id = u32::try_from(k).expect("a small number");
        let done = drop_after_polls(k, writer.insert(&order("p", id, 1)))
            .await
            .is_some();
        crate::settle().await;
        let batch = consumer.poll(100).await.expect("poll");
        delivered.extend(batch.changes.iter().map(|c| c.id.seq));
        consumer.commit(&batch).await.expect("commit");
        let stored: Vec<u64> = changes(&writer, "p")
            .await
            .iter()
            .map(|c| c.id.seq)
            .collect();
        assert_eq!(delivered, stored, "a write dropped after poll {k}");
        if done {
            // Dropped at every point before: the announcement's own too.
            assert!(k > 3, "the write took {k} polls");
            break;
        }
    }
    backend.delete_table(&name).await.expect("delete table");
}
