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

mod moves;
pub use moves::*;
mod remote;
pub use remote::*;
mod elsewhere;
pub use elsewhere::*;
mod expiring;
pub use expiring::*;

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
        inject_step_faults(self, rng);
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

/// A step's faults: often one transient or lost answer on the table or the
/// queue; now and then a writer that stops after its commit, or fails every
/// transaction after its first.
fn inject_step_faults(step: &OutboxStep<'_>, rng: &mut fastrand::Rng) {
    step.table_faults.clear();
    step.queue_faults.clear();
    if rng.f64() < 0.6 {
        let fault = [Fault::Transient, Fault::LostResponse][rng.usize(0..2)];
        let injection = Injection::any().skip(rng.usize(0..6)).fault(fault);
        if rng.bool() {
            step.table_faults.inject(injection);
        } else {
            step.queue_faults.inject(injection);
        }
    }
    if rng.f64() < 0.1 {
        // The writer stops after its commit: every later step fails.
        step.table_faults
            .inject(Injection::on(Operation::QueryEntities).times(usize::MAX));
    } else if rng.f64() < 0.1 {
        // Every transaction after the first fails.
        step.table_faults.inject(
            Injection::on(Operation::SubmitTransaction)
                .skip(1)
                .times(usize::MAX),
        );
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
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..runs {
        // A table per run, so that checking a run reads only its rows.
        let name = fresh_table(&*backend, "outbox").await;
        let table: Table<Mover> =
            Table::from_arc(Arc::clone(&faulty_tables), &name).with_outbox(outbox.clone());
        let plain: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name);
        let base = u32::try_from(run).unwrap_or(0) * 10;
        // What each employee may hold: one value, or two after a lost answer.
        let mut model = first_movers(&plain, base, &mut rng).await;
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

/// A run's three employees, in random departments, each held by the model.
async fn first_movers(
    plain: &Table<Mover>,
    base: u32,
    rng: &mut fastrand::Rng,
) -> BTreeMap<u32, Vec<Mover>> {
    let mut model: BTreeMap<u32, Vec<Mover>> = BTreeMap::new();
    for id in base..base + 3 {
        let mover = Mover {
            department: DEPARTMENTS[rng.usize(0..3)].into(),
            id,
            last_name: ["Jones", "Smith"][rng.usize(0..2)].into(),
            salary: 100,
            badge: format!("b{id}"),
        };
        plain.insert(&mover).await.expect("insert");
        model.insert(id, vec![mover]);
    }
    model
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
