//! Changes across partitions through the outbox: whatever fails, whoever
//! stops, however often a notice is delivered, every change converges once
//! the worker has drained and the sweeper has run, and no step applied
//! twice changes the result.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{QueueTime, fresh_table};
use tablekit::Error;
use tablekit::TableBackendExt;
use tablekit::backend::{Query, TableBackend};
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::outbox::{self, Outbox, OutboxWorker, WorkerConfig};
use tablekit::queue::{PutMessageOptions, QueueStore};
use tablekit::table::Table;
use tablekit::{Entity, TableEntity};

/// An employee, found by last name inside their department, who moves
/// between departments.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "MOV")]
#[tablekit(index(name = "name", copy(salary)))]
#[tablekit(index(name = "badge", copy()))]
pub struct Mover {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id, unique in the table.
    #[tablekit(row_key)]
    pub id: u32,
    /// Indexed in the department.
    #[tablekit(index = "name")]
    pub last_name: String,
    /// Copied into the index rows.
    pub salary: u32,
    /// Unique in the department.
    #[tablekit(unique = "badge")]
    pub badge: String,
}

/// A fresh queue name for a test.
fn unique_queue() -> String {
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(10)
        .collect();
    format!("tk-outbox-{suffix}")
}

/// What a model run saw, for the caller to report.
#[derive(Debug, Default, Clone, Copy)]
pub struct OutboxOutcomes {
    /// Moves that reported success.
    pub moved: usize,
    /// Moves refused or failed with nothing changed.
    pub refused: usize,
    /// Moves whose outcome was unknown, settled after the drain.
    pub unknown: usize,
    /// Messages the worker set aside as poison.
    pub poisoned: u64,
    /// Notices delivered again on purpose.
    pub duplicates: usize,
    /// Moves after which a reader found the employee in both departments
    /// (a copy made, the old row not yet given up: never in neither).
    pub found_in_both: u64,
}

/// An outbox record row, as a write of entity `(pk, rk)` of `table` leaves
/// it; for tests that set up records by hand.
pub fn record_for_tests(
    table: &str,
    pk: &str,
    rk: &str,
    seq: i64,
    at: tablekit::DateTime,
    steps: &[tablekit::outbox::Step],
) -> Entity {
    tablekit::__conformance::record_row(table, pk, rk, seq, at, "test", steps)
}

/// Every row of the table.
async fn rows(backend: &dyn TableBackend, table: &str) -> Vec<Entity> {
    backend
        .query_all(table, Query::new())
        .await
        .expect("read the table")
}

/// Drains: the worker until the queue is empty, then the sweeper with no
/// age, on the store without faults.
async fn drain(
    backend: &Arc<dyn TableBackend>,
    queues: &Arc<dyn QueueStore>,
    queue: &str,
    table: &str,
) {
    let worker = OutboxWorker::new(Arc::clone(backend), Arc::clone(queues), queue).config({
        let mut config = WorkerConfig::default();
        config.visibility = Duration::from_secs(1);
        config
    });
    // Notices that failed come back later and find nothing to do: the
    // sweeper finishes their records now.
    while worker.run_once().await.expect("drain the queue") > 0 {}
    let clock = tablekit::clock::SystemClock;
    let report = outbox::sweep(backend.as_ref(), table, Duration::ZERO, None, &clock)
        .await
        .expect("sweep");
    assert!(
        report.failed.is_empty(),
        "the sweep finished every record: {:?}",
        report.failed
    );
}

/// Checks what the table holds against the model: each employee in exactly
/// one department with its last values, index rows in step, no record left.
async fn check(backend: &dyn TableBackend, table: &str, model: &BTreeMap<u32, Vec<Mover>>) {
    let all = rows(backend, table).await;
    assert!(
        !all.iter().any(outbox::is_outbox_row),
        "no outbox record is left after the drain"
    );
    let audit = tablekit::index::audit::<Mover>(&all);
    assert!(audit.is_clean(), "index rows in step: {audit:?}");
    let mut found: BTreeMap<u32, Vec<Mover>> = BTreeMap::new();
    for row in &all {
        if !outbox::is_bookkeeping_row(row) && tablekit::schema::is_kind::<Mover>(row) {
            let mover: Mover = tablekit::schema::from_entity(row).expect("a mover");
            found.entry(mover.id).or_default().push(mover);
        }
    }
    for (id, candidates) in model {
        let stored = found.remove(id).unwrap_or_default();
        assert_eq!(
            stored.len(),
            1,
            "employee {id} is in exactly one department: {stored:?}"
        );
        assert!(
            candidates.contains(&stored[0]),
            "employee {id} holds what was last written: {:?} not in {candidates:?}",
            stored[0]
        );
    }
    let (first, last) = (model.keys().next(), model.keys().next_back());
    if let (Some(&first), Some(&last)) = (first, last) {
        assert!(
            found.range(first..=last).next().is_none(),
            "no employee of the run appears from nowhere"
        );
    }
}

/// The departments of the outbox model run.
const DEPARTMENTS: [&str; 3] = ["Sales", "Ops", "Dev"];

/// What one step of the outbox model run works with.
struct OutboxStep<'a> {
    backend: &'a Arc<dyn TableBackend>,
    queues: &'a Arc<dyn QueueStore>,
    queue: &'a str,
    name: &'a str,
    table: &'a Table<Mover>,
    plain: &'a Table<Mover>,
    table_faults: &'a tablekit::layer::FaultHandle,
    queue_faults: &'a tablekit::layer::FaultHandle,
    worker: &'a OutboxWorker,
    base: u32,
}

