//! Concurrent writers of one partition of a kind with a change feed: sent
//! together in the partition's lane, each still committing or failing on
//! its own, with every change numbered once and in order; a writer's
//! future dropped while it waits, or while its group is sent, leaves no
//! half and no gap.

use std::sync::Arc;
use std::time::Duration;

use tablekit::changes::ChangeOp;
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit::{Error, Table, TableBackend, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Lanes", kind = "ITEM", changes)]
struct Item {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "code")]
    code: String,
}

fn item(id: u32) -> Item {
    Item {
        pk: "p".into(),
        id,
        code: format!("code-{id}"),
    }
}

/// A table over the in-memory store behind a layer that counts calls and
/// can make each take a while (time is paused in these tests: a sleep
/// lets every other writer run up to its own wait).
async fn table() -> (Table<Item>, FaultHandle) {
    let layer = FaultInjection::new(MemBackend::new());
    let handle = layer.handle();
    let backend: Arc<dyn TableBackend> = Arc::new(layer);
    let t: Table<Item> = Table::from_arc(backend, "Lanes");
    t.create_if_missing().await.expect("the table");
    (t, handle)
}

/// Every change of the partition, in order: (number, op, id).
async fn changes(t: &Table<Item>) -> Vec<(u64, ChangeOp, u32)> {
    let consumer = t.changes().consumer("check").expect("a consumer");
    let batch = consumer.poll(10_000).await.expect("poll");
    batch
        .changes
        .iter()
        .map(|c| (c.id.seq, c.op, c.value.as_ref().expect("a value").id))
        .collect()
}

/// 64 writers of one partition at once all commit, in a few transactions
/// rather than one each (and without racing each other for the head),
/// and their changes are numbered 1..=64 with no gap or repeat.
#[tokio::test(start_paused = true)]
async fn sixty_four_writers_of_one_partition_commit_together() {
    let (t, calls) = table().await;
    t.insert(&item(1000)).await.expect("the first");
    calls.set_latency(Some(Duration::from_millis(5)));
    let before = calls.calls(Operation::SubmitTransaction);
    let writers: Vec<_> = (0..64)
        .map(|i| {
            let t = t.clone();
            tokio::spawn(async move { t.insert(&item(i)).await })
        })
        .collect();
    for writer in writers {
        writer
            .await
            .expect("a writer")
            .expect("every insert commits");
    }
    let sent = calls.calls(Operation::SubmitTransaction) - before;
    assert!(sent < 8, "64 writers took {sent} transactions");
    calls.set_latency(None);
    let seen = changes(&t).await;
    assert_eq!(seen.len(), 65);
    for (n, (seq, op, _)) in seen.iter().enumerate() {
        assert_eq!(*seq, n as u64 + 1);
        assert_eq!(*op, ChangeOp::Insert);
    }
    let mut ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
    ids.sort_unstable();
    let mut want: Vec<u32> = (0..64).chain([1000]).collect();
    want.sort_unstable();
    assert_eq!(ids, want);
}

/// In one group, a write the store refuses (its row exists, or its
/// unique value is taken) fails alone: the others commit, and only they
/// have changes.
#[tokio::test(start_paused = true)]
async fn a_refused_writer_fails_alone() {
    let (t, calls) = table().await;
    t.insert(&item(1)).await.expect("the first");
    calls.set_latency(Some(Duration::from_millis(5)));
    let writers: Vec<_> = (0..10)
        .map(|i| {
            let t = t.clone();
            tokio::spawn(async move {
                match i {
                    // Its row exists.
                    3 => t.insert(&item(1)).await,
                    // Its unique value is held by entity 1.
                    6 => {
                        t.insert(&Item {
                            code: "code-1".into(),
                            ..item(106)
                        })
                        .await
                    }
                    i => t.insert(&item(100 + i)).await,
                }
            })
        })
        .collect();
    for (i, writer) in writers.into_iter().enumerate() {
        let result = writer.await.expect("a writer");
        match i {
            3 => assert!(
                matches!(result, Err(Error::EntityAlreadyExists { .. })),
                "{result:?}"
            ),
            6 => assert!(
                matches!(result, Err(Error::UniqueViolation { .. })),
                "{result:?}"
            ),
            _ => {
                result.expect("the others commit");
            }
        }
    }
    calls.set_latency(None);
    let seen = changes(&t).await;
    let ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
    let mut sorted = ids[1..].to_vec();
    sorted.sort_unstable();
    assert_eq!(ids[0], 1);
    assert_eq!(sorted, [100, 101, 102, 104, 105, 107, 108, 109]);
    let numbers: Vec<u64> = seen.iter().map(|c| c.0).collect();
    assert_eq!(numbers, (1..=9).collect::<Vec<u64>>());
    assert!(t.get("p", 106u32).await.expect("get").is_none());
}

