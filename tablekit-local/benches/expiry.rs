//! Rows that expire, on the local store, in the same run:
//!
//! - the sweep: `n` expired entities deleted by `Table::sweep_expired`
//!   (reading the due rows of the expiry index, then each entity, then
//!   deleting both), in rows per second, beside deleting the same `n`
//!   entities by key with the bulk writer;
//! - reads: every entity of a table read by typed queries, one partition
//!   after another, when half its rows have expired (and are passed by),
//!   beside a table holding only the live half.
//!
//! Beside each, the floor under its ratio: for the sweep, the bulk delete
//! with each entity's expiry index row deleted by key too (what any sweep
//! that keeps such an index must delete, with nothing read); for reads,
//! the engine alone stepping over a stored row and checking its checksum.
//!
//! `cargo bench -p tablekit-local --bench expiry` (`-- 20000` for fewer
//! rows; `TABLEKIT_BENCH_READS_ONLY=1` for the reads alone). Each figure
//! is the median of 5 rounds, the two sides of a comparison measured one
//! after the other in each round.
//!
//! A load measurement, not a statistical micro-benchmark: no criterion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit::clock::{Clock, ManualClock};
use tablekit::{DateTime, Table, TableBackend, TableBackendExt, TableEntity};
use tablekit_local::LocalStorage;

/// A session with its own expiry time (`None`: never).
#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Sessions", kind = "SES")]
struct Session {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    device: String,
    token: String,
    #[tablekit(expires)]
    expires_at: Option<DateTime>,
}

const PARTITIONS: u32 = 10;
const ROUNDS: usize = 5;

