//! Changes across partitions through the outbox, against a local Azurite
//! (started by the bench itself, as the tests do): requests and latency of
//! a move finished by its writer; of an entity write with two indexes kept
//! elsewhere (another partition, another table) beside the same rows
//! written by hand in sequence; and the worker's drain rate for moves whose
//! writer stopped after its commit.
//!
//! `cargo bench -p tablekit-azure --bench azurite_outbox`
//!
//! A load measurement over HTTP, not a statistical micro-benchmark, so it
//! does not use criterion.

#[path = "../tests/azurite/mod.rs"]
mod azurite;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit::TableBackendExt;
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit::outbox::Outbox;
use tablekit::{Entity, QueueStore, Table, TableBackend, TableEntity, UpdateMode};
use tablekit_azure::{AzureQueues, AzureTables};
use tablekit_conformance::outbox_drain;

const WRITES: u32 = 200;

/// A contact with two indexes kept elsewhere: by email in partition
/// `email_{team}`, by city in another table.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "BenchContacts", kind = "CON")]
#[tablekit(index(name = "email", partition = "email", copy(salary)))]
#[tablekit(index(name = "city", table = "BenchCities"))]
struct Contact {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(index = "email")]
    email: String,
    #[tablekit(index = "city")]
    city: String,
    salary: u32,
}

fn requests(handle: &FaultHandle) -> usize {
    use Operation::*;
    [
        GetEntity,
        QueryEntities,
        InsertEntity,
        UpdateEntity,
        UpsertEntity,
        DeleteEntity,
        SubmitTransaction,
        PutMessage,
        DeleteMessage,
    ]
    .iter()
    .map(|op| handle.calls(*op))
    .sum()
}

