//! Consumers: their own place, their batches, faults, dropped writes, trims and leases.

use super::*;
use tablekit::TableBackendExt as _;

/// Consumers read from their own checkpoints, which only move forward and
/// only when committed.
pub async fn change_consumers_keep_their_own_place(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgcons").await;
    let t: Table<Order> = Table::from_arc(Arc::clone(&backend), &name);
    for (customer, id) in [("ann", 1), ("bob", 1), ("ann", 2)] {
        t.insert(&order(customer, id, 1)).await.expect("insert");
    }
    let feed = t.changes();
    assert_eq!(feed.partitions().await.expect("partitions"), ["ann", "bob"]);
    let first = feed.consumer("search").expect("consumer");
    let batch = first.poll(100).await.expect("poll");
    assert_eq!(batch.changes.len(), 3);
    let again = first.poll(100).await.expect("poll");
    assert_eq!(again.changes.len(), 3, "nothing moves before a commit");
    first.commit(&batch).await.expect("commit");
    assert!(first.poll(100).await.expect("poll").is_empty());
    assert_eq!(first.checkpoint("ann").await.expect("checkpoint"), 2);

    t.update("bob", 1u32, |o| o.total = 2)
        .await
        .expect("update");
    t.insert(&order("cy", 1, 1)).await.expect("insert");
    let next = first.poll(100).await.expect("poll");
    let ids: Vec<String> = next.changes.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(ids, ["2@bob", "1@cy"]);
    first.commit(&next).await.expect("commit");
    // An older batch committed late moves nothing back.
    first.commit(&batch).await.expect("commit");
    assert_eq!(first.checkpoint("bob").await.expect("checkpoint"), 2);

    // A small poll stops at its limit; the rest follows.
    let other = feed.consumer("audit.v2").expect("consumer");
    let part = other.poll(2).await.expect("poll");
    assert_eq!(part.changes.len(), 2);
    other.commit(&part).await.expect("commit");
    let rest = other.poll(100).await.expect("poll");
    assert_eq!(rest.changes.len(), 3, "another consumer is not held back");

    let late = feed.consumer("late").expect("consumer");
    late.start_from_now().await.expect("start");
    assert!(late.poll(100).await.expect("poll").is_empty());
    t.delete_unconditionally("ann", 1u32).await.expect("delete");
    let now = late.poll(100).await.expect("poll");
    assert_eq!(ops(&now.changes), [ChangeOp::Delete]);

    // Where each stands, read from the raw rows (no type needed).
    let lags = tablekit::changes::consumer_lags(&*backend, &name)
        .await
        .expect("the consumers");
    let of = |consumer: &str| -> Vec<(String, u64, u64, u64)> {
        (lags.iter().filter(|l| l.consumer == consumer))
            .map(|l| (l.partition_key.clone(), l.checkpoint, l.newest, l.lag()))
            .collect()
    };
    let at = |pk: &str, checkpoint, newest, lag| (pk.to_owned(), checkpoint, newest, lag);
    let placed = [at("ann", 2, 3, 1), at("bob", 2, 2, 0), at("cy", 1, 1, 0)];
    assert_eq!(of("search"), placed, "{lags:?}");
    assert_eq!(of("late"), placed, "{lags:?}");
    assert_eq!(of("audit.v2").len(), 3, "{lags:?}");

    for bad in ["", "a|b", "x".repeat(64).as_str(), "naïve"] {
        assert!(
            matches!(
                feed.consumer(bad),
                Err(Error::Invalid(InvalidInput::ConsumerName { .. }))
            ),
            "consumer name {bad:?} accepted"
        );
    }
}

/// A note, whose kind records no changes; a program that claims it does
/// (by hand, past the derive) gets a feed that refuses to read.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "NOTE")]
pub(super) struct Note {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
}

impl tablekit::changes::RecordsChanges for Note {}

