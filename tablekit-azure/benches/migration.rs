//! A migration beside the bulk writer on a local Azurite (started by the
//! bench itself): migrating 10,000 version-1 rows over 10 partitions to
//! version 2 (`Table::migrate`, unpaced, four partitions at once) beside
//! the bulk writer upserting the same 10,000 rows as version 2 (unpaced,
//! four at once), in interleaved rounds, the best of each. A migration
//! reads every row and writes it back, so the target is at least 0.5× the
//! bulk writer's rows per second. It also prints how fast the rows are read
//! alone. Azurite serves every request on one thread, so here a migration
//! pays for its reads on the same thread as its writes, even though it
//! reads the next page while it rewrites this one.
//!
//! `cargo bench -p tablekit-azure --bench migration`

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::Instant;

use tablekit::{Table, TableBackend, TableEntity};
use tablekit_azure::AzureTables;

const ROWS: usize = 10_000;
const PARTITIONS: usize = 10;
const ROUNDS: usize = 3;

#[derive(TableEntity, Clone)]
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

#[derive(TableEntity, Clone)]
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let old_rows: Vec<ProductV1> = (0..ROWS)
        .map(|i| ProductV1 {
            shop: format!("shop{:02}", i % PARTITIONS),
            sku: i as u32,
            name: format!("product number {i}"),
            price: (i % 500) as u32,
            colour: ["red", "green", "blue"][i % 3].into(),
        })
        .collect();
    let new_rows: Vec<Product> = old_rows.iter().cloned().map(Product::from).collect();
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a client for Azurite"));
    let (mut migrate, mut bulk, mut read) = (0f64, 0f64, 0f64);
    for round in 0..ROUNDS {
        for migrating in [round % 2 == 0, round % 2 != 0] {
            let name = format!("mig{round}{}{}", u8::from(migrating), fastrand::u32(..));
            let old: Table<ProductV1> = Table::from_arc(Arc::clone(&backend), &name);
            old.create_if_missing().await.expect("create the table");
            let new: Table<Product> = Table::from_arc(Arc::clone(&backend), &name);
            let rate = if migrating {
                let loaded = old.bulk().unpaced().parallelism(4).insert(&old_rows).await;
                assert!(loaded.is_complete(), "{:?}", loaded.failures.first());
                // What a migration must read, alone: every row, upgraded.
                let started = Instant::now();
                let all = new.query().collect().await.expect("read");
                read = read.max(ROWS as f64 / started.elapsed().as_secs_f64());
                assert_eq!(all.len(), ROWS);
                let started = Instant::now();
                let report = new
                    .migrate()
                    .unpaced()
                    .parallelism(4)
                    .run()
                    .await
                    .expect("migrate");
                let rate = ROWS as f64 / started.elapsed().as_secs_f64();
                assert_eq!((report.upgraded, report.failed), (ROWS, 0), "{report:?}");
                rate
            } else {
                let started = Instant::now();
                let report = new.bulk().unpaced().parallelism(4).upsert(&new_rows).await;
                let rate = ROWS as f64 / started.elapsed().as_secs_f64();
                assert!(report.is_complete(), "{:?}", report.failures.first());
                rate
            };
            if migrating {
                migrate = migrate.max(rate);
            } else {
                bulk = bulk.max(rate);
            }
            backend.delete_table(&name).await.expect("delete the table");
        }
    }
    println!(
        "{ROWS} rows over {PARTITIONS} partitions, Azurite {}, best of {ROUNDS}:",
        azurite::VERSION
    );
    println!("  migration (version 1 to 2)   {migrate:>9.0} rows/s");
    println!("  bulk writer (version 2)      {bulk:>9.0} rows/s");
    println!("  ratio                        {:>9.2}", migrate / bulk);
    println!("  reading the rows alone       {read:>9.0} rows/s");
    println!(
        "  reading, then writing, at best {:>7.2}",
        1.0 / (bulk / read + 1.0)
    );
}
