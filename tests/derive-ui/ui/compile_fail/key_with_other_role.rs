use tablekit::TableEntity;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key, skip)]
    department: String,
    #[tablekit(row_key, default)]
    id: u32,
}

fn main() {}
