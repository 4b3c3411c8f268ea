//! The guide's scenario on the in-memory backend: one table holds employees,
//! their departments, their performance reviews and their expense claims, told
//! apart by entity kind. Each step prints the keys it builds, so the output
//! teaches the table-design patterns behind them.
//!
//! Run it with `cargo run -p tablekit-examples --example staff`. With
//! `TABLEKIT_CONNECTION_STRING` set (for Azurite:
//! `UseDevelopmentStorage=true`), the same code runs on the REST backend, in a
//! fresh table that it deletes at the end.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::key::InvertedTime;
use tablekit::{
    DateTime, EntityKinds, Error, Table, TableBackend, TableEntity, UnknownKind, schema,
};

/// An employee: partition = department, row = zero-padded id (pattern: compound
/// key with padded numbers, so ids sort and range-query numerically). The
/// employee heads a collection: their reviews and expense claims are stored
/// right after them, and one range reads them all.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "EMP", collection, rename_all = "PascalCase")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    email: String,
    hired: DateTime,
}

/// The department itself lives in the same partition as its employees
/// (pattern: several kinds in one partition, read with one query).
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "DEPT", rename_all = "PascalCase")]
struct Department {
    #[tablekit(partition_key)]
    department: String,
    manager: String,
    budget: f64,
}

/// A performance review: RowKey = employee id + year, nested under the
/// employee (pattern: compound key; the employee and every review of theirs
/// form one range: `EMP_0000000123`, `EMP_0000000123_REV_02019`, …).
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "REV", parent = Employee, rename_all = "PascalCase")]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 1)]
    year: u16,
    rating: u8,
    summary: String,
}

/// An expense claim: RowKey = employee id + inverted timestamp, nested under
/// the employee (pattern: log tail; the newest claims come first).
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "EXP", parent = Employee, rename_all = "PascalCase")]
struct Expense {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 1)]
    filed: InvertedTime,
    amount: f64,
    what: String,
}

/// Who has which skill: RowKey = skill + employee id (pattern: a compound key
/// led by text; the key reads as written, `SKILL_Public Speaking|0000000123`,
/// and a prefix query lists everyone with one skill).
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "SKILL", rename_all = "PascalCase")]
struct Skill {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    skill: String,
    #[tablekit(row_key = 1)]
    employee: u32,
    level: u8,
}

/// Everything that may live in a department's partition.
#[derive(EntityKinds, Debug)]
enum StaffRow {
    Department(Department),
    Employee(Employee),
    Review(Review),
    Expense(Expense),
    Skill(Skill),
}

/// An employee's file: the employee and the rows nested under them.
#[derive(EntityKinds, Debug)]
enum EmployeeFile {
    Employee(Employee),
    Review(Review),
    Expense(Expense),
}