impl OutboxStep<'_> {
    /// One step: random faults, a random move of one of the run's three
    /// employees, the check that a reader finds it somewhere (settling an
    /// unknown outcome at once), and at random a notice delivered twice or
    /// a worker pass.
    async fn run(
        &self,
        rng: &mut fastrand::Rng,
        model: &mut BTreeMap<u32, Vec<Mover>>,
        outcomes: &mut OutboxOutcomes,
    ) {
        self.table_faults.clear();
        self.queue_faults.clear();
        if rng.f64() < 0.6 {
            let fault = [Fault::Transient, Fault::LostResponse][rng.usize(0..2)];
            let injection = Injection::any().skip(rng.usize(0..6)).fault(fault);
            if rng.bool() {
                self.table_faults.inject(injection);
            } else {
                self.queue_faults.inject(injection);
            }
        }
        if rng.f64() < 0.1 {
            // The writer stops after its commit: every later step fails.
            self.table_faults
                .inject(Injection::on(Operation::QueryEntities).times(usize::MAX));
        } else if rng.f64() < 0.1 {
            // Every transaction after the first fails.
            self.table_faults.inject(
                Injection::on(Operation::SubmitTransaction)
                    .skip(1)
                    .times(usize::MAX),
            );
        }
        let id = self.base + rng.u32(0..3);
        let Some(loaded) = self
            .plain
            .get(model[&id][0].department.as_str(), id)
            .await
            .expect("read")
        else {
            // Settled elsewhere after a lost answer: look it up.
            return;
        };
        let mut moved = (*loaded).clone();
        moved.department = DEPARTMENTS[rng.usize(0..3)].into();
        moved.salary = rng.u32(..1000);
        if rng.bool() {
            moved.last_name = ["Jones", "Smith", "Brown"][rng.usize(0..3)].into();
        }
        match self.table.move_to(&loaded, &moved).await {
            Ok(()) => {
                outcomes.moved += 1;
                model.insert(id, vec![moved]);
            }
            Err(Error::OutcomeUnknown { .. }) => {
                outcomes.unknown += 1;
                model.insert(id, vec![(*loaded).clone(), moved]);
            }
            Err(_) => {
                outcomes.refused += 1;
            }
        }
        self.table_faults.clear();
        self.queue_faults.clear();
        // Whatever failed, a reader finds the employee somewhere: in the
        // old department, the new one, or (until the move finishes) both.
        let places = rows(self.backend.as_ref(), self.name)
            .await
            .into_iter()
            .filter(|row| {
                !outbox::is_bookkeeping_row(row)
                    && tablekit::schema::from_entity::<Mover>(row).is_ok_and(|m| m.id == id)
            })
            .count();
        assert!(places >= 1, "employee {id} is in neither department");
        outcomes.found_in_both += u64::from(places > 1);
        // Settle an unknown outcome now: the next move reads from where
        // the employee is.
        if model[&id].len() > 1 {
            drain(self.backend, self.queues, self.queue, self.name).await;
            let at = rows(self.backend.as_ref(), self.name)
                .await
                .into_iter()
                .find(|row| {
                    tablekit::schema::is_kind::<Mover>(row)
                        && !outbox::is_bookkeeping_row(row)
                        && tablekit::schema::from_entity::<Mover>(row).is_ok_and(|m| m.id == id)
                });
            let at: Mover = tablekit::schema::from_entity(&at.expect("the employee is somewhere"))
                .expect("a mover");
            assert!(model[&id].contains(&at), "a settled move is one of the two");
            model.insert(id, vec![at]);
        }
        match rng.usize(0..4) {
            0 => {
                // A notice delivered twice.
                let notice = format!(
                    "{{\"table\":\"{}\",\"pk\":\"{}\",\"rk\":\"MOV_{id:010}\"}}",
                    self.name, model[&id][0].department
                );
                self.queues
                    .put_message(self.queue, &notice, &PutMessageOptions::default())
                    .await
                    .expect("put a duplicate");
                outcomes.duplicates += 1;
            }
            1 => {
                let _ = self.worker.run_once().await;
            }
            _ => {}
        }
    }

    /// A notice that fails until it is poison: every table read fails
    /// while the worker takes it six times, a second apart.
    async fn poison_one_notice(&self, time: &QueueTime) {
        self.table_faults
            .inject(Injection::on(Operation::QueryEntities).times(usize::MAX));
        let notice = format!(
            "{{\"table\":\"{}\",\"pk\":\"Sales\",\"rk\":\"MOV_{:010}\"}}",
            self.name, self.base
        );
        self.queues
            .put_message(self.queue, &notice, &PutMessageOptions::default())
            .await
            .expect("put");
        for _ in 0..6 {
            let _ = self.worker.run_once().await;
            time.pass(Duration::from_secs(1)).await;
        }
    }
}

/// The ids the messages on `queue`'s poison queue name (each carrying its
/// error), read off the queue.
async fn poison_ids(queues: &dyn QueueStore, queue: &str) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    loop {
        let poison = queues
            .get_messages(
                &outbox::poison_queue_name(queue),
                32,
                Duration::from_secs(3600),
            )
            .await
            .expect("read the poison queue");
        if poison.is_empty() {
            break;
        }
        for message in poison {
            let json: serde_json::Value =
                serde_json::from_str(&message.text).expect("a poison message is JSON");
            assert!(
                json.get("error").is_some(),
                "poison messages carry their error"
            );
            let id = json["id"].as_str().expect("poison messages name their id");
            ids.insert(id.to_owned());
        }
    }
    ids
}

