use tablekit::TableEntity;

// A unique index's value is encoded into a RowKey: a type that is no key
// type is one error, on the field's type.
#[derive(TableEntity)]
#[tablekit(table = "Files", kind = "FILE")]
struct File {
    #[tablekit(partition_key)]
    owner: String,
    #[tablekit(row_key)]
    name: String,
    #[tablekit(unique = "hash")]
    hash: Vec<u8>,
}

fn main() {}