/// A batch is committed by the consumer that read it; a consumer is read
/// by its newest handle alone (unless leased); a kind without a feed has
/// none to read.
pub async fn consumers_commit_their_own_batches_and_read_alone(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgown").await;
    let t: Table<Order> = Table::from_arc(Arc::clone(&backend), &name);
    for id in 1..=10 {
        t.insert(&order("ann", id, 1)).await.expect("insert");
    }
    let feed = t.changes();
    let search = feed.consumer("search").expect("consumer");
    let totals = feed.consumer("totals").expect("consumer");
    let read = search.poll(4).await.expect("poll");
    assert_eq!(read.changes.len(), 4);
    let error = totals.commit(&read).await.expect_err("another's batch");
    assert!(
        matches!(&error, Error::Invalid(InvalidInput::ForeignChangeBatch { read_by, consumer })
            if read_by.contains("`search`") && consumer.contains("`totals`")),
        "{error:?}"
    );
    assert_eq!(totals.checkpoint("ann").await.expect("checkpoint"), 0);
    assert_eq!(totals.poll(100).await.expect("poll").changes.len(), 10);
    // The same consumer's name on another table is another consumer.
    let other_name = fresh_table(&*backend, "chgown").await;
    let other: Table<Order> = Table::from_arc(Arc::clone(&backend), &other_name);
    let elsewhere = other.changes().consumer("search").expect("consumer");
    assert!(matches!(
        elsewhere.commit(&read).await,
        Err(Error::Invalid(InvalidInput::ForeignChangeBatch { .. }))
    ));
    search.commit(&read).await.expect("its own batch");
    assert_eq!(search.checkpoint("ann").await.expect("checkpoint"), 4);

    // A second handle of `search` (the projector started twice) takes it
    // over: the first reads no more, from then on.
    let again = feed.consumer("search").expect("consumer");
    let newer = again.poll(100).await.expect("the newer handle reads");
    assert_eq!(newer.changes.len(), 6);
    for _ in 0..2 {
        let error = search.poll(100).await.expect_err("taken over");
        assert!(
            matches!(&error, Error::ConsumerReplaced { consumer, .. } if consumer == "search"),
            "{error:?}"
        );
    }
    again.commit(&newer).await.expect("commit");
    assert!(again.poll(100).await.expect("poll").is_empty());
    // A handle that unregistered and polls again reads as the consumer's
    // reader once more.
    again.unregister().await.expect("unregister");
    assert_eq!(again.poll(100).await.expect("poll").changes.len(), 10);

    // A kind without a feed: no rows to read, and said so.
    let notes: Table<Note> = Table::from_arc(Arc::clone(&backend), &name);
    notes
        .insert(&Note {
            customer: "ann".into(),
            id: 1,
        })
        .await
        .expect("insert");
    let error = notes
        .changes()
        .consumer("n")
        .expect("consumer")
        .poll(10)
        .await
        .expect_err("no feed");
    assert!(matches!(error, Error::NotSupported { .. }), "{error:?}");
}

/// Under lost answers, resent requests and failures after apply, every
/// committed write has exactly one change, in order, and no change is
/// recorded for a write that did not commit.
pub async fn changes_match_commits_under_faults(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgflt").await;
    let faulty = FaultInjection::new(Arc::clone(&backend));
    let handle = faulty.handle();
    handle.seed(11);
    for (operation, fault) in [
        (Operation::SubmitTransaction, Fault::LostResponse),
        (Operation::SubmitTransaction, Fault::Resent),
        (Operation::SubmitTransaction, Fault::FailsAfterApply),
        (Operation::GetEntity, Fault::Transient),
    ] {
        handle.inject(
            Injection::on(operation)
                .probability(0.2)
                .times(usize::MAX)
                .fault(fault),
        );
    }
    let t: Table<Order> = Table::from_arc(Arc::new(faulty), &name);
    const ORDERS: u32 = 12;
    for id in 0..ORDERS {
        until_done(
            || async { t.insert(&order("f", id, 0)).await.map(drop) },
            "insert",
        )
        .await;
        for _ in 0..3 {
            until_done(
                || async { t.update("f", id, |o| o.total += 1).await.map(drop) },
                "update",
            )
            .await;
        }
    }
    handle.clear();
    let seen = changes(&t, "f").await;
    assert_numbered(&seen, "writes under faults");
    for id in 0..ORDERS {
        let stored = t.get("f", id).await.expect("get").expect("stored");
        let rk = tablekit::schema::row_key_of(&*stored).expect("row key");
        let mine: Vec<&Change<Order>> = seen.iter().filter(|c| c.row_key == rk).collect();
        let totals: Vec<i64> = mine
            .iter()
            .map(|c| c.value.as_ref().expect("a whole value").total)
            .collect();
        // One insert, then one change per update that committed, in order.
        let expected: Vec<i64> = (0..=stored.total).collect();
        assert_eq!(totals, expected, "order {id}: its changes, in commit order");
        assert_eq!(mine[0].op, ChangeOp::Insert);
    }
}

