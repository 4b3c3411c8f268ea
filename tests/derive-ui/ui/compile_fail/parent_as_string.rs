use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "C", collection)]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "ORD", parent = "Customer")]
struct Order {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key = 0)]
    customer: String,
    #[tablekit(row_key = 1)]
    number: u32,
}

fn main() {}
