//! The disk store beside its baselines, in one run and on one disk: see
//! Cargo.toml. Rows are 100,000 entities of 1,000 per partition, each with
//! one 150-byte value; SQLite holds the same rows in a `WITHOUT ROWID`
//! table keyed by (PartitionKey, RowKey), in WAL mode with
//! `synchronous=FULL`, so that each of its commits is durable too.
//!
//! Each timed figure is the best of three rounds, the rounds of the things
//! compared interleaved.

mod mix;
mod table;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tablekit::TableBackendExt;

use redb::{ReadableDatabase, TableDefinition};
use tablekit::{BatchOperation, Entity, GetOptions, Query, TableBackend, TableEntity};
use tablekit_local::LocalStorage;

const TABLE: &str = "Staff";
const ROWS: usize = 100_000;
const PER_PARTITION: usize = 1_000;
const WRITERS: usize = 16;
const ROUNDS: usize = 3;
/// How long each rate is measured for, per round.
const SPAN: Duration = Duration::from_secs(2);

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff")]
struct Row {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: String,
    data: String,
}

fn pk(n: usize) -> String {
    format!("Dept{:03}", n / PER_PARTITION)
}

fn rk(n: usize) -> String {
    format!("{n:08}")
}

/// 150 bytes that differ from row to row.
fn data(n: usize) -> String {
    let seed = format!("{n:08}-");
    seed.chars().cycle().take(150).collect()
}

fn entity(n: usize) -> Entity {
    Entity::new(pk(n), rk(n)).with("data", data(n))
}

fn sqlite(path: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(path).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "FULL").unwrap();
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS rows (pk TEXT NOT NULL, rk TEXT NOT NULL, data TEXT NOT NULL, \
         PRIMARY KEY (pk, rk)) WITHOUT ROWID",
    )
    .unwrap();
    c
}

fn rate(n: usize, took: Duration) -> f64 {
    n as f64 / took.as_secs_f64()
}

/// The disk's own rate: appends of one row's size, each followed by
/// `fdatasync`.
fn disk_rate(dir: &Path) -> f64 {
    let path = dir.join("appends");
    let mut file = std::fs::File::create(&path).unwrap();
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < SPAN {
        file.write_all(&[b'x'; 200]).unwrap();
        file.sync_data().unwrap();
        n += 1;
    }
    let r = rate(n, started.elapsed());
    std::fs::remove_file(path).unwrap();
    r
}