/// A writer dropped while it waits behind another's group is taken out:
/// its entity is never written, not even by a later group, and the
/// changes stay gapless. A writer whose turn it is, dropped while its
/// group of several is being sent (before the store saw it), gives the
/// group back: the others settle, send again and commit.
#[tokio::test(start_paused = true)]
async fn dropped_writers_leave_no_half_and_no_gap() {
    for drop_leader in [false, true] {
        let (t, calls) = table().await;
        t.insert(&item(1)).await.expect("the first");
        calls.set_latency(Some(Duration::from_millis(10)));
        // The first writer takes the turn and waits in the store's latency
        // (until 10 ms); the next ones queue behind it, and the first of
        // them sends them all as one group (from 10 ms to 20 ms).
        let spawn = |i: u32| {
            let t = t.clone();
            tokio::spawn(async move { t.insert(&item(i)).await })
        };
        let first = spawn(2);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let mut writers = vec![first];
        for i in 3..8 {
            writers.push(spawn(i));
            tokio::time::sleep(Duration::from_micros(10)).await;
        }
        let dropped: u32 = if drop_leader {
            tokio::time::sleep(Duration::from_millis(14)).await;
            3
        } else {
            4
        };
        writers[dropped as usize - 2].abort();
        let before = calls.calls(Operation::SubmitTransaction);
        for (i, writer) in writers.into_iter().enumerate() {
            let result = writer.await;
            if i as u32 + 2 == dropped {
                assert!(result.is_err_and(|e| e.is_cancelled()));
            } else {
                result.expect("a writer").expect("commits");
            }
        }
        if drop_leader {
            // The group went back and was sent again.
            assert!(calls.calls(Operation::SubmitTransaction) > before);
        }
        // Later writes of the partition do not carry the dropped one.
        t.insert(&item(9)).await.expect("a later write");
        calls.set_latency(None);
        assert!(t.get("p", dropped).await.expect("get").is_none());
        let seen = changes(&t).await;
        let numbers: Vec<u64> = seen.iter().map(|c| c.0).collect();
        assert_eq!(numbers, (1..=7).collect::<Vec<u64>>());
        let mut ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
        ids.sort_unstable();
        let want: Vec<u32> = [1, 2, 3, 4, 5, 6, 7, 9]
            .into_iter()
            .filter(|id| *id != dropped)
            .collect();
        assert_eq!(ids, want, "dropped {dropped}");
        for id in want {
            assert!(t.get("p", id).await.expect("get").is_some());
        }
    }
}

/// `commits_here` returns once this process committed a change to the
/// table, and not before: a consumer can sleep long and still wake at once
/// for a write made here.
#[tokio::test(start_paused = true)]
async fn commits_here_wakes_on_a_write_made_here() {
    let (t, _) = table().await;
    let mut commits = t.changes().commits_here();
    let waited = tokio::time::timeout(Duration::from_secs(60), commits.changed()).await;
    assert!(waited.is_err(), "nothing committed yet");
    let writer = {
        let t = t.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            t.insert(&item(1)).await
        })
    };
    let at = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(60), commits.changed())
        .await
        .expect("woken by the write");
    assert_eq!(at.elapsed(), Duration::from_secs(5));
    writer.await.expect("a writer").expect("the insert");
    // Seen: the next wait is for the next write.
    let waited = tokio::time::timeout(Duration::from_secs(60), commits.changed()).await;
    assert!(waited.is_err());
}

