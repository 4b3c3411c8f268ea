//! An employee directory: one partition per department, employees under
//! RowKeys by id, found by email through a unique index and by last name
//! through a non-unique one, and the manager's details copied into every
//! employee of the department and kept in step with it.
//!
//! The rows are laid out as a storage browser shows them:
//!
//! | RowKey | row |
//! |---|---|
//! | `department_` | the department: its manager |
//! | `empid_000223` | the employee |
//! | `email_jonesj@contoso.com` | a copy of the employee, found by email |
//! | `lastname_Jones\|empid_000223` | first name and email, found by last name |
//!
//! At the end an employee moves to another department: another partition,
//! which no transaction reaches, so the move goes through the outbox.
//!
//! Runs on the in-memory backend by default. With
//! `TABLEKIT_CONNECTION_STRING` set (for Azurite:
//! `UseDevelopmentStorage=true`), the same code runs on the REST backend, in a
//! fresh table that it deletes at the end.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::key::Padded;
use tablekit::outbox::Outbox;
use tablekit::upkeep::Upkeep;
use tablekit::{Error, Loaded, Table, TableEntity};

/// An employee, stored as `empid_000223` in their department's partition.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Directory", row_key = "empid_{id}")]
#[tablekit(index(name = "email", tag = "email"))]
#[tablekit(index(name = "last_name", tag = "lastname", copy(first_name, email)))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: Padded<6>,
    first_name: String,
    #[tablekit(index = "last_name")]
    last_name: String,
    #[tablekit(unique = "email")]
    email: String,
    /// The department's manager, copied here so one read of an employee
    /// says who they report to.
    manager_name: String,
    manager_email: String,
}

/// What a directory listing shows: served from the last-name index rows
/// alone, which copy these fields.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Employee)]
struct Card {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: Padded<6>,
    first_name: String,
    email: String,
}

/// A department, one row in its own partition.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Directory", kind = "department")]
struct Department {
    #[tablekit(partition_key)]
    department: String,
    manager_name: String,
    manager_email: String,
}

fn id(n: u64) -> Padded<6> {
    Padded::new(n).expect("six digits")
}

