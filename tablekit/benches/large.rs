//! Entities larger than a row, beside the same work done by hand in the same
//! run: a 1,000-property wide entity beside four hand-made rows, and a 5 MiB
//! offloaded field beside a raw blob put and get. Request counts are printed
//! before the timings.
//!
//! `cargo bench -p tablekit --bench large`

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit::{
    BatchOperation, BlobStore, Entity, PutCondition, Query, Table, TableBackend, TableBackendExt,
    TableEntity, UpdateMode,
};
use tablekit_mem::{MemBackend, MemBlobStore};

#[derive(TableEntity, Clone)]
#[tablekit(table = "Wide", kind = "W", wide)]
struct WideRow {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(series)]
    values: Vec<i64>,
}

#[derive(TableEntity, Clone)]
#[tablekit(table = "Photos", kind = "P")]
struct Photo {
    #[tablekit(partition_key)]
    album: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(blob)]
    image: Vec<u8>,
}

use common::now;

/// The same 1,000 values as four hand-made rows of 250 properties.
fn hand_rows(values: &[i64]) -> Vec<Entity> {
    values
        .chunks(250)
        .enumerate()
        .map(|(part, chunk)| {
            let mut e = Entity::new("p", format!("manual_{part:02}"));
            for (i, v) in chunk.iter().enumerate() {
                e.insert(format!("V{}", part * 250 + i), *v);
            }
            e
        })
        .collect()
}

fn requests(handle: &FaultHandle) -> usize {
    [
        Operation::QueryEntities,
        Operation::SubmitTransaction,
        Operation::GetEntity,
    ]
    .iter()
    .map(|op| handle.calls(*op))
    .sum()
}

fn benches(c: &mut Criterion) {
    let backend = MemBackend::new();
    now(backend.create_table("Wide")).unwrap();
    let layer = FaultInjection::new(backend.clone());
    let handle = layer.handle();
    let table: Table<WideRow> = Table::new(layer);
    let row = WideRow {
        pk: "p".into(),
        id: 1,
        values: (0..1000).collect(),
    };
    let manual = hand_rows(&row.values);

    now(table.upsert(&row)).unwrap();
    let start = requests(&handle);
    now(table.upsert(&row)).unwrap();
    let write_requests = requests(&handle) - start;
    let start = requests(&handle);
    now(table.get("p", 1u32)).unwrap();
    let read_requests = requests(&handle) - start;
    println!(
        "wide entity of 1,000 properties: write {write_requests} requests, read {read_requests} (hand-made rows: write 1, read 1)"
    );

    let mut g = c.benchmark_group("wide_1000_write");
    g.bench_function("tablekit", |b| {
        b.iter(|| now(table.upsert(black_box(&row))).unwrap())
    });
    g.bench_function("hand_made_rows", |b| {
        b.iter(|| {
            let ops: Vec<_> = manual
                .iter()
                .cloned()
                .map(|entity| BatchOperation::Upsert {
                    entity,
                    mode: UpdateMode::Replace,
                })
                .collect();
            now(backend.submit_transaction("Wide", &ops)).unwrap()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("wide_1000_read");
    g.bench_function("tablekit", |b| {
        b.iter(|| now(table.get("p", 1u32)).unwrap().unwrap())
    });
    g.bench_function("hand_made_rows", |b| {
        b.iter(|| {
            let range = tablekit::filter::Filter::partition_key().eq("p")
                & tablekit::filter::Filter::row_key().ge("manual_")
                & tablekit::filter::Filter::row_key().lt("manual`");
            let rows = now(backend.query_all("Wide", Query::new().filter(range))).unwrap();
            assert_eq!(rows.len(), 4);
            rows
        })
    });
    g.finish();

    let photos_backend = MemBackend::new();
    now(photos_backend.create_table("Photos")).unwrap();
    let blobs = MemBlobStore::new();
    now(blobs.create_container("photos")).unwrap();
    let photos: Table<Photo> =
        Table::new(photos_backend).with_blob_store(Arc::new(blobs.clone()), "photos");
    let image: Vec<u8> = (0..5 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let photo = Photo {
        album: "a".into(),
        id: 1,
        image: image.clone(),
    };
    now(photos.insert(&photo)).unwrap();

    let mut g = c.benchmark_group("offload_5mib_round_trip");
    g.sample_size(20);
    g.bench_function("tablekit", |b| {
        b.iter(|| {
            now(photos.upsert(black_box(&photo))).unwrap();
            now(photos.get("a", 1u32)).unwrap().unwrap()
        })
    });
    g.bench_function("raw_blob", |b| {
        b.iter(|| {
            now(blobs.put_blob(
                "photos",
                "raw",
                black_box(image.clone()),
                &PutCondition::None,
            ))
            .unwrap();
            now(blobs.get_blob("photos", "raw")).unwrap()
        })
    });
    g.finish();
}

criterion_group! {
    name = large;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(large);