/// Random moves and updates of a few employees between departments, with
/// faults injected into the tables and the queue at random steps (failures,
/// lost answers, a writer that stops after its commit), notices delivered
/// twice, a worker that fails until the notice goes to the poison queue,
/// and a drain after each run that must converge: each employee in exactly
/// one department, with what was last written to it, its index rows in
/// step, and no record left.
pub async fn outbox_model_runs(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    time: QueueTime,
    runs: usize,
    steps: usize,
    seed: u64,
) -> OutboxOutcomes {
    let mut outcomes = OutboxOutcomes::default();
    let mut poison_phases = 0u64;
    let queue = unique_queue();
    let tables = FaultInjection::new(Arc::clone(&backend));
    let table_faults = tables.handle();
    table_faults.seed(seed);
    let faulty_queues = FaultInjection::new(Arc::clone(&queues));
    let queue_faults = faulty_queues.handle();
    queue_faults.seed(seed ^ 0xF00D);
    let faulty_queues: Arc<dyn QueueStore> = Arc::new(faulty_queues);
    let faulty_tables: Arc<dyn TableBackend> = Arc::new(tables);
    let outbox = Outbox::new(Arc::clone(&faulty_queues), queue.clone()).delay(Duration::ZERO);
    let worker = OutboxWorker::new(
        Arc::clone(&faulty_tables),
        Arc::clone(&faulty_queues),
        &queue,
    )
    .config({
        let mut config = WorkerConfig::default();
        config.visibility = Duration::from_secs(1);
        config.max_dequeue = 3;
        config
    });
    worker.create_queues().await.expect("create the queues");
    let departments = DEPARTMENTS;
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..runs {
        // A table per run, so that checking a run reads only its rows.
        let name = fresh_table(&*backend, "outbox").await;
        let table: Table<Mover> =
            Table::from_arc(Arc::clone(&faulty_tables), &name).with_outbox(outbox.clone());
        let plain: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name);
        let base = u32::try_from(run).unwrap_or(0) * 10;
        // What each employee may hold: one value, or two after a lost answer.
        let mut model: BTreeMap<u32, Vec<Mover>> = BTreeMap::new();
        for id in base..base + 3 {
            let mover = Mover {
                department: departments[rng.usize(0..3)].into(),
                id,
                last_name: ["Jones", "Smith"][rng.usize(0..2)].into(),
                salary: 100,
                badge: format!("b{id}"),
            };
            plain.insert(&mover).await.expect("insert");
            model.insert(id, vec![mover]);
        }
        let step = OutboxStep {
            backend: &backend,
            queues: &queues,
            queue: &queue,
            name: &name,
            table: &table,
            plain: &plain,
            table_faults: &table_faults,
            queue_faults: &queue_faults,
            worker: &worker,
            base,
        };
        for _ in 0..steps {
            step.run(&mut rng, &mut model, &mut outcomes).await;
        }
        // A notice that fails until it is poison: every table read fails.
        // Where time is real, once: it takes the notice's timeouts.
        let poison_run = matches!(time, QueueTime::Manual(_)) || run == 0;
        if poison_run {
            poison_phases += 1;
        } else {
            drain(&backend, &queues, &queue, &name).await;
            check(backend.as_ref(), &name, &model).await;
            backend
                .delete_table(&name)
                .await
                .expect("delete the run's table");
            continue;
        }
        step.poison_one_notice(&time).await;
        table_faults.clear();
        drain(&backend, &queues, &queue, &name).await;
        check(backend.as_ref(), &name, &model).await;
        backend
            .delete_table(&name)
            .await
            .expect("delete the run's table");
    }
    outcomes.poisoned = worker.stats().poisoned;
    assert!(
        outcomes.poisoned >= poison_phases,
        "every failing notice goes to the poison queue"
    );
    // Each message set aside names the original's id; the worker counts
    // each id once. (The drain below runs a worker of its own, whose sets
    // are not counted here: the run's poison queue may hold more ids.)
    let ids = poison_ids(queues.as_ref(), &queue).await;
    assert!(
        ids.len() as u64 >= outcomes.poisoned,
        "every message counted is on the poison queue: {} ids, {} counted",
        ids.len(),
        outcomes.poisoned
    );
    outcomes
}

/// A move reaches the new partition at once, with its index rows; the old
/// partition keeps nothing; and a move onto keys that are taken is refused.
pub async fn moves_cross_partitions(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "move").await;
    let queue = unique_queue();
    queues.create_queue(&queue).await.expect("create queue");
    let table: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name)
        .with_outbox(Outbox::new(Arc::clone(&queues), queue.clone()));
    let jones = Mover {
        department: "Sales".into(),
        id: 223,
        last_name: "Jones".into(),
        salary: 10,
        badge: "b223".into(),
    };
    table.insert(&jones).await.expect("insert");
    let loaded = table
        .get("Sales", 223u32)
        .await
        .expect("get")
        .expect("there");
    let moved = Mover {
        department: "Ops".into(),
        salary: 11,
        ..jones.clone()
    };
    table.move_to(&loaded, &moved).await.expect("move");
    assert!(table.get("Sales", 223u32).await.expect("get").is_none());
    let arrived = table.get("Ops", 223u32).await.expect("get").expect("moved");
    assert_eq!(*arrived, moved);
    let by_name = table.index(Mover::indexes().name);
    let found: Vec<Mover> = read_all(by_name.find("Ops", "Jones")).await;
    assert_eq!(found, std::slice::from_ref(&moved));
    let all = rows(backend.as_ref(), &name).await;
    assert!(
        !all.iter().any(outbox::is_outbox_row),
        "the record is finished"
    );
    assert!(tablekit::index::audit::<Mover>(&all).is_clean());
    assert!(
        queues
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "the notice is withdrawn"
    );
    // Onto a department where another holds the badge: refused.
    let holder = Mover {
        department: "Dev".into(),
        id: 500,
        ..jones.clone()
    };
    table.insert(&holder).await.expect("insert");
    let to_dev = Mover {
        department: "Dev".into(),
        ..moved.clone()
    };
    assert!(matches!(
        table.move_to(&arrived, &to_dev).await,
        Err(Error::UniqueViolation { index: "badge", .. })
    ));
    let holder = table.get("Dev", 500u32).await.expect("get").expect("there");
    table.delete(&holder).await.expect("delete");
    // Onto taken keys: refused, nothing changed.
    let other = Mover {
        department: "Dev".into(),
        badge: "b999".into(),
        ..jones.clone()
    };
    table.insert(&other).await.expect("insert");
    let back = Mover {
        department: "Dev".into(),
        ..moved.clone()
    };
    assert!(matches!(
        table.move_to(&arrived, &back).await,
        Err(Error::EntityAlreadyExists { .. })
    ));
    assert!(table.get("Ops", 223u32).await.expect("get").is_some());
    // Within a partition, under another id: the same way.
    let renamed = Mover {
        id: 224,
        ..moved.clone()
    };
    table
        .move_to(&arrived, &renamed)
        .await
        .expect("move in place");
    assert!(table.get("Ops", 223u32).await.expect("get").is_none());
    assert!(table.get("Ops", 224u32).await.expect("get").is_some());
}

