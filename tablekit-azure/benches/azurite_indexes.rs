//! An entity with two indexes (a unique email, a non-unique last name)
//! against a local Azurite (started by the bench itself, as the tests do),
//! beside the same rows written by hand in one transaction: sequential
//! inserts, updates that move the email, and deletes. Reports the mean
//! latency of each; each figure is the best of `ROUNDS` runs.
//!
//! `cargo bench -p tablekit-azure --bench azurite_indexes`
//!
//! A load measurement over HTTP, not a statistical micro-benchmark, so it
//! does not use criterion.

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit::{
    BatchOperation, ETag, Entity, IfMatch, Loaded, Table, TableBackend, TableEntity, UpdateMode,
};
use tablekit_azure::AzureTables;

const OPS: u32 = 300;
const ROUNDS: usize = 3;

#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "BenchIndexes", kind = "EMP")]
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

fn employee(id: u32, email: &str) -> Employee {
    Employee {
        department: "Sales".into(),
        id,
        first_name: "Jim".into(),
        last_name: "Jones".into(),
        email: email.into(),
        salary: 1000,
    }
}

/// The same rows as tablekit writes, built by hand.
fn hand_rows(id: u32, email: &str) -> [Entity; 3] {
    let main = Entity::new("Sales", format!("H_{id:010}"))
        .with("first_name", "Jim")
        .with("last_name", "Jones")
        .with("email", email)
        .with("salary", 1000i64)
        .with("_Kind", "H")
        .with("_Version", 1);
    let mut by_email = main.clone();
    by_email.row_key = format!("hemail_{email}");
    by_email.properties.remove("_Kind");
    by_email.insert("_Index", "email");
    by_email.insert("_Row", main.row_key.clone());
    let by_name = Entity::new("Sales", format!("hlast_Jones|{}", main.row_key))
        .with("first_name", "Jim")
        .with("email", email)
        .with("_Version", 1)
        .with("_Index", "last_name")
        .with("_Row", main.row_key.clone());
    [main, by_email, by_name]
}

fn mean(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e6 / f64::from(OPS)
}

/// One round: inserts, updates, deletes by tablekit and by hand, each side
/// in a table of its own; mean microseconds of each.
async fn round(backend: &Arc<dyn TableBackend>, r: usize) -> [(f64, f64); 3] {
    let name = format!("benchidx{r}{}", fastrand::u32(..));
    let table: Table<Employee> = Table::from_arc(Arc::clone(backend), &name);
    table.create_if_missing().await.expect("create");
    let hand_table = format!("{name}h");
    backend.create_table(&hand_table).await.expect("create");

    let started = Instant::now();
    for id in 0..OPS {
        table
            .insert(&employee(id, &format!("{id}@x")))
            .await
            .expect("insert");
    }
    let tk_insert = mean(started.elapsed());
    let started = Instant::now();
    let mut etags = Vec::new();
    for id in 0..OPS {
        let ops: Vec<_> = hand_rows(id, &format!("{id}@x"))
            .into_iter()
            .map(BatchOperation::Insert)
            .collect();
        let written = backend
            .submit_transaction(&hand_table, &ops)
            .await
            .expect("insert");
        etags.push(written[0].clone().expect("etag"));
    }
    let hand_insert = mean(started.elapsed());

    let mut loaded: Vec<Loaded<Employee>> = Vec::new();
    for id in 0..OPS {
        loaded.push(table.get("Sales", id).await.expect("get").expect("found"));
    }
    let started = Instant::now();
    for value in &mut loaded {
        value.email = format!("moved{}@x", value.id);
        table.replace(value).await.expect("replace");
    }
    let tk_update = mean(started.elapsed());
    let started = Instant::now();
    for (id, etag) in (0..OPS).zip(etags.iter_mut()) {
        let new = format!("moved{id}@x");
        let [main, by_email, by_name] = hand_rows(id, &new);
        let ops = [
            BatchOperation::Update {
                entity: main,
                mode: UpdateMode::Replace,
                if_match: IfMatch::ETag(etag.clone()),
            },
            BatchOperation::Delete {
                partition_key: "Sales".into(),
                row_key: format!("hemail_{id}@x"),
                if_match: IfMatch::Any,
            },
            BatchOperation::Insert(by_email),
            BatchOperation::Upsert {
                entity: by_name,
                mode: UpdateMode::Replace,
            },
        ];
        let written = backend
            .submit_transaction(&hand_table, &ops)
            .await
            .expect("update");
        *etag = written[0].clone().expect("etag");
    }
    let hand_update = mean(started.elapsed());

    let started = Instant::now();
    for value in &loaded {
        table.delete(value).await.expect("delete");
    }
    let tk_delete = mean(started.elapsed());
    let started = Instant::now();
    for (id, etag) in (0..OPS).zip(&etags) {
        let main = format!("H_{id:010}");
        let ops = [
            BatchOperation::Delete {
                partition_key: "Sales".into(),
                row_key: main.clone(),
                if_match: IfMatch::ETag(ETag::clone(etag)),
            },
            BatchOperation::Delete {
                partition_key: "Sales".into(),
                row_key: format!("hemail_moved{id}@x"),
                if_match: IfMatch::Any,
            },
            BatchOperation::Delete {
                partition_key: "Sales".into(),
                row_key: format!("hlast_Jones|{main}"),
                if_match: IfMatch::Any,
            },
        ];
        backend
            .submit_transaction(&hand_table, &ops)
            .await
            .expect("delete");
    }
    let hand_delete = mean(started.elapsed());
    table.delete_table().await.expect("drop");
    backend.delete_table(&hand_table).await.expect("drop");
    [
        (tk_insert, hand_insert),
        (tk_update, hand_update),
        (tk_delete, hand_delete),
    ]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let backend: Arc<dyn TableBackend> =
        Arc::new(AzureTables::new(azurite::account()).expect("a client for Azurite"));
    println!(
        "entity with two indexes, {OPS} sequential operations each, Azurite {} in memory",
        azurite::VERSION
    );
    let mut best = [(f64::MAX, f64::MAX); 3];
    for r in 0..ROUNDS {
        for (b, (tk, hand)) in best.iter_mut().zip(round(&backend, r).await) {
            b.0 = b.0.min(tk);
            b.1 = b.1.min(hand);
        }
    }
    for (label, (tk, hand)) in ["insert", "update (email moves)", "delete"]
        .iter()
        .zip(best)
    {
        println!(
            "{label:<22} tablekit {tk:>7.0} µs   by hand {hand:>7.0} µs   {:.2}x",
            tk / hand
        );
    }
}
