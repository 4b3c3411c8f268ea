use tablekit::TableEntity;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    salary: f64,
}

fn main() {}
