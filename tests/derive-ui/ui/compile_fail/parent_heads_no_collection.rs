use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "C")]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    customer: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "ORD", parent = Customer)]
struct Order {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key = 0)]
    customer: String,
    #[tablekit(row_key = 1)]
    order: u32,
}

fn main() {
    let _ = tablekit::schema::row_key_of(&Order { tenant: "t".into(), customer: "c".into(), order: 1 });
}
