use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Orders", kind = "ORDER", changes(old))]
struct Order {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
}

fn main() {}