/// One writer of a group, dropped after its k-th poll for every k (while
/// it waits for its turn, while its turn sends the group of four, after
/// the store applied it): the others all commit, the dropped one is
/// stored exactly when its change is recorded, the numbers have no gap,
/// and a later write of the partition never carries the dropped one.
#[tokio::test(start_paused = true)]
async fn a_writer_dropped_after_each_poll_leaves_its_group_in_step() {
    use tablekit_conformance::drop_after_polls;
    for k in 1.. {
        assert!(k < 200, "the write never completes");
        let (t, calls) = table().await;
        calls.set_latency(Some(Duration::from_millis(10)));
        calls.set_yields(true);
        let spawn = |i: u32| {
            let t = t.clone();
            tokio::spawn(async move { t.insert(&item(i)).await })
        };
        // Writer 1 takes the turn and waits in the store; writer 2 (the
        // one dropped) waits first for the next turn, and 3 to 5 behind
        // it: the next turn is 2's, with 3 to 5 in its group.
        let first = spawn(1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let two = item(2);
        let dropped = drop_after_polls(k, t.insert(&two));
        let behind = async {
            tokio::task::yield_now().await;
            (3..6).map(spawn).collect::<Vec<_>>()
        };
        let (done, others) = futures::join!(dropped, behind);
        let done = done.is_some();
        first.await.expect("a writer").expect("commits");
        for other in others {
            other.await.expect("a writer").expect("commits");
        }
        calls.set_latency(None);
        calls.set_yields(false);
        t.insert(&item(9)).await.expect("a later write");
        let stored = t.get("p", 2u32).await.expect("get").is_some();
        let seen = changes(&t).await;
        let numbers: Vec<u64> = seen.iter().map(|c| c.0).collect();
        let count = if stored { 6 } else { 5 };
        assert_eq!(numbers, (1..=count).collect::<Vec<u64>>(), "k = {k}");
        let mut ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
        ids.sort_unstable();
        let want: Vec<u32> = [1, 2, 3, 4, 5, 9]
            .into_iter()
            .filter(|id| stored || *id != 2)
            .collect();
        assert_eq!(ids, want, "k = {k}: stored {stored}");
        if done {
            assert!(stored, "k = {k}: answered, so stored");
            break;
        }
    }
}

/// Two processes (two backends over one store, so two lanes) each with 16
/// writers of one partition: their groups race for the head, the losers go
/// back to their lane and are sent again numbered after it, and every
/// write commits with its change recorded once, numbered with no gap.
#[tokio::test(start_paused = true)]
async fn two_processes_racing_for_the_head_all_commit_in_step() {
    let store = MemBackend::new();
    let mut tables = Vec::new();
    for _ in 0..2 {
        let layer = FaultInjection::new(store.clone());
        layer.handle().set_latency(Some(Duration::from_millis(3)));
        let backend: Arc<dyn TableBackend> = Arc::new(layer);
        let t: Table<Item> = Table::from_arc(backend, "Lanes");
        t.create_if_missing().await.expect("the table");
        tables.push(t);
    }
    let writers: Vec<_> = (0..32u32)
        .map(|i| {
            let t = tables[i as usize % 2].clone();
            tokio::spawn(async move {
                // Spread out, so groups of both processes meet the head
                // moved by the other.
                tokio::time::sleep(Duration::from_millis(u64::from(i % 8))).await;
                t.insert(&item(i)).await
            })
        })
        .collect();
    for writer in writers {
        writer
            .await
            .expect("a writer")
            .expect("every insert commits");
    }
    let seen = changes(&tables[0]).await;
    let numbers: Vec<u64> = seen.iter().map(|c| c.0).collect();
    assert_eq!(numbers, (1..=32).collect::<Vec<u64>>());
    let mut ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..32).collect::<Vec<u32>>());
}

