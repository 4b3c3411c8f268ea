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
#[tablekit(table = "Billing", kind = "INV")]
struct Invoice {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
}

#[derive(EntityKinds)]
enum Rows {
    Employee(Employee),
    Invoice(Invoice),
}

fn main() {}
