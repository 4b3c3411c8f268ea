use tablekit::{Table, TableEntity};

// A misspelt key attribute gives one error, on the misspelling, not one
// more at every use of the key it should have made.
#[derive(TableEntity, Clone)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_kye)]
    id: u32,
    name: String,
}

async fn use_it(staff: Table<Employee>) -> tablekit::Result<()> {
    let _ = staff.get("Sales", 7u32).await?;
    let _ = staff.exists("Sales", 7).await?;
    let _ = staff.query().partition("Sales").rows(1u32..5).collect().await?;
    staff.delete_unconditionally("Sales", 7u32).await?;
    let e = Employee { department: "Sales".into(), id: 7, name: "Ada".into() };
    staff.insert(&e).await?;
    staff.update("Sales", 7u32, |e| e.name.clear()).await?;
    Ok(())
}

fn main() {
    let _ = use_it;
}
