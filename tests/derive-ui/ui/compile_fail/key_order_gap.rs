use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Staff")]
struct Review {
    #[tablekit(partition_key = 3)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 2)]
    year: u16,
}

#[derive(TableEntity)]
#[tablekit(table = "Staff")]
struct Mixed {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 1)]
    employee: u32,
    #[tablekit(row_key)]
    year: u16,
}

fn main() {}