/// Runs `write` again until it reports success, or that an earlier
/// attempt landed.
pub(super) async fn until_done<F, Fut>(mut write: F, what: &str)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = tablekit::Result<()>>,
{
    for _ in 0..50 {
        match write().await {
            Ok(()) | Err(Error::EntityAlreadyExists { .. }) => return,
            Err(e) if e.is_transient() || e.is_outcome_unknown() => {}
            Err(e) => panic!("{what}: {e}"),
        }
    }
    panic!("{what}: never went through");
}

/// A write dropped after each poll commits with its change or not at all.
pub async fn dropped_writes_record_changes_with_them(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgdrop").await;
    let faulty = FaultInjection::new(Arc::clone(&backend));
    faulty.handle().set_yields(true);
    let t: Table<Order> = Table::from_arc(Arc::new(faulty), &name);
    let upkeep = tablekit::upkeep::Upkeep::new().watch(&t);
    for (how, setup) in [
        ("insert", false),
        ("replace", true),
        ("delete", true),
        ("move", true),
    ] {
        for k in 1.. {
            assert!(k < 200, "{how}: the write never completes");
            let pk = format!("{how}{k}");
            if setup {
                t.insert(&order(&pk, 1, 1)).await.expect("insert");
            }
            let done = match how {
                "insert" => drop_after_polls(k, t.insert(&order(&pk, 1, 2)))
                    .await
                    .is_some(),
                "replace" => {
                    let mut loaded = t.get(&*pk, 1u32).await.expect("get").expect("stored");
                    loaded.total = 2;
                    drop_after_polls(k, async { t.replace(&mut loaded).await })
                        .await
                        .is_some()
                }
                "move" => {
                    let loaded = t.get(&*pk, 1u32).await.expect("get").expect("stored");
                    let moved = order(&format!("{pk}m"), 1, 1);
                    drop_after_polls(k, t.move_to(&loaded, &moved))
                        .await
                        .is_some()
                }
                _ => drop_after_polls(k, t.delete_unconditionally(&*pk, 1u32))
                    .await
                    .is_some(),
            };
            crate::settle().await;
            if how == "move" {
                // The upkeep finishes a move its mover dropped.
                let round = upkeep.run_round_now().await;
                assert!(round.failures.is_empty(), "upkeep failed: {round:?}");
                let moved = t.get(&*format!("{pk}m"), 1u32).await.expect("get");
                let seen = ops(&changes(&t, &format!("{pk}m")).await);
                let expected: &[ChangeOp] = if moved.is_some() {
                    &[ChangeOp::Insert]
                } else {
                    &[]
                };
                assert_eq!(seen, expected, "move dropped after poll {k}: its new half");
            }
            let stored = t.get(&*pk, 1u32).await.expect("get").map(|l| l.total);
            let seen = ops(&changes(&t, &pk).await);
            use ChangeOp::*;
            let expected: &[ChangeOp] = match (how, stored) {
                ("insert", None) => &[],
                ("insert", Some(_)) => &[Insert],
                ("replace", Some(1)) | ("delete" | "move", Some(_)) => &[Insert],
                ("replace", Some(_)) => &[Insert, Replace],
                _ => &[Insert, Delete],
            };
            assert_eq!(
                seen, expected,
                "{how} dropped after poll {k}: stored {stored:?}"
            );
            if done {
                break;
            }
        }
    }
}