fn at(text: &str) -> DateTime {
    DateTime::parse(text).expect("a valid timestamp")
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Pick the backend; the in-memory one behaves like the real service, and
    // the same code runs on Azure Table Storage, Cosmos DB or Azurite.
    let tablekit_examples::Store {
        backend,
        table,
        remote,
        ..
    } = tablekit_examples::store("Staff")?;
    let employees: Table<Employee> = Table::from_arc(Arc::clone(&backend), &table);
    employees.create_if_missing().await?;
    let departments = employees.of::<Department>();
    let reviews = employees.of::<Review>();
    let expenses = employees.of::<Expense>();
    let skills = employees.of::<Skill>();
    println!(
        "== one table `{}` for five kinds of entity",
        employees.name()
    );

    for (department, manager, budget) in [
        ("Sales", "Grace", 250_000.0),
        ("Engineering", "Ada", 900_000.0),
    ] {
        let d = Department {
            department: department.into(),
            manager: manager.into(),
            budget,
        };
        departments.insert(&d).await?;
        println!(
            "department  PK={:?} RK={:?}",
            schema::partition_key_of(&d)?,
            schema::row_key_of(&d)?
        );
    }

    let staff = [
        ("Sales", 7, "Jones", "2012-03-01T09:00:00Z"),
        ("Sales", 123, "Smith", "2015-06-15T09:00:00Z"),
        ("Sales", 150, "Garcia", "2018-01-08T09:00:00Z"),
        ("Sales", 199, "Chen", "2020-11-02T09:00:00Z"),
        ("Sales", 230, "Okafor", "2021-04-19T09:00:00Z"),
        ("Engineering", 42, "Lovelace", "2010-12-10T09:00:00Z"),
    ];
    let people: Vec<Employee> = staff
        .iter()
        .map(|(department, id, name, hired)| Employee {
            department: (*department).into(),
            id: *id,
            name: (*name).into(),
            email: format!("{}@contoso.com", name.to_lowercase()),
            hired: at(hired),
        })
        .collect();
    let report = employees.bulk().insert(&people).await;
    println!(
        "\n== bulk-loaded {} employees in {} batch(es), grouped by partition; failures: {}",
        report.written,
        report.batches,
        report.failures.len()
    );
    for e in &people[..2] {
        println!(
            "employee    PK={:?} RK={:?}",
            schema::partition_key_of(e)?,
            schema::row_key_of(e)?
        );
    }

    println!("\n== employees of Sales with ids 100..=199 (a RowKey range, no scan)");
    let query = employees.query().partition("Sales").rows(100..=199);
    println!("   $filter: {}", query.to_query().filter.expect("a filter"));
    for e in query.collect().await? {
        println!("   {:>4} {}", e.id, e.name);
    }

    println!("\n== reviews: nested under their employee, RowKey = employee id + year");
    for (employee, year, rating) in [
        (123, 2019, 3),
        (123, 2020, 4),
        (123, 2021, 5),
        (150, 2021, 4),
    ] {
        let r = Review {
            department: "Sales".into(),
            employee,
            year,
            rating,
            summary: format!("review {year}"),
        };
        reviews.insert(&r).await?;
        if employee == 123 && year == 2019 {
            println!("   review  RK={:?}", schema::row_key_of(&r)?);
        }
    }
    for r in reviews
        .query()
        .partition("Sales")
        .row_prefix((123u32,))
        .collect()
        .await?
    {
        println!("   employee {} {}: rating {}", r.employee, r.year, r.rating);
    }

    println!("\n== expense claims: nested too, newest first (inverted timestamps)");
    for (filed, amount, what) in [
        ("2024-01-15T10:00:00Z", 120.0, "train"),
        ("2024-03-02T18:30:00Z", 45.5, "dinner"),
        ("2024-02-20T08:15:00Z", 310.0, "hotel"),
    ] {
        let claim = Expense {
            department: "Sales".into(),
            employee: 123,
            filed: InvertedTime(at(filed)),
            amount,
            what: what.into(),
        };
        expenses.insert(&claim).await?;
    }
    let newest = expenses
        .query()
        .partition("Sales")
        .row_prefix((123u32,))
        .limit(2)
        .collect()
        .await?;
    for claim in &newest {
        println!("   {} {:>7.2} {}", claim.filed.0, claim.amount, claim.what);
    }
    println!("   claim   RK={:?}", schema::row_key_of(&*newest[0])?);

    println!("\n== employee 123's file: the employee, reviews and claims, one range query");
    let file: Vec<_> = employees
        .of::<EmployeeFile>()
        .read_collection::<Employee>("Sales", 123, UnknownKind::Fail)
        .try_collect()
        .await?;
    for row in &file {
        let line = match &**row {
            EmployeeFile::Employee(e) => format!("employee {} {}", e.id, e.name),
            EmployeeFile::Review(r) => format!("review {}: rating {}", r.year, r.rating),
            EmployeeFile::Expense(x) => format!("expense {} {:.2}", x.what, x.amount),
        };
        println!("   {line}");
    }

    println!("\n== skills: a compound key led by text reads as written");
    for (skill, employee, level) in [
        ("Public Speaking", 123, 4),
        ("Public Speaking", 7, 2),
        ("SQL", 150, 5),
        ("Public Speaking/Debate", 199, 3),
    ] {
        let s = Skill {
            department: "Sales".into(),
            skill: skill.into(),
            employee,
            level,
        };
        skills.insert(&s).await?;
        println!("   skill   RK={:?}", schema::row_key_of(&s)?);
    }
    for s in skills
        .query()
        .partition("Sales")
        .row_prefix(("Public Speaking",))
        .collect()
        .await?
    {
        println!("   {} speaks in public (level {})", s.employee, s.level);
    }

    println!("\n== optimistic concurrency: two writers, one ETag");
    let mut mine = employees.get("Sales", 123).await?.expect("stored");
    let mut theirs = employees.get("Sales", 123).await?.expect("stored");
    mine.email = "smith@fabrikam.com".into();
    employees.replace(&mut mine).await?;
    match employees.replace(&mut theirs).await {
        Err(e @ Error::PreconditionFailed { .. }) => {
            println!("   the second writer is refused: {e}")
        }
        other => println!("   unexpected: {other:?}"),
    }
    let updated = employees
        .update("Sales", 123, |e| e.name = "Smith-Jones".into())
        .await?;
    println!(
        "   update() re-read and re-applied: {} <{}>",
        updated.name, updated.email
    );

    println!("\n== the whole Sales partition, one query, typed by kind");
    let rows: Vec<_> = employees
        .of::<StaffRow>()
        .read_partition("Sales", UnknownKind::Fail)
        .try_collect()
        .await?;
    for row in &rows {
        let line = match &**row {
            StaffRow::Department(d) => format!("department managed by {}", d.manager),
            StaffRow::Employee(e) => format!("employee {} {}", e.id, e.name),
            StaffRow::Review(r) => format!("review {} {}", r.employee, r.year),
            StaffRow::Expense(x) => format!("expense {} {}", x.employee, x.what),
            StaffRow::Skill(s) => format!("skill {} of {}", s.skill, s.employee),
        };
        println!("   {line}");
    }

    println!("\n== keys hold any text: forbidden characters are escaped, never dropped");
    let odd = Department {
        department: "R&D / Labs #1?".into(),
        manager: "Hopper".into(),
        budget: 1.0,
    };
    departments.insert(&odd).await?;
    println!(
        "   {:?} is stored as PK {:?}",
        odd.department,
        schema::partition_key_of(&odd)?
    );
    let back = departments
        .get("R&D / Labs #1?", ())
        .await?
        .expect("stored");
    println!("   and reads back as {:?}", back.department);

    let raw = backend
        .get_entity(&table, "Sales", "EMP_0000000007", &Default::default())
        .await?;
    println!(
        "\n== the raw row of employee 7: {:?}",
        raw.properties.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    if remote {
        backend.delete_table(&table).await?;
    }
    Ok(())
}