fn employee(id_number: u64, first: &str, last: &str, email: &str, dept: &Department) -> Employee {
    Employee {
        department: dept.department.clone(),
        id: id(id_number),
        first_name: first.into(),
        last_name: last.into(),
        email: email.into(),
        manager_name: dept.manager_name.clone(),
        manager_email: dept.manager_email.clone(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let tablekit_examples::Store {
        backend,
        table,
        remote,
        queues,
        ..
    } = tablekit_examples::store("Directory")?;
    let employees: Table<Employee> = Table::from_arc(Arc::clone(&backend), &table);
    employees.create_if_missing().await?;
    let departments: Table<Department> = employees.of();
    let indexes = Employee::indexes();

    // A department and its manager, in one transaction.
    let sales = Department {
        department: "Sales".into(),
        manager_name: "Jim Jones".into(),
        manager_email: "jonesj@contoso.com".into(),
    };
    let mut hire = employees.transaction();
    hire.insert(&sales)?;
    hire.insert(&employee(223, "Jim", "Jones", "jonesj@contoso.com", &sales))?;
    hire.submit().await?;
    for (n, first, last, email) in [
        (224, "Ann", "Smith", "smitha@contoso.com"),
        (225, "Beth", "Jones", "jonesb@contoso.com"),
        (226, "Carl", "Brown", "brownc@contoso.com"),
    ] {
        employees
            .insert(&employee(n, first, last, email, &sales))
            .await?;
    }

    println!("== the rows of partition Sales");
    let rows =
        tablekit::TableBackendExt::query_all(&*backend, &table, tablekit::Query::new()).await?;
    for row in &rows {
        println!("  {}", row.row_key);
    }

    // One request: the index row holds a copy of the employee.
    let by_email = employees.index(indexes.email);
    let found = by_email
        .get("Sales", "smitha@contoso.com")
        .await?
        .expect("Ann is there");
    println!(
        "== smitha@contoso.com is {} {}, reporting to {}",
        found.first_name, found.last_name, found.manager_name
    );

    // The Joneses, from the last-name index rows alone.
    let joneses: Vec<Card> = employees
        .index(indexes.last_name)
        .project::<Card>()
        .find("Sales", "Jones")
        .try_collect()
        .await?;
    println!("== the Joneses of Sales");
    for card in &joneses {
        println!("  {} <{}> (id {})", card.first_name, card.email, *card.id);
    }
    assert_eq!(joneses.len(), 2);

    // A new email: the index row moves in the same transaction.
    let mut ann = employees.get("Sales", id(224)).await?.expect("Ann");
    ann.email = "ann.smith@contoso.com".into();
    employees.replace(&mut ann).await?;
    assert!(by_email.get("Sales", "smitha@contoso.com").await?.is_none());
    println!(
        "== Ann's new email finds her: {}",
        by_email
            .get("Sales", "ann.smith@contoso.com")
            .await?
            .is_some()
    );

    // An email is unique in the department: a typed error, nothing written.
    match employees
        .insert(&employee(227, "Dan", "Green", "jonesb@contoso.com", &sales))
        .await
    {
        Err(Error::UniqueViolation {
            index,
            value,
            held_by,
            ..
        }) => {
            println!("== refused: index `{index}` already holds {value} (row {held_by})");
        }
        other => panic!("expected a unique violation, got {other:?}"),
    }

    // A new manager: the department and every employee's copy change in
    // one transaction, so no reader sees two managers.
    let mut dept = departments.get("Sales", ()).await?.expect("Sales");
    dept.manager_name = "Ann Smith".into();
    dept.manager_email = ann.email.clone();
    let staff: Vec<Loaded<Employee>> = employees
        .query()
        .partition("Sales")
        .stream()
        .try_collect()
        .await?;
    let mut promote = employees.transaction();
    promote.replace(&dept)?;
    for mut member in staff {
        member.manager_name = dept.manager_name.clone();
        member.manager_email = dept.manager_email.clone();
        promote.replace(&member)?;
    }
    promote.submit().await?;
    let beth = by_email
        .get("Sales", "jonesb@contoso.com")
        .await?
        .expect("Beth");
    println!("== Beth now reports to {}", beth.manager_name);
    assert_eq!(beth.manager_name, "Ann Smith");

    // Carl leaves: his index rows go with him.
    let carl = employees.get("Sales", id(226)).await?.expect("Carl");
    employees.delete(&carl).await?;
    let audit = employees.verify_indexes("Sales").await?;
    println!("== index rows in step: {}", audit.is_clean());
    assert!(audit.is_clean());

    // Beth moves to Marketing. One transaction deletes her from Sales (with
    // her index rows) and records the rest of the move in Sales' outbox;
    // then she is inserted in Marketing, with her index rows there. Had
    // this process stopped in between (or the future been dropped), the
    // library's upkeep would finish the move: its outbox worker from the
    // queue, its sweep from the record. A service spawns it once, in the
    // background: `Upkeep::new().watch(&table).spawn()`.
    let queue = format!("directory-moves-{}", std::process::id());
    let marketing = Department {
        department: "Marketing".into(),
        manager_name: "Dan Wu".into(),
        manager_email: "wud@contoso.com".into(),
    };
    departments.insert(&marketing).await?;
    let movable = employees
        .clone()
        .with_outbox(Outbox::new(Arc::clone(&queues), queue.as_str()));
    let upkeep = Upkeep::new().watch(&movable);
    upkeep.create_queues().await?;
    let beth = employees.get("Sales", id(225)).await?.expect("Beth");
    let moved = Employee {
        department: marketing.department.clone(),
        manager_name: marketing.manager_name.clone(),
        manager_email: marketing.manager_email.clone(),
        ..(*beth).clone()
    };
    movable.move_to(&beth, &moved).await?;
    assert!(employees.get("Sales", id(225)).await?.is_none());
    let beth = by_email
        .get("Marketing", "jonesb@contoso.com")
        .await?
        .expect("Beth, found by email in Marketing");
    println!(
        "== Beth moved to {} and reports to {}",
        beth.department, beth.manager_name
    );
    let pending = upkeep.pending().await?;
    println!("== outbox records left to finish: {pending:?}");
    assert!(
        pending.values().all(|&n| n == 0),
        "nothing was left to finish"
    );
    for department in ["Sales", "Marketing"] {
        assert!(employees.verify_indexes(department).await?.is_clean());
    }

    if remote {
        employees.delete_table().await?;
        queues.delete_queue(&queue).await?;
        queues
            .delete_queue(&tablekit::outbox::poison_queue_name(&queue))
            .await?;
    }
    Ok(())
}
