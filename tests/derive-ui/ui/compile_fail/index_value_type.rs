use tablekit::TableEntity;

// An indexed value is encoded into a RowKey: it must be a key type.
#[derive(TableEntity)]
#[tablekit(kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(index = "score")]
    score: f64,
}

fn main() {}
