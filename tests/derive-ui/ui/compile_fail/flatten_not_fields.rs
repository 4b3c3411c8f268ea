use tablekit::TableEntity;

struct Address {
    street: String,
}

#[derive(TableEntity)]
#[tablekit(table = "People")]
struct Person {
    #[tablekit(partition_key)]
    city: String,
    #[tablekit(flatten)]
    home: Address,
}

fn main() {}
