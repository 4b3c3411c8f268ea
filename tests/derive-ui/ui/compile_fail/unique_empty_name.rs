use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "C")]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(unique = "")]
    email: String,
}

fn main() {}
