//! The in-memory backend at 1,000,000 entities of ten properties, beside a plain
//! `BTreeMap` holding the same keys and values doing the same work, so each
//! figure is a ratio from one run.
//!
//! `cargo bench -p tablekit-mem --bench mem_backend`

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use support::*;
use tablekit::TableBackendExt;
use tablekit::filter::Filter;
use tablekit::{BatchOperation, Entity, GetOptions, Query, TableBackend, UpdateMode};

fn benches(c: &mut Criterion) {
    let backend = load_mem();
    let mut baseline = load_baseline();
    let mut rng = fastrand::Rng::with_seed(1);
    let mut pick = move || (rng.usize(0..PARTITIONS), rng.usize(0..ROWS_PER_PARTITION));

    let mut group = c.benchmark_group("point_get");
    let keys: Vec<(String, String)> = (0..4096)
        .map(|_| pick())
        .map(|(p, r)| (pk(p), rk(r)))
        .collect();
    let mut i = 0;
    group.bench_function("mem", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            let (p, r) = &keys[i];
            black_box(now(backend.get_entity(TABLE, p, r, &GetOptions::default())).expect("get"))
        })
    });
    group.bench_function("btreemap", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            let (p, r) = &keys[i];
            black_box(baseline_get(&baseline, p, r).expect("get"))
        })
    });
    group.finish();

    // Inserts of new rows into fresh partitions beside the million. Both sides
    // take the entity by reference and store a copy; building the inputs and
    // dropping them are outside the timed loop.
    let mut group = c.benchmark_group("insert");
    let fresh = |from: usize, count: u64| -> Vec<Entity> {
        (from..from + count as usize)
            .map(|n| {
                let mut e = entity(n % PARTITIONS, n);
                e.partition_key = format!("new{:06}", n / 1000);
                e
            })
            .collect()
    };
    let mut next = 0usize;
    group.bench_function("mem", |b| {
        b.iter_custom(|iters| {
            let inputs = fresh(next, iters);
            next += iters as usize;
            let start = Instant::now();
            for e in &inputs {
                black_box(now(backend.insert_entity(TABLE, e)).expect("insert"));
            }
            start.elapsed()
        })
    });
    let mut next = 0usize;
    group.bench_function("btreemap", |b| {
        b.iter_custom(|iters| {
            let inputs = fresh(next, iters);
            next += iters as usize;
            let start = Instant::now();
            for e in &inputs {
                let props: Vec<_> = e
                    .properties
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect();
                let partition = baseline.entry(e.partition_key.clone()).or_default();
                black_box(partition.insert(e.row_key.clone(), props));
            }
            start.elapsed()
        })
    });
    group.finish();

    // Insert-or-replace of existing rows.
    let mut group = c.benchmark_group("upsert");
    let updates: Vec<Entity> = (0..4096)
        .map(|_| pick())
        .map(|(p, r)| entity(p, r).with("Age", 99))
        .collect();
    group.bench_function("mem", |b| {
        b.iter(|| {
            i = (i + 1) % updates.len();
            black_box(
                now(backend.upsert_entity(TABLE, &updates[i], UpdateMode::Replace))
                    .expect("upsert"),
            )
        })
    });
    group.bench_function("btreemap", |b| {
        b.iter(|| {
            i = (i + 1) % updates.len();
            let e = &updates[i];
            let props: Vec<_> = e
                .properties
                .iter()
                .map(|(k, v)| (k.to_owned(), v.clone()))
                .collect();
            let partition = baseline.entry(e.partition_key.clone()).or_default();
            black_box(partition.insert(e.row_key.clone(), props))
        })
    });
    group.finish();

    // A whole 1,000-row partition, read as a RowKey range.
    let mut group = c.benchmark_group("range_scan_1000");
    group.bench_function("mem", |b| {
        b.iter(|| {
            let (p, _) = pick();
            let range = Filter::partition_key().eq(pk(p))
                & Filter::row_key().ge(rk(0))
                & Filter::row_key().le(rk(999));
            let page =
                now(backend.query_entities(TABLE, &Query::new().filter(range))).expect("query");
            assert_eq!(page.entities.len(), 1000);
            black_box(page)
        })
    });
    group.bench_function("btreemap", |b| {
        b.iter(|| {
            let (p, _) = pick();
            let pk = pk(p);
            let (lo, hi) = (rk(0), rk(999));
            let rows: Vec<Entity> = baseline[&pk]
                .range(lo..=hi)
                .map(|(rk, props)| {
                    let mut e = Entity::new(pk.as_str(), rk.as_str());
                    e.properties = props.iter().cloned().collect();
                    e
                })
                .collect();
            assert_eq!(rows.len(), 1000);
            black_box(rows)
        })
    });
    group.finish();

    // One atomic batch of 100 insert-or-replace operations in one partition.
    let mut group = c.benchmark_group("batch_100");
    let batches: Vec<Vec<BatchOperation>> = (0..64)
        .map(|b| {
            let p = b * 7 % PARTITIONS;
            (0..100)
                .map(|r| BatchOperation::Upsert {
                    entity: entity(p, r * 3).with("Age", 77),
                    mode: UpdateMode::Replace,
                })
                .collect()
        })
        .collect();
    group.bench_function("mem", |b| {
        b.iter(|| {
            i = (i + 1) % batches.len();
            black_box(now(backend.submit_transaction(TABLE, &batches[i])).expect("batch"))
        })
    });
    group.bench_function("btreemap", |b| {
        b.iter(|| {
            i = (i + 1) % batches.len();
            for op in &batches[i] {
                let e = op.entity().expect("upserts carry entities");
                let props: Vec<_> = e
                    .properties
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect();
                let partition = baseline.entry(e.partition_key.clone()).or_default();
                black_box(partition.insert(e.row_key.clone(), props));
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = mem_backend;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(mem_backend);
