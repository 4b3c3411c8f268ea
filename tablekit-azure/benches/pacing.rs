//! The default (adaptively paced) bulk writer beside the unpaced one on a
//! local Azurite (started by the bench itself): 10,000 entities over 10
//! partitions, in interleaved rounds, the best of each. Azurite never
//! throttles, so the default writer should soon stop holding back: the
//! target is at least 0.95× the unpaced writer's rate.
//!
//! `cargo bench -p tablekit-azure --bench pacing`

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::Instant;

use tablekit::{Table, TableBackend, TableEntity};
use tablekit_azure::AzureTables;

const ENTITIES: usize = 10_000;
const PARTITIONS: usize = 10;
const ROUNDS: usize = 4;

#[derive(TableEntity, Clone)]
#[tablekit(table = "PacedItems", kind = "I")]
struct Item {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    amount: i64,
    price: f64,
    active: bool,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data: Vec<Item> = (0..ENTITIES)
        .map(|i| Item {
            tenant: format!("tenant{:02}", i % PARTITIONS),
            id: i as u32,
            name: format!("item number {i}"),
            amount: i as i64 * 3,
            price: i as f64 / 7.0,
            active: i % 2 == 0,
        })
        .collect();
    let (mut paced, mut unpaced) = (0f64, 0f64);
    for round in 0..ROUNDS {
        for default in [round % 2 == 0, round % 2 != 0] {
            // A client of its own per load: a fresh pacing, as a new program's.
            let backend: Arc<dyn TableBackend> =
                Arc::new(AzureTables::new(azurite::account()).expect("a client for Azurite"));
            let name = format!("paced{round}{}{}", u8::from(default), fastrand::u32(..));
            let table: Table<Item> = Table::from_arc(backend, &name);
            table.create_if_missing().await.expect("create the table");
            let writer = table.bulk().parallelism(4);
            let writer = if default { writer } else { writer.unpaced() };
            let started = Instant::now();
            let report = writer.insert(&data).await;
            let rate = ENTITIES as f64 / started.elapsed().as_secs_f64();
            assert!(report.is_complete(), "{:?}", report.failures.first());
            if default {
                paced = paced.max(rate);
            } else {
                unpaced = unpaced.max(rate);
            }
        }
    }
    println!(
        "{ENTITIES} entities over {PARTITIONS} partitions, Azurite {}, best of {ROUNDS}:",
        azurite::VERSION
    );
    println!("  default writer (adaptive pacing) {paced:>9.0} entities/s");
    println!("  unpaced writer                   {unpaced:>9.0} entities/s");
    println!(
        "  ratio                            {:>9.2}",
        paced / unpaced
    );
}
