//! Key rotation on the local store: 100,000 entities with two encrypted
//! fields, their content keys rewrapped under a new key-encryption key
//! (`migrate().rewrap_only()`), beside the rotation that seals every row
//! again (`migrate()`), in rows per second, on the same store in the same
//! run.
//!
//! `cargo bench -p tablekit-local --bench rewrap` (`-- 20000` for fewer
//! rows).
//!
//! A load measurement, not a statistical micro-benchmark: no criterion.

use std::sync::Arc;
use std::time::Instant;

use tablekit::encryption::{LocalKey, LocalKeys};
use tablekit::{Table, TableBackend, TableEntity};
use tablekit_local::LocalStorage;

/// An entity with two encrypted fields of 200 bytes each.
#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Rotation", kind = "PAT")]
struct Patient {
    #[tablekit(partition_key)]
    ward: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted)]
    national_id: String,
    #[tablekit(encrypted)]
    notes: String,
}

const PARTITIONS: u32 = 10;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let rows: u32 = (args.iter().skip(1))
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("a directory");
    let backend: Arc<dyn TableBackend> = Arc::new(LocalStorage::open(dir.path()).expect("open"));
    let (k1, k2, k3) = (
        LocalKey::new("k1", [1; 32]),
        LocalKey::new("k2", [2; 32]),
        LocalKey::new("k3", [3; 32]),
    );
    let t: Table<Patient> =
        Table::from_arc(Arc::clone(&backend), "Rotation").with_encryption(Arc::new(k1.clone()));
    t.create_if_missing().await.expect("the table");
    let items: Vec<Patient> = (0..rows)
        .map(|i| Patient {
            ward: format!("ward{}", i % PARTITIONS),
            id: i,
            name: format!("patient {i}"),
            national_id: format!("{i:0>200}"),
            notes: format!("{:x>200}", i),
        })
        .collect();
    let start = Instant::now();
    let report = t.bulk().unpaced().insert(&items).await;
    assert!(report.is_complete(), "{report:?}");
    println!(
        "{rows} entities sealed under k1 and loaded in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    let ring = LocalKeys::new(k1.clone()).with(k2.clone(), true);
    let t2 = t.clone().with_encryption(Arc::new(ring));
    let run = t2.migrate().rewrap_only().unpaced().run();
    let report = timed("rewrap k1 -> k2 (content keys alone)", rows, run).await;
    assert_eq!(
        (report.rewrapped, report.failed),
        (rows as usize, 0),
        "{report:?}"
    );

    let ring = LocalKeys::new(k1).with(k2, false).with(k3, true);
    let t3 = t.clone().with_encryption(Arc::new(ring));
    let run = t3.migrate().unpaced().run();
    let report = timed("reseal k2 -> k3 (every value sealed again)", rows, run).await;
    assert_eq!(
        (report.resealed, report.failed),
        (rows as usize, 0),
        "{report:?}"
    );
}

/// Runs `run` over `rows` rows and prints its rate as `what`.
async fn timed(
    what: &str,
    rows: u32,
    run: impl std::future::Future<Output = tablekit::Result<tablekit::table::MigrationReport>>,
) -> tablekit::table::MigrationReport {
    let start = Instant::now();
    let report = run.await.expect("a migration");
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{what}: {rows} rows in {seconds:.2} s, {:.0} rows/s",
        f64::from(rows) / seconds
    );
    report
}
