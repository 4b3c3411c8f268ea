use std::collections::HashMap;

use tablekit::TableEntity;

#[derive(TableEntity)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    skills: HashMap<String, u32>,
}

fn main() {}
