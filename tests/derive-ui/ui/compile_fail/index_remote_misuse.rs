use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(kind = "EMP")]
#[tablekit(index(name = "email", partition = "email"))]
#[tablekit(index(name = "city", table = "no_such-table"))]
#[tablekit(index(name = "zone", partition = "a/b"))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
    #[tablekit(index = "city")]
    city: String,
    #[tablekit(index = "zone")]
    zone: String,
}

fn main() {}
