use tablekit::{EntityKinds, TableEntity};

#[derive(TableEntity)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Contractor {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    agency: String,
}

#[derive(EntityKinds)]
enum StaffRow {
    Employee(Employee),
    Contractor(Contractor),
}

fn main() {}
