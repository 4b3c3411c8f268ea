use tablekit::TableEntity;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

fn main() {}
