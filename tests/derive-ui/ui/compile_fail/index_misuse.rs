use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(kind = "EMP")]
#[tablekit(index(name = "nothing"))]
#[tablekit(index(name = "email", tag = "EMP"))]
#[tablekit(index(name = "mixed", copy(id, missing)))]
#[tablekit(index(name = "code", list))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key, unique = "key")]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
    #[tablekit(unique = "mixed")]
    first: String,
    #[tablekit(index = "mixed")]
    last: String,
    #[tablekit(unique = "code")]
    code: String,
    #[tablekit(json, index = "tags")]
    tags: Vec<String>,
}

fn main() {}
