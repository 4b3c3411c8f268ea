use tablekit::TableEntity;

// One error, on the misspelt name, with the closest name suggested.
#[derive(TableEntity)]
#[tablekit(table = "Staff", kind = "EMP")]
#[tablekit(index(name = "name", tag = "name"))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_kye)]
    id: u32,
    #[tablekit(index = "name")]
    last_name: String,
}

fn main() {}
