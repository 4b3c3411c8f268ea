//! Pacing against a store that throttles: a partition that takes more than
//! its rate in any second answers 503 Server Busy. The same bulk load runs
//! without pacing and with it; paced, it is throttled less and finishes.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tablekit::table::{BulkWriter, Pacing};
use tablekit::{
    BatchOperation, ETag, Entity, EntityWrite, Error, GetOptions, ListTablesOptions, Query,
    QueryPage, Result, Table, TableBackend, TableEntity, TablePage,
};
use tablekit_mem::MemBackend;
use tokio::time::Instant;

/// The in-memory store behind a throttle: each partition takes at most
/// `per_second` entities in any second, and each transaction takes a little
/// time, as over a network.
#[derive(Debug)]
struct Throttling {
    inner: MemBackend,
    per_second: usize,
    latency: Duration,
    sent: Mutex<HashMap<String, VecDeque<(Instant, usize)>>>,
    throttled: AtomicUsize,
}

impl Throttling {
    fn admit(&self, partition: &str, entities: usize) -> bool {
        let now = Instant::now();
        let mut sent = self.sent.lock().unwrap();
        let window = sent.entry(partition.to_owned()).or_default();
        while window
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) >= Duration::from_secs(1))
        {
            window.pop_front();
        }
        let recent: usize = window.iter().map(|(_, n)| n).sum();
        if recent + entities > self.per_second {
            self.throttled.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        window.push_back((now, entities));
        true
    }
}

#[async_trait::async_trait]
impl TableBackend for Throttling {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.inner.create_table(table).await
    }
    async fn delete_table(&self, table: &str) -> Result<()> {
        self.inner.delete_table(table).await
    }
    async fn list_tables(&self, options: &ListTablesOptions) -> Result<TablePage> {
        self.inner.list_tables(options).await
    }
    async fn get_entity(&self, t: &str, pk: &str, rk: &str, o: &GetOptions) -> Result<Entity> {
        self.inner.get_entity(t, pk, rk, o).await
    }
    async fn query_entities(&self, table: &str, query: &Query) -> Result<QueryPage> {
        self.inner.query_entities(table, query).await
    }
    async fn write_entity(&self, table: &str, write: EntityWrite<'_>) -> Result<Option<ETag>> {
        self.inner.write_entity(table, write).await
    }
    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[BatchOperation],
    ) -> Result<Vec<Option<ETag>>> {
        tokio::time::sleep(self.latency).await;
        let partition = operations.first().map_or("", |op| op.keys().0);
        if !self.admit(partition, operations.len()) {
            return Err(Error::Throttled { retry_after: None });
        }
        self.inner.submit_transaction(table, operations).await
    }
}

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Readings")]
struct Reading {
    #[tablekit(partition_key)]
    sensor: String,
    #[tablekit(row_key)]
    n: u32,
    value: f64,
}

async fn load(
    pace: impl FnOnce(BulkWriter<Reading>) -> BulkWriter<Reading>,
) -> (tablekit::BulkReport, usize) {
    let store = Throttling {
        inner: MemBackend::new(),
        per_second: 250,
        latency: Duration::from_millis(2),
        sent: Mutex::default(),
        throttled: AtomicUsize::new(0),
    };
    let store = std::sync::Arc::new(store);
    let table: Table<Reading> = Table::from_arc(store.clone(), "Readings");
    table.create_if_missing().await.unwrap();
    let rows: Vec<Reading> = (0..4)
        .flat_map(|s| {
            (0..300).map(move |n| Reading {
                sensor: format!("sensor{s}"),
                n,
                value: f64::from(n) / 10.0,
            })
        })
        .collect();
    let report = pace(table.bulk().parallelism(4)).insert(&rows).await;
    let stored = table.query().count().await.unwrap();
    assert_eq!(stored, report.written, "the report matches the store");
    (report, store.throttled.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_loads_are_throttled_less_and_finish() {
    let (unpaced, unpaced_throttled) = load(BulkWriter::unpaced).await;
    // Well under the store's rate, with room for timers that wake late.
    let (paced, paced_throttled) = load(|w| w.pacing(Pacing::new(150.0, 10_000.0))).await;
    eprintln!(
        "unpaced: {unpaced_throttled} throttled, {} written; paced: {paced_throttled} throttled, {} written",
        unpaced.written, paced.written
    );
    assert!(unpaced_throttled > 0, "the load outruns the store");
    assert!(!unpaced.is_complete(), "unpaced, throttled batches fail");
    assert!(
        paced_throttled < unpaced_throttled,
        "paced: {paced_throttled} throttled against {unpaced_throttled}"
    );
    assert!(
        paced.is_complete(),
        "paced, the whole load is written: {paced:?}"
    );
    assert_eq!(paced.written, 1200);
}

/// A writer is paced unless told otherwise: at the service's targets, which
/// this store's rate is under, throttled batches wait and go again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_are_paced_by_default() {
    let (report, throttled) = load(|w| w).await;
    eprintln!("default: {throttled} throttled, {} written", report.written);
    assert!(report.is_complete(), "{:?}", report.failures.first());
    assert_eq!(report.written, 1200);
}

/// On a store that takes `capacity` entities a second per partition, the
/// default (adaptive) writer finds that rate: each partition is written at
/// 90% of it or more, and 5% of the batches or fewer are throttled. On
/// tokio's paused clock, so the seconds pass at once.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_default_writer_finds_the_stores_capacity() {
    for capacity in [300usize, 1_000, 5_000] {
        let store = std::sync::Arc::new(Throttling {
            inner: MemBackend::new(),
            per_second: capacity,
            latency: Duration::from_millis(2),
            sent: Mutex::default(),
            throttled: AtomicUsize::new(0),
        });
        let table: Table<Reading> = Table::from_arc(store.clone(), "Readings");
        table.create_if_missing().await.unwrap();
        // Thirty seconds' worth for each of two partitions.
        let per_partition = capacity * 30;
        let rows: Vec<Reading> = (0..2)
            .flat_map(|s| {
                (0..per_partition as u32).map(move |n| Reading {
                    sensor: format!("sensor{s}"),
                    n,
                    value: 1.0,
                })
            })
            .collect();
        let started = Instant::now();
        let report = table.bulk().insert(&rows).await;
        let seconds = started.elapsed().as_secs_f64();
        let throttled = store.throttled.load(Ordering::Relaxed);
        let rate = per_partition as f64 / seconds;
        eprintln!(
            "capacity {capacity}/s: {rate:.0}/s per partition ({:.1}%), {throttled} of {} batches throttled ({:.1}%)",
            100.0 * rate / capacity as f64,
            report.batches,
            100.0 * throttled as f64 / report.batches as f64
        );
        assert!(report.is_complete(), "{:?}", report.failures.first());
        assert!(rate >= 0.9 * capacity as f64, "{rate:.0}/s of {capacity}/s");
        assert!(
            throttled as f64 <= 0.05 * report.batches as f64,
            "{throttled} of {} batches throttled",
            report.batches
        );
    }
}
