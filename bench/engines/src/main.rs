//! redb, fjall and SQLite doing tablekit-local's key/value work, one after
//! the other in one run (SQLite as the bench against it runs it: WAL,
//! `synchronous=FULL`, a `WITHOUT ROWID` table of byte keys and values): 100,000 rows of ~130 bytes in 100 partitions loaded in
//! durable transactions of 100, then point reads, 1,000-row partition
//! ranges, durable single inserts, durable transactions of 100 (each key
//! read first, as an insert checks), the time to open the store again, and
//! its size on disk.

use std::path::Path;
use std::time::{Duration, Instant};

const ROWS: usize = 100_000;
const PER_PARTITION: usize = 1_000;

fn key(n: usize) -> Vec<u8> {
    format!("Dept{:03}\0EMP_{:010}", n / PER_PARTITION, n).into_bytes()
}

fn value(n: usize) -> Vec<u8> {
    let mut v = vec![7u8; 8];
    v.extend_from_slice(format!("\x05_Kind\x00\x03EMP\x04Name\x00\x0cEmployee {n}\x05Email\x00\x18employee{n}@contoso.com\x05Hired\x05").as_bytes());
    v.extend_from_slice(&[1u8; 8]);
    v
}

/// The work, over one engine.
trait Engine {
    fn name(&self) -> &'static str;
    /// Writes `rows` in one durable, atomic transaction, reading each key first.
    fn write(&self, rows: &[(Vec<u8>, Vec<u8>)]);
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    fn range(&self, lo: &[u8], hi: &[u8]) -> usize;
}

mod redb_engine {
    use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
    const T: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("rows");
    pub struct Redb(pub Database);
    impl Redb {
        pub fn open(dir: &std::path::Path) -> Redb {
            Redb(Database::create(dir.join("db.redb")).unwrap())
        }
    }
    impl super::Engine for Redb {
        fn name(&self) -> &'static str {
            "redb 4.6"
        }
        fn write(&self, rows: &[(Vec<u8>, Vec<u8>)]) {
            let txn = self.0.begin_write().unwrap();
            {
                let mut t = txn.open_table(T).unwrap();
                for (k, v) in rows {
                    std::hint::black_box(t.get(k.as_slice()).unwrap().is_some());
                    t.insert(k.as_slice(), v.as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
            let txn = self.0.begin_read().unwrap();
            let t = txn.open_table(T).unwrap();
            t.get(key).unwrap().map(|v| v.value().to_vec())
        }
        fn range(&self, lo: &[u8], hi: &[u8]) -> usize {
            let txn = self.0.begin_read().unwrap();
            let t = txn.open_table(T).unwrap();
            t.range::<&[u8]>(lo..hi)
                .unwrap()
                .map(|r| {
                    let (k, v) = r.unwrap();
                    k.value().len() + v.value().len()
                })
                .count()
        }
    }
}

mod fjall_engine {
    use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
    pub struct Fjall(pub Database, pub Keyspace);
    impl Fjall {
        pub fn open(dir: &std::path::Path) -> Fjall {
            let db = Database::builder(dir.join("fjall")).open().unwrap();
            let ks = db.keyspace("rows", KeyspaceCreateOptions::default).unwrap();
            Fjall(db, ks)
        }
    }
    impl super::Engine for Fjall {
        fn name(&self) -> &'static str {
            "fjall 3.1"
        }
        fn write(&self, rows: &[(Vec<u8>, Vec<u8>)]) {
            let mut batch = self.0.batch().durability(Some(PersistMode::SyncAll));
            for (k, v) in rows {
                std::hint::black_box(self.1.get(k).unwrap().is_some());
                batch.insert(&self.1, k.clone(), v.clone());
            }
            batch.commit().unwrap();
        }
        fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
            self.1.get(key).unwrap().map(|v| v.to_vec())
        }
        fn range(&self, lo: &[u8], hi: &[u8]) -> usize {
            self.1
                .range(lo.to_vec()..hi.to_vec())
                .map(|kv| {
                    let (k, v) = kv.into_inner().unwrap();
                    k.len() + v.len()
                })
                .count()
        }
    }
}

