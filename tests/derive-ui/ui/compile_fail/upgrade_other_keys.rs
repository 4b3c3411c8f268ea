use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 1)]
struct ItemV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// Other key fields.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 2, upgrade_from = ItemV1)]
struct NumberedItem {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    number: u32,
}
impl From<ItemV1> for NumberedItem {
    fn from(v: ItemV1) -> Self {
        NumberedItem { shop: v.shop, number: v.sku.len() as u32 }
    }
}

fn main() {}
