//! Measurements of the change feed that every store's bench runs (the
//! local store's `changes` bench, Azurite's `azurite_changes`): what a
//! write costs with the feed and without, how fast a consumer reads beside
//! the bulk writer's rate, and the delay from a write's commit to its
//! delivery. Load measurements, printed, never asserted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit::TableEntity;
use tablekit::backend::TableBackend;
use tablekit::table::Table;

/// A row of the measurements, without a change feed.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "BenchFeed", kind = "PLAIN")]
pub struct Plain {
    /// The partition.
    #[tablekit(partition_key)]
    pub pk: String,
    /// The row.
    #[tablekit(row_key)]
    pub rk: u32,
    /// A name.
    pub name: String,
    /// A count.
    pub count: i64,
}

/// The same row, with a change feed.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "BenchFeed", kind = "FED", changes)]
pub struct Fed {
    /// The partition.
    #[tablekit(partition_key)]
    pub pk: String,
    /// The row.
    #[tablekit(row_key)]
    pub rk: u32,
    /// A name.
    pub name: String,
    /// A count.
    pub count: i64,
}

fn plain(pk: &str, rk: u32) -> Plain {
    Plain {
        pk: pk.to_owned(),
        rk,
        name: format!("item {rk}"),
        count: i64::from(rk),
    }
}

fn fed(pk: &str, rk: u32) -> Fed {
    Fed {
        pk: pk.to_owned(),
        rk,
        name: format!("item {rk}"),
        count: i64::from(rk),
    }
}

/// Inserts rows `rk` and `second` of `pk` in one transaction.
async fn pair(table: &Table<Plain>, pk: &str, rk: u32, second: u32) -> tablekit::Result<()> {
    let mut transaction = table.transaction();
    transaction
        .insert(&plain(pk, rk))?
        .insert(&plain(pk, second))?;
    transaction.submit().await.map(drop)
}

/// Requests per typed insert and per get + replace, without a feed and
/// with one, over `n` writes into one partition (after its first); printed.
pub async fn requests_per_write(backend: Arc<dyn TableBackend>, table: &str, n: u32) {
    use tablekit::layer::FaultInjection;
    let counted = FaultInjection::new(backend);
    let calls = counted.handle();
    let without: Table<Plain> = Table::from_arc(Arc::new(counted), table);
    let with: Table<Fed> = without.of();
    without.create_if_missing().await.expect("the table");
    with.insert(&fed("q", u32::MAX)).await.expect("the first");
    let total = || crate::indexes::handle_calls(&calls);
    let mut figures = Vec::new();
    for feed in [false, true] {
        let before = total();
        for rk in 0..n {
            if feed {
                with.insert(&fed("q", rk)).await.expect("insert");
            } else {
                without.insert(&plain("q", rk + n)).await.expect("insert");
            }
        }
        let inserted = total();
        for rk in 0..n {
            if feed {
                let mut loaded = with.get("q", rk).await.expect("get").expect("stored");
                loaded.count += 1;
                with.replace(&mut loaded).await.expect("replace");
            } else {
                let mut loaded = without
                    .get("q", rk + n)
                    .await
                    .expect("get")
                    .expect("stored");
                loaded.count += 1;
                without.replace(&mut loaded).await.expect("replace");
            }
        }
        let per = |a: usize, b: usize| (b - a) as f64 / f64::from(n);
        figures.push((per(before, inserted), per(inserted, total())));
    }
    println!(
        "requests per typed insert: {:.2} without a feed, {:.2} with one; per get + replace: {:.2} and {:.2}",
        figures[0].0, figures[1].0, figures[0].1, figures[1].1
    );
}