mod sqlite_engine {
    use rusqlite::{Connection, OptionalExtension, params};
    pub struct Sqlite(pub Connection);
    impl Sqlite {
        pub fn open(dir: &std::path::Path) -> Sqlite {
            let c = Connection::open(dir.join("rows.sqlite")).unwrap();
            c.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
                 CREATE TABLE IF NOT EXISTS rows (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;",
            )
            .unwrap();
            Sqlite(c)
        }
    }
    impl super::Engine for Sqlite {
        fn name(&self) -> &'static str {
            "SQLite 3.50"
        }
        fn write(&self, rows: &[(Vec<u8>, Vec<u8>)]) {
            let txn = self.0.unchecked_transaction().unwrap();
            {
                let mut exists = txn
                    .prepare_cached("SELECT 1 FROM rows WHERE k = ?1")
                    .unwrap();
                let mut put = txn
                    .prepare_cached("INSERT OR REPLACE INTO rows (k, v) VALUES (?1, ?2)")
                    .unwrap();
                for (k, v) in rows {
                    let found: Option<i64> = exists
                        .query_row(params![k], |r| r.get(0))
                        .optional()
                        .unwrap();
                    std::hint::black_box(found.is_some());
                    put.execute(params![k, v]).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
            let mut get = self
                .0
                .prepare_cached("SELECT v FROM rows WHERE k = ?1")
                .unwrap();
            get.query_row(params![key], |r| r.get(0))
                .optional()
                .unwrap()
        }
        fn range(&self, lo: &[u8], hi: &[u8]) -> usize {
            let mut range = self
                .0
                .prepare_cached("SELECT k, v FROM rows WHERE k >= ?1 AND k < ?2 ORDER BY k")
                .unwrap();
            let mut rows = range.query(params![lo, hi]).unwrap();
            let mut count = 0;
            while let Some(row) = rows.next().unwrap() {
                let k = row.get_ref(0).unwrap().as_blob().unwrap();
                let v = row.get_ref(1).unwrap().as_blob().unwrap();
                std::hint::black_box(k.len() + v.len());
                count += 1;
            }
            count
        }
    }
}

fn size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            size(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

fn per_op(started: Instant, n: usize) -> String {
    let each = started.elapsed() / n as u32;
    if each < Duration::from_millis(1) {
        format!("{:.1} µs", each.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", each.as_secs_f64() * 1e3)
    }
}

fn run(engine: &dyn Engine) {
    let load = Instant::now();
    let all: Vec<(Vec<u8>, Vec<u8>)> = (0..ROWS).map(|n| (key(n), value(n))).collect();
    for chunk in all.chunks(100) {
        engine.write(chunk);
    }
    let load = load.elapsed();
    let mut rng = fastrand::Rng::with_seed(1);
    let reads = 20_000;
    let started = Instant::now();
    for _ in 0..reads {
        assert!(engine.get(&key(rng.usize(..ROWS))).is_some());
    }
    let read = per_op(started, reads);
    let started = Instant::now();
    for p in 0..50 {
        let lo = format!("Dept{p:03}\0").into_bytes();
        let hi = format!("Dept{p:03}\x01").into_bytes();
        assert_eq!(engine.range(&lo, &hi), PER_PARTITION);
    }
    let range = per_op(started, 50);
    let started = Instant::now();
    for n in 0..300 {
        engine.write(&[(key(ROWS + n), value(n))]);
    }
    let single = per_op(started, 300);
    let started = Instant::now();
    for b in 0..50 {
        let rows: Vec<_> = (0..100)
            .map(|k| (key(ROWS * 2 + b * 100 + k), value(k)))
            .collect();
        engine.write(&rows);
    }
    let txn = per_op(started, 50);
    println!(
        "| {} | {:.1} s | {read} | {range} | {single} | {txn} |",
        engine.name(),
        load.as_secs_f64()
    );
}

fn main() {
    println!(
        "| engine | load 100,000 rows | point read | 1,000-row range | durable insert | 100-row transaction |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let redb_dir = tempfile::tempdir().unwrap();
    let fjall_dir = tempfile::tempdir().unwrap();
    let sqlite_dir = tempfile::tempdir().unwrap();
    {
        let engine = redb_engine::Redb::open(redb_dir.path());
        run(&engine);
    }
    {
        let engine = fjall_engine::Fjall::open(fjall_dir.path());
        run(&engine);
    }
    {
        let engine = sqlite_engine::Sqlite::open(sqlite_dir.path());
        run(&engine);
    }
    let started = Instant::now();
    let engine = redb_engine::Redb::open(redb_dir.path());
    let redb_open = started.elapsed();
    assert!(super_get(&engine));
    drop(engine);
    let started = Instant::now();
    let engine = fjall_engine::Fjall::open(fjall_dir.path());
    let fjall_open = started.elapsed();
    assert!(super_get(&engine));
    drop(engine);
    let started = Instant::now();
    let engine = sqlite_engine::Sqlite::open(sqlite_dir.path());
    let sqlite_open = started.elapsed();
    assert!(super_get(&engine));
    drop(engine);
    println!(
        "\nopen again: redb {:.1} ms, fjall {:.1} ms, SQLite {:.1} ms; on disk: redb {} bytes, fjall {} bytes, SQLite {} bytes",
        redb_open.as_secs_f64() * 1e3,
        fjall_open.as_secs_f64() * 1e3,
        sqlite_open.as_secs_f64() * 1e3,
        size(redb_dir.path()),
        size(fjall_dir.path()),
        size(sqlite_dir.path())
    );
}

fn super_get(engine: &dyn Engine) -> bool {
    engine.get(&key(12_345)).is_some()
}
