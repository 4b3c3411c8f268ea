use tablekit::TableEntity;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(rename = "Timestamp")]
    updated: String,
}

fn main() {}
