use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Staff", kind_properties = false)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
}

fn main() {}
