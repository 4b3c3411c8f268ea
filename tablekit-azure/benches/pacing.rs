//! The default (adaptively paced) bulk writer beside the unpaced one on a
//! local Azurite (started by the bench itself), in interleaved rounds, for
//! three shapes of load: 10,000 entities over 10 partitions, 20,000 over 2
//! and 20,000 in one partition (where one writer fills one lane). Azurite
//! never throttles, so the default writer should not hold back: the target
//! is at least 0.95× the unpaced writer's rate in every shape.
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
const ROUNDS: usize = 6;

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

/// `entities` items spread over `partitions` partitions.
fn items(entities: usize, partitions: usize) -> Vec<Item> {
    (0..entities)
        .map(|i| Item {
            tenant: format!("tenant{:02}", i % partitions),
            id: i as u32,
            name: format!("item number {i}"),
            amount: i as i64 * 3,
            price: i as f64 / 7.0,
            active: i % 2 == 0,
        })
        .collect()
}

/// Loads `data` once with the default writer or the unpaced one, through a
/// client of its own (a fresh pacing, as a new program's): entities/s.
async fn load(data: &[Item], default: bool, round: usize) -> f64 {
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a client for Azurite"));
    let name = format!("paced{round}{}{}", u8::from(default), fastrand::u32(..));
    let table: Table<Item> = Table::from_arc(backend.clone(), &name);
    table.create_if_missing().await.expect("create the table");
    let writer = table.bulk().parallelism(4);
    let writer = if default { writer } else { writer.unpaced() };
    let started = Instant::now();
    let report = writer.insert(data).await;
    let rate = data.len() as f64 / started.elapsed().as_secs_f64();
    assert!(report.is_complete(), "{:?}", report.failures.first());
    backend.delete_table(&name).await.expect("drop the table");
    rate
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!(
        "the default writer (adaptive pacing) beside the unpaced one, Azurite {}, {ROUNDS} interleaved rounds:",
        azurite::VERSION
    );
    println!("| load | default (best, median) | unpaced (best, median) | ratio of medians |");
    println!("| --- | --- | --- | --- |");
    for (entities, partitions) in [(ENTITIES, PARTITIONS), (20_000, 2), (20_000, 1)] {
        let data = items(entities, partitions);
        let (mut paced, mut unpaced) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            for default in [round % 2 == 0, round % 2 != 0] {
                let rate = load(&data, default, round).await;
                if default {
                    paced.push(rate);
                } else {
                    unpaced.push(rate);
                }
            }
        }
        let best = |r: &[f64]| r.iter().copied().fold(0f64, f64::max);
        println!(
            "| {entities} entities over {partitions} partitions | {:.0}, {:.0} /s | {:.0}, {:.0} /s | {:.2} |",
            best(&paced),
            median(paced.clone()),
            best(&unpaced),
            median(unpaced.clone()),
            median(paced) / median(unpaced)
        );
    }
}
