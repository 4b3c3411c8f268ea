//! An open store keeps no more of its file in memory than its cache: 64 MB
//! written and read twice through a 4 MiB cache leave the process's
//! resident memory within 32 MB of where it started (a cache that held
//! the data would add all of it). The only test of its binary, so that no
//! other test's memory is counted. Linux only: it reads the process's
//! memory from `/proc/self/status`.
#![cfg(target_os = "linux")]

use tablekit::{BatchOperation, Entity, Query, TableBackend, TableBackendExt};
use tablekit_local::LocalStorage;

/// The process's resident memory, in bytes (`VmRSS`, which Linux gives
/// in kB).
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in kB");
    kb * 1024
}

const PARTITIONS: usize = 16;
const ROWS: usize = 1000;
const VALUE: usize = 4000;

#[tokio::test]
async fn a_store_holds_no_more_than_its_cache() {
    let start = resident();
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        LocalStorage::builder()
            .cache_size(4 << 20)
            .open(dir.path())
            .unwrap()
    };
    let mut peak = start;
    {
        let store = open();
        store.create_table("Memory").await.unwrap();
        let value = vec![7u8; VALUE];
        for p in 0..PARTITIONS {
            for first in (0..ROWS).step_by(100) {
                let ops: Vec<_> = (first..first + 100)
                    .map(|r| {
                        let row = Entity::new(format!("p{p:02}"), format!("r{r:04}"));
                        BatchOperation::Insert(row.with("b", value.clone()))
                    })
                    .collect();
                store.submit_transaction("Memory", &ops).await.unwrap();
            }
            peak = peak.max(resident());
        }
    }
    let store = open();
    for _ in 0..2 {
        for p in 0..PARTITIONS {
            let query =
                Query::new().filter(tablekit::filter::prop("PartitionKey").eq(format!("p{p:02}")));
            let rows = store.query_all("Memory", query).await.unwrap();
            assert_eq!(rows.len(), ROWS);
            assert!(
                rows.iter().all(|r| r.get("b").is_some_and(|b| {
                    matches!(b, tablekit::Value::Binary(b) if b.len() == VALUE)
                }))
            );
            drop(rows);
            peak = peak.max(resident());
        }
    }
    let written = (PARTITIONS * ROWS * VALUE) as u64;
    let grown = peak.saturating_sub(start);
    println!(
        "{} MB written and read twice; resident memory grew by at most {} MB",
        written >> 20,
        grown >> 20
    );
    assert!(grown < 32 << 20, "grew by {grown} bytes");
}
