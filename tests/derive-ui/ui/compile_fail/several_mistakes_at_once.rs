use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(kind = "a b", version = 0)]
struct Employee {
    #[tablekit(nope)]
    department: String,
    #[tablekit(rename = "1st")]
    first: String,
}

fn main() {}