/// Trimming deletes only what every registered consumer committed and is
/// older than the window; a consumer behind it is told, never skipped.
pub async fn changes_are_trimmed_behind_every_consumer(backend: Arc<dyn TableBackend>) {
    use std::time::Duration;
    let name = fresh_table(&*backend, "chgtrim").await;
    let t: Table<Order> = Table::from_arc(Arc::clone(&backend), &name);
    for id in 1..=3 {
        t.insert(&order("ann", id, 1)).await.expect("insert");
    }
    let feed = t.changes();
    let (a, b) = (
        feed.consumer("a").expect("consumer"),
        feed.consumer("b").expect("consumer"),
    );
    let all = a.poll(100).await.expect("poll");
    a.commit(&all).await.expect("commit");
    let two = b.poll(2).await.expect("poll");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let kept = feed.trim(Duration::from_secs(3600)).await.expect("trim");
    assert_eq!(kept.removed, 0, "younger than the window: kept");
    let held = feed.trim(Duration::ZERO).await.expect("trim");
    assert_eq!(held.removed, 0, "b has committed nothing: kept");
    b.commit(&two).await.expect("commit");
    let trimmed = feed.trim(Duration::ZERO).await.expect("trim");
    assert_eq!((trimmed.removed, trimmed.partitions), (2, 1));
    let left = changes(&t, "ann").await;
    assert_eq!(left.iter().map(|c| c.id.seq).collect::<Vec<_>>(), [3]);
    assert_eq!(
        ops(&b.poll(100).await.expect("poll").changes),
        [ChangeOp::Insert]
    );

    // A consumer that was not registered is behind: told, not skipped.
    let late = feed.consumer("late").expect("consumer");
    match late.poll(100).await {
        Err(Error::ChangesTrimmed {
            checkpoint: 0,
            trimmed: 2,
            consumer,
            ..
        }) => assert_eq!(consumer, "late"),
        other => panic!("a consumer behind the trim: {other:?}"),
    }
    late.start_from_oldest().await.expect("start");
    let rest = late.poll(100).await.expect("poll");
    assert_eq!(
        rest.changes.iter().map(|c| c.id.seq).collect::<Vec<_>>(),
        [3]
    );

    // Unregistered consumers hold nothing back.
    for consumer in [&a, &b, &late] {
        consumer.unregister().await.expect("unregister");
    }
    let last = feed.trim(Duration::ZERO).await.expect("trim");
    assert_eq!(last.removed, 1);
    assert!(changes(&t, "ann").await.is_empty());
    t.insert(&order("ann", 4, 1)).await.expect("insert");
    assert_eq!(
        changes(&t, "ann").await[0].id.seq,
        4,
        "numbers go on after a trim"
    );

    // The upkeep trims a watched kind's feed on its own.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let config = tablekit::upkeep::UpkeepConfig::default().change_retention(Duration::ZERO);
    let upkeep = tablekit::upkeep::Upkeep::new().config(config).watch(&t);
    let round = upkeep.run_round().await;
    assert!(round.failures.is_empty(), "{:?}", round.failures);
    assert_eq!(round.changes_trimmed, 1);
    assert!(changes(&t, "ann").await.is_empty());

    gaps_and_stopped_consumers_are_told(&*backend, &name, &t, &feed).await;
}

/// A change gone without a mark is a gap a consumer is told of; a registered
/// consumer that stopped holds changes back up to a limit only.
async fn gaps_and_stopped_consumers_are_told(
    backend: &dyn TableBackend,
    name: &str,
    t: &Table<Order>,
    feed: &tablekit::changes::Changes<Order>,
) {
    // A change gone without a mark (a trim racing a new consumer's first
    // poll) is a gap in the numbers: told too.
    let gap = feed.consumer("gap").expect("consumer");
    gap.start_from_oldest().await.expect("start");
    t.insert(&order("ann", 5, 1)).await.expect("insert");
    t.insert(&order("ann", 6, 1)).await.expect("insert");
    backend
        .delete_entity(
            name,
            "ann",
            "~tk|change|0000000000000005",
            &tablekit::IfMatch::Any,
        )
        .await
        .expect("raw delete of change 5");
    match gap.poll(100).await {
        Err(Error::ChangesTrimmed {
            checkpoint: 4,
            trimmed: 5,
            ..
        }) => {}
        other => panic!("a gap in the numbers: {other:?}"),
    }

    // A registered consumer that stopped for good holds changes back up
    // to a limit only: past it they go, and it is told.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let held = feed.trim(std::time::Duration::ZERO).await.expect("trim");
    assert_eq!(held.removed, 0, "`gap` has not committed change 6");
    let limited = feed
        .trim_with_limit(std::time::Duration::ZERO, Some(std::time::Duration::ZERO))
        .await
        .expect("trim");
    assert_eq!(limited.removed, 1, "older than the limit: trimmed");
    assert!(changes(t, "ann").await.is_empty());
    match gap.poll(100).await {
        Err(Error::ChangesTrimmed {
            checkpoint: 4,
            trimmed: 6,
            ..
        }) => {}
        other => panic!("a consumer past the limit: {other:?}"),
    }
}

