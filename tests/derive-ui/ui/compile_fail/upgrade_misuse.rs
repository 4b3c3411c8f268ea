use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "PRD")]
struct ProductV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// A string where a type goes.
#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "PRD", version = 2, upgrade_from = "ProductV1")]
struct ProductNamed {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// A conversion with nothing to convert.
#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "PRD", version = 2, upgrade_with = convert)]
struct ProductAlone {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

fn main() {}
