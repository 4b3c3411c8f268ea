// Values written in another form than the attribute takes: each is one
// error on what was written, saying how to write it, and nothing after it.
use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = Orders, kind("ORD"), version = "2", crate = "tablekit")]
#[tablekit(kind_properties = "true", shards = two, rename_all = PascalCase)]
struct Order {
    #[tablekit(partition_key = true)]
    customer: String,
    #[tablekit(row_key)]
    id: u64,
    #[tablekit(unique)]
    email: String,
    #[tablekit(index(name = "by_city"))]
    city: String,
    #[tablekit(rename = Total, alias)]
    total: i64,
    #[tablekit(default = 5)]
    note: String,
    #[tablekit(flatten = true)]
    address: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Orders", kind = "ORD", version = -1, projection_of = "Order")]
struct Summary {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u64,
}

fn main() {}

#[derive(tablekit::TableValue)]
enum Status {
    #[tablekit(rename = active)]
    Active,
    #[tablekit(rename)]
    Closed,
}
