use tablekit::TableEntity;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(rename = "Name", rename = "FullName")]
    name: String,
}

fn main() {}
