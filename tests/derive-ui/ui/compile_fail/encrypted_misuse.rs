use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "People", kind = "P")]
struct Person {
    #[tablekit(partition_key, encrypted)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(encrypted, unique = "email")]
    email: String,
    #[tablekit(encrypted, blob)]
    photo: Vec<u8>,
    #[tablekit(encrypted, alias = "Phone")]
    phone: String,
    #[tablekit(encrypted, skip)]
    cache: String,
}

fn main() {}
