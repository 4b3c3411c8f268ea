//! Nine short programs of the kind a new user writes first, one per
//! function, each on a table of its own: a multi-tenant prefix query, kinds
//! in one partition, a log tail, two writers, a web page cursor, tables per
//! day, a wide entity and a blob field, a bulk load read back with a filter
//! and a projection. Run on the in-memory backend with
//! `cargo run -p tablekit-examples --example scenarios`; with
//! `TABLEKIT_CONNECTION_STRING` set (for Azurite: `UseDevelopmentStorage=true`)
//! the same code runs on the REST backend, which is the ninth scenario.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::key::InvertedTime;
use tablekit::{
    BlobStore, DateTime, EntityKinds, Error, Table, TableBackend, TableEntity, UnknownKind,
};

/// A user session under a tenant > user hierarchical PartitionKey.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Sessions")]
struct Session {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    started: InvertedTime,
    device: String,
}

async fn multi_tenant_prefix_query(
    backend: Arc<dyn TableBackend>,
    name: &str,
) -> Result<(), Error> {
    let sessions: Table<Session> = Table::from_arc(backend, name);
    sessions.create_if_missing().await?;
    for (tenant, user) in [("acme", "ada"), ("acme", "bob"), ("acme corp", "cy")] {
        let started = InvertedTime(DateTime::now());
        let device = "laptop".to_string();
        let (tenant, user) = (tenant.to_string(), user.to_string());
        sessions
            .insert(&Session {
                tenant,
                user,
                started,
                device,
            })
            .await?;
    }
    let acme = sessions.query().partition_prefix("acme").collect().await?;
    println!(
        "1. tenant acme: {} sessions (not `acme corp`'s)",
        acme.len()
    );
    Ok(())
}

/// A department and its employees in one partition.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Org", kind = "DEPT")]
struct Department {
    #[tablekit(partition_key)]
    name: String,
    budget: f64,
}

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Org", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

#[derive(EntityKinds, Debug)]
enum OrgRow {
    Department(Department),
    Employee(Employee),
}

async fn kinds_in_one_partition(backend: Arc<dyn TableBackend>, name: &str) -> Result<(), Error> {
    let departments: Table<Department> = Table::from_arc(backend, name);
    departments.create_if_missing().await?;
    departments
        .insert(&Department {
            name: "Sales".into(),
            budget: 1e6,
        })
        .await?;
    let employees = departments.of::<Employee>();
    for (id, who) in [(7, "Ada"), (9, "Bob")] {
        let e = Employee {
            department: "Sales".into(),
            id,
            name: who.into(),
        };
        employees.insert(&e).await?;
    }
    let rows: Vec<_> = departments
        .of::<OrgRow>()
        .read_partition("Sales", UnknownKind::Fail)
        .try_collect()
        .await?;
    for row in &rows {
        match &**row {
            OrgRow::Department(d) => println!("2. department {} (budget {})", d.name, d.budget),
            OrgRow::Employee(e) => println!("   employee {} {}", e.id, e.name),
        }
    }
    Ok(())
}

/// A log line: newest first, then by sequence.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Log")]
struct LogLine {
    #[tablekit(partition_key)]
    source: String,
    #[tablekit(row_key)]
    at: InvertedTime,
    #[tablekit(row_key)]
    seq: u32,
    text: String,
}

async fn log_tail(backend: Arc<dyn TableBackend>, name: &str) -> Result<(), Error> {
    let log: Table<LogLine> = Table::from_arc(backend, name);
    log.create_if_missing().await?;
    let start = DateTime::parse("2026-11-23T10:00:00Z")?;
    for seq in 0..30u32 {
        let at =
            InvertedTime(start.checked_add(std::time::Duration::from_secs(u64::from(seq) * 60))?);
        log.insert(&LogLine {
            source: "api".into(),
            at,
            seq,
            text: format!("line {seq}"),
        })
        .await?;
    }
    let cutoff = InvertedTime(start.checked_add(std::time::Duration::from_secs(20 * 60))?);
    let tail = log
        .query()
        .partition("api")
        .row_prefix_range(cutoff..)
        .limit(10)
        .collect()
        .await?;
    println!(
        "3. ten lines from 10:20 back: {} … {}",
        tail[0].text, tail[9].text
    );
    Ok(())
}

async fn two_writers(backend: Arc<dyn TableBackend>, name: &str) -> Result<(), Error> {
    let staff: Table<Employee> = Table::from_arc(backend, name);
    staff.create_if_missing().await?;
    staff
        .insert(&Employee {
            department: "Ops".into(),
            id: 1,
            name: "Ada".into(),
        })
        .await?;
    let mut mine = staff.get("Ops", 1).await?.expect("stored");
    let mut theirs = staff.get("Ops", 1).await?.expect("stored");
    mine.name = "Ada L.".into();
    staff.replace(&mut mine).await?;
    theirs.name = "Ada K.".into();
    let refused = staff.replace(&mut theirs).await.is_err();
    let merged = staff
        .update("Ops", 1, |e| e.name.push_str(" (checked)"))
        .await?;
    println!(
        "4. second writer refused: {refused}; update() gives {:?}",
        merged.name
    );
    Ok(())
}

