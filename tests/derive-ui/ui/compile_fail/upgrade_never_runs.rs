use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "PRD")]
struct ProductV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// Version 1 rows are refused (min_version 2), so they are never upgraded.
#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "PRD", version = 3, min_version = 2, upgrade_from = ProductV1)]
struct Product {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

impl From<ProductV1> for Product {
    fn from(v1: ProductV1) -> Product {
        Product { shop: v1.shop, sku: v1.sku }
    }
}

fn main() {
    let _ = Product::columns();
}
