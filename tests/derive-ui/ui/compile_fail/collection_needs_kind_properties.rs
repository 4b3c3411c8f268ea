use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "C", collection, kind_properties = false)]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    customer: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Shop", parent = Customer)]
struct Note {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    customer: u32,
}

fn main() {}
