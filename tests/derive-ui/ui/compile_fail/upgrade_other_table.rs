use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 1)]
struct ItemV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// Another table.
#[derive(TableEntity)]
#[tablekit(table = "Other", kind = "ITEM", version = 2, upgrade_from = ItemV1)]
struct ElsewhereItem {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}
impl From<ItemV1> for ElsewhereItem {
    fn from(v: ItemV1) -> Self {
        ElsewhereItem { shop: v.shop, sku: v.sku }
    }
}

fn main() {}
