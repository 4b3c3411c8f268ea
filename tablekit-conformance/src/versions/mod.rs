//! Changing an entity: older names and missing fields, typed upgrades
//! along a chain of versions, and older programs that must not overwrite
//! newer rows, on every store.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::TableBackendExt as _;
use tablekit::backend::TableBackend;
use tablekit::table::{Loaded, Table};
use tablekit::{Entity, Error, TableEntity};

use super::fresh_table;

mod model;
pub use model::*;
mod kinds;
pub use kinds::*;
mod meanwhile;
pub use meanwhile::*;

/// Version 1 of a catalog item: a price in whole units, a `Colour`.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "CITEM", version = 1)]
#[tablekit(index(name = "code", tag = "code"))]
pub struct CatalogItemV1 {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The item.
    #[tablekit(row_key)]
    pub sku: String,
    /// Unique in the shop.
    #[tablekit(unique = "code")]
    pub code: String,
    /// Whole units.
    pub price: u32,
    /// Its colour.
    #[tablekit(rename = "Colour")]
    pub colour: String,
}

/// Version 2: the price in cents, `Colour` renamed `Color`, a new field.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Conformance",
    kind = "CITEM",
    version = 2,
    upgrade_from = CatalogItemV1
)]
#[tablekit(index(name = "code", tag = "code"))]
pub struct CatalogItem {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The item.
    #[tablekit(row_key)]
    pub sku: String,
    /// Unique in the shop.
    #[tablekit(unique = "code")]
    pub code: String,
    /// Cents.
    pub price_cents: u64,
    /// Its color (stored as `Colour` before).
    #[tablekit(rename = "Color", alias = "Colour")]
    pub color: String,
    /// Added in version 2.
    #[tablekit(default)]
    pub stock: u32,
}

impl From<CatalogItemV1> for CatalogItem {
    fn from(v1: CatalogItemV1) -> CatalogItem {
        CatalogItem {
            shop: v1.shop,
            sku: v1.sku,
            code: v1.code,
            price_cents: u64::from(v1.price) * 100,
            color: v1.colour,
            stock: 0,
        }
    }
}

/// Rows version 1 wrote read through version 2 on every typed path (get,
/// query, index), say which version they were stored as, and are written
/// back as version 2 with their index rows in step; an older program's
/// update or replace of a version-2 row is refused, nothing written.
pub async fn older_versions_read_through_upgrades(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "versions").await;
    let old: Table<CatalogItemV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<CatalogItem> = Table::from_arc(Arc::clone(&backend), &name);
    for (sku, price) in [("a", 1u32), ("b", 2), ("c", 3)] {
        old.insert(&CatalogItemV1 {
            shop: "main".into(),
            sku: sku.into(),
            code: format!("c-{sku}"),
            price,
            colour: "red".into(),
        })
        .await
        .expect("insert version 1");
    }
    let read: Vec<Loaded<CatalogItem>> = new
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    let prices: Vec<u64> = read.iter().map(|i| i.price_cents).collect();
    assert_eq!(prices, [100, 200, 300]);
    assert!(
        read.iter()
            .all(|i| i.color == "red" && Loaded::version(i) == Some(1))
    );
    let by_code = new
        .index(CatalogItem::indexes().code)
        .get("main", "c-b")
        .await
        .expect("index get")
        .expect("there");
    assert_eq!(by_code.price_cents, 200);
    // Written back as version 2, under the new names.
    let mut a = new.get("main", "a").await.expect("get").expect("there");
    a.stock = 5;
    new.replace(&mut a).await.expect("replace");
    assert_eq!(Loaded::version(&a), Some(2));
    let stored: Entity = backend
        .get_entity(&name, "main", "CITEM_a", &Default::default())
        .await
        .expect("stored");
    assert_eq!(
        stored.properties.get("_Version"),
        Some(&tablekit::Value::Int32(2))
    );
    assert!(stored.properties.contains("Color") && !stored.properties.contains("Colour"));
    assert!(new.verify_indexes("main").await.expect("verify").is_clean());
    // The older program meets a version-2 row: refused, nothing written.
    let refused = old
        .update("main", "a", |item| item.price = 9)
        .await
        .expect_err("an older update");
    assert!(
        matches!(
            refused,
            Error::NewerVersion {
                stored: 2,
                writing: 1,
                ..
            }
        ),
        "{refused}"
    );
    let mut stale = Loaded::new(
        CatalogItemV1 {
            shop: "main".into(),
            sku: "a".into(),
            code: "c-a".into(),
            price: 9,
            colour: "blue".into(),
        },
        tablekit::table::Loaded::etag(&a).clone(),
        None,
    );
    assert!(matches!(
        old.replace(&mut stale).await,
        Err(Error::NewerVersion { .. })
    ));
    let kept = new.get("main", "a").await.expect("get").expect("there");
    assert_eq!((kept.price_cents, kept.stock), (100, 5), "nothing dropped");
    backend.delete_table(&name).await.expect("delete table");
}