/// A move whose entity changes at its old keys while it runs takes its
/// copy back: the caller gets `PreconditionFailed`, the entity stays where
/// it was with the change, and nothing is left at the new keys. A writer
/// that stopped after the copy leaves both copies; a change to the old one
/// then is a conflict the finishing work reports (and keeps both, losing
/// neither) until one copy is deleted.
pub async fn moves_meeting_a_change_lose_nothing(
    backend: Arc<dyn TableBackend>,
    _queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    use futures::FutureExt;
    let name = fresh_table(&*backend, "movechange").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    faults.set_yields(true);
    let table: Table<Mover> = Table::from_arc(Arc::new(layer), &name);
    let plain: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name);
    let jones = Mover {
        department: "Sales".into(),
        id: 7,
        last_name: "Jones".into(),
        salary: 10,
        badge: "b7".into(),
    };
    plain.insert(&jones).await.expect("insert");
    let loaded = plain.get("Sales", 7u32).await.expect("get").expect("there");
    let moved = Mover {
        department: "Ops".into(),
        ..jones.clone()
    };
    // Poll the move by hand; as soon as its first transaction (the copy)
    // is under way, change the entity at its old keys.
    let mut moving = std::pin::pin!(table.move_to(&loaded, &moved));
    let mut changed = false;
    let result = loop {
        if let Some(result) = (&mut moving).now_or_never() {
            break result;
        }
        if !changed && faults.calls(Operation::SubmitTransaction) >= 1 {
            let mut current = plain.get("Sales", 7u32).await.expect("get").expect("there");
            current.salary = 99;
            plain
                .replace(&mut current)
                .await
                .expect("change the old row");
            changed = true;
        }
        tokio::task::yield_now().await;
    };
    assert!(changed, "the move ran a transaction");
    assert!(
        matches!(result, Err(Error::PreconditionFailed { ref partition_key, .. }) if partition_key == "Sales"),
        "{result:?}"
    );
    let stayed = plain
        .get("Sales", 7u32)
        .await
        .expect("get")
        .expect("stayed");
    assert_eq!(stayed.salary, 99, "the change is kept");
    assert!(
        plain.get("Ops", 7u32).await.expect("get").is_none(),
        "the copy is taken back"
    );
    let all = rows(backend.as_ref(), &name).await;
    assert!(!all.iter().any(outbox::is_outbox_row), "no record is left");
    assert!(tablekit::index::audit::<Mover>(&all).is_clean());

    // A writer that stops after the copy: both copies, the same values.
    faults.set_yields(false);
    faults.inject(
        Injection::on(Operation::SubmitTransaction)
            .skip(1)
            .times(usize::MAX),
    );
    let moved = Mover {
        department: "Ops".into(),
        ..(*stayed).clone()
    };
    table.move_to(&stayed, &moved).await.expect("committed");
    faults.clear();
    let copy = plain.get("Ops", 7u32).await.expect("get").expect("copied");
    let mut old = plain.get("Sales", 7u32).await.expect("get").expect("kept");
    assert_eq!(
        *copy,
        Mover {
            department: "Ops".into(),
            ..(*old).clone()
        }
    );
    // Now the old copy changes: finishing the move is a conflict, and
    // both copies stay.
    old.salary = 100;
    plain.replace(&mut old).await.expect("change the old copy");
    let finished = outbox::finish_entity(backend.as_ref(), &name, "Ops", "MOV_0000000007").await;
    assert!(
        matches!(finished, Err(Error::PreconditionFailed { .. })),
        "{finished:?}"
    );
    assert!(plain.get("Sales", 7u32).await.expect("get").is_some());
    assert!(plain.get("Ops", 7u32).await.expect("get").is_some());
    // One copy deleted by hand: the move finishes.
    let old = plain.get("Sales", 7u32).await.expect("get").expect("kept");
    plain.delete(&old).await.expect("delete the old copy");
    outbox::finish_entity(backend.as_ref(), &name, "Ops", "MOV_0000000007")
        .await
        .expect("finish");
    let all = rows(backend.as_ref(), &name).await;
    assert!(!all.iter().any(outbox::is_outbox_row), "no record is left");
    assert!(tablekit::index::audit::<Mover>(&all).is_clean());
    backend.delete_table(&name).await.expect("delete table");
}

