use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(tabel = "Employees")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
}

fn main() {}
