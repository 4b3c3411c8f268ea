//! The local backend beside the in-memory backend and beside the raw engine
//! (redb) doing the same key/value work: the same keys, the same value
//! bytes, one engine transaction per operation. Each figure is a ratio from
//! one run. Rows are the main example's employee.
//!
//! Also printed: durable single inserts per second, bytes on disk per
//! employee, and the time to open a store of 1,000,000 rows
//! (`TABLEKIT_BENCH_OPEN_ROWS` sets the count).
//!
//! `cargo bench -p tablekit-local --bench local`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use tablekit::TableBackendExt;
use tablekit::{
    BatchOperation, DateTime, Entity, GetOptions, Query, TableBackend, TableEntity, UpdateMode,
};
use tablekit_local::LocalStorage;
use tablekit_mem::MemBackend;

const TABLE: &str = "Staff";
const ROWS: usize = 100_000;
const PER_PARTITION: usize = 1_000;
const RAW: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("raw");

/// The main example's employee.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "EMP", collection, rename_all = "PascalCase")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    email: String,
    hired: DateTime,
}

fn employee(n: usize) -> Entity {
    let e = Employee {
        department: format!("Dept{:03}", n / PER_PARTITION),
        id: n as u32,
        name: format!("Employee {n}"),
        email: format!("employee{n}@contoso.com"),
        hired: DateTime::parse("2015-06-15T09:00:00Z").unwrap(),
    };
    tablekit::schema::to_entity(&e).unwrap()
}

fn now<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// The raw engine's key and value for a row: bytes of the size the backend
/// keeps (PartitionKey, a zero byte, RowKey; room for the checksum, the
/// write time, then each property's name as a number and its value in the
/// compact form), made here without the backend.
fn raw_row(e: &Entity) -> (Vec<u8>, Vec<u8>) {
    use tablekit::backend::sorted::{encode_key, encode_value, put_varint};
    let key = [
        &*encode_key(&e.partition_key),
        &[0],
        &*encode_key(&e.row_key),
    ]
    .concat();
    let mut value = vec![0; 4];
    value.extend_from_slice(&DateTime::now().ticks().to_le_bytes());
    put_varint(&mut value, e.properties.len() as u64);
    for (id, (_, v)) in e.properties.iter().enumerate() {
        put_varint(&mut value, (id as u64) << 1);
        encode_value(v, &mut value);
    }
    (key, value)
}