/// Mean time of one typed insert and of one get + replace, for the kind
/// without a feed and with one, over `rounds` interleaved rounds of `n`
/// writes each; printed with their ratios.
pub async fn write_cost(backend: Arc<dyn TableBackend>, table: &str, n: u32, rounds: u32) {
    let without: Table<Plain> = Table::from_arc(Arc::clone(&backend), table);
    let with: Table<Fed> = without.of();
    without.create_if_missing().await.expect("the table");
    let mut times = [Duration::ZERO; 4];
    for round in 0..rounds {
        let pk = format!("r{round}");
        let at = Instant::now();
        for rk in 0..n {
            without.insert(&plain(&pk, rk)).await.expect("insert");
        }
        times[0] += at.elapsed();
        let at = Instant::now();
        for rk in 0..n {
            with.insert(&fed(&pk, rk + n)).await.expect("insert");
        }
        times[1] += at.elapsed();
        let at = Instant::now();
        for rk in 0..n {
            let mut loaded = without.get(&*pk, rk).await.expect("get").expect("stored");
            loaded.count += 1;
            without.replace(&mut loaded).await.expect("replace");
        }
        times[2] += at.elapsed();
        let at = Instant::now();
        for rk in n..2 * n {
            let mut loaded = with.get(&*pk, rk).await.expect("get").expect("stored");
            loaded.count += 1;
            with.replace(&mut loaded).await.expect("replace");
        }
        times[3] += at.elapsed();
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(n * rounds);
    let [insert, insert_fed, replace, replace_fed] = times.map(per);
    println!(
        "typed insert: {insert:.1} µs without a feed, {insert_fed:.1} µs with one ({:.2}×)",
        insert_fed / insert
    );
    println!(
        "typed get + replace: {replace:.1} µs without a feed, {replace_fed:.1} µs with one ({:.2}×)",
        replace_fed / replace
    );
}

/// The bulk writer's rate inserting `items` rows of the kind with a feed
/// over `partitions` partitions, beside one consumer's rate reading and
/// committing their changes, `batch` a poll; printed.
pub async fn consumer_rate(
    backend: Arc<dyn TableBackend>,
    table: &str,
    items: u32,
    partitions: u32,
    batch: usize,
) {
    let t: Table<Fed> = Table::from_arc(backend, table);
    t.create_if_missing().await.expect("the table");
    let without: Vec<Plain> = (0..items)
        .map(|i| plain(&format!("c{}", i % partitions), i + items))
        .collect();
    let at = Instant::now();
    let report = t.of::<Plain>().bulk().unpaced().insert(&without).await;
    let bulk_plain = at.elapsed();
    assert!(report.is_complete(), "{:?}", report.failures.first());
    let rows: Vec<Fed> = (0..items)
        .map(|i| fed(&format!("c{}", i % partitions), i))
        .collect();
    let at = Instant::now();
    let report = t.bulk().unpaced().insert(&rows).await;
    let bulk = at.elapsed();
    assert!(report.is_complete(), "{:?}", report.failures.first());
    println!(
        "bulk writer without a feed: {items} rows in {:.2} s ({:.0} rows/s)",
        bulk_plain.as_secs_f64(),
        f64::from(items) / bulk_plain.as_secs_f64()
    );
    let consumer = t.changes().consumer("bench").expect("a consumer");
    let at = Instant::now();
    let mut read = 0;
    let mut polls = 0;
    while read < items as usize {
        let got = consumer.poll(batch).await.expect("poll");
        polls += 1;
        read += got.changes.len();
        consumer.commit(&got).await.expect("commit");
    }
    let consumed = at.elapsed();
    println!(
        "bulk writer with a feed: {items} rows over {partitions} partitions in {:.2} s ({:.0} rows/s)",
        bulk.as_secs_f64(),
        f64::from(items) / bulk.as_secs_f64()
    );
    println!(
        "one consumer: {read} changes in {:.2} s ({:.0} changes/s, {polls} polls of up to {batch}, each committed)",
        consumed.as_secs_f64(),
        read as f64 / consumed.as_secs_f64()
    );
}

/// The delay from a write's commit (its insert returned) to its delivery,
/// with one writer inserting every `gap` into `partitions` partitions and
/// one consumer polling back to back (sleeping 1 ms after an empty poll):
/// p50, p99 and the largest of `n` writes; printed.
pub async fn delivery_delay(
    backend: Arc<dyn TableBackend>,
    table: &str,
    n: u32,
    partitions: u32,
    gap: Duration,
) {
    let t: Table<Fed> = Table::from_arc(backend, table);
    t.create_if_missing().await.expect("the table");
    let committed: Arc<Mutex<HashMap<u32, Instant>>> = Arc::default();
    let consumer = t.changes().consumer("delay").expect("a consumer");
    consumer.start_from_now().await.expect("start from now");
    let writer = {
        let (t, committed) = (t.clone(), Arc::clone(&committed));
        tokio::spawn(async move {
            for i in 0..n {
                t.insert(&fed(&format!("d{}", i % partitions), 1_000_000 + i))
                    .await
                    .expect("insert");
                committed
                    .lock()
                    .expect("the times")
                    .insert(1_000_000 + i, Instant::now());
                tokio::time::sleep(gap).await;
            }
        })
    };
    let mut delays = Vec::with_capacity(n as usize);
    while delays.len() < n as usize {
        let batch = consumer.poll(1000).await.expect("poll");
        let now = Instant::now();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        for change in &batch.changes {
            let rk = change.value.as_ref().expect("the value").rk;
            // Read before its writer noted the time: no delay to speak of.
            let at = committed
                .lock()
                .expect("the times")
                .get(&rk)
                .copied()
                .unwrap_or(now);
            delays.push(now.saturating_duration_since(at));
        }
        consumer.commit(&batch).await.expect("commit");
    }
    writer.await.expect("the writer");
    delays.sort();
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "commit to delivery, {n} writes {} ms apart over {partitions} partitions: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        gap.as_millis(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

/// `writers` tasks inserting `each` rows apiece into one partition at once,
/// for the kind without a feed and then with one, in `rounds` interleaved
/// rounds: writes per second of each, their ratio, and the writes that
/// failed (each failure is printed). Returns the ratio (with a feed over
/// without) and the failures.
///
/// Also printed, the floor under that ratio for any feed that stores a
/// change row per write: the kind without a feed, each insert a
/// transaction with one more row of its size.
pub async fn concurrent_writers(
    backend: Arc<dyn TableBackend>,
    table: &str,
    writers: u32,
    each: u32,
    rounds: u32,
) -> (f64, usize) {
    let without: Table<Plain> = Table::from_arc(Arc::clone(&backend), table);
    let with: Table<Fed> = without.of();
    without.create_if_missing().await.expect("the table");
    let mut times = [Duration::ZERO; 3];
    let mut failures = 0;
    for round in 0..rounds {
        // Without a feed, with one, and without one two rows a write.
        for variant in 0..3u32 {
            let pk = format!("w{round}");
            let at = Instant::now();
            let tasks: Vec<_> = (0..writers)
                .map(|w| {
                    let (without, with, pk) = (without.clone(), with.clone(), pk.clone());
                    tokio::spawn(async move {
                        let mut failed = Vec::new();
                        for i in 0..each {
                            let rk = w * each + i + variant * writers * each;
                            let done = match variant {
                                0 => without.insert(&plain(&pk, rk)).await.map(drop),
                                1 => with.insert(&fed(&pk, rk)).await.map(drop),
                                _ => pair(&without, &pk, rk, rk + writers * each).await,
                            };
                            if let Err(e) = done {
                                failed.push(e.to_string());
                            }
                        }
                        failed
                    })
                })
                .collect();
            for task in tasks {
                for e in task.await.expect("a writer") {
                    println!("a write failed: {e}");
                    failures += 1;
                }
            }
            times[variant as usize] += at.elapsed();
        }
    }
    let n = f64::from(writers * each * rounds);
    let [plain_rate, fed_rate, pair_rate] = times.map(|t| n / t.as_secs_f64());
    let ratio = fed_rate / plain_rate;
    println!(
        "{writers} writers to one partition: {plain_rate:.0} inserts/s without a feed, \
         {fed_rate:.0} with one ({ratio:.2}×), {failures} failed; the floor for a feed that \
         stores a row per write, each insert with one more row in its transaction: \
         {pair_rate:.0}/s ({:.2}×)",
        pair_rate / plain_rate
    );
    (ratio, failures)
}
