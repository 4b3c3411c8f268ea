//! Changing an entity, and rewriting the rows the old shape left: 100,000
//! version-1 rows are read through the version-2 type (a typed upgrade),
//! counted per version, and migrated with a live progress bar.
//!
//! ```text
//! cargo run -p tablekit-examples --example migrate
//! ```

use futures::TryStreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use tablekit::{Loaded, Table, TableEntity};
use tablekit_mem::MemBackend;

/// Version 1: a price in whole units and a `Colour`.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Products", kind = "PROD", version = 1)]
struct ProductV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: u32,
    #[tablekit(rename = "Colour")]
    colour: String,
    price: u32,
}

/// Version 2: the price in cents, `Color`, and a stock count.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Products", kind = "PROD", version = 2, upgrade_from = ProductV1)]
struct Product {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: u32,
    #[tablekit(rename = "Color")]
    color: String,
    price_cents: u64,
    stock: u32,
}

impl From<ProductV1> for Product {
    fn from(old: ProductV1) -> Product {
        Product {
            shop: old.shop,
            sku: old.sku,
            color: old.colour,
            price_cents: u64::from(old.price) * 100,
            stock: 0,
        }
    }
}

const ROWS: u32 = 100_000;

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let backend = MemBackend::new();
    let old: Table<ProductV1> = Table::new(backend.clone());
    old.create_if_missing().await?;
    let rows: Vec<ProductV1> = (0..ROWS)
        .map(|sku| ProductV1 {
            shop: format!("shop{:03}", sku % 100),
            sku,
            colour: ["red", "green", "blue"][sku as usize % 3].into(),
            price: sku % 500,
        })
        .collect();
    let loaded = old.bulk().insert(&rows).await;
    assert!(loaded.failures.is_empty(), "{:?}", loaded.failures.first());
    println!("wrote {} version-1 rows", loaded.written);

    // The new program reads the old rows as its own type.
    let products: Table<Product> = Table::new(backend.clone());
    let first: Vec<Loaded<Product>> = products
        .query()
        .partition("shop007")
        .limit(3)
        .stream()
        .try_collect()
        .await?;
    for p in &first {
        println!(
            "  {} {}: {} cents, {} (stored as version {:?})",
            p.shop,
            p.sku,
            p.price_cents,
            p.color,
            Loaded::version(p)
        );
    }

    let before = products.migrate().dry_run().run().await?;
    println!("rows per version before: {:?}", before.by_version);

    let bar = ProgressBar::new(u64::from(ROWS));
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows ({per_sec}, {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let report = products
        .migrate()
        .on_progress(|report| bar.set_position(report.scanned as u64))
        .run()
        .await?;
    bar.finish();
    println!(
        "migrated: {} rewritten, {} already current, {} retried, {} failed",
        report.upgraded, report.already_current, report.retried, report.failed
    );

    let after = products.migrate().dry_run().run().await?;
    println!("rows per version after: {:?}", after.by_version);
    assert_eq!(after.by_version.get(&2).copied(), Some(ROWS as usize));
    Ok(())
}