/// A migration rewrites the rows of older versions as the current one,
/// index rows in step: a dry run counts them and writes nothing, a second
/// run finds nothing to do, and one partition can go alone.
pub async fn migrations_rewrite_older_rows(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "migrate").await;
    let old: Table<CatalogItemV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<CatalogItem> = Table::from_arc(Arc::clone(&backend), &name);
    let shops = ["north", "south", "west"];
    for (i, shop) in shops.iter().cycle().take(12).enumerate() {
        old.insert(&CatalogItemV1 {
            shop: (*shop).into(),
            sku: format!("s{i:02}"),
            code: format!("c{i:02}"),
            price: u32::try_from(i).unwrap_or(0),
            colour: "red".into(),
        })
        .await
        .expect("insert version 1");
    }
    // Another client's column on every entity row: the migration keeps it.
    let entity_rows = || async {
        let rows = backend
            .query_all(&name, tablekit::backend::Query::new())
            .await
            .expect("raw query");
        rows.into_iter()
            .filter(|row| {
                row.properties.contains(tablekit::schema::KIND_PROPERTY)
                    && !row.properties.contains(tablekit::index::INDEX_PROPERTY)
            })
            .collect::<Vec<_>>()
    };
    let before = entity_rows().await;
    assert_eq!(before.len(), 12);
    for row in &before {
        let column = Entity::new(row.partition_key.clone(), row.row_key.clone())
            .with("Supplier", row.row_key.clone());
        backend
            .upsert_entity(&name, &column, tablekit::backend::UpdateMode::Merge)
            .await
            .expect("raw merge");
    }
    let counted = new.migrate().dry_run().run().await.expect("dry run");
    assert_eq!(counted.scanned, 12);
    assert_eq!(counted.by_version.get(&1), Some(&12));
    assert_eq!(counted.upgraded, 12);
    let still: Loaded<CatalogItem> = new.get("north", "s00").await.expect("get").expect("there");
    assert_eq!(Loaded::version(&still), Some(1), "a dry run writes nothing");

    let one = new
        .migrate()
        .partition("west")
        .run()
        .await
        .expect("one partition");
    assert_eq!((one.scanned, one.upgraded, one.failed), (4, 4, 0));
    let mut seen = 0;
    let all = new
        .migrate()
        .on_progress(|report| seen = report.scanned)
        .run()
        .await
        .expect("migrate");
    assert_eq!((all.upgraded, all.already_current, all.failed), (8, 4, 0));
    assert_eq!(seen, 12, "progress after every row");
    let again = new.migrate().run().await.expect("again");
    assert_eq!(
        (again.upgraded, again.already_current),
        (0, 12),
        "nothing left to do"
    );
    assert_eq!(again.by_version.get(&2), Some(&12));
    for shop in shops {
        assert!(new.verify_indexes(shop).await.expect("verify").is_clean());
    }
    let moved = new.get("south", "s01").await.expect("get").expect("there");
    assert_eq!((moved.price_cents, moved.color.as_str()), (100, "red"));
    let after = entity_rows().await;
    assert_eq!(after.len(), 12);
    for row in after {
        assert_eq!(
            row.properties.get("Supplier"),
            Some(&tablekit::Value::String(row.row_key.clone())),
            "a migration keeps the columns the type does not know"
        );
    }
    backend.delete_table(&name).await.expect("delete table");
}

/// What [`migration_model_runs`] saw, summed over its runs.
#[derive(Debug, Clone, Default)]
pub struct MigrationOutcomes {
    /// Runs made.
    pub runs: usize,
    /// Rows written, of either version.
    pub rows: usize,
    /// Migrations dropped mid-way (at a random poll).
    pub dropped: usize,
    /// Migrations stopped by an injected fault (a page that could not be read).
    pub stopped: usize,
    /// Migrations started again from a checkpoint.
    pub resumed: usize,
    /// Rows rewritten, as the reports count them.
    pub upgraded: usize,
    /// Rows read again because another writer changed them.
    pub retried: usize,
    /// Rows a run could not rewrite (a fault), left for the next run.
    pub failed: usize,
    /// Rows changed by another writer while a migration ran.
    pub changed_meanwhile: usize,
}

impl MigrationOutcomes {
    /// Adds another set of runs' outcomes.
    fn add(&mut self, other: MigrationOutcomes) {
        self.runs += other.runs;
        self.rows += other.rows;
        self.dropped += other.dropped;
        self.stopped += other.stopped;
        self.resumed += other.resumed;
        self.upgraded += other.upgraded;
        self.retried += other.retried;
        self.failed += other.failed;
        self.changed_meanwhile += other.changed_meanwhile;
    }
}
