//! Transactions that put rows in another partition once they commit, under faults.

use super::*;

/// The log entry a transaction of employee `id` puts elsewhere.
pub(super) fn log_entry(id: u32) -> Entity {
    Entity::new("log", format!("e{id:04}"))
        .with("Employee", i64::from(id))
        .with("Action", format!("hired {id}"))
}

/// Submits 40 transactions, each an insert of an employee and a put of its
/// log entry in `elsewhere`, under random faults (a writer that stops after
/// its commit among them): whether each committed (`None`: unknown).
pub(super) async fn submit_under_faults(
    table: &Table<Mover>,
    faults: &tablekit::layer::FaultHandle,
    elsewhere: &str,
) -> BTreeMap<u32, Option<bool>> {
    let mut rng = fastrand::Rng::with_seed(4545);
    // Per employee: whether its transaction committed (`None`: unknown).
    let mut committed: BTreeMap<u32, Option<bool>> = BTreeMap::new();
    for id in 0..40u32 {
        faults.clear();
        if rng.f64() < 0.7 {
            let fault = [Fault::Transient, Fault::LostResponse][rng.usize(0..2)];
            faults.inject(Injection::any().skip(rng.usize(0..5)).fault(fault));
        }
        if rng.f64() < 0.2 {
            // The writer stops after its commit: every later call fails.
            faults.inject(
                Injection::any()
                    .skip(rng.usize(1..4))
                    .times(usize::MAX)
                    .fault(Fault::Transient),
            );
        }
        let mover = Mover {
            department: ["Sales", "Ops"][rng.usize(0..2)].into(),
            id,
            last_name: "Jones".into(),
            salary: id,
            badge: format!("b{id}"),
        };
        let mut tx = table.transaction();
        tx.insert(&mover).expect("an insert");
        tx.then_put(elsewhere, log_entry(id)).expect("a put");
        let outcome = match tx.submit().await {
            Ok(etags) => {
                assert_eq!(etags.len(), 1, "one ETag per write, none for the puts");
                Some(true)
            }
            Err(error) if error.is_outcome_unknown() => None,
            Err(_) => Some(false),
        };
        committed.insert(id, outcome);
    }
    committed
}

/// `Transaction::then_put`: a row put into another table once the
/// transaction commits. Over random transactions (an employee inserted, an
/// entry put elsewhere) with faults injected at random steps (failures,
/// lost answers, a writer that stops after its commit), once the worker and
/// the sweeper have drained: an entry exists exactly for each transaction
/// that committed, with the values put, and no record is left. A put of a
/// reserved RowKey, and a transaction with nothing but puts, are refused.
pub async fn transactions_put_elsewhere_once_they_commit(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "then").await;
    let elsewhere = fresh_table(&*backend, "thenlog").await;
    let queue = unique_queue();
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    faults.seed(45);
    let faulty: Arc<dyn TableBackend> = Arc::new(layer);
    let outbox = Outbox::new(Arc::clone(&queues), queue.clone()).delay(Duration::ZERO);
    OutboxWorker::new(Arc::clone(&backend), Arc::clone(&queues), &queue)
        .create_queues()
        .await
        .expect("create the queues");
    let table: Table<Mover> =
        Table::from_arc(Arc::clone(&faulty), &name).with_outbox(outbox.clone());
    let plain: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name);
    let entry = log_entry;

    // Refused up front: a reserved RowKey; nothing but puts.
    let mut tx = table.transaction();
    assert!(matches!(
        tx.then_put(&elsewhere, Entity::new("log", "~tk|fence|x")),
        Err(Error::Invalid(
            tablekit::InvalidInput::ReservedRowKey { .. }
        ))
    ));
    tx.then_put(&elsewhere, entry(9999)).expect("a put");
    assert!(tx.submit().await.is_err(), "a transaction of puts alone");

    let committed = submit_under_faults(&table, &faults, &elsewhere).await;
    faults.clear();
    // The run met every outcome: committed, refused, unknown.
    for (outcome, what) in [
        (Some(true), "committed"),
        (Some(false), "refused"),
        (None, "unknown"),
    ] {
        assert!(
            committed.values().any(|o| *o == outcome),
            "no transaction {what}: the faults did not reach it"
        );
    }
    // Some were committed with their puts left to the drain.
    let left = outbox::pending_count(backend.as_ref(), &name)
        .await
        .expect("count");
    drain(&backend, &queues, &queue, &name).await;
    let stored = rows(backend.as_ref(), &elsewhere).await;
    for (id, outcome) in committed {
        let exists = plain.get("Sales", id).await.expect("get").is_some()
            || plain.get("Ops", id).await.expect("get").is_some();
        let put = stored
            .iter()
            .find(|row| row.row_key == format!("e{id:04}") && row.partition_key == "log");
        if let Some(outcome) = outcome {
            assert_eq!(exists, outcome, "employee {id}: committed {outcome}");
        }
        assert_eq!(
            put.is_some(),
            exists,
            "employee {id}: the entry exists exactly when the write does"
        );
        if let Some(put) = put {
            assert_eq!(put.properties, entry(id).properties, "employee {id}");
        }
    }
    assert_eq!(
        outbox::pending_count(backend.as_ref(), &name)
            .await
            .expect("count"),
        0,
        "no record left"
    );
    assert!(left > 0, "no put was left for the drain to finish");
    for table in [&name, &elsewhere] {
        backend.delete_table(table).await.expect("delete a table");
    }
}
