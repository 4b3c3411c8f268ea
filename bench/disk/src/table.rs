//! The disk store's figures beside SQLite's, as the medians of interleaved
//! rounds with their spread (`TABLEKIT_BENCH_TABLE=1`, or
//! `TABLEKIT_BENCH_TABLE=7` for seven rounds): each round measures every
//! figure on both sides, one after the other, so that a slow spell of the
//! machine falls on both.

use std::path::Path;
use std::time::{Duration, Instant};

use tablekit::{GetOptions, Table, TableBackend};
use tablekit_local::LocalStorage;

use crate::{
    ROWS, Row, SPAN, TABLE, WRITERS, bytes_in, local_load, local_rate, pk, rk, sqlite, sqlite_load,
    sqlite_rate, time_ranges,
};

/// Point reads timed per round.
const READS: usize = 20_000;

/// One figure's values, a value per round.
#[derive(Default)]
struct Figure(Vec<f64>);

impl Figure {
    fn median(&self) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    fn spread(&self) -> (f64, f64) {
        let min = self.0.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.0.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (min, max)
    }

    /// The median and spread of the per-round ratios `self / other`.
    fn ratio_to(&self, other: &Figure) -> Figure {
        Figure(self.0.iter().zip(&other.0).map(|(a, b)| a / b).collect())
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Durable single typed inserts per second from one writer.
fn typed_rate(runtime: &tokio::runtime::Runtime, dir: &Path) -> f64 {
    let store = LocalStorage::builder().open(dir).unwrap();
    runtime.block_on(store.create_table(TABLE)).unwrap();
    let table = Table::<Row>::new(store);
    let started = Instant::now();
    let n = runtime.block_on(async {
        let mut n = 0;
        while started.elapsed() < SPAN {
            let i = 10_000_000 + n;
            let row = Row {
                department: pk(i),
                id: rk(i),
                data: crate::data(i),
            };
            table.insert(&row).await.unwrap();
            n += 1;
        }
        n
    });
    n as f64 / started.elapsed().as_secs_f64()
}

/// Durable single inserts per second from one writer of SQLite, called as
/// an async program calls it: each insert handed from a task to a thread
/// of the runtime's blocking pool (`spawn_blocking`, as `tokio-rusqlite`
/// and connection pools hand each call to a thread of their own), the task
/// waiting for it. Beside [`crate::sqlite_rate`], which calls it on its own
/// thread, it shows what the hand-over costs on this machine: the store's
/// writes make the same hand-over to its writer thread.
fn sqlite_async_rate(runtime: &tokio::runtime::Runtime, path: &Path) -> f64 {
    let c = std::sync::Arc::new(std::sync::Mutex::new(sqlite(path)));
    let started = Instant::now();
    let n = runtime.block_on(async {
        let mut n = 0;
        while started.elapsed() < SPAN {
            let i = 10_000_000 + n;
            let c = std::sync::Arc::clone(&c);
            tokio::task::spawn_blocking(move || {
                let c = c.lock().unwrap();
                let mut insert = c
                    .prepare_cached("INSERT INTO rows (pk, rk, data) VALUES (?1, ?2, ?3)")
                    .unwrap();
                insert.execute((pk(i), rk(i), crate::data(i))).unwrap();
            })
            .await
            .unwrap();
            n += 1;
        }
        n
    });
    n as f64 / started.elapsed().as_secs_f64()
}

/// The keys of the `i`th point read: spread over the whole table.
fn point(i: usize) -> usize {
    (i * 7919) % ROWS
}

/// Point reads per second: untyped, typed.
fn local_points(runtime: &tokio::runtime::Runtime, store: &LocalStorage) -> (f64, f64) {
    let options = GetOptions::default();
    let started = Instant::now();
    runtime.block_on(async {
        for i in 0..READS {
            let n = point(i);
            let e = store.get_entity(TABLE, &pk(n), &rk(n), &options).await;
            assert_eq!(e.unwrap().row_key, rk(n));
        }
    });
    let untyped = READS as f64 / started.elapsed().as_secs_f64();
    let table = Table::<Row>::new(store.clone());
    let started = Instant::now();
    runtime.block_on(async {
        for i in 0..READS {
            let n = point(i);
            let row = table.get(pk(n), rk(n)).await.unwrap();
            assert_eq!(row.unwrap().id, rk(n));
        }
    });
    (untyped, READS as f64 / started.elapsed().as_secs_f64())
}

fn sqlite_points(path: &Path) -> f64 {
    let c = sqlite(path);
    let mut select = c
        .prepare("SELECT pk, rk, data FROM rows WHERE pk = ?1 AND rk = ?2")
        .unwrap();
    let started = Instant::now();
    for i in 0..READS {
        let n = point(i);
        let row: (String, String, String) = select
            .query_row((pk(n), rk(n)), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap();
        assert_eq!(row.1, rk(n));
    }
    READS as f64 / started.elapsed().as_secs_f64()
}

/// Mean milliseconds of a 1,000-row range, untyped.
fn untyped_ranges(runtime: &tokio::runtime::Runtime, store: &LocalStorage) -> f64 {
    use tablekit::Query;
    let took = time_ranges(100, |p| {
        let q =
            Query::new().filter(tablekit::filter::prop("PartitionKey").eq(format!("Dept{p:03}")));
        let page = runtime.block_on(store.query_entities(TABLE, &q)).unwrap();
        page.entities.len()
    });
    took.as_secs_f64() * 1000.0
}

/// Mean milliseconds of a 1,000-row range, typed.
fn typed_ranges(runtime: &tokio::runtime::Runtime, store: &LocalStorage) -> f64 {
    let table = Table::<Row>::new(store.clone());
    let took = time_ranges(100, |p| {
        let rows = runtime.block_on(table.query().partition(format!("Dept{p:03}")).collect());
        rows.unwrap().len()
    });
    took.as_secs_f64() * 1000.0
}

/// Mean milliseconds of a 1,000-row range of SQLite's.
pub(crate) fn sqlite_range_ms(path: &Path) -> f64 {
    sqlite_passes_ms(path, 1)
}

/// [`sqlite_range_ms`] of a second pass on one connection: the ranges
/// read again, SQLite's cache holding what it kept of the first pass.
fn sqlite_warm_range_ms(path: &Path) -> f64 {
    sqlite_passes_ms(path, 2)
}

/// Mean milliseconds of a 1,000-row range in the last of `passes` passes
/// over the ranges on one connection.
fn sqlite_passes_ms(path: &Path, passes: usize) -> f64 {
    let c = sqlite(path);
    let mut select = c
        .prepare("SELECT pk, rk, data FROM rows WHERE pk = ?1 ORDER BY rk")
        .unwrap();
    let mut last = Duration::ZERO;
    for _ in 0..passes {
        last = time_ranges(100, |p| {
            let rows: Vec<(String, String, String)> = select
                .query_map([format!("Dept{p:03}")], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.len()
        });
    }
    last.as_secs_f64() * 1000.0
}

/// Only the point reads, `rounds` times, interleaved with SQLite's on the
/// same rows (`TABLEKIT_BENCH_POINTS_ONLY=5`): for comparing two builds
/// of the store's read path quickly.
pub(crate) fn points_report(runtime: &tokio::runtime::Runtime, base: &Path, rounds: usize) {
    let before = load_average();
    let (local, lite) = (base.join("points"), base.join("points-sqlite"));
    local_load(runtime, &local);
    std::fs::create_dir_all(&lite).unwrap();
    sqlite_load(&lite.join("rows.sqlite"));
    let store = LocalStorage::open(&local).unwrap();
    let (mut untyped, mut typed, mut theirs) =
        (Figure::default(), Figure::default(), Figure::default());
    for _ in 0..rounds {
        let (u, t) = local_points(runtime, &store);
        untyped.0.push(u);
        typed.0.push(t);
        theirs.0.push(sqlite_points(&lite.join("rows.sqlite")));
    }
    println!(
        "{rounds} interleaved rounds; load average before {before}, after {}",
        load_average()
    );
    for (name, ours) in [("untyped", &untyped), ("typed", &typed)] {
        let ratio = ours.ratio_to(&theirs);
        let (low, high) = ratio.spread();
        println!(
            "point read, {name}: {:.0}/s against SQLite's {:.0}/s: {:.2}× ({low:.2}–{high:.2})",
            ours.median(),
            theirs.median(),
            ratio.median()
        );
    }
}

/// Every figure, `rounds` times, interleaved; then the table.
pub(crate) fn report(runtime: &tokio::runtime::Runtime, base: &Path, rounds: usize) {
    let before = load_average();
    let mut f: [Figure; 20] = Default::default();
    for round in 0..rounds {
        let dir = base.join(format!("round-{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        f[0].0.push(local_rate(runtime, &dir.join("one"), 1).0);
        f[1].0.push(typed_rate(runtime, &dir.join("typed")));
        f[2].0.push(sqlite_rate(&dir.join("one.sqlite"), 1));
        f[19]
            .0
            .push(sqlite_async_rate(runtime, &dir.join("async.sqlite")));
        f[3].0
            .push(local_rate(runtime, &dir.join("many"), WRITERS).0);
        f[4].0.push(sqlite_rate(&dir.join("many.sqlite"), WRITERS));
        let (local, lite) = (dir.join("load"), dir.join("load-sqlite"));
        f[5].0.push(local_load(runtime, &local));
        std::fs::create_dir_all(&lite).unwrap();
        f[6].0.push(sqlite_load(&lite.join("rows.sqlite")));
        let (length, _) = bytes_in(&local);
        f[7].0.push(length as f64 / ROWS as f64);
        let (length, _) = bytes_in(&lite);
        f[8].0.push(length as f64 / ROWS as f64);
        // Each cold pass on a store just opened, its engine's cache empty
        // (the file in the system's cache, as SQLite's is when it opens a
        // connection for its cold pass).
        let store = LocalStorage::open(&local).unwrap();
        f[9].0.push(untyped_ranges(runtime, &store));
        drop(store);
        let store = LocalStorage::open(&local).unwrap();
        f[10].0.push(typed_ranges(runtime, &store));
        f[11].0.push(sqlite_range_ms(&lite.join("rows.sqlite")));
        // The same ranges again, the pages now in each engine's cache as
        // far as it holds them (SQLite's default cache: 2 MB per
        // connection; the store's: 64 MiB).
        f[16].0.push(untyped_ranges(runtime, &store));
        f[17].0.push(typed_ranges(runtime, &store));
        f[18]
            .0
            .push(sqlite_warm_range_ms(&lite.join("rows.sqlite")));
        let (untyped, typed) = local_points(runtime, &store);
        f[12].0.push(untyped);
        f[13].0.push(typed);
        f[14].0.push(sqlite_points(&lite.join("rows.sqlite")));
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
        eprintln!("round {} of {rounds} done", round + 1);
    }
    println!(
        "{rounds} interleaved rounds; load average before {before}, after {}",
        load_average()
    );
    println!(
        "| measure | tablekit-local | SQLite | ratio (median of per-round ratios, spread) | target |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let line = |name: &str,
                ours: &Figure,
                theirs: &Figure,
                unit: &str,
                target: &str,
                higher: bool| {
        let ratio = if higher {
            ours.ratio_to(theirs)
        } else {
            theirs.ratio_to(ours)
        };
        let (lo, hi) = ratio.spread();
        let (olo, ohi) = ours.spread();
        let (tlo, thi) = theirs.spread();
        println!(
            "| {name} | {:.3}{unit} ({olo:.3}–{ohi:.3}) | {:.3}{unit} ({tlo:.3}–{thi:.3}) | {:.2}× ({lo:.2}–{hi:.2}) | {target} |",
            ours.median(),
            theirs.median(),
            ratio.median(),
        );
    };
    line(
        "durable single insert, 1 writer, untyped",
        &f[0],
        &f[2],
        "/s",
        "",
        true,
    );
    line(
        "durable single insert, 1 writer, typed",
        &f[1],
        &f[2],
        "/s",
        "≥ 1.0×",
        true,
    );
    line(
        "durable single insert, 1 writer, typed, beside SQLite called from a task (spawn_blocking)",
        &f[1],
        &f[19],
        "/s",
        "",
        true,
    );
    line(
        "durable single insert, 16 writers",
        &f[3],
        &f[4],
        "/s",
        "≥ 5×",
        true,
    );
    line(
        "1,000-row range, untyped (ms; ratio as speed)",
        &f[9],
        &f[11],
        " ms",
        "≥ 0.7×",
        false,
    );
    line(
        "1,000-row range, typed (ms; ratio as speed)",
        &f[10],
        &f[11],
        " ms",
        "≥ 1.0×",
        false,
    );
    line(
        "1,000-row range again, untyped (warm)",
        &f[16],
        &f[18],
        " ms",
        "",
        false,
    );
    line(
        "1,000-row range again, typed (warm)",
        &f[17],
        &f[18],
        " ms",
        "",
        false,
    );
    line("point read, untyped", &f[12], &f[14], "/s", "", true);
    line("point read, typed", &f[13], &f[14], "/s", "≥ 2×", true);
    line(
        "bulk load, 100-row transactions (rows/s)",
        &f[5],
        &f[6],
        "/s",
        "≥ 1.0×",
        true,
    );
    f[15].0 = f[8].0.iter().map(|b| b + 12.0).collect();
    line(
        "bytes per row, file length, after the load (SQLite's + 12; ratio as SQLite's over ours)",
        &f[7],
        &f[15],
        "",
        "≥ 0.8× (ours ≤ 1.25× theirs)",
        false,
    );
}
