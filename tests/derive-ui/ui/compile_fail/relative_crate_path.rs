use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(crate = tablekit)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
}

fn main() {}