/// Inserts and updates (the email moves) of a contact with two indexes
/// kept elsewhere, through tablekit and by hand; prints mean latency and
/// requests of each.
async fn remote_index_writes(tables: Arc<dyn TableBackend>, queues: Arc<dyn QueueStore>) {
    let name = format!("benchremote{}", std::process::id());
    tables.create_table(&name).await.expect("create table");
    match tables.create_table("BenchCities").await {
        Ok(()) | Err(tablekit::Error::TableAlreadyExists { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    let queue = format!("benchremote{}", std::process::id());
    queues.create_queue(&queue).await.expect("create queue");
    let layer = FaultInjection::new(Arc::clone(&queues));
    let queue_calls = layer.handle();
    let counted = FaultInjection::new(Arc::clone(&tables));
    let table_calls = counted.handle();
    let table: Table<Contact> = Table::from_arc(Arc::new(counted), &name)
        .with_outbox(Outbox::new(Arc::new(layer), queue.clone()));
    let contact = |id: u32, email: &str| Contact {
        team: "Sales".into(),
        id,
        email: email.into(),
        city: "Oslo".into(),
        salary: 1,
    };
    let count = |tables: &FaultHandle, queues: &FaultHandle| requests(tables) + requests(queues);
    let (mut insert, mut update) = (Duration::ZERO, Duration::ZERO);
    let before = count(&table_calls, &queue_calls);
    for id in 0..WRITES {
        let started = Instant::now();
        table.insert(&contact(id, "a@x")).await.expect("insert");
        insert += started.elapsed();
    }
    let insert_requests = count(&table_calls, &queue_calls) - before;
    let before = count(&table_calls, &queue_calls);
    for id in 0..WRITES {
        let started = Instant::now();
        table
            .update("Sales", id, |c| c.email = "b@x".into())
            .await
            .expect("update");
        update += started.elapsed();
    }
    let update_requests = count(&table_calls, &queue_calls) - before;
    // By hand: the entity's row, then each index row where it lives (and,
    // for an update, the old email row's delete), in sequence.
    let row = |id: u32, email: &str| {
        Entity::new("Sales", format!("H_{id:010}"))
            .with("email", email)
            .with("city", "Oslo")
            .with("salary", 1i64)
    };
    let index = |pk: &str, rk: String, id: u32| {
        Entity::new(pk, rk)
            .with("salary", 1i64)
            .with("_Row", format!("H_{id:010}"))
    };
    let (mut hand_insert, mut hand_update) = (Duration::ZERO, Duration::ZERO);
    for id in 0..WRITES {
        let started = Instant::now();
        tables
            .insert_entity(&name, &row(id, "a@x"))
            .await
            .expect("insert");
        tables
            .upsert_entity(
                &name,
                &index("email_Sales", format!("h.email_a@x|{id}"), id),
                UpdateMode::Replace,
            )
            .await
            .expect("upsert");
        tables
            .upsert_entity(
                "BenchCities",
                &index("Sales", format!("h.city_Oslo|{id}"), id),
                UpdateMode::Replace,
            )
            .await
            .expect("upsert");
        hand_insert += started.elapsed();
    }
    for id in 0..WRITES {
        let started = Instant::now();
        let read = tables
            .get_entity(&name, "Sales", &format!("H_{id:010}"), &Default::default())
            .await
            .expect("read");
        tables
            .update_entity(
                &name,
                &row(id, "b@x"),
                UpdateMode::Replace,
                &tablekit::IfMatch::ETag(read.etag.expect("etag")),
            )
            .await
            .expect("update");
        tables
            .delete_entity(
                &name,
                "email_Sales",
                &format!("h.email_a@x|{id}"),
                &tablekit::IfMatch::Any,
            )
            .await
            .expect("delete");
        tables
            .upsert_entity(
                &name,
                &index("email_Sales", format!("h.email_b@x|{id}"), id),
                UpdateMode::Replace,
            )
            .await
            .expect("upsert");
        tables
            .upsert_entity(
                "BenchCities",
                &index("Sales", format!("h.city_Oslo|{id}"), id),
                UpdateMode::Replace,
            )
            .await
            .expect("upsert");
        hand_update += started.elapsed();
    }
    let mean = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(WRITES);
    let per = |n: usize| n as f64 / f64::from(WRITES);
    println!("entity with two indexes kept elsewhere, {WRITES} writes each");
    println!(
        "insert  tablekit {:6.0} µs {:4.1} requests   by hand {:6.0} µs 3 requests   {:.2}x",
        mean(insert),
        per(insert_requests),
        mean(hand_insert),
        mean(insert) / mean(hand_insert)
    );
    println!(
        "update  tablekit {:6.0} µs {:4.1} requests   by hand {:6.0} µs 5 requests   {:.2}x",
        mean(update),
        per(update_requests),
        mean(hand_update),
        mean(update) / mean(hand_update)
    );
    tables.delete_table(&name).await.expect("delete table");
    queues.delete_queue(&queue).await.expect("delete queue");
}

const MOVES: usize = 300;

#[tokio::main]
async fn main() {
    let account = azurite::account();
    remote_index_writes(
        Arc::new(AzureTables::new(account.clone()).expect("a table client")),
        Arc::new(AzureQueues::new(account.clone()).expect("a queue client")),
    )
    .await;
    let figures = outbox_drain(
        Arc::new(AzureTables::new(account.clone()).expect("a table client")),
        Arc::new(AzureQueues::new(account).expect("a queue client")),
        MOVES,
    )
    .await;
    println!(
        "outbox on Azurite {}, {MOVES} moves each way",
        azurite::VERSION
    );
    println!(
        "move finished by its writer: {:.1} requests, {:.0} µs",
        figures.requests_per_move,
        figures.move_latency.as_secs_f64() * 1e6
    );
    println!(
        "worker drain: {} messages in {:.0} ms, {:.0} messages/s",
        figures.drained,
        figures.drain_time.as_secs_f64() * 1e3,
        figures.drained as f64 / figures.drain_time.as_secs_f64()
    );
}
