use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 1)]
struct ItemV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// A version that does not increase.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 1, upgrade_from = ItemV1)]
struct SameItem {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}
impl From<ItemV1> for SameItem {
    fn from(v: ItemV1) -> Self {
        SameItem { shop: v.shop, sku: v.sku }
    }
}

fn main() {}
