use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(kind = "EMP-1")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
}

fn main() {}