/// A step applies once: again, it is skipped; an older step after a newer
/// one is skipped; steps applied by many workers at once write once; a
/// delete of a row that is not there still moves the fence.
pub async fn steps_are_fenced(
    backend: Arc<dyn TableBackend>,
    _queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    use tablekit::outbox::{Applied, Step, StepOp, apply_step};
    let name = fresh_table(&*backend, "fence").await;
    let step = |seq: i64, op: StepOp| Step {
        table: name.clone(),
        partition_key: "p".into(),
        fence: "r".into(),
        seq,
        ops: vec![op],
    };
    let put = |v: i64| StepOp::Put(Entity::new("p", "r").with("v", v));
    let value = |backend: Arc<dyn TableBackend>, name: String| async move {
        backend
            .try_get_entity(&name, "p", "r")
            .await
            .expect("read")
            .map(|row| row.properties.get("v").cloned())
    };
    let b = backend.as_ref();
    assert_eq!(
        apply_step(b, &step(2, put(2))).await.expect("apply"),
        Applied::Written
    );
    assert_eq!(
        apply_step(b, &step(2, put(2))).await.expect("again"),
        Applied::Skipped
    );
    assert_eq!(
        apply_step(b, &step(1, put(1))).await.expect("older"),
        Applied::Skipped
    );
    assert_eq!(
        value(Arc::clone(&backend), name.clone()).await,
        Some(Some(tablekit::Value::Int64(2))),
        "the newer step's value stays"
    );
    assert_eq!(
        apply_step(b, &step(3, StepOp::Delete("r".into())))
            .await
            .expect("delete"),
        Applied::Written
    );
    assert_eq!(
        apply_step(b, &step(4, StepOp::Delete("r".into())))
            .await
            .expect("delete nothing"),
        Applied::Written,
        "a delete of nothing still moves the fence"
    );
    assert_eq!(
        apply_step(b, &step(3, put(3))).await.expect("stale"),
        Applied::Skipped
    );
    assert_eq!(
        value(Arc::clone(&backend), name.clone()).await,
        None,
        "stays deleted"
    );
    // Many workers, one step: written once.
    let many = futures::future::join_all((0..8).map(|_| {
        let backend = Arc::clone(&backend);
        let step = step(5, put(5));
        async move { apply_step(backend.as_ref(), &step).await }
    }))
    .await;
    let written = many
        .iter()
        .filter(|r| matches!(r, Ok(Applied::Written)))
        .count();
    assert_eq!(written, 1, "{many:?}");
    assert!(many.iter().all(Result::is_ok), "{many:?}");
    // An insert that meets a row fails the step, nothing written.
    let insert = step(6, StepOp::Insert(Entity::new("p", "r").with("v", 6i64)));
    assert!(matches!(
        apply_step(b, &insert).await,
        Err(Error::EntityAlreadyExists { .. })
    ));
    assert_eq!(
        value(Arc::clone(&backend), name.clone()).await,
        Some(Some(tablekit::Value::Int64(5)))
    );
    let rows = rows(b, &name).await;
    assert!(
        rows.iter().filter(|row| outbox::is_fence_row(row)).count() == 1,
        "one fence per row"
    );
}

/// Figures of [`outbox_drain`].
#[derive(Debug, Clone, Copy)]
pub struct DrainFigures {
    /// Moves made (each a record and a notice).
    pub moves: usize,
    /// Requests one move made, finished at once by its writer.
    pub requests_per_move: f64,
    /// Mean time of a move finished at once by its writer.
    pub move_latency: Duration,
    /// Records the worker finished from the queue.
    pub drained: u64,
    /// How long the worker took to drain them.
    pub drain_time: Duration,
}

/// Measures moves through the outbox and the worker's drain rate: first
/// `moves` moves finished at once by their writer; then as many moves whose
/// writer stops after the commit (every query fails), left to the worker,
/// which then drains the queue. For benches.
pub async fn outbox_drain(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    moves: usize,
) -> DrainFigures {
    use std::time::Instant;
    let name = fresh_table(&*backend, "drain").await;
    let queue = unique_queue();
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    let counted: Arc<dyn TableBackend> = Arc::new(layer);
    let outbox = Outbox::new(Arc::clone(&queues), queue.clone()).delay(Duration::ZERO);
    let table: Table<Mover> = Table::from_arc(Arc::clone(&counted), &name).with_outbox(outbox);
    let worker = OutboxWorker::new(Arc::clone(&backend), Arc::clone(&queues), &queue).config({
        let mut config = WorkerConfig::default();
        config.batch = 32;
        config
    });
    worker.create_queues().await.expect("create the queues");
    let count = moves as u32;
    for id in 0..2 * count {
        let mover = Mover {
            department: "Sales".into(),
            id,
            last_name: "Jones".into(),
            salary: 1,
            badge: format!("b{id}"),
        };
        table.insert(&mover).await.expect("insert");
    }
    let requests = crate::indexes::handle_calls;
    let move_one = |id: u32| {
        let table = table.clone();
        async move {
            let loaded = table.get("Sales", id).await.expect("get").expect("there");
            let moved = Mover {
                department: "Ops".into(),
                ..(*loaded).clone()
            };
            (loaded, moved)
        }
    };
    let (before, mut elapsed) = (requests(&faults), Duration::ZERO);
    let mut reads = 0;
    for id in 0..count {
        let (loaded, moved) = move_one(id).await;
        reads += 1;
        let started = Instant::now();
        table.move_to(&loaded, &moved).await.expect("move");
        elapsed += started.elapsed();
    }
    let requests_per_move = (requests(&faults) - before - reads) as f64 / moves as f64 + 2.0; // the notice's put and delete, on the queue
    // Writers that stop after their commit: the worker finishes.
    faults.inject(Injection::on(Operation::QueryEntities).times(usize::MAX));
    for id in count..2 * count {
        let (loaded, moved) = move_one(id).await;
        table.move_to(&loaded, &moved).await.expect("move");
    }
    faults.clear();
    let started = Instant::now();
    while worker.run_once().await.expect("drain") > 0 {}
    let drain_time = started.elapsed();
    let all = rows(backend.as_ref(), &name).await;
    assert!(
        !all.iter().any(outbox::is_outbox_row),
        "every record finished"
    );
    backend.delete_table(&name).await.expect("delete the table");
    queues.delete_queue(&queue).await.expect("delete the queue");
    queues
        .delete_queue(&outbox::poison_queue_name(&queue))
        .await
        .expect("delete the poison queue");
    DrainFigures {
        moves,
        requests_per_move,
        move_latency: elapsed / count,
        drained: worker.stats().applied,
        drain_time,
    }
}

