use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "People", kind = "EMP")]
struct Person {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    salary: i64,
}

// A typo, a field of another type, and keys of another type: each is
// reported on the projection's field.
#[derive(TableEntity)]
#[tablekit(projection_of = Person)]
struct PersonPay {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u64,
    nmae: String,
    salary: i32,
}

// A projection takes its table, kind and names from its entity.
#[derive(TableEntity)]
#[tablekit(projection_of = Person, kind = "EMP")]
struct PersonName {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(rename = "Name")]
    name: String,
}

fn main() {}