/// Two instances of one consumer split its partitions by lease; when one
/// stops, the other takes its partitions over once its leases run out.
pub async fn consumer_instances_share_partitions_by_lease(backend: Arc<dyn TableBackend>) {
    use std::time::Duration;
    let name = fresh_table(&*backend, "chglease").await;
    let clock = tablekit::clock::ManualClock::new();
    let t: Table<Order> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    let partitions = ["p0", "p1", "p2", "p3"];
    for pk in partitions {
        t.insert(&order(pk, 1, 1)).await.expect("insert");
    }
    let lease = Duration::from_secs(30);
    let feed = t.changes();
    let a = feed
        .consumer("shared")
        .expect("consumer")
        .leased("a", lease);
    let b = feed
        .consumer("shared")
        .expect("consumer")
        .leased("b", lease);
    let first = a.poll(100).await.expect("poll");
    assert_eq!(
        first.changes.len(),
        4,
        "alone, an instance takes every partition"
    );
    a.commit(&first).await.expect("commit");

    let taken = b.poll(100).await.expect("poll");
    assert_eq!(b.held().len(), 2, "a second instance takes its share");
    assert!(
        taken.is_empty(),
        "what the first committed is not read again"
    );
    a.poll(100).await.expect("poll");
    let (mut held_a, held_b) = (a.held(), b.held());
    assert_eq!(held_a.len(), 2, "the first keeps its share: {held_a:?}");
    held_a.extend(held_b.iter().cloned());
    held_a.sort();
    assert_eq!(held_a, partitions, "between them, every partition, once");

    // Changes go to the instance holding their partition.
    t.update(&*held_b[0], 1u32, |o| o.total = 2)
        .await
        .expect("update");
    assert!(a.poll(100).await.expect("poll").is_empty());
    let next = b.poll(100).await.expect("poll");
    assert_eq!(next.changes.len(), 1);
    assert_eq!(next.changes[0].id.partition_key, held_b[0]);
    b.commit(&next).await.expect("commit");

    // `a` stops polling: within one lease period, `b` holds everything.
    clock.advance(lease + Duration::from_secs(1));
    b.poll(100).await.expect("poll");
    let mut all = b.held();
    all.sort();
    assert_eq!(
        all, partitions,
        "a stopped instance's partitions are taken over"
    );
}