/// Creates the table the contacts' city index lives in, unless it exists.
pub(super) async fn cities_table(backend: &dyn TableBackend) {
    match backend.create_table("ConformanceCities").await {
        Ok(()) | Err(Error::TableAlreadyExists { .. }) => {}
        Err(e) => panic!("create the cities table: {e}"),
    }
}

/// Every item of a stream of reads through an index.
async fn read_all<Q>(reads: futures::stream::BoxStream<'static, tablekit::Result<Q>>) -> Vec<Q> {
    futures::TryStreamExt::try_collect(reads)
        .await
        .expect("read through the index")
}

/// A contact, found by email through an index kept in another partition
/// of its table, and by city through one kept in another table.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "CON")]
#[tablekit(index(name = "email", partition = "email", copy(salary)))]
#[tablekit(index(name = "city", table = "ConformanceCities"))]
#[tablekit(index(name = "tier", partition = "tier", list))]
pub struct Contact {
    /// The team.
    #[tablekit(partition_key)]
    pub team: String,
    /// The contact id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Indexed in partition `email_{team}`.
    #[tablekit(index = "email")]
    pub email: String,
    /// Indexed in table `ConformanceCities`, partition `{team}`.
    #[tablekit(index = "city")]
    pub city: String,
    /// Copied into the email index.
    pub salary: u32,
    /// Listed in one index entity per tier, in partition `tier_{team}`.
    #[tablekit(index = "tier")]
    pub tier: String,
}

/// An entity an index entity should list: the index's name and the
/// entity's RowKey.
type ListedBy<'a> = (&'a str, String);

/// The rows of `T`'s indexes kept elsewhere that the entities of `table`'s
/// partitions `pks` should have, against those there are.
async fn remote_rows_in_step<T: TableEntity>(
    backend: &dyn TableBackend,
    table: &str,
    pks: &[String],
) -> Result<(), String> {
    use tablekit::__conformance::index_row;
    use tablekit::index::RemoteIndexDef;
    let mut expected: BTreeMap<(String, String, String), Entity> = BTreeMap::new();
    let mut places: Vec<(&RemoteIndexDef, String, String)> = Vec::new();
    // For each index entity (table, partition, RowKey): its index's name
    // and the RowKeys it should list.
    let mut lists: BTreeMap<(String, String, String), Vec<ListedBy<'_>>> = BTreeMap::new();
    for pk in pks {
        let filter = tablekit::filter::Filter::partition_key().eq(pk.as_str());
        let rows = backend
            .query_all(table, Query::new().filter(filter))
            .await
            .map_err(|e| e.to_string())?;
        for def in tablekit::index::remote_indexes::<T>() {
            let (index_table, partition) = def.place(table, pk);
            places.push((def, index_table, partition));
        }
        for row in rows
            .iter()
            .filter(|r| tablekit::schema::is_kind::<T>(r) && !outbox::is_bookkeeping_row(r))
        {
            let value: T = tablekit::schema::from_entity(row).map_err(|e| e.to_string())?;
            for (i, def) in tablekit::index::remote_indexes::<T>().iter().enumerate() {
                let key = tablekit::__conformance::remote_index_key(&value, i, &row.row_key)
                    .map_err(|e| e.to_string())?;
                if key.is_empty() {
                    continue;
                }
                let (index_table, partition) = def.place(table, pk);
                if def.index.list {
                    lists
                        .entry((index_table, partition, key))
                        .or_default()
                        .push((def.index.name, row.row_key.clone()));
                    continue;
                }
                let mut index = index_row::<T>(&def.index, key.clone(), row);
                index.partition_key.clone_from(&partition);
                expected.insert((index_table, partition, key), index);
            }
        }
    }
    // An index entity lists its entities' RowKeys in order, one per line,
    // and names its index when the kind writes it.
    for ((index_table, partition, key), mut members) in lists {
        members.sort();
        let mut row = Entity::new(partition.as_str(), key.as_str()).with(
            "_Rows0",
            members
                .iter()
                .map(|(_, rk)| format!("{rk}\n"))
                .collect::<String>(),
        );
        if T::DESCRIPTOR.kind_properties {
            row.insert("_Index", members[0].0);
        }
        expected.insert((index_table, partition, key), row);
    }
    for (def, index_table, partition) in places {
        let filter = tablekit::filter::Filter::partition_key()
            .eq(partition.as_str())
            .and(tablekit::__conformance::row_key_prefix(&def.index.prefix()));
        let rows = backend
            .query_all(&index_table, Query::new().filter(filter))
            .await
            .map_err(|e| e.to_string())?;
        for row in rows {
            let key = (index_table.clone(), partition.clone(), row.row_key.clone());
            let Some(want) = expected.remove(&key) else {
                return Err(format!("an index row no entity wants: {key:?}"));
            };
            let sorted = |e: &Entity| {
                let mut props: Vec<(String, tablekit::Value)> = e
                    .properties
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.clone()))
                    .collect();
                props.sort_by(|a, b| a.0.cmp(&b.0));
                props
            };
            if sorted(&row) != sorted(&want) {
                return Err(format!("a stale index row {key:?}: {row:?}, want {want:?}"));
            }
        }
    }
    match expected.into_keys().next() {
        Some(missing) => Err(format!("a missing index row: {missing:?}")),
        None => Ok(()),
    }
}

