//! Changing an entity, measured beside its baselines in one run:
//! - reading a version-1 row through the version-2 type (aliases, a default
//!   and the typed upgrade) beside reading a version-2 row as it is: the
//!   target is at most 1.3×;
//! - migrating 10,000 version-1 rows (`Table::migrate`, unpaced) beside the
//!   bulk writer upserting 10,000 version-2 rows (unpaced): the target is at
//!   least 0.5× the bulk writer's rows per second.
//!
//! `cargo bench -p tablekit --bench versions`

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use tablekit::{Table, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Products", kind = "PROD", version = 1)]
struct ProductV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: u32,
    name: String,
    price: u32,
    #[tablekit(rename = "Colour")]
    colour: String,
}

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Products", kind = "PROD", version = 2, upgrade_from = ProductV1)]
struct Product {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: u32,
    name: String,
    price_cents: u64,
    #[tablekit(rename = "Color", alias = "Colour")]
    color: String,
    #[tablekit(default)]
    stock: u32,
}

impl From<ProductV1> for Product {
    fn from(v1: ProductV1) -> Product {
        Product {
            shop: v1.shop,
            sku: v1.sku,
            name: v1.name,
            price_cents: u64::from(v1.price) * 100,
            color: v1.colour,
            stock: 0,
        }
    }
}

fn v1(shop: usize, sku: u32) -> ProductV1 {
    ProductV1 {
        shop: format!("shop{shop:03}"),
        sku,
        name: format!("Product {sku}"),
        price: sku % 1000,
        colour: "red".into(),
    }
}

use common::now;

fn reads(c: &mut Criterion) {
    let backend = MemBackend::new();
    let old: Table<ProductV1> = Table::new(backend.clone());
    let new: Table<Product> = Table::new(backend);
    now(new.create_if_missing()).unwrap();
    for sku in 0..1000 {
        now(old.insert(&v1(0, sku))).unwrap();
        now(new.insert(&Product::from(v1(1, sku)))).unwrap();
    }
    let mut group = c.benchmark_group("read");
    let mut i = 0u32;
    group.bench_function("version_1_upgraded", |b| {
        b.iter(|| {
            i = (i + 1) % 1000;
            black_box(now(new.get("shop000", i)).unwrap().unwrap())
        })
    });
    group.bench_function("version_2_as_is", |b| {
        b.iter(|| {
            i = (i + 1) % 1000;
            black_box(now(new.get("shop001", i)).unwrap().unwrap())
        })
    });
    group.finish();
}

const ROWS: u32 = 10_000;

fn rewrites(c: &mut Criterion) {
    let mut group = c.benchmark_group("rewrite_10000");
    group.sample_size(10);
    group.bench_function("migrate", |b| {
        b.iter_batched(
            || {
                let backend = MemBackend::new();
                let old: Table<ProductV1> = Table::new(backend.clone());
                now(old.create_if_missing()).unwrap();
                let rows: Vec<ProductV1> = (0..ROWS).map(|n| v1((n / 100) as usize, n)).collect();
                let report = now(old.bulk().unpaced().insert(&rows));
                assert!(report.is_complete());
                Table::<Product>::new(backend)
            },
            |new| {
                let report = now(new.migrate().unpaced().run()).unwrap();
                assert_eq!(report.upgraded, ROWS as usize);
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("bulk_writer", |b| {
        b.iter_batched(
            || {
                let new: Table<Product> = Table::new(MemBackend::new());
                now(new.create_if_missing()).unwrap();
                let rows: Vec<Product> = (0..ROWS)
                    .map(|n| Product::from(v1((n / 100) as usize, n)))
                    .collect();
                (new, rows)
            },
            |(new, rows)| {
                let report = now(new.bulk().unpaced().upsert(&rows));
                assert!(report.is_complete());
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, reads, rewrites);

fn main() {
    benches();
    // One more timing of each rewrite, as rows per second.
    let backend = MemBackend::new();
    let old: Table<ProductV1> = Table::new(backend.clone());
    now(old.create_if_missing()).unwrap();
    let rows: Vec<ProductV1> = (0..ROWS).map(|n| v1((n / 100) as usize, n)).collect();
    assert!(now(old.bulk().unpaced().insert(&rows)).is_complete());
    let new: Table<Product> = Table::new(backend);
    // What a migration must read, alone: every row, upgraded.
    let started = Instant::now();
    let read = now(new.query().collect()).unwrap().len();
    let reading = started.elapsed();
    assert_eq!(read, ROWS as usize);
    let started = Instant::now();
    now(new.migrate().unpaced().run()).unwrap();
    let migrate = started.elapsed();
    let new: Table<Product> = Table::new(MemBackend::new());
    now(new.create_if_missing()).unwrap();
    let rows: Vec<Product> = (0..ROWS)
        .map(|n| Product::from(v1((n / 100) as usize, n)))
        .collect();
    let started = Instant::now();
    assert!(now(new.bulk().unpaced().upsert(&rows)).is_complete());
    let bulk = started.elapsed();
    let rate = |d: Duration| f64::from(ROWS) / d.as_secs_f64();
    println!(
        "migrate: {:.0} rows/s; bulk writer: {:.0} rows/s; ratio {:.2} (reading the rows alone: {:.0} rows/s, so reading and writing at best {:.2})",
        rate(migrate),
        rate(bulk),
        rate(migrate) / rate(bulk),
        rate(reading),
        rate(reading + bulk) / rate(bulk),
    );
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
