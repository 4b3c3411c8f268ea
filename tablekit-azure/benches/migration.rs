//! A migration beside the bulk writer on a local Azurite (started by the
//! bench itself): migrating 10,000 version-1 rows over 10 partitions to
//! version 2 (`Table::migrate`, unpaced, four partitions at once) beside
//! the bulk writer upserting the same 10,000 rows as version 2 (unpaced,
//! four at once) over the version-1 rows, as the migration writes them, in
//! interleaved rounds, the best of each. A migration reads every row and
//! writes it back, so the target is at least 0.5× the bulk writer's rows
//! per second.
//!
//! It also prints the bulk writer into an empty table, and how fast the
//! rows are read alone. On Azurite the first is a different workload:
//! inserting rows costs it less than half what replacing stored ones does
//! (its store updates a document in place), so the ratio against it
//! measures Azurite's insert against its update, not the migration.
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
    let (mut migrate, mut bulk_over, mut bulk_empty, mut read) = (0f64, 0f64, 0f64, 0f64);
    for round in 0..ROUNDS {
        // 0: the migration; 1: the bulk writer over the same stored rows;
        // 2: the bulk writer into an empty table. Rotated, round by round.
        for step in 0..3 {
            let mode = (step + round) % 3;
            let name = format!("mig{round}{mode}{}", fastrand::u32(..));
            let old: Table<ProductV1> = Table::from_arc(Arc::clone(&backend), &name);
            old.create_if_missing().await.expect("create the table");
            let new: Table<Product> = Table::from_arc(Arc::clone(&backend), &name);
            if mode != 2 {
                let loaded = old.bulk().unpaced().parallelism(4).insert(&old_rows).await;
                assert!(loaded.is_complete(), "{:?}", loaded.failures.first());
            }
            if mode == 0 {
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
                migrate = migrate.max(ROWS as f64 / started.elapsed().as_secs_f64());
                assert_eq!((report.upgraded, report.failed), (ROWS, 0), "{report:?}");
            } else {
                let started = Instant::now();
                let report = new.bulk().unpaced().parallelism(4).upsert(&new_rows).await;
                let rate = ROWS as f64 / started.elapsed().as_secs_f64();
                assert!(report.is_complete(), "{:?}", report.failures.first());
                if mode == 1 {
                    bulk_over = bulk_over.max(rate);
                } else {
                    bulk_empty = bulk_empty.max(rate);
                }
            }
            backend.delete_table(&name).await.expect("delete the table");
        }
    }
    println!(
        "{ROWS} rows over {PARTITIONS} partitions, Azurite {}, best of {ROUNDS}:",
        azurite::VERSION
    );
    println!("  migration (version 1 to 2)            {migrate:>9.0} rows/s");
    println!("  bulk writer over the same rows (v2)   {bulk_over:>9.0} rows/s");
    println!(
        "  ratio                                 {:>9.2}",
        migrate / bulk_over
    );
    println!("  bulk writer into an empty table (v2)  {bulk_empty:>9.0} rows/s");
    println!(
        "  ratio                                 {:>9.2}",
        migrate / bulk_empty
    );
    println!("  reading the rows alone                {read:>9.0} rows/s");
}