/// Random writes of every kind to contacts whose indexes are kept in
/// another partition and another table, with faults injected into the
/// tables and the queue (failures, lost answers, a writer that stops after
/// its commit); after each run the worker drains, the sweeper runs, and
/// every index row must match its entity, with none left over and no
/// record left.
pub async fn remote_index_model_runs(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> OutboxOutcomes {
    let mut outcomes = OutboxOutcomes::default();
    cities_table(backend.as_ref()).await;
    let queue = unique_queue();
    let tables = FaultInjection::new(Arc::clone(&backend));
    let faults = tables.handle();
    faults.seed(seed);
    let faulty: Arc<dyn TableBackend> = Arc::new(tables);
    let outbox = Outbox::new(Arc::clone(&queues), queue.clone()).delay(Duration::ZERO);
    OutboxWorker::new(Arc::clone(&backend), Arc::clone(&queues), &queue)
        .create_queues()
        .await
        .expect("create the queues");
    let mut rng = fastrand::Rng::with_seed(seed);
    let tag: String = std::iter::repeat_with(|| rng.lowercase()).take(6).collect();
    for run in 0..runs {
        // A table per run, so that checking a run reads only its rows.
        let name = fresh_table(&*backend, "remote").await;
        let table: Table<Contact> =
            Table::from_arc(Arc::clone(&faulty), &name).with_outbox(outbox.clone());
        let pk = format!("{tag}{run}");
        for _ in 0..steps {
            faults.clear();
            if rng.f64() < 0.5 {
                let fault = [Fault::Transient, Fault::LostResponse][rng.usize(0..2)];
                faults.inject(Injection::any().skip(rng.usize(0..8)).fault(fault));
            }
            if rng.f64() < 0.1 {
                faults.inject(Injection::on(Operation::QueryEntities).times(usize::MAX));
            }
            let id = rng.u32(0..3);
            let value = Contact {
                team: pk.clone(),
                id,
                email: ["a@x", "b@x", "c@x"][rng.usize(0..3)].into(),
                city: ["Oslo", "Rome"][rng.usize(0..2)].into(),
                salary: rng.u32(..100),
                tier: ["gold", "silver"][rng.usize(0..2)].into(),
            };
            let result = match rng.usize(0..6) {
                0 => table.insert(&value).await.map(drop),
                1 => table.upsert(&value).await.map(drop),
                2 => table.upsert_merge(&value).await.map(drop),
                3 => table.delete_unconditionally(pk.as_str(), id).await,
                4 => table
                    .update(pk.as_str(), id, |c| {
                        c.email = value.email.clone();
                        c.salary += 1;
                    })
                    .await
                    .map(drop),
                _ => match table.get(pk.as_str(), id).await {
                    Ok(Some(mut loaded)) => {
                        loaded.city = value.city.clone();
                        table.replace(&mut loaded).await.map(drop)
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok(()) => outcomes.moved += 1,
                Err(Error::OutcomeUnknown { .. }) => outcomes.unknown += 1,
                Err(_) => outcomes.refused += 1,
            }
        }
        faults.clear();
        drain(&backend, &queues, &queue, &name).await;
        let all = rows(backend.as_ref(), &name).await;
        assert!(!all.iter().any(outbox::is_outbox_row), "no record left");
        if let Err(problem) =
            remote_rows_in_step::<Contact>(backend.as_ref(), &name, std::slice::from_ref(&pk)).await
        {
            panic!("run {run}: {problem}");
        }
        backend
            .delete_table(&name)
            .await
            .expect("delete the run's table");
    }
    outcomes
}

/// Reads through the indexes kept elsewhere find the entities once their
/// steps are applied (at once, by the writer), follow moves of the value,
/// and leave out rows an entity no longer matches.
pub async fn remote_indexes_follow_writes(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "remotes").await;
    cities_table(backend.as_ref()).await;
    let queue = unique_queue();
    queues.create_queue(&queue).await.expect("create queue");
    let table: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name)
        .with_outbox(Outbox::new(Arc::clone(&queues), queue.clone()));
    let team: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    let ann = Contact {
        team: team.clone(),
        id: 1,
        email: "ann@x".into(),
        city: "Oslo".into(),
        salary: 5,
        tier: "gold".into(),
    };
    table.insert(&ann).await.expect("insert");
    let by_email = table.remote_index(Contact::indexes().email);
    let by_city = table.remote_index(Contact::indexes().city);
    let found: Vec<Contact> = read_all(by_email.find(team.as_str(), "ann@x")).await;
    assert_eq!(
        found,
        std::slice::from_ref(&ann),
        "found through the email index"
    );
    let found: Vec<Contact> = read_all(by_city.find(team.as_str(), "Oslo")).await;
    assert_eq!(
        found,
        std::slice::from_ref(&ann),
        "found through the city index"
    );
    // The tier index keeps one index entity per tier, listing contacts.
    let by_tier = table.remote_index(Contact::indexes().tier);
    let gold: Vec<Contact> = read_all(by_tier.find(team.as_str(), "gold")).await;
    assert_eq!(gold, std::slice::from_ref(&ann), "listed in the gold tier");
    table
        .update(team.as_str(), 1u32, |c| c.tier = "silver".into())
        .await
        .expect("update");
    assert!(
        read_all(by_tier.find(team.as_str(), "gold"))
            .await
            .is_empty()
    );
    let silver: Vec<Contact> = read_all(by_tier.find(team.as_str(), "silver")).await;
    assert_eq!(silver.len(), 1, "listed in the silver tier now");
    table
        .update(team.as_str(), 1u32, |c| c.tier = "gold".into())
        .await
        .expect("update");
    // The email moves: the old row goes, the new one comes.
    table
        .update(team.as_str(), 1u32, |c| c.email = "anna@x".into())
        .await
        .expect("update");
    let old: Vec<Contact> = read_all(by_email.find(team.as_str(), "ann@x")).await;
    assert!(old.is_empty(), "the old value finds nothing");
    let new: Vec<Contact> = read_all(by_email.find(team.as_str(), "anna@x")).await;
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].email, "anna@x");
    // The email index's rows copy the salary only: followed to the entity.
    let page = by_email
        .find_page(team.as_str(), "anna@x", 10, None)
        .await
        .expect("page");
    assert_eq!(page.items.len(), 1);
    table
        .delete_unconditionally(team.as_str(), 1u32)
        .await
        .expect("delete");
    let gone: Vec<Contact> = read_all(by_city.find(team.as_str(), "Oslo")).await;
    assert!(gone.is_empty(), "a deleted entity's index rows go");
    // Inserted again: its rows come back, above the fences its first life left.
    table.insert(&ann).await.expect("insert again");
    let back: Vec<Contact> = read_all(by_email.find(team.as_str(), "ann@x")).await;
    assert_eq!(
        back,
        std::slice::from_ref(&ann),
        "an entity inserted again is indexed again"
    );
    remote_rows_in_step::<Contact>(backend.as_ref(), &name, std::slice::from_ref(&team))
        .await
        .expect("index rows in step");
    assert!(
        queues
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "every notice withdrawn"
    );
}

