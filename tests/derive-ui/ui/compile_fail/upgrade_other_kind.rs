use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 1)]
struct ItemV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// Another kind.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "THING", version = 2, upgrade_from = ItemV1)]
struct Thing {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}
impl From<ItemV1> for Thing {
    fn from(v: ItemV1) -> Self {
        Thing { shop: v.shop, sku: v.sku }
    }
}

fn main() {}