/// Durable single inserts per second from `writers` tasks at once.
fn local_rate(runtime: &tokio::runtime::Runtime, dir: &Path, writers: usize) -> (f64, f64) {
    let store = LocalStorage::builder().open(dir).unwrap();
    runtime.block_on(store.create_table(TABLE)).unwrap();
    let before = store.write_stats();
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            runtime.spawn(async move {
                let mut n = 0;
                while started.elapsed() < SPAN {
                    let i = 10_000_000 + w * 1_000_000 + n;
                    store.insert_entity(TABLE, &entity(i)).await.unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let n: usize = runtime
        .block_on(futures::future::join_all(tasks))
        .into_iter()
        .map(Result::unwrap)
        .sum();
    let r = rate(n, started.elapsed());
    let after = store.write_stats();
    let per_commit =
        (after.writes - before.writes) as f64 / (after.commits - before.commits) as f64;
    (r, per_commit)
}

fn sqlite_rate(path: &Path, writers: usize) -> f64 {
    drop(sqlite(path));
    let started = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let path = path.to_path_buf();
            std::thread::spawn(move || {
                let c = sqlite(&path);
                let mut insert = c
                    .prepare("INSERT INTO rows (pk, rk, data) VALUES (?1, ?2, ?3)")
                    .unwrap();
                let mut n = 0;
                while started.elapsed() < SPAN {
                    let i = 10_000_000 + w * 1_000_000 + n;
                    insert.execute((pk(i), rk(i), data(i))).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let n: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    rate(n, started.elapsed())
}

/// Loads [`ROWS`] rows in transactions of 100; rows per second.
fn local_load(runtime: &tokio::runtime::Runtime, dir: &Path) -> f64 {
    let store = LocalStorage::open(dir).unwrap();
    runtime.block_on(store.create_table(TABLE)).unwrap();
    let started = Instant::now();
    for start in (0..ROWS).step_by(100) {
        let ops: Vec<_> = (start..start + 100)
            .map(|n| BatchOperation::Insert(entity(n)))
            .collect();
        runtime
            .block_on(store.submit_transaction(TABLE, &ops))
            .unwrap();
    }
    rate(ROWS, started.elapsed())
}

fn sqlite_load(path: &Path) -> f64 {
    let mut c = sqlite(path);
    let started = Instant::now();
    for start in (0..ROWS).step_by(100) {
        let txn = c.transaction().unwrap();
        {
            let mut insert = txn
                .prepare_cached("INSERT INTO rows (pk, rk, data) VALUES (?1, ?2, ?3)")
                .unwrap();
            for n in start..start + 100 {
                insert.execute((pk(n), rk(n), data(n))).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let r = rate(ROWS, started.elapsed());
    c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
    r
}

/// Bytes on disk of the bulk load's rows in SQLite with one more column,
/// the row's write time in ticks, which every row of the store keeps (the
/// service's Timestamp) and the plain SQLite table does not.
fn sqlite_with_timestamps(dir: &Path) -> u64 {
    std::fs::create_dir_all(dir).unwrap();
    let mut c = sqlite(&dir.join("rows.sqlite"));
    c.execute_batch(
        "CREATE TABLE timed (pk TEXT NOT NULL, rk TEXT NOT NULL, ts INTEGER NOT NULL, \
         data TEXT NOT NULL, PRIMARY KEY (pk, rk)) WITHOUT ROWID; DROP TABLE rows",
    )
    .unwrap();
    let ticks = tablekit::DateTime::now().ticks();
    for start in (0..ROWS).step_by(100) {
        let txn = c.transaction().unwrap();
        {
            let mut insert = txn
                .prepare_cached("INSERT INTO timed (pk, rk, ts, data) VALUES (?1, ?2, ?3, ?4)")
                .unwrap();
            for n in start..start + 100 {
                insert
                    .execute((pk(n), rk(n), ticks + n as i64, data(n)))
                    .unwrap();
            }
        }
        txn.commit().unwrap();
    }
    c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
    drop(c);
    let (_, on_disk) = bytes_in(dir);
    std::fs::remove_dir_all(dir).unwrap();
    on_disk
}

/// Bytes on disk per row of the raw engine holding the same keys in a table
/// of its own, each value `extra` bytes of its own before the 150 bytes
/// and their length (a varint, as SQLite's record keeps it): what the
/// engine's layout costs, apart from the store's.
fn engine_bytes(dir: &Path, extra: usize) -> f64 {
    use tablekit::backend::sorted::{encode_key, put_varint};
    std::fs::create_dir_all(dir).unwrap();
    let definition: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows");
    let db = redb::Database::create(dir.join("engine.redb")).unwrap();
    for start in (0..ROWS).step_by(100) {
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(definition).unwrap();
            for n in start..start + 100 {
                let key = [&*encode_key(&pk(n)), &[0], &*encode_key(&rk(n))].concat();
                let mut value = vec![7u8; extra];
                let data = data(n);
                put_varint(&mut value, data.len() as u64);
                value.extend_from_slice(data.as_bytes());
                table.insert(key.as_slice(), value.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    drop(db);
    let (_, on_disk) = bytes_in(dir);
    std::fs::remove_dir_all(dir).unwrap();
    on_disk as f64 / ROWS as f64
}

/// Bytes on disk per row of 100,000 rows whose one value is `len` bytes,
/// loaded in 100-row transactions: the store's, SQLite's, SQLite's with a
/// Timestamp column. Rows fill the engine's 4 KiB pages by whole rows, so
/// one size alone can land either side of a page's last row.
fn bytes_at(runtime: &tokio::runtime::Runtime, base: &Path, len: usize) -> (f64, f64, f64) {
    let value = |n: usize| -> String { data(n).chars().cycle().take(len).collect() };
    let local = base.join(format!("sized-local-{len}"));
    {
        let store = LocalStorage::open(&local).unwrap();
        runtime.block_on(store.create_table(TABLE)).unwrap();
        for start in (0..ROWS).step_by(100) {
            let ops: Vec<_> = (start..start + 100)
                .map(|n| BatchOperation::Insert(Entity::new(pk(n), rk(n)).with("data", value(n))))
                .collect();
            runtime
                .block_on(store.submit_transaction(TABLE, &ops))
                .unwrap();
        }
    }
    let local_bytes = bytes_in(&local).1;
    std::fs::remove_dir_all(&local).unwrap();
    let sqlite_bytes = |timed: bool| {
        let dir = base.join(format!("sized-sqlite-{len}-{timed}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = sqlite(&dir.join("rows.sqlite"));
        c.execute_batch(
            "CREATE TABLE timed (pk TEXT NOT NULL, rk TEXT NOT NULL, ts INTEGER NOT NULL, \
             data TEXT NOT NULL, PRIMARY KEY (pk, rk)) WITHOUT ROWID",
        )
        .unwrap();
        let ticks = tablekit::DateTime::now().ticks();
        for start in (0..ROWS).step_by(100) {
            let txn = c.transaction().unwrap();
            {
                let (mut plain, mut with_time) = (
                    txn.prepare_cached("INSERT INTO rows (pk, rk, data) VALUES (?1, ?2, ?3)")
                        .unwrap(),
                    txn.prepare_cached(
                        "INSERT INTO timed (pk, rk, ts, data) VALUES (?1, ?2, ?3, ?4)",
                    )
                    .unwrap(),
                );
                for n in start..start + 100 {
                    if timed {
                        with_time
                            .execute((pk(n), rk(n), ticks + n as i64, value(n)))
                            .unwrap();
                    } else {
                        plain.execute((pk(n), rk(n), value(n))).unwrap();
                    }
                }
            }
            txn.commit().unwrap();
        }
        c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
        drop(c);
        let bytes = bytes_in(&dir).1;
        std::fs::remove_dir_all(&dir).unwrap();
        bytes
    };
    let (plain, timed) = (sqlite_bytes(false), sqlite_bytes(true));
    let per_row = |bytes: u64| bytes as f64 / ROWS as f64;
    (per_row(local_bytes), per_row(plain), per_row(timed))
}

/// [`bytes_at`] for values of several sizes, printed.
fn bytes_by_size(runtime: &tokio::runtime::Runtime, base: &Path) {
    println!(
        "bytes on disk per row by the value's size: tablekit-local / SQLite / SQLite with a Timestamp"
    );
    for len in [20, 60, 100, 140, 150, 160, 200, 300, 500, 1000] {
        let (local, plain, timed) = bytes_at(runtime, base, len);
        println!(
            "  {len:>4} bytes: {local:.0} / {plain:.0} / {timed:.0} ({:.2}x, {:.2}x)",
            local / plain,
            local / timed
        );
    }
}

/// An employee of the main example's kind: six columns of their own, with
/// names, as most rows have.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Employees", rename_all = "PascalCase")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: String,
    name: String,
    email: String,
    title: String,
    hired: tablekit::DateTime,
    salary: f64,
    active: bool,
}

fn employee(n: usize) -> Employee {
    const TITLES: [&str; 4] = ["Engineer", "Manager", "Analyst", "Designer"];
    Employee {
        department: pk(n),
        id: rk(n),
        name: format!("Employee {n}"),
        email: format!("employee{n}@contoso.com"),
        title: TITLES[n % 4].to_owned(),
        hired: tablekit::DateTime::from_ticks(635_700_000_000_000_000 + n as i64 * 10_000_000)
            .unwrap(),
        salary: 50_000.0 + (n % 1000) as f64 * 37.5,
        active: !n.is_multiple_of(7),
    }
}

/// Bytes on disk per employee row: the store, and SQLite's table of the
/// same columns without and with the Timestamp (the time as ticks, the
/// flag as an integer, as SQLite keeps them).
fn employee_bytes(runtime: &tokio::runtime::Runtime, base: &Path) -> (f64, f64, f64) {
    let local = base.join("employees-local");
    {
        let store = LocalStorage::open(&local).unwrap();
        let table = tablekit::Table::<Employee>::new(store.clone());
        runtime.block_on(store.create_table("Employees")).unwrap();
        for start in (0..ROWS).step_by(100) {
            let ops: Vec<_> = (start..start + 100)
                .map(|n| {
                    let entity = tablekit::schema::to_entity(&employee(n)).unwrap();
                    BatchOperation::Insert(entity)
                })
                .collect();
            runtime
                .block_on(store.submit_transaction("Employees", &ops))
                .unwrap();
        }
        drop(table);
        runtime.block_on(store.compact()).unwrap();
    }
    let local_bytes = bytes_in(&local).1;
    let sqlite_bytes = |timed: bool| {
        let dir = base.join(format!("employees-sqlite-{timed}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = sqlite(&dir.join("rows.sqlite"));
        c.execute_batch(
            "CREATE TABLE employees (pk TEXT NOT NULL, rk TEXT NOT NULL, ts INTEGER, \
             name TEXT NOT NULL, email TEXT NOT NULL, title TEXT NOT NULL, hired INTEGER NOT NULL, \
             salary REAL NOT NULL, active INTEGER NOT NULL, PRIMARY KEY (pk, rk)) WITHOUT ROWID; \
             DROP TABLE rows",
        )
        .unwrap();
        let ticks = tablekit::DateTime::now().ticks();
        for start in (0..ROWS).step_by(100) {
            let txn = c.transaction().unwrap();
            {
                let mut insert = txn
                    .prepare_cached(
                        "INSERT INTO employees VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .unwrap();
                for n in start..start + 100 {
                    let e = employee(n);
                    let ts = timed.then_some(ticks + n as i64);
                    insert
                        .execute(rusqlite::params![
                            e.department,
                            e.id,
                            ts,
                            e.name,
                            e.email,
                            e.title,
                            e.hired.ticks(),
                            e.salary,
                            e.active
                        ])
                        .unwrap();
                }
            }
            txn.commit().unwrap();
        }
        c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
        drop(c);
        bytes_in(&dir).1
    };
    let (plain, timed) = (sqlite_bytes(false), sqlite_bytes(true));
    let per_row = |bytes: u64| bytes as f64 / ROWS as f64;
    (per_row(local_bytes), per_row(plain), per_row(timed))
}

/// Bytes of every file in `dir` (SQLite's database and its WAL): their
/// lengths, and what the disk holds for them (allocated blocks). The engine
/// grows its file by doubling it, and the part it has not written yet is a
/// hole in the file that takes no room on the disk.
fn bytes_in(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap())
        .map(|m| (m.len(), m.blocks() * 512))
        .fold((0, 0), |(l, b), (len, blocks)| (l + len, b + blocks))
}

/// Mean time to read one partition's 1,000 rows, over `n` partitions.
fn time_ranges(n: usize, mut read: impl FnMut(usize) -> usize) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        let got = read((i * 37) % (ROWS / PER_PARTITION));
        assert_eq!(got, PER_PARTITION);
    }
    started.elapsed() / n as u32
}

/// How full the engine's leaves are for the loaded rows: why the store
/// takes more bytes per row than SQLite.
fn leaf_fill(local: &Path) {
    use redb::ReadableTableMetadata;
    let engine: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows/staff");
    let db = redb::Database::open(local.join(tablekit_local::FILE_NAME)).unwrap();
    let txn = db.begin_read().unwrap();
    let stats = txn.open_table(engine).unwrap().stats().unwrap();
    let page = 4096;
    let leaves = stats.leaf_pages() * page;
    let all = txn_pages(&db);
    println!(
        "engine: {} leaf pages ({:.0} bytes per row), {} branch pages; entries' bytes {:.0} per row, \
         the leaves {:.0}% full; {:.0} bytes per row in every page the file's data takes",
        stats.leaf_pages(),
        leaves as f64 / ROWS as f64,
        stats.branch_pages(),
        stats.stored_bytes() as f64 / ROWS as f64,
        100.0 * (stats.stored_bytes() + stats.metadata_bytes()) as f64 / leaves as f64,
        (all * page) as f64 / ROWS as f64,
    );
}

/// The pages the engine's data takes (allocated, not free).
fn txn_pages(db: &redb::Database) -> u64 {
    let txn = db.begin_write().unwrap();
    let pages = txn.stats().unwrap().allocated_pages();
    txn.abort().unwrap();
    pages
}

fn ranges(runtime: &tokio::runtime::Runtime, local: &Path, sqlite_path: &Path) {
    use tablekit::backend::sorted::encode_key;
    let engine: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows/staff");
    let mut best = [Duration::MAX; 6];
    for _ in 0..ROUNDS {
        {
            // The least any read returning entities can do: the raw engine's
            // rows made into `Entity` values with nothing decoded or checked
            // (the keys split, the value's last 150 bytes taken as the one
            // property, its name not copied). Likewise for the typed rows.
            let db = redb::Database::open(local.join(tablekit_local::FILE_NAME)).unwrap();
            let floor = |typed: bool| {
                time_ranges(100, |p| {
                    let pk = format!("Dept{p:03}");
                    let key = encode_key(&pk);
                    let (lo, hi) = ([&*key, &[0]].concat(), [&*key, &[1]].concat());
                    let txn = db.begin_read().unwrap();
                    let rows = txn.open_table(engine).unwrap();
                    let parts = |k: &[u8], v: &[u8]| {
                        let at = k.iter().position(|&b| b == 0).unwrap();
                        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                        (
                            text(&k[..at]),
                            text(&k[at + 1..]),
                            text(&v[v.len() - 150..]),
                        )
                    };
                    let range = rows.range::<&[u8]>(lo.as_slice()..hi.as_slice()).unwrap();
                    if typed {
                        let got: Vec<Row> = range
                            .map(|r| {
                                let (k, v) = r.unwrap();
                                let (department, id, data) = parts(k.value(), v.value());
                                Row {
                                    department,
                                    id,
                                    data,
                                }
                            })
                            .collect();
                        return got.len();
                    }
                    let got: Vec<Entity> = range
                        .map(|r| {
                            let (k, v) = r.unwrap();
                            let (pk, rk, data) = parts(k.value(), v.value());
                            Entity::new(pk, rk).with("data", data)
                        })
                        .collect();
                    got.len()
                })
            };
            best[4] = best[4].min(floor(false));
            best[5] = best[5].min(floor(true));
        }
        {
            // The raw engine on the store's own file: the same keys and
            // bytes, copied out, not decoded.
            let db = redb::Database::open(local.join(tablekit_local::FILE_NAME)).unwrap();
            let t = time_ranges(100, |p| {
                let pk = format!("Dept{p:03}");
                let key = encode_key(&pk);
                let (lo, hi) = ([&*key, &[0]].concat(), [&*key, &[1]].concat());
                let txn = db.begin_read().unwrap();
                let rows = txn.open_table(engine).unwrap();
                let got: Vec<(Vec<u8>, Vec<u8>)> = rows
                    .range::<&[u8]>(lo.as_slice()..hi.as_slice())
                    .unwrap()
                    .map(|r| {
                        let (k, v) = r.unwrap();
                        (k.value().to_vec(), v.value().to_vec())
                    })
                    .collect();
                got.len()
            });
            best[0] = best[0].min(t);
        }
        {
            let store = LocalStorage::open(local).unwrap();
            let t = time_ranges(100, |p| {
                let q = Query::new()
                    .filter(tablekit::filter::prop("PartitionKey").eq(format!("Dept{p:03}")));
                runtime
                    .block_on(store.query_entities(TABLE, &q))
                    .unwrap()
                    .entities
                    .len()
            });
            best[1] = best[1].min(t);
            let table = tablekit::Table::<Row>::new(store.clone());
            let t = time_ranges(100, |p| {
                let rows = runtime
                    .block_on(table.query().partition(format!("Dept{p:03}")).collect())
                    .unwrap();
                rows.len()
            });
            best[2] = best[2].min(t);
            // A point read, so the store is used as an application would.
            let e = runtime
                .block_on(store.get_entity(TABLE, &pk(5), &rk(5), &GetOptions::default()))
                .unwrap();
            assert_eq!(e.row_key, rk(5));
        }
        let t = table::sqlite_range_ms(sqlite_path);
        best[3] = best[3].min(Duration::from_secs_f64(t / 1000.0));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "1,000-row range: raw engine {:.3} ms, untyped {:.3} ms ({:.2}x), typed {:.3} ms ({:.2}x), SQLite {:.3} ms",
        ms(best[0]),
        ms(best[1]),
        ms(best[1]) / ms(best[0]),
        ms(best[2]),
        ms(best[2]) / ms(best[0]),
        ms(best[3]),
    );
    println!(
        "the raw engine's rows made into values, nothing decoded or checked: entities {:.3} ms ({:.2}x), \
         typed rows {:.3} ms ({:.2}x)",
        ms(best[4]),
        ms(best[4]) / ms(best[0]),
        ms(best[5]),
        ms(best[5]) / ms(best[0]),
    );
}

/// The child of the reopen measure: loads `rows` rows, says so, then
/// writes until it is killed.
fn child(dir: &Path, rows: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let store = LocalStorage::builder().open(dir).unwrap();
    runtime.block_on(store.create_table(TABLE)).unwrap();
    for start in (0..rows).step_by(100) {
        let ops: Vec<_> = (start..(start + 100).min(rows))
            .map(|n| BatchOperation::Insert(entity(n)))
            .collect();
        runtime
            .block_on(store.submit_transaction(TABLE, &ops))
            .unwrap();
    }
    println!("loaded");
    std::io::stdout().flush().unwrap();
    for n in rows.. {
        runtime
            .block_on(store.insert_entity(TABLE, &entity(n)))
            .unwrap();
    }
}

/// Opens a store of `rows` rows after its process was killed mid-write:
/// the time of the open that checks the file's pages (the default), and of
/// one that does not (`verify_on_open(false)`), each on its own copy of
/// the killed store.
fn reopen_after_kill(base: &Path, rows: usize) -> (Duration, Duration) {
    let dir = base.join("killed");
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("TABLEKIT_BENCH_CHILD", &dir)
        .env("TABLEKIT_BENCH_CHILD_ROWS", rows.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "loaded");
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let copy = base.join("killed-copy");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let started = Instant::now();
    let store = LocalStorage::builder().open(&dir).unwrap();
    let checked = started.elapsed();
    drop(store);
    let started = Instant::now();
    let store = LocalStorage::builder()
        .verify_on_open(false)
        .open(&copy)
        .unwrap();
    let unchecked = started.elapsed();
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&copy).unwrap();
    (checked, unchecked)
}

/// The reopen measure alone (`TABLEKIT_BENCH_REOPEN_ONLY`).
fn reopen(base: &Path) {
    let rows: usize = std::env::var("TABLEKIT_BENCH_REOPEN_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (checked, unchecked) = reopen_after_kill(base, rows);
    println!(
        "reopen after a kill, {rows} rows: {:.1} ms with the check of the file's pages, \
         {:.1} ms without",
        checked.as_secs_f64() * 1000.0,
        unchecked.as_secs_f64() * 1000.0
    );
}

fn main() {
    if let Some(dir) = std::env::var_os("TABLEKIT_BENCH_CHILD") {
        let rows = std::env::var("TABLEKIT_BENCH_CHILD_ROWS").unwrap();
        child(Path::new(&dir), rows.parse().unwrap());
        return;
    }
    let temporary = match std::env::var_os("TABLEKIT_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => {
            let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target");
            std::fs::create_dir_all(&target).unwrap();
            tempfile::tempdir_in(target).unwrap()
        }
    };
    let base = temporary.path();
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    );
    println!("on {}", base.display());
    if std::env::var_os("TABLEKIT_BENCH_REOPEN_ONLY").is_some() {
        reopen(base);
        return;
    }
    if let Ok(n) = std::env::var("TABLEKIT_BENCH_MIX") {
        // Only the bytes per row after the load and after a day's writes.
        mix::report(&runtime, base, n.parse().unwrap_or(400_000));
        return;
    }
    if let Ok(rounds) = std::env::var("TABLEKIT_BENCH_POINTS_ONLY") {
        // Only the point reads against SQLite's, interleaved.
        table::points_report(&runtime, base, rounds.parse().unwrap_or(5).max(5));
        return;
    }
    if let Ok(rounds) = std::env::var("TABLEKIT_BENCH_TABLE") {
        // Only the figures against SQLite, as medians of interleaved rounds.
        table::report(&runtime, base, rounds.parse().unwrap_or(5).max(5));
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_LOAD_ONLY").is_some() {
        // Only the local store's bulk load, for a profiler.
        let r = local_load(&runtime, &base.join("loaded"));
        println!("bulk load: {r:.0} rows/s");
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_RANGES_ONLY").is_some() {
        // Only the local store's ranges, for a profiler.
        let dir = base.join("profiled");
        local_load(&runtime, &dir);
        let store = LocalStorage::open(&dir).unwrap();
        let table = tablekit::Table::<Row>::new(store.clone());
        // Set and not empty: `TABLEKIT_BENCH_TYPED=` reads untyped, as unset does.
        let typed = std::env::var("TABLEKIT_BENCH_TYPED")
            .ok()
            .filter(|typed| !typed.is_empty());
        let n = std::env::var("TABLEKIT_BENCH_RANGES_N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(2000);
        let t = time_ranges(n, |p| {
            let pk = format!("Dept{p:03}");
            if typed.as_deref() == Some("stream") {
                use futures::TryStreamExt;
                let rows: Vec<_> = runtime
                    .block_on(table.query().partition(pk).stream().try_collect())
                    .unwrap();
                return rows.len();
            }
            if typed.is_some() {
                return runtime
                    .block_on(table.query().partition(pk).collect())
                    .unwrap()
                    .len();
            }
            let q = Query::new().filter(tablekit::filter::prop("PartitionKey").eq(pk));
            runtime
                .block_on(store.query_entities(TABLE, &q))
                .unwrap()
                .entities
                .len()
        });
        println!("range: {:.3} ms", t.as_secs_f64() * 1000.0);
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_COMPARE_RANGES").is_some() {
        // Only the 1,000-row ranges beside their baselines.
        let (local, sqlite_dir) = (base.join("local"), base.join("sqlite"));
        local_load(&runtime, &local);
        std::fs::create_dir_all(&sqlite_dir).unwrap();
        sqlite_load(&sqlite_dir.join("rows.sqlite"));
        ranges(&runtime, &local, &sqlite_dir.join("rows.sqlite"));
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_SIZES_ONLY").is_some() {
        bytes_by_size(&runtime, base);
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_ENGINE_BYTES_ONLY").is_some() {
        let bare = engine_bytes(&base.join("engine-bare"), 0);
        let kept = engine_bytes(&base.join("engine-kept"), 12);
        println!("the raw engine: {bare:.0} bytes per row; {kept:.0} with 12 bytes more");
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_EMPLOYEES_ONLY").is_some() {
        let (local, plain, timed) = employee_bytes(&runtime, base);
        println!("employee rows: {local:.0} bytes per row; SQLite {plain:.0}, {timed:.0} timed");
        return;
    }
    if std::env::var_os("TABLEKIT_BENCH_FILL_ONLY").is_some() {
        // Only how full the engine's leaves are after a load.
        let dir = base.join("filled");
        local_load(&runtime, &dir);
        let (length, on_disk) = bytes_in(&dir);
        println!(
            "bytes per row: {:.0} on disk, {:.0} in the file's length",
            on_disk as f64 / ROWS as f64,
            length as f64 / ROWS as f64
        );
        leaf_fill(&dir);
        let store = LocalStorage::open(&dir).unwrap();
        let t = Instant::now();
        runtime.block_on(store.compact()).unwrap();
        drop(store);
        println!(
            "compacted in {:?}: {:.0} bytes per row on disk",
            t.elapsed(),
            bytes_in(&dir).1 as f64 / ROWS as f64
        );
        return;
    }
    if let Ok(writers) = std::env::var("TABLEKIT_BENCH_WRITERS_ONLY") {
        // Only the local store's durable writes, for a profiler.
        let writers = writers.parse().unwrap();
        let (r, per) = local_rate(&runtime, &base.join("profiled"), writers);
        println!("{writers} writers: {r:.0}/s, {per:.1} writes per commit");
        return;
    }

    // Durable single writes: the disk, then 1 and 16 writers on each.
    let mut disk: f64 = 0.0;
    let (mut local1, mut local16, mut sqlite1, mut sqlite16) = (0f64, 0f64, 0f64, 0f64);
    let mut grouped: f64 = 0.0;
    for round in 0..ROUNDS {
        disk = disk.max(disk_rate(base));
        let dir = base.join(format!("writes-{round}"));
        local1 = local1.max(local_rate(&runtime, &dir.join("local1"), 1).0);
        let (r, per) = local_rate(&runtime, &dir.join("local16"), WRITERS);
        if r > local16 {
            (local16, grouped) = (r, per);
        }
        std::fs::create_dir_all(&dir).unwrap();
        sqlite1 = sqlite1.max(sqlite_rate(&dir.join("one.sqlite"), 1));
        sqlite16 = sqlite16.max(sqlite_rate(&dir.join("many.sqlite"), WRITERS));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    println!("disk: {disk:.0} appends+fdatasync per second");
    println!(
        "durable single writes, 1 writer: tablekit-local {local1:.0}/s ({:.2}x the disk), SQLite {sqlite1:.0}/s ({:.2}x)",
        local1 / disk,
        local1 / sqlite1
    );
    println!(
        "durable single writes, {WRITERS} writers: tablekit-local {local16:.0}/s ({grouped:.1} writes per commit), SQLite {sqlite16:.0}/s: {:.2}x SQLite",
        local16 / sqlite16
    );

    // Bulk load, then bytes per row, then ranges on what was loaded.
    let (local_dir, sqlite_dir) = (base.join("local"), base.join("sqlite"));
    let (mut local_bulk, mut sqlite_bulk) = (0f64, 0f64);
    for round in 0..ROUNDS {
        if round > 0 {
            std::fs::remove_dir_all(&local_dir).unwrap();
            std::fs::remove_dir_all(&sqlite_dir).unwrap();
        }
        local_bulk = local_bulk.max(local_load(&runtime, &local_dir));
        std::fs::create_dir_all(&sqlite_dir).unwrap();
        sqlite_bulk = sqlite_bulk.max(sqlite_load(&sqlite_dir.join("rows.sqlite")));
    }
    println!(
        "bulk load in 100-row transactions: tablekit-local {local_bulk:.0} rows/s, SQLite {sqlite_bulk:.0} rows/s ({:.2}x)",
        local_bulk / sqlite_bulk
    );
    // Every file of the store's directory (the engine's and the journal's).
    let local_bytes = bytes_in(&local_dir);
    let compacted = {
        let copy = base.join("compacted");
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::copy(
            local_dir.join(tablekit_local::FILE_NAME),
            copy.join(tablekit_local::FILE_NAME),
        )
        .unwrap();
        let store = LocalStorage::open(&copy).unwrap();
        runtime.block_on(store.compact()).unwrap();
        drop(store);
        let bytes = bytes_in(&copy);
        std::fs::remove_dir_all(&copy).unwrap();
        bytes
    };
    let sqlite_bytes = bytes_in(&sqlite_dir);
    let timed_bytes = sqlite_with_timestamps(&base.join("sqlite-timed"));
    let per_row = |bytes: u64| bytes as f64 / ROWS as f64;
    let ratio = |a: u64, b: u64| a as f64 / b as f64;
    println!(
        "bytes on disk per row: tablekit-local {:.0}, SQLite {:.0} ({:.2}x); after compact() {:.0} ({:.2}x); \
         the files' lengths: tablekit-local {:.0}, SQLite {:.0} ({:.2}x), after compact() {:.0}",
        per_row(local_bytes.1),
        per_row(sqlite_bytes.1),
        ratio(local_bytes.1, sqlite_bytes.1),
        per_row(compacted.1),
        ratio(compacted.1, sqlite_bytes.1),
        per_row(local_bytes.0),
        per_row(sqlite_bytes.0),
        ratio(local_bytes.0, sqlite_bytes.0),
        per_row(compacted.0),
    );
    println!(
        "SQLite with what every row of the store also keeps, its Timestamp (an 8-byte integer): \
         {:.0} bytes per row; tablekit-local after compact() {:.2}x that",
        per_row(timed_bytes),
        ratio(compacted.1, timed_bytes),
    );
    println!(
        "the raw engine with the same keys and values alone: {:.0} bytes on disk per row; \
         with the 12 bytes every row of the store must keep (its write time and checksum): {:.0}",
        engine_bytes(&base.join("engine-bare"), 0),
        engine_bytes(&base.join("engine-kept"), 12),
    );
    bytes_by_size(&runtime, base);
    let (local, plain, timed) = employee_bytes(&runtime, base);
    println!(
        "employee rows (six named columns): tablekit-local {local:.0} bytes on disk per row after \
         compact(), SQLite {plain:.0} ({:.2}x), {timed:.0} with a Timestamp ({:.2}x)",
        local / plain,
        local / timed,
    );
    leaf_fill(&local_dir);
    ranges(&runtime, &local_dir, &sqlite_dir.join("rows.sqlite"));

    reopen(base);
}
