use tablekit::{Table, TableEntity};

// A key argument of the wrong type is one error each, on the argument.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "EMP")]
#[tablekit(index(name = "email", tag = "email"))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
}

async fn use_it(staff: Table<Employee>) -> tablekit::Result<()> {
    let _ = staff.get("Sales", "7").await?;
    let _ = staff.exists(("Sales", 1), 7).await?;
    staff.delete_unconditionally(7, 7).await?;
    let _ = staff.index(Employee::indexes().email).get("Sales", 5).await?;
    Ok(())
}

fn main() {
    let _ = use_it;
}
