use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "People")]
struct Person {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted)]
    email: String,
}

/// Marks a plain field encrypted, and leaves an encrypted one unmarked:
/// both are told at compile time.
#[derive(TableEntity)]
#[tablekit(projection_of = Person)]
struct Contact {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(encrypted)]
    name: String,
    email: String,
}

fn main() {}
