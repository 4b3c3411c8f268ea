use tablekit::TableEntity;

// Index rows are told apart from the type's rows by the start of their
// RowKeys: a type without a kind has none.
#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
}

fn main() {}
