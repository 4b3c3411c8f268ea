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

fn main() {
    // A filter on a plain field compiles; the store cannot compare
    // ciphertext, so an encrypted field has no column.
    let _ = Person::columns().name.eq("Ada");
    let _ = Person::columns().email.eq("ada@example.com");
}
