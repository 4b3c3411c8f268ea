use tablekit::TableEntity;

struct Opaque;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(json)]
    blob: Opaque,
}

fn main() {}
