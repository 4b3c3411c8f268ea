use tablekit::TableEntity;

// A kind cannot nest under itself.
#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "C", collection, parent = Self)]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: String,
}

fn main() {}
