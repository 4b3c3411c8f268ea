use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "my-table")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
}

fn main() {}
