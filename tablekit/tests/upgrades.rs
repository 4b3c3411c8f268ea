//! Typed upgrades: the old shape of an entity stays its own type, and rows
//! of its versions are read as it, then converted to the current type, on
//! every typed read path; a write always writes the current version.

use futures::TryStreamExt;
use tablekit::{Entity, Loaded, Table, TableBackend, TableEntity, schema};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 1)]
#[tablekit(index(name = "code", tag = "code"))]
struct ItemV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(unique = "code")]
    code: String,
    /// A price in whole units.
    price: u32,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 2, upgrade_from = ItemV1)]
#[tablekit(index(name = "code", tag = "code"))]
struct ItemV2 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(unique = "code")]
    code: String,
    /// Now in cents.
    price_cents: u64,
}

impl From<ItemV1> for ItemV2 {
    fn from(v1: ItemV1) -> ItemV2 {
        ItemV2 {
            shop: v1.shop,
            sku: v1.sku,
            code: v1.code,
            price_cents: u64::from(v1.price) * 100,
        }
    }
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Catalog",
    kind = "ITEM",
    version = 3,
    upgrade_from = ItemV2,
    upgrade_with = from_v2
)]
#[tablekit(index(name = "code", tag = "code"))]
struct Item {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(unique = "code")]
    code: String,
    price_cents: u64,
    /// Added in version 3.
    currency: String,
}

fn from_v2(v2: ItemV2) -> Item {
    Item {
        shop: v2.shop,
        sku: v2.sku,
        code: v2.code,
        price_cents: v2.price_cents,
        currency: "EUR".into(),
    }
}

fn v1(sku: &str, price: u32) -> ItemV1 {
    ItemV1 {
        shop: "main".into(),
        sku: sku.into(),
        code: format!("c-{sku}"),
        price,
    }
}

#[test]
fn every_older_version_reads_as_the_current_type() {
    assert_eq!(
        Item::DESCRIPTOR.min_version,
        1,
        "the chain's oldest version"
    );
    let row: Entity = schema::to_entity(&v1("a", 3)).expect("a version-1 row");
    let item: Item = schema::from_entity(&row).expect("upgraded through the chain");
    assert_eq!(item.price_cents, 300);
    assert_eq!(item.currency, "EUR");
    let text = tablekit::json::to_string(&row);
    let from_text: Item = schema::from_json(&text).expect("from JSON too");
    assert_eq!(from_text, item);
    let v2_row = schema::to_entity(&ItemV2::from(v1("b", 2))).expect("a version-2 row");
    let item: Item = schema::from_entity(&v2_row).expect("upgraded once");
    assert_eq!((item.price_cents, item.currency.as_str()), (200, "EUR"));
    // Written as the current version.
    let written = schema::to_entity(&item).expect("write");
    assert_eq!(
        written.properties.get("_Version"),
        Some(&tablekit::Value::Int32(3))
    );
}

#[tokio::test]
async fn typed_reads_upgrade_and_writes_write_the_current_version() {
    let backend = MemBackend::new();
    let old: Table<ItemV1> = Table::new(backend.clone());
    old.create_if_missing().await.expect("create");
    for (sku, price) in [("a", 1), ("b", 2), ("c", 3)] {
        old.insert(&v1(sku, price)).await.expect("insert version 1");
    }
    let items: Table<Item> = Table::new(backend.clone());
    let read: Vec<Loaded<Item>> = items
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    let prices: Vec<u64> = read.iter().map(|i| i.price_cents).collect();
    assert_eq!(prices, [100, 200, 300]);
    assert!(read.iter().all(|i| Loaded::version(i) == Some(1)));
    // Index reads upgrade too.
    let by_code = items
        .index(Item::indexes().code)
        .get("main", "c-b")
        .await
        .expect("index get")
        .expect("there");
    assert_eq!(by_code.price_cents, 200);
    // A write writes version 3, its index rows from the upgraded value.
    let mut a = items.get("main", "a").await.expect("get").expect("there");
    a.currency = "USD".into();
    items.replace(&mut a).await.expect("replace");
    let stored = backend
        .get_entity("Catalog", "main", "ITEM_a", &Default::default())
        .await
        .expect("stored");
    assert_eq!(
        stored.properties.get("_Version"),
        Some(&tablekit::Value::Int32(3))
    );
    assert!(
        items
            .verify_indexes("main")
            .await
            .expect("verify")
            .is_clean()
    );
}