/// A trim dropped after its k-th poll, for every k, leaves no change row
/// behind for good: the next trim deletes what it marked and did not get
/// to, and a consumer behind the mark is told.
pub async fn a_trim_dropped_half_way_is_finished_by_the_next(backend: Arc<dyn TableBackend>) {
    use std::time::Duration;
    for k in 1.. {
        assert!(k < 200, "the trim never completes");
        // A table of its own each time: the trim sees one partition.
        let name = fresh_table(&*backend, "chgtrimdrop").await;
        let yielding = FaultInjection::new(Arc::clone(&backend));
        yielding.handle().set_yields(true);
        let t: Table<Order> = Table::from_arc(Arc::new(yielding), &name);
        let plain: Table<Order> = Table::from_arc(Arc::clone(&backend), &name);
        let pk = "p".to_owned();
        for id in 0..3 {
            t.insert(&order(&pk, id, 0)).await.expect("insert");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let done = drop_after_polls(k, t.changes().trim(Duration::ZERO))
            .await
            .is_some();
        plain
            .changes()
            .trim(Duration::ZERO)
            .await
            .expect("the next trim");
        let left = backend
            .query_all(
                &name,
                tablekit::Query::new().filter(
                    tablekit::filter::Filter::partition_key()
                        .eq(pk.as_str())
                        .and(tablekit::filter::Filter::row_key().ge("~tk|change|"))
                        .and(tablekit::filter::Filter::row_key().lt("~tk|change}")),
                ),
            )
            .await
            .expect("query");
        assert!(
            left.is_empty(),
            "trim dropped after poll {k}: {left:?} left"
        );
        let late = plain.changes().consumer("late").expect("consumer");
        match late.poll(100).await {
            Err(Error::ChangesTrimmed { trimmed: 3, .. }) => {}
            other => panic!("trim dropped after poll {k}: {other:?}"),
        }
        backend.delete_table(&name).await.expect("delete table");
        if done {
            break;
        }
    }
}

/// Two instances of one consumer share six partitions while a writer adds
/// changes; one is killed (its future dropped in the middle of a poll, at
/// a random point) and never comes back. Within one lease period of its
/// last poll, the other holds every partition, and between them the two
/// delivered every change, each partition's in order.
pub async fn a_killed_instance_is_taken_over_within_a_lease(backend: Arc<dyn TableBackend>) {
    use std::time::Duration;
    use tablekit::clock::Clock as _;
    let name = fresh_table(&*backend, "chgkill").await;
    let clock = tablekit::clock::ManualClock::new();
    let t: Table<Order> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    let partitions: Vec<String> = (0..6).map(|p| format!("p{p}")).collect();
    let lease = Duration::from_secs(30);
    let mut rng = fastrand::Rng::with_seed(0x1EA5E);
    // `a` reads through a layer that yields at every call, so that its
    // future can be dropped between any two of them.
    let yielding = FaultInjection::new(Arc::clone(&backend));
    yielding.handle().set_yields(true);
    let ta: Table<Order> =
        Table::from_arc(Arc::new(yielding), &name).with_clock(Arc::new(clock.clone()));
    let instance = |t: &Table<Order>, name: &str| {
        t.changes()
            .consumer("shared")
            .expect("consumer")
            .leased(name, lease)
    };
    let (a, b) = (instance(&ta, "a"), instance(&t, "b"));
    let mut delivered: Vec<Change<Order>> = Vec::new();
    let mut id = 0;
    let mut killed_at = None;
    for step in 0..60 {
        id += 1;
        let pk = &partitions[rng.usize(..partitions.len())];
        t.insert(&order(pk, id, 0)).await.expect("insert");
        clock.advance(Duration::from_secs(2));
        let alive_a = killed_at.is_none();
        let who = if alive_a && rng.bool() { &a } else { &b };
        if step == 30 {
            // `a` dies in the middle of a poll, and is never seen again.
            let polls = rng.usize(1..20);
            let done = drop_after_polls(polls, a.poll(100)).await;
            assert!(done.is_none(), "killed before its poll finished");
            killed_at = Some(clock.now());
            continue;
        }
        let batch = who.poll(100).await.expect("poll");
        delivered.extend(batch.changes.iter().cloned());
        who.commit(&batch).await.expect("commit");
    }
    // One lease period after the kill, the survivor holds everything.
    let killed_at = killed_at.expect("a was killed");
    let until = killed_at
        .checked_add(lease + Duration::from_secs(1))
        .expect("a time");
    while clock.now() < until {
        clock.advance(Duration::from_secs(5));
        let batch = b.poll(100).await.expect("poll");
        delivered.extend(batch.changes.iter().cloned());
        b.commit(&batch).await.expect("commit");
    }
    let mut held = b.held();
    held.sort();
    assert_eq!(held, partitions, "the survivor holds every partition");
    loop {
        let batch = b.poll(100).await.expect("poll");
        if batch.is_empty() {
            break;
        }
        delivered.extend(batch.changes.iter().cloned());
        b.commit(&batch).await.expect("commit");
    }
    for pk in &partitions {
        let feed: Vec<u64> = changes(&t, pk).await.iter().map(|c| c.id.seq).collect();
        let mut got: Vec<u64> = delivered
            .iter()
            .filter(|c| c.id.partition_key == *pk)
            .map(|c| c.id.seq)
            .collect();
        // Each change first delivered after every one before it (a repeat
        // may come where the partition changed hands).
        got.dedup();
        let mut firsts = Vec::new();
        for seq in got {
            if !firsts.contains(&seq) {
                firsts.push(seq);
            }
        }
        assert_eq!(firsts, feed, "partition {pk}: every change, in order");
    }
}

/// The requests a write with a change feed makes: its partition's first
/// change reads the head and lists the partition; later writes of this
/// process send their transaction alone.
pub async fn change_feed_requests_per_write(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgreq").await;
    let counted = FaultInjection::new(Arc::clone(&backend));
    let handle = counted.handle();
    let t: Table<Order> = Table::from_arc(Arc::new(counted), &name);
    for id in 1..=3 {
        t.insert(&order("req", id, 1)).await.expect("insert");
    }
    let calls = |op| handle.calls(op);
    assert_eq!(calls(Operation::GetEntity), 1, "the head, read once");
    assert_eq!(
        calls(Operation::UpsertEntity),
        1,
        "the partition, listed once"
    );
    assert_eq!(
        calls(Operation::SubmitTransaction),
        3,
        "one transaction a write"
    );
    assert_eq!(calls(Operation::InsertEntity), 0);
    assert_eq!(changes(&t, "req").await.len(), 3);
}
