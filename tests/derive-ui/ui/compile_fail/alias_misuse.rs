use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Products", kind = "PROD")]
struct Product {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key, alias = "Code")]
    sku: String,
    // An alias names an older name, not a current one.
    #[tablekit(alias = "price")]
    colour: String,
    price: u32,
}

fn main() {}