/// Verify finds the rows of indexes kept elsewhere that are missing, stale
/// or left over (rows written by another client, a record not finished);
/// repair fixes them all, and a second repair finds nothing.
pub async fn remote_index_repair_finds_and_fixes(
    backend: Arc<dyn TableBackend>,
    _queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "rrepair").await;
    cities_table(backend.as_ref()).await;
    let table: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name);
    let team: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    for (id, email, city) in [(1, "a@x", "Oslo"), (2, "b@x", "Rome"), (3, "c@x", "Oslo")] {
        let contact = Contact {
            team: team.clone(),
            id,
            email: email.into(),
            city: city.into(),
            salary: id,
            tier: if id == 2 { "silver" } else { "gold" }.into(),
        };
        table.insert(&contact).await.expect("insert");
    }
    let clean = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert!(clean.is_clean(), "{clean:?}");
    damage_remote_rows(backend.as_ref(), &name, &team).await;
    let found = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert_eq!(found.missing.len(), 1, "{found:?}");
    assert_eq!(found.stale.len(), 2, "{found:?}");
    assert_eq!(found.orphans.len(), 1, "{found:?}");
    let repaired = table
        .repair_remote_indexes(team.as_str())
        .await
        .expect("repair");
    assert_eq!(repaired, found, "repair reports what it found");
    let after = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert!(after.is_clean(), "{after:?}");
    remote_rows_in_step::<Contact>(backend.as_ref(), &name, std::slice::from_ref(&team))
        .await
        .expect("in step");
    let again = table
        .repair_remote_indexes(team.as_str())
        .await
        .expect("repair again");
    assert!(again.is_clean(), "a second repair finds nothing: {again:?}");
    // The whole table, a partition at a time, resumable.
    let other_team = format!("{team}z");
    let other = Contact {
        team: other_team.clone(),
        id: 7,
        email: "z@x".into(),
        city: "Rome".into(),
        salary: 7,
        tier: "gold".into(),
    };
    table.insert(&other).await.expect("insert");
    backend
        .delete_entity(
            &name,
            &format!("email_{other_team}"),
            "CON.email_z@x|CON_0000000007",
            &tablekit::IfMatch::Any,
        )
        .await
        .expect("delete a row");
    let first = table
        .repair_all_remote_indexes(None, 1, false)
        .await
        .expect("a pass");
    assert_eq!(first.partitions, 1);
    assert!(first.audit.is_clean(), "{first:?}");
    assert_eq!(first.resume.as_deref(), Some(team.as_str()));
    let second = table
        .repair_all_remote_indexes(first.resume.as_deref(), 1, true)
        .await
        .expect("a pass");
    assert_eq!((second.partitions, second.resume.as_deref()), (1, None));
    assert_eq!(second.audit.missing.len(), 1, "{second:?}");
    let done = table
        .repair_all_remote_indexes(None, 10, false)
        .await
        .expect("a pass");
    assert_eq!(done.partitions, 2);
    assert!(done.audit.is_clean(), "repaired: {done:?}");
    // Writes after a repair still reach their rows.
    table
        .update(team.as_str(), 1u32, |c| c.city = "Rome".into())
        .await
        .expect("update");
    let after = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert!(after.is_clean(), "{after:?}");
}

/// What another client does to `team`'s rows of the indexes kept
/// elsewhere: deletes one row, changes another, leaves a stray one, and
/// drops a contact from the gold tier's list.
async fn damage_remote_rows(backend: &dyn TableBackend, name: &str, team: &str) {
    let email_partition = format!("email_{team}");
    // Another client deletes one row, changes another, and leaves one.
    backend
        .delete_entity(
            "ConformanceCities",
            team,
            "CON.city_Rome|CON_0000000002",
            &tablekit::IfMatch::Any,
        )
        .await
        .expect("delete a row");
    let mut changed = backend
        .get_entity(
            name,
            &email_partition,
            "CON.email_a@x|CON_0000000001",
            &Default::default(),
        )
        .await
        .expect("read a row");
    changed.insert("salary", 999i64);
    backend
        .upsert_entity(name, &changed, tablekit::UpdateMode::Replace)
        .await
        .expect("change a row");
    let stray = Entity::new(email_partition.as_str(), "CON.email_zz@x|CON_0000000009")
        .with("_Row", "CON_0000000009");
    backend
        .insert_entity(name, &stray)
        .await
        .expect("add a row");
    // And drops a contact from the gold tier's list.
    let short = Entity::new(format!("tier_{team}"), "CON.tier_gold")
        .with("_Rows0", "CON_0000000001\n")
        .with("_Index", "tier");
    backend
        .upsert_entity(name, &short, tablekit::UpdateMode::Replace)
        .await
        .expect("change a list");
}

/// The log entry a transaction of employee `id` puts elsewhere.
fn log_entry(id: u32) -> Entity {
    Entity::new("log", format!("e{id:04}"))
        .with("Employee", i64::from(id))
        .with("Action", format!("hired {id}"))
}

/// Submits 40 transactions, each an insert of an employee and a put of its
/// log entry in `elsewhere`, under random faults (a writer that stops after
/// its commit among them): whether each committed (`None`: unknown).
async fn submit_under_faults(
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
