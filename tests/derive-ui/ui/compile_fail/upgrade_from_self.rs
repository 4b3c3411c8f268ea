use tablekit::TableEntity;

// An upgrade reads the rows of an older type: naming this type itself is an
// error on that name.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 2, upgrade_from = Self)]
struct Item {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", version = 3, upgrade_from = Product)]
struct Product {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

fn main() {}