fn load(local: &LocalStorage, mem: &MemBackend, raw: &Database) {
    now(local.create_table(TABLE)).unwrap();
    now(mem.create_table(TABLE)).unwrap();
    let rows: Vec<Entity> = (0..ROWS).map(employee).collect();
    for chunk in rows.chunks(100) {
        let ops: Vec<_> = chunk.iter().cloned().map(BatchOperation::Insert).collect();
        now(local.submit_transaction(TABLE, &ops)).unwrap();
        now(mem.submit_transaction(TABLE, &ops)).unwrap();
        let txn = raw.begin_write().unwrap();
        {
            let mut t = txn.open_table(RAW).unwrap();
            for e in chunk {
                let (k, v) = raw_row(e);
                t.insert(k.as_slice(), v.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
}

fn benches(c: &mut Criterion) {
    let local = LocalStorage::temporary().unwrap();
    let mem = MemBackend::new();
    let raw_dir = tempfile::tempdir().unwrap();
    let raw = Database::create(raw_dir.path().join("raw.redb")).unwrap();
    load(&local, &mem, &raw);
    let mut rng = fastrand::Rng::with_seed(7);
    let keys: Vec<Entity> = (0..4096).map(|_| employee(rng.usize(..ROWS))).collect();
    let mut i = 0;

    let mut group = c.benchmark_group("point_read");
    group.bench_function("local", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            let e = &keys[i];
            black_box(
                now(local.get_entity(TABLE, &e.partition_key, &e.row_key, &GetOptions::default()))
                    .unwrap(),
            )
        })
    });
    group.bench_function("mem", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            let e = &keys[i];
            black_box(
                now(mem.get_entity(TABLE, &e.partition_key, &e.row_key, &GetOptions::default()))
                    .unwrap(),
            )
        })
    });
    group.bench_function("raw_redb", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            let (k, _) = raw_row(&keys[i]);
            let txn = raw.begin_read().unwrap();
            let t = txn.open_table(RAW).unwrap();
            black_box(t.get(k.as_slice()).unwrap().unwrap().value().to_vec())
        })
    });
    group.finish();

    let mut group = c.benchmark_group("range_1000");
    let partition = |n: usize| format!("Dept{:03}", n % (ROWS / PER_PARTITION));
    let mut p = 0;
    group.bench_function("local", |b| {
        b.iter(|| {
            p += 1;
            let q = Query::new().filter(tablekit::filter::prop("PartitionKey").eq(partition(p)));
            let page = now(local.query_entities(TABLE, &q)).unwrap();
            assert_eq!(page.entities.len(), PER_PARTITION);
            black_box(page)
        })
    });
    group.bench_function("mem", |b| {
        b.iter(|| {
            p += 1;
            let q = Query::new().filter(tablekit::filter::prop("PartitionKey").eq(partition(p)));
            black_box(now(mem.query_entities(TABLE, &q)).unwrap())
        })
    });
    group.bench_function("raw_redb", |b| {
        b.iter(|| {
            p += 1;
            let pk = partition(p);
            let (lo, hi) = (
                [pk.as_bytes(), &[0]].concat(),
                [pk.as_bytes(), &[1]].concat(),
            );
            let txn = raw.begin_read().unwrap();
            let t = txn.open_table(RAW).unwrap();
            let rows: Vec<(Vec<u8>, Vec<u8>)> = t
                .range::<&[u8]>(lo.as_slice()..hi.as_slice())
                .unwrap()
                .map(|r| {
                    let (k, v) = r.unwrap();
                    (k.value().to_vec(), v.value().to_vec())
                })
                .collect();
            assert_eq!(rows.len(), PER_PARTITION);
            black_box(rows)
        })
    });
    group.finish();

    // Durable writes: each one is on disk when it returns.
    let mut group = c.benchmark_group("insert");
    group.sample_size(30);
    let mut next = ROWS;
    group.bench_function("local", |b| {
        b.iter_batched(
            || {
                next += 1;
                employee(next)
            },
            |e| now(local.insert_entity(TABLE, &e)).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("mem", |b| {
        b.iter_batched(
            || {
                next += 1;
                employee(next)
            },
            |e| now(mem.insert_entity(TABLE, &e)).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("raw_redb", |b| {
        b.iter_batched(
            || {
                next += 1;
                raw_row(&employee(next))
            },
            |(k, v)| {
                let txn = raw.begin_write().unwrap();
                {
                    let mut t = txn.open_table(RAW).unwrap();
                    t.insert(k.as_slice(), v.as_slice()).unwrap();
                }
                txn.commit().unwrap();
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut group = c.benchmark_group("upsert");
    group.sample_size(30);
    group.bench_function("local", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            now(local.upsert_entity(TABLE, &keys[i], UpdateMode::Replace)).unwrap()
        })
    });
    group.bench_function("mem", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            now(mem.upsert_entity(TABLE, &keys[i], UpdateMode::Replace)).unwrap()
        })
    });
    group.bench_function("raw_redb", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            let (k, v) = raw_row(&keys[i]);
            let txn = raw.begin_write().unwrap();
            {
                let mut t = txn.open_table(RAW).unwrap();
                // Read the old row, as an upsert decides on it.
                let old = t.get(k.as_slice()).unwrap().map(|g| g.value().len());
                black_box(old);
                t.insert(k.as_slice(), v.as_slice()).unwrap();
            }
            txn.commit().unwrap();
        })
    });
    group.finish();

    let mut group = c.benchmark_group("transaction_100");
    group.sample_size(30);
    let batch = |p: usize| -> Vec<Entity> {
        (0..100)
            .map(|k| {
                let mut e = employee(k);
                e.partition_key = format!("Batch{p:06}");
                e
            })
            .collect()
    };
    let mut b_no = 0;
    group.bench_function("local", |b| {
        b.iter_batched(
            || {
                b_no += 1;
                batch(b_no)
                    .into_iter()
                    .map(BatchOperation::Insert)
                    .collect::<Vec<_>>()
            },
            |ops| now(local.submit_transaction(TABLE, &ops)).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("mem", |b| {
        b.iter_batched(
            || {
                b_no += 1;
                batch(b_no)
                    .into_iter()
                    .map(BatchOperation::Insert)
                    .collect::<Vec<_>>()
            },
            |ops| now(mem.submit_transaction(TABLE, &ops)).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("raw_redb", |b| {
        b.iter_batched(
            || {
                b_no += 1;
                batch(b_no).iter().map(raw_row).collect::<Vec<_>>()
            },
            |rows| {
                let txn = raw.begin_write().unwrap();
                {
                    let mut t = txn.open_table(RAW).unwrap();
                    for (k, v) in &rows {
                        // Insert-only: each key checked absent first.
                        black_box(t.get(k.as_slice()).unwrap().is_none());
                        t.insert(k.as_slice(), v.as_slice()).unwrap();
                    }
                }
                txn.commit().unwrap();
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Durable inserts per second, bytes on disk per employee, and the time to
/// open a store of many rows.
fn figures() {
    let store = LocalStorage::temporary().unwrap();
    now(store.create_table(TABLE)).unwrap();
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(3) {
        now(store.insert_entity(TABLE, &employee(n))).unwrap();
        n += 1;
    }
    println!(
        "durable single inserts: {:.0} per second (each synced to disk)",
        n as f64 / started.elapsed().as_secs_f64()
    );

    let rows: usize = std::env::var("TABLEKIT_BENCH_OPEN_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let load = Instant::now();
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        now(store.create_table(TABLE)).unwrap();
        for start in (0..rows).step_by(100) {
            let ops: Vec<_> = (start..(start + 100).min(rows))
                .map(|n| BatchOperation::Insert(employee(n)))
                .collect();
            now(store.submit_transaction(TABLE, &ops)).unwrap();
        }
    }
    let file = dir.path().join(tablekit_local::FILE_NAME);
    let bytes = std::fs::metadata(&file).unwrap().len();
    let json: usize = tablekit::json::to_string(&employee(123_456)).len();
    println!(
        "{rows} employees loaded in {:.1} s; {} bytes on disk, {:.0} per employee (its wire JSON: {json} bytes)",
        load.elapsed().as_secs_f64(),
        bytes,
        bytes as f64 / rows as f64
    );
    let open = Instant::now();
    let store = LocalStorage::open(dir.path()).unwrap();
    let opened = open.elapsed();
    let first = now(store.get_entity(
        TABLE,
        "Dept000",
        &employee(0).row_key,
        &GetOptions::default(),
    ));
    println!(
        "open a store of {rows} rows: {:.1} ms (first read {})",
        opened.as_secs_f64() * 1000.0,
        if first.is_ok() { "ok" } else { "failed" }
    );
}

criterion_group!(local_benches, benches);

fn main() {
    local_benches();
    figures();
    Criterion::default().configure_from_args().final_summary();
}