async fn web_page_cursor(backend: Arc<dyn TableBackend>, name: &str) -> Result<(), Error> {
    let staff: Table<Employee> = Table::from_arc(backend, name);
    staff.create_if_missing().await?;
    for id in 0..25 {
        staff
            .insert(&Employee {
                department: "Web".into(),
                id,
                name: format!("e{id}"),
            })
            .await?;
    }
    let first = staff.query().partition("Web").page_of(10).await?;
    let link = first.next.expect("more follow").to_string(); // `?after=…` in a URL
    let second = staff
        .query()
        .partition("Web")
        .after(link.parse()?)
        .page_of(10)
        .await?;
    println!(
        "5. page 2 starts at id {}; link {} bytes",
        second.items[0].id,
        link.len()
    );
    Ok(())
}

/// An audit event, in one table per day.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Audit")]
struct Audit {
    #[tablekit(partition_key)]
    actor: String,
    #[tablekit(row_key)]
    at: DateTime,
    what: String,
}

async fn tables_per_day(backend: Arc<dyn TableBackend>, prefix: &str) -> Result<(), Error> {
    let audit: Table<Audit> = Table::from_arc(Arc::clone(&backend), prefix);
    for day in ["20261121", "20261122", "20261123"] {
        let today = audit.named(&format!("{prefix}{day}"));
        today.create_if_missing().await?;
        let at = DateTime::parse(&format!(
            "{}-{}-{}T09:00:00Z",
            &day[..4],
            &day[4..6],
            &day[6..]
        ))?;
        today
            .insert(&Audit {
                actor: "ada".into(),
                at,
                what: "login".into(),
            })
            .await?;
    }
    let options = tablekit::ListTablesOptions::default().with_prefix(prefix);
    let days = backend.list_tables(&options).await?.tables;
    audit.named(&days[0]).delete_table().await?;
    println!(
        "5b. {} daily tables; dropped {} in one request",
        days.len(),
        days[0]
    );
    Ok(())
}

/// A wide entity: more properties than one row holds.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Wide", wide)]
struct Sensor {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(series)]
    samples: Vec<f64>,
    #[tablekit(blob)]
    manual: Vec<u8>,
}

async fn wide_entity_and_blob(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn BlobStore>,
    name: &str,
) -> Result<(), Error> {
    // The table and its blob container, each made if missing.
    let sensors: Table<Sensor> = Table::from_arc(backend, name).with_blob_store(blobs, name);
    sensors.create_if_missing().await?;
    let samples = (0..600).map(f64::from).collect();
    sensors
        .insert(&Sensor {
            site: "north".into(),
            samples,
            manual: vec![7; 100_000],
        })
        .await?;
    let back = sensors.get("north", ()).await?.expect("stored");
    println!(
        "6. {} samples over several rows, a {} byte manual in a blob",
        back.samples.len(),
        back.manual.len()
    );
    Ok(())
}

/// Only the names of employees.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(projection_of = Employee)]
struct EmployeeName {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

async fn bulk_load_filter_projection(
    backend: Arc<dyn TableBackend>,
    name: &str,
) -> Result<(), Error> {
    let staff: Table<Employee> = Table::from_arc(backend, name);
    staff.create_if_missing().await?;
    let people: Vec<Employee> = (0..1000)
        .map(|id| Employee {
            department: format!("d{}", id % 4),
            id,
            name: format!("e{id}"),
        })
        .collect();
    let report = staff.bulk().insert(&people).await;
    let named = staff
        .query()
        .partition("d1")
        .filter(Employee::columns().name.ge("e9"))
        .project::<EmployeeName>()
        .collect()
        .await?;
    println!(
        "7. {} written in {} batches; {} names from e9 on in d1",
        report.written,
        report.batches,
        named.len()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // The ninth scenario: the same code on the REST backend.
    let tablekit_examples::Store { backend, blobs, .. } = tablekit_examples::store("Scenarios")?;
    let run = format!("{:06}", std::process::id() % 1_000_000);
    let name = |scenario: &str| format!("{scenario}{run}");
    multi_tenant_prefix_query(Arc::clone(&backend), &name("Sessions")).await?;
    kinds_in_one_partition(Arc::clone(&backend), &name("Org")).await?;
    log_tail(Arc::clone(&backend), &name("Log")).await?;
    two_writers(Arc::clone(&backend), &name("Writers")).await?;
    web_page_cursor(Arc::clone(&backend), &name("Pages")).await?;
    tables_per_day(Arc::clone(&backend), &name("Audit")).await?;
    wide_entity_and_blob(Arc::clone(&backend), blobs, &name("wide")).await?;
    bulk_load_filter_projection(Arc::clone(&backend), &name("Bulk")).await?;
    let made = backend.list_tables(&Default::default()).await?.tables;
    for table in made.iter().filter(|t| t.ends_with(&run)) {
        backend.delete_table(table).await?;
    }
    Ok(())
}
