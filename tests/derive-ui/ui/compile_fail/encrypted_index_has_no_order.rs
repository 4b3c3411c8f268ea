use tablekit::{Table, TableEntity};

#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "People", kind = "P")]
struct Person {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(encrypted, unique = "email")]
    email: String,
}

// An index on an encrypted field finds equal values alone: its RowKeys hold
// hashes, which have no order, so a prefix or a range does not compile.
fn by_prefix(people: &Table<Person>) {
    let _ = people.index(Person::indexes().email).prefix("red", "ada");
}

fn by_range(people: &Table<Person>) {
    let _ = people.index(Person::indexes().email).range("red", "a", "b");
}

fn main() {}
