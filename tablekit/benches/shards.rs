//! A read of one logical partition of 10,000 rows: spread over 8 shards and
//! merged in RowKey order, against the same rows in one partition, on the
//! in-memory backend.
//!
//! `cargo bench -p tablekit --bench shards`

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use futures::executor::block_on;
use tablekit::{Table, TableBackend, TableEntity};
use tablekit_mem::MemBackend;

const ROWS: u32 = 10_000;

#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Sharded", kind = "HIT", shards = 8)]
struct Sharded {
    #[tablekit(partition_key)]
    page: String,
    #[tablekit(row_key)]
    seq: u32,
    user: String,
    millis: i64,
}

#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Single", kind = "HIT")]
struct Single {
    #[tablekit(partition_key)]
    page: String,
    #[tablekit(row_key)]
    seq: u32,
    user: String,
    millis: i64,
}

fn benches(c: &mut Criterion) {
    let backend = MemBackend::new();
    block_on(backend.create_table("Sharded")).unwrap();
    block_on(backend.create_table("Single")).unwrap();
    let backend: std::sync::Arc<dyn TableBackend> = std::sync::Arc::new(backend);
    let sharded: Table<Sharded> = Table::from_arc(backend.clone(), "Sharded");
    let single: Table<Single> = Table::from_arc(backend, "Single");
    let rows: Vec<Sharded> = (0..ROWS)
        .map(|seq| Sharded {
            page: "home".into(),
            seq,
            user: format!("user{}", seq % 97),
            millis: i64::from(seq) * 1000,
        })
        .collect();
    let same: Vec<Single> = rows
        .iter()
        .map(|r| Single {
            page: r.page.clone(),
            seq: r.seq,
            user: r.user.clone(),
            millis: r.millis,
        })
        .collect();
    assert!(block_on(sharded.bulk().unpaced().insert(&rows)).is_complete());
    assert!(block_on(single.bulk().unpaced().insert(&same)).is_complete());
    let read = block_on(sharded.query().partition("home").collect()).unwrap();
    assert!(read.iter().map(|r| r.seq).eq(0..ROWS), "merged in order");

    let mut g = c.benchmark_group("read_10k_rows");
    g.bench_function("one_partition", |b| {
        b.iter(|| {
            let all = block_on(single.query().partition("home").collect()).unwrap();
            assert_eq!(all.len(), ROWS as usize);
        })
    });
    g.bench_function("8_shards_merged", |b| {
        b.iter(|| {
            let all = block_on(sharded.query().partition("home").collect()).unwrap();
            assert_eq!(all.len(), ROWS as usize);
        })
    });
    g.finish();
}

criterion_group! {
    name = shards;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(shards);
