//! A program a new user writes, built outside the workspace against the
//! packaged crates (see `.ci/package-check`): a derived entity, an
//! in-memory table, one insert and one query.

use tablekit::{Table, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "EMP", rename_all = "PascalCase")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> tablekit::Result<()> {
    let staff: Table<Employee> = Table::new(MemBackend::new());
    staff.create_if_missing().await?;
    staff
        .insert(&Employee {
            department: "Sales".into(),
            id: 7,
            name: "Ada".into(),
        })
        .await?;
    let found = staff.query().partition("Sales").collect().await?;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "Ada");
    // The other crates build too: one connection string opens any store.
    let stores = tablekit_stores::Stores::open("UseMemoryStorage=true")?;
    println!("{} employee found; stores in {}", found.len(), stores.location());
    Ok(())
}