fn session(id: u32, expires_at: Option<DateTime>) -> Session {
    Session {
        user: format!("user{}", id % PARTITIONS),
        id,
        device: format!("device {id}"),
        token: format!("{id:0>100}"),
        expires_at,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A new table `name` of the store, on `clock`.
async fn table(backend: &Arc<dyn TableBackend>, name: &str, clock: &ManualClock) -> Table<Session> {
    let t: Table<Session> =
        Table::from_arc(Arc::clone(backend), name).with_clock(Arc::new(clock.clone()));
    t.create_if_missing().await.expect("the table");
    t
}

/// Rows per second of the sweep, of the bulk writer's deletes by key, and
/// of those deletes with the entities' expiry index rows deleted too.
async fn sweep_round(
    backend: &Arc<dyn TableBackend>,
    clock: &ManualClock,
    n: u32,
    round: usize,
) -> (f64, f64, f64) {
    let soon = clock.now().saturating_add(Duration::from_secs(60));
    let items: Vec<Session> = (0..n).map(|i| session(i, Some(soon))).collect();
    let swept = table(backend, &format!("Swept{round}"), clock).await;
    assert!(swept.bulk().insert(&items).await.is_complete());
    let deleted = table(backend, &format!("Deleted{round}"), clock).await;
    assert!(deleted.bulk().insert(&items).await.is_complete());
    clock.advance(Duration::from_secs(120));

    let start = Instant::now();
    let mut count = 0;
    loop {
        let sweep = swept.sweep_expired(10_000).await.expect("a sweep");
        count += sweep.deleted;
        if !sweep.more {
            break;
        }
    }
    let sweep_rate = f64::from(n) / start.elapsed().as_secs_f64();
    assert_eq!(count, n as usize);

    let start = Instant::now();
    assert!(deleted.bulk().delete(&items).await.is_complete());
    let took = start.elapsed();
    let delete_rate = f64::from(n) / took.as_secs_f64();

    // The floor of any sweep that keeps an expiry index: each entity's
    // index row must go too. A delete by key leaves it (the sweep drops
    // it), so here it is deleted the bulk writer's way, by key, in
    // transactions of 100 of one partition.
    let left = backend
        .query_all(&format!("Deleted{round}"), tablekit::Query::new())
        .await
        .expect("the index rows");
    assert_eq!(left.len(), n as usize, "an index row per entity is left");
    let mut partitions: std::collections::BTreeMap<&str, Vec<_>> = Default::default();
    for row in &left {
        partitions
            .entry(row.partition_key.as_str())
            .or_default()
            .push(tablekit::BatchOperation::Delete {
                partition_key: row.partition_key.clone(),
                row_key: row.row_key.clone(),
                if_match: tablekit::IfMatch::Any,
            });
    }
    let start = Instant::now();
    for deletes in partitions.values().flat_map(|rows| rows.chunks(100)) {
        backend
            .submit_transaction(&format!("Deleted{round}"), deletes)
            .await
            .expect("the index rows deleted");
    }
    let floor_rate = f64::from(n) / (took + start.elapsed()).as_secs_f64();
    (sweep_rate, delete_rate, floor_rate)
}

/// Seconds to read every live entity of `t`, partition by partition.
async fn read_all(t: &Table<Session>, live: usize) -> f64 {
    let start = Instant::now();
    let mut read = 0;
    for p in 0..PARTITIONS {
        read += t
            .query()
            .partition(format!("user{p}"))
            .collect()
            .await
            .expect("a query")
            .len();
    }
    assert_eq!(read, live);
    start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let n: u32 = (args.iter().skip(1))
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("a directory");
    let backend: Arc<dyn TableBackend> = Arc::new(LocalStorage::open(dir.path()).expect("open"));
    let clock = ManualClock::new();

    let (mut sweeps, mut deletes, mut floors) = (Vec::new(), Vec::new(), Vec::new());
    // `TABLEKIT_BENCH_READS_ONLY`: the reads alone, for a profiler.
    let sweep_rounds = match std::env::var_os("TABLEKIT_BENCH_READS_ONLY") {
        Some(_) => 0,
        None => ROUNDS,
    };
    for round in 0..sweep_rounds {
        let (sweep, delete, floor) = sweep_round(&backend, &clock, n, round).await;
        sweeps.push(sweep / delete);
        deletes.push(delete);
        floors.push(floor / delete);
    }
    if sweep_rounds > 0 {
        let (ratio, delete, floor) = (median(sweeps), median(deletes), median(floors));
        println!(
            "sweep of {n} expired entities: {:.0} rows/s; bulk delete by key: {delete:.0} rows/s; \
         ratio {ratio:.2} (median of the rounds' ratios)",
            ratio * delete
        );
        println!(
            "the floor of a sweep that keeps an expiry index, the bulk delete with each entity's \
         index row deleted by key too (no read): {floor:.2}x the bulk delete"
        );
    }

    // Half of `mixed` has expired (every other id); `live` holds the rest.
    let soon = clock.now().saturating_add(Duration::from_secs(60));
    let mixed = table(&backend, "Mixed", &clock).await;
    let all: Vec<Session> = (0..n)
        .map(|i| session(i, (i % 2 == 0).then_some(soon)))
        .collect();
    assert!(mixed.bulk().insert(&all).await.is_complete());
    let live = table(&backend, "Live", &clock).await;
    let odd: Vec<Session> = all.iter().filter(|s| s.id % 2 == 1).cloned().collect();
    assert!(live.bulk().insert(&odd).await.is_complete());
    clock.advance(Duration::from_secs(120));
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        with.push(read_all(&mixed, odd.len()).await);
        without.push(read_all(&live, odd.len()).await);
    }
    let (with, without) = (median(with), median(without));
    println!(
        "reads of {} live entities: {:.1} ms beside {} expired, {:.1} ms alone; ratio {:.2}",
        odd.len(),
        with * 1e3,
        n as usize - odd.len(),
        without * 1e3,
        with / without
    );
    // The floor under that ratio: what the store spends stepping over a
    // row a query's filter leaves out (every row of `Mixed`, by a filter
    // no row matches), against a live entity's typed read.
    let mut skips = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for p in 0..PARTITIONS {
            let filter = tablekit::filter::Filter::partition_key()
                .eq(format!("user{p}").as_str())
                .and(tablekit::filter::prop("device").eq("none"));
            let rows = backend
                .query_all("Mixed", tablekit::Query::new().filter(filter))
                .await
                .expect("a query");
            assert!(rows.is_empty());
        }
        skips.push(start.elapsed().as_secs_f64());
    }
    let skip = median(skips) / f64::from(n);
    let read = without / odd.len() as f64;
    println!(
        "a row passed by: {:.0} ns; a live entity read: {:.0} ns; so {} expired beside {} live cost at least {:.2}x",
        skip * 1e9,
        read * 1e9,
        n as usize - odd.len(),
        odd.len(),
        1.0 + skip * (n as usize - odd.len()) as f64 / (read * odd.len() as f64)
    );
    // The engine's own floor: stepping over a stored row and checking its
    // checksum (which a read must, before it trusts the expiry time the
    // row holds), on the engine alone, with nothing decoded.
    drop((mixed, live, backend));
    let step = engine_step(&dir.path().join(tablekit_local::FILE_NAME), "rows/mixed");
    println!(
        "the engine stepping over a row and checking its checksum, nothing decoded: {:.0} ns; \
         so any store that keeps expired rows among live ones until they are swept costs \
         at least {:.2}x here",
        step * 1e9,
        1.0 + step * (n as usize - odd.len()) as f64 / (read * odd.len() as f64)
    );
}

/// Seconds per row to walk the engine table `name` of the store file at
/// `path` in key order, each row's checksum checked (median of rounds).
fn engine_step(path: &std::path::Path, name: &str) -> f64 {
    use redb::{ReadableDatabase, TableDefinition};
    // The store's writer lets go of the file once its last handle is gone.
    let started = Instant::now();
    let db = loop {
        match redb::Database::open(path) {
            Ok(db) => break db,
            Err(_) if started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the store's file: {e}"),
        }
    };
    let definition: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new(name);
    let txn = db.begin_read().expect("a read");
    let table = txn.open_table(definition).expect("the table");
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut rows = 0usize;
        for entry in table.range::<&[u8]>(..).expect("a range") {
            let (key, value) = entry.expect("a row");
            let (key, value) = (key.value(), value.value());
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(&(key.len() as u64).to_le_bytes());
            hasher.update(key);
            hasher.update(&value[4..]);
            assert_eq!(hasher.finalize().to_le_bytes(), value[..4], "a sound row");
            rows += 1;
        }
        times.push(start.elapsed().as_secs_f64() / rows as f64);
    }
    median(times)
}