/// A group with one member the store refuses and one whose writer was
/// dropped while the group was out: the refused one fails, the others go
/// back to the lane and commit, and the dropped one is never sent again,
/// not by that turn and not by a later one.
#[tokio::test(start_paused = true)]
async fn a_writer_dropped_while_its_group_is_refused_is_not_sent_again() {
    let (t, calls) = table().await;
    t.insert(&item(1)).await.expect("the first");
    calls.set_latency(Some(Duration::from_millis(10)));
    let spawn = |i: u32| {
        let t = t.clone();
        tokio::spawn(async move {
            // 3 inserts entity 1 again: its row exists.
            let id = if i == 3 { 1 } else { i };
            t.insert(&item(id)).await
        })
    };
    // 2 takes the turn and waits in the store (until 10 ms); 3 to 6 queue
    // behind it and go out as one group from 10 ms to 20 ms.
    let first = spawn(2);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let mut writers = vec![first];
    for i in 3..7 {
        writers.push(spawn(i));
        tokio::time::sleep(Duration::from_micros(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(14)).await;
    // 5 is dropped while its group is out.
    writers[3].abort();
    for (i, writer) in writers.into_iter().enumerate() {
        let id = i as u32 + 2;
        let result = writer.await;
        match id {
            3 => assert!(
                matches!(result, Ok(Err(Error::EntityAlreadyExists { .. }))),
                "{result:?}"
            ),
            5 => assert!(result.is_err_and(|e| e.is_cancelled())),
            _ => {
                result.expect("a writer").expect("commits");
            }
        }
    }
    t.insert(&item(9)).await.expect("a later write");
    calls.set_latency(None);
    assert!(t.get("p", 5u32).await.expect("get").is_none());
    let seen = changes(&t).await;
    let numbers: Vec<u64> = seen.iter().map(|c| c.0).collect();
    assert_eq!(numbers, (1..=5).collect::<Vec<u64>>());
    let mut ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 4, 6, 9]);
}

/// As above, with a member of the group the store refuses: the group goes
/// back to the lane once, and the writer dropped after its k-th poll, for
/// every k (waiting, in the refused send, back in the lane, in the second
/// send), is stored exactly when its change is recorded; the refused one
/// fails alone; the numbers have no gap.
#[tokio::test(start_paused = true)]
async fn a_writer_dropped_after_each_poll_of_a_refused_group_leaves_it_in_step() {
    use tablekit_conformance::drop_after_polls;
    for k in 1.. {
        assert!(k < 300, "the write never completes");
        let (t, calls) = table().await;
        t.insert(&item(100))
            .await
            .expect("the row the refused one names");
        calls.set_latency(Some(Duration::from_millis(10)));
        calls.set_yields(true);
        let spawn = |i: u32| {
            let t = t.clone();
            tokio::spawn(async move { t.insert(&item(i)).await })
        };
        // Writer 1 takes the turn; 2 (dropped) waits first for the next,
        // with 3 (its row exists: refused) and 4 behind it.
        let first = spawn(1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let two = item(2);
        let dropped = drop_after_polls(k, t.insert(&two));
        let behind = async {
            tokio::task::yield_now().await;
            let refused = {
                let t = t.clone();
                tokio::spawn(async move { t.insert(&item(100)).await })
            };
            (refused, spawn(4))
        };
        let (done, (refused, four)) = futures::join!(dropped, behind);
        let done = done.is_some();
        first.await.expect("a writer").expect("commits");
        four.await.expect("a writer").expect("commits");
        let refused = refused.await.expect("a writer");
        assert!(
            matches!(refused, Err(Error::EntityAlreadyExists { .. })),
            "k = {k}: {refused:?}"
        );
        calls.set_latency(None);
        calls.set_yields(false);
        t.insert(&item(9)).await.expect("a later write");
        let stored = t.get("p", 2u32).await.expect("get").is_some();
        let seen = changes(&t).await;
        let numbers: Vec<u64> = seen.iter().map(|c| c.0).collect();
        let count = if stored { 5 } else { 4 };
        assert_eq!(numbers, (1..=count).collect::<Vec<u64>>(), "k = {k}");
        let mut ids: Vec<u32> = seen.iter().map(|c| c.2).collect();
        ids.sort_unstable();
        let want: Vec<u32> = [1, 2, 4, 9, 100]
            .into_iter()
            .filter(|id| stored || *id != 2)
            .collect();
        assert_eq!(ids, want, "k = {k}: stored {stored}");
        if done {
            assert!(stored, "k = {k}: answered, so stored");
            break;
        }
    }
}
