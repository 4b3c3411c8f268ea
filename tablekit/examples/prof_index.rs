use futures::FutureExt;
use tablekit::{Table, TableBackend, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Staff", kind = "EMP")]
#[tablekit(index(name = "email", tag = "email"))]
#[tablekit(index(name = "last_name", tag = "last", copy(first_name, email)))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    first_name: String,
    #[tablekit(index = "last_name")]
    last_name: String,
    #[tablekit(unique = "email")]
    email: String,
    salary: i64,
}

fn main() {
    let backend = MemBackend::new();
    backend
        .create_table("Staff")
        .now_or_never()
        .unwrap()
        .unwrap();
    let table: Table<Employee> = Table::new(backend);
    let e = Employee {
        department: "Sales".into(),
        id: 1,
        first_name: "Jim".into(),
        last_name: "Jones".into(),
        email: "a@x".into(),
        salary: 1,
    };
    table.insert(&e).now_or_never().unwrap().unwrap();
    let mut loaded = table
        .get("Sales", 1u32)
        .now_or_never()
        .unwrap()
        .unwrap()
        .unwrap();
    let mode = std::env::args().nth(1).unwrap_or_default();
    for i in 0..200_000u32 {
        if mode == "insert" {
            let e = Employee {
                id: i + 10,
                email: format!("{i}@x"),
                ..e.clone()
            };
            table.insert(&e).now_or_never().unwrap().unwrap();
        } else {
            loaded.email = format!("u{}@x", i % 2);
            table.replace(&mut loaded).now_or_never().unwrap().unwrap();
        }
    }
}
