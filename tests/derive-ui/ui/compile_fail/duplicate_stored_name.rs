use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(rename_all = "PascalCase")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    full_name: String,
    #[tablekit(rename = "FullName")]
    display_name: String,
}

fn main() {}
