use tablekit::{TableEntity, TableFields};

#[derive(TableFields)]
struct Address {
    street: String,
}

#[derive(TableEntity)]
#[tablekit(table = "People")]
struct Person {
    #[tablekit(partition_key)]
    city: String,
    #[tablekit(flatten(prefix = "Addr"))]
    home: Address,
    #[tablekit(flatten(prefix = "Addr"))]
    work: Address,
}

fn main() {}
