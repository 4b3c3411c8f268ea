use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "People", kind = "P")]
#[tablekit(index(name = "squad", list))]
#[tablekit(index(name = "city", partition = "city"))]
struct Person {
    #[tablekit(partition_key, encrypted)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(encrypted, index = "squad")]
    squad: String,
    #[tablekit(index = "city")]
    city: String,
    #[tablekit(encrypted, alias = "Phone")]
    phone: String,
    #[tablekit(encrypted, skip)]
    cache: String,
}

fn main() {}
