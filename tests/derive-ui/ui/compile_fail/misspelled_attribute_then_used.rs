use tablekit::{Table, TableEntity};

// One misspelled attribute gives one error, not one more at every use.
#[derive(TableEntity)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(renme = "FullName")]
    name: String,
}

async fn use_it(staff: Table<Employee>) -> tablekit::Result<()> {
    let _ = staff.get("Sales", 7).await?;
    let _ = staff.get("Sales".to_string(), 7u32).await?;
    let _ = staff.query().partition("Sales").rows(1..5).collect().await?;
    let _ = staff.exists("Sales", 7).await?;
    staff.delete_unconditionally("Sales", 7).await?;
    Ok(())
}

fn main() {
    let _ = use_it;
}
