//! The upkeep's rounds over an idle change feed read its directory, not
//! each partition: what a round learns (a partition's oldest change is too
//! young until a time, or its consumers must commit more first) lets the
//! next pass the partition by, and the changes are still trimmed once they
//! are due.

use std::sync::Arc;
use std::time::Duration;

use tablekit::clock::ManualClock;
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit::upkeep::Upkeep;
use tablekit::{Table, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Fed", kind = "F", changes)]
struct Item {
    #[tablekit(partition_key)]
    group: String,
    #[tablekit(row_key)]
    id: u32,
}

fn queries(handle: &FaultHandle) -> usize {
    handle.calls(Operation::QueryEntities)
}

/// With `partitions` partitions of one change each, committed by a
/// consumer: the queries of three idle rounds, and what the round a day
/// later trims.
async fn idle_rounds(partitions: u32) -> (usize, usize) {
    let counted = FaultInjection::new(MemBackend::new());
    let handle = counted.handle();
    let clock = ManualClock::new();
    let table: Table<Item> = Table::new(counted).with_clock(Arc::new(clock.clone()));
    table.create_if_missing().await.unwrap();
    for p in 0..partitions {
        let item = Item {
            group: format!("g{p:02}"),
            id: 1,
        };
        table.insert(&item).await.unwrap();
    }
    let consumer = table.changes().consumer("reader").unwrap();
    let batch = consumer.poll(1000).await.unwrap();
    assert_eq!(batch.changes.len(), partitions as usize);
    consumer.commit(&batch).await.unwrap();
    let upkeep = Upkeep::new().clock(Arc::new(clock.clone())).watch(&table);
    // The first round reads each partition, and learns.
    let first = upkeep.run_round().await;
    assert!(first.failures.is_empty(), "{first:?}");
    assert_eq!(first.changes_trimmed, 0, "a day's window keeps them");
    let before = queries(&handle);
    for _ in 0..3 {
        clock.advance(Duration::from_secs(5));
        let round = upkeep.run_round().await;
        assert!(round.failures.is_empty(), "{round:?}");
    }
    let idle = queries(&handle) - before;
    // A day on, every change is due and trimmed.
    clock.advance(Duration::from_secs(24 * 3600 + 60));
    let due = upkeep.run_round().await;
    assert!(due.failures.is_empty(), "{due:?}");
    (idle, due.changes_trimmed)
}

#[tokio::test]
async fn idle_rounds_read_the_directory_not_each_partition() {
    let (few, trimmed_few) = idle_rounds(4).await;
    let (many, trimmed_many) = idle_rounds(40).await;
    assert_eq!(
        few, many,
        "three idle rounds: {few} queries with 4 partitions, {many} with 40"
    );
    assert_eq!(
        (trimmed_few, trimmed_many),
        (4, 40),
        "due changes are trimmed"
    );
}

/// A partition whose consumers have not passed its changes is read again
/// once they commit more, and its changes trimmed when due; one whose
/// changes were all trimmed waits for the consumers.
#[tokio::test]
async fn trimming_follows_the_consumers() {
    let clock = ManualClock::new();
    let table: Table<Item> = Table::new(MemBackend::new()).with_clock(Arc::new(clock.clone()));
    table.create_if_missing().await.unwrap();
    let item = |id| Item {
        group: "g".into(),
        id,
    };
    table.insert(&item(1)).await.unwrap();
    let consumer = table.changes().consumer("reader").unwrap();
    let first = consumer.poll(1).await.unwrap();
    consumer.commit(&first).await.unwrap();
    table.insert(&item(2)).await.unwrap();
    let upkeep = Upkeep::new().clock(Arc::new(clock.clone())).config(
        tablekit::upkeep::UpkeepConfig::default().change_retention(Duration::from_secs(30)),
    );
    let upkeep = upkeep.watch(&table);
    // A minute on (the store stamps rows by the system's clock, which the
    // manual one started from): change 1, passed, is trimmed; change 2
    // waits for the consumer.
    clock.advance(Duration::from_secs(60));
    assert_eq!(upkeep.run_round().await.changes_trimmed, 1);
    clock.advance(Duration::from_secs(5));
    assert_eq!(upkeep.run_round().await.changes_trimmed, 0);
    let second = consumer.poll(10).await.unwrap();
    assert_eq!(second.changes.len(), 1);
    consumer.commit(&second).await.unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        upkeep.run_round().await.changes_trimmed,
        1,
        "trimmed once the consumer passed it"
    );
}
