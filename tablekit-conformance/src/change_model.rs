//! A model of the change feed: random writes of every typed kind (single
//! writes, `update`, moves, batches, the bulk writer), each with a token of
//! its own, checked against the feed and against what consumers deliver.
//!
//! The truth of each write is read back from the store once its writer is
//! done with it (its future finished, dropped, or its process killed, and
//! the upkeep has finished what it left): a write committed if the store
//! holds its token. Then:
//! - the feed of each entity is exactly its committed writes, in the order
//!   they were made (every committed write appears; nothing else does);
//! - a write its caller saw succeed is committed;
//! - every consumer delivered every change of the feed at least once,
//!   nothing that is not in it, and each entity's changes in feed order
//!   (a repeat may come after a crash, never a change out of order).
//!
//! [`change_feed_model_runs`] runs it in one process with faults, dropped
//! futures and consumers that crash; the local store's kill test runs the
//! same writes in a child process that is killed (see its `change_kill`
//! test), through the public pieces here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use tablekit::TableEntity;
use tablekit::backend::TableBackend;
use tablekit::changes::{Change, ChangeBatch, ChangeId, ChangeOp, Consumer};
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::table::Table;
use tablekit::upkeep::Upkeep;

use super::{drop_after_polls, fresh_table};

/// An item of the model, whose kind records its changes; its unique code
/// gives every write index rows too.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Items", kind = "ITEM", changes(previous))]
#[tablekit(index(name = "code", tag = "code"))]
pub struct Item {
    /// The item's group: its partition.
    #[tablekit(partition_key)]
    pub group: String,
    /// Its number in the group.
    #[tablekit(row_key)]
    pub id: u32,
    /// The token of the write that last wrote it.
    pub token: i64,
    /// A unique code, new with each write.
    #[tablekit(unique = "code")]
    pub code: String,
}

/// The item `(group, id)` as the write `token` writes it.
pub fn item(group: &str, id: u32, token: i64) -> Item {
    Item {
        group: group.to_owned(),
        id,
        token,
        code: format!("c{token}"),
    }
}

/// The groups the model's items are in.
pub const GROUPS: [&str; 3] = ["g0", "g1", "g2"];

/// One write of the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOp {
    /// A write of one item: `insert`, `replace`, `merge`, `update`,
    /// `upsert`, `upsert_merge` or `delete`.
    Single {
        /// Which write.
        what: &'static str,
        /// The item's group.
        group: String,
        /// The item's number.
        id: u32,
        /// The token it writes (unused by a delete).
        token: i64,
    },
    /// A move of the item `(group, id)` to `(to, to_id)`.
    Move {
        /// The old group.
        group: String,
        /// The old number.
        id: u32,
        /// The new group.
        to: String,
        /// The new number.
        to_id: u32,
        /// The token the moved item holds.
        token: i64,
    },
    /// Upserts of several items of one group: in one batch, or with the
    /// bulk writer.
    Many {
        /// `batch` or `bulk`.
        what: &'static str,
        /// The group.
        group: String,
        /// The items' numbers and tokens.
        items: Vec<(u32, i64)>,
    },
}

const SINGLES: [&str; 7] = [
    "insert",
    "replace",
    "merge",
    "update",
    "upsert",
    "upsert_merge",
    "delete",
];

impl ModelOp {
    /// The op as one line of text, which [`parse`](ModelOp::parse) reads.
    pub fn line(&self) -> String {
        match self {
            ModelOp::Single {
                what,
                group,
                id,
                token,
            } => format!("{what} {group} {id} {token}"),
            ModelOp::Move {
                group,
                id,
                to,
                to_id,
                token,
            } => format!("move {group} {id} {to} {to_id} {token}"),
            ModelOp::Many { what, group, items } => {
                let items: Vec<String> = items.iter().map(|(id, t)| format!("{id}:{t}")).collect();
                format!("{what} {group} {}", items.join(","))
            }
        }
    }

    /// Reads a [`line`](ModelOp::line).
    pub fn parse(line: &str) -> Option<ModelOp> {
        let words: Vec<&str> = line.split(' ').collect();
        let group = |i: usize| words.get(i).map(|g| (*g).to_owned());
        let num = |i: usize| words.get(i)?.parse::<u32>().ok();
        let token = |i: usize| words.get(i)?.parse::<i64>().ok();
        match *words.first()? {
            "move" => Some(ModelOp::Move {
                group: group(1)?,
                id: num(2)?,
                to: group(3)?,
                to_id: num(4)?,
                token: token(5)?,
            }),
            what @ ("batch" | "bulk") => {
                let items = words
                    .get(2)?
                    .split(',')
                    .map(|pair| {
                        let (id, t) = pair.split_once(':')?;
                        Some((id.parse().ok()?, t.parse().ok()?))
                    })
                    .collect::<Option<Vec<_>>>()?;
                let what = if what == "batch" { "batch" } else { "bulk" };
                Some(ModelOp::Many {
                    what,
                    group: group(1)?,
                    items,
                })
            }
            what => Some(ModelOp::Single {
                what: SINGLES.into_iter().find(|s| *s == what)?,
                group: group(1)?,
                id: num(2)?,
                token: token(3)?,
            }),
        }
    }
}

/// The tokens the items `ids` hold now, in every group (`None`: absent).
pub async fn state_of(plain: &Table<Item>, ids: &[u32]) -> HashMap<(String, u32), Option<i64>> {
    let mut state = HashMap::new();
    for group in GROUPS {
        for &id in ids {
            let stored = plain.get(group, id).await.expect("read the state");
            state.insert((group.to_owned(), id), stored.map(|l| l.token));
        }
    }
    state
}

/// A random write of the items `ids` (an item number lives in one group at
/// a time), its tokens from `next`.
pub async fn choose(
    rng: &mut fastrand::Rng,
    plain: &Table<Item>,
    ids: &[u32],
    next: &mut i64,
) -> ModelOp {
    let state = state_of(plain, ids).await;
    let mut token = || {
        *next += 1;
        *next
    };
    let id = ids[rng.usize(..ids.len())];
    let present: Vec<&str> = GROUPS
        .into_iter()
        .filter(|g| state[&((*g).to_owned(), id)].is_some())
        .collect();
    let Some(&group) = present.first() else {
        // Absent: an insert or an upsert brings it (or a batch of several).
        let group = GROUPS[rng.usize(..GROUPS.len())].to_owned();
        return match rng.u8(..4) {
            0 => ModelOp::Single {
                what: "upsert",
                group,
                id,
                token: token(),
            },
            1 => {
                let what = if rng.bool() { "batch" } else { "bulk" };
                let absent: Vec<u32> = ids
                    .iter()
                    .copied()
                    .filter(|i| {
                        GROUPS
                            .iter()
                            .all(|g| state[&((*g).to_owned(), *i)].is_none())
                    })
                    .take(3)
                    .collect();
                let items = absent.into_iter().map(|i| (i, token())).collect();
                ModelOp::Many { what, group, items }
            }
            _ => ModelOp::Single {
                what: "insert",
                group,
                id,
                token: token(),
            },
        };
    };
    let group = group.to_owned();
    match rng.u8(..10) {
        0..=5 => ModelOp::Single {
            what: SINGLES[1 + rng.usize(..SINGLES.len() - 2)],
            group,
            id,
            token: token(),
        },
        6 | 7 => ModelOp::Single {
            what: "delete",
            group,
            id,
            token: 0,
        },
        _ => {
            // To another group: the item keeps its number.
            let at = GROUPS.iter().position(|g| *g == group).unwrap_or(0);
            let to = GROUPS[(at + 1 + rng.usize(..GROUPS.len() - 1)) % GROUPS.len()].to_owned();
            ModelOp::Move {
                group,
                id,
                to,
                to_id: id,
                token: token(),
            }
        }
    }
}

/// Makes the write `op` through `t`; whether its caller saw it succeed.
pub async fn perform(t: &Table<Item>, op: &ModelOp) -> bool {
    match op {
        ModelOp::Single {
            what,
            group,
            id,
            token,
        } => single(t, what, group, *id, *token).await,
        ModelOp::Move {
            group,
            id,
            to,
            to_id,
            token,
        } => match t.get(group.as_str(), *id).await {
            Ok(Some(loaded)) => t.move_to(&loaded, &item(to, *to_id, *token)).await.is_ok(),
            _ => false,
        },
        ModelOp::Many { what, group, items } => {
            let values: Vec<Item> = items.iter().map(|&(id, t)| item(group, id, t)).collect();
            if *what == "bulk" {
                return t.bulk().unpaced().upsert(&values).await.is_complete();
            }
            let mut batch = t.batch();
            for value in &values {
                batch.upsert(value).expect("a batch of the model's items");
            }
            batch.submit().await.is_ok()
        }
    }
}

/// A write of one item.
async fn single(t: &Table<Item>, what: &str, group: &str, id: u32, token: i64) -> bool {
    let value = item(group, id, token);
    let done = match what {
        "insert" => t.insert(&value).await.map(drop),
        "upsert" => t.upsert(&value).await.map(drop),
        "upsert_merge" => t.upsert_merge(&value).await.map(drop),
        "update" => {
            let code = value.code.clone();
            t.update(group, id, move |i: &mut Item| {
                i.token = token;
                i.code.clone_from(&code);
            })
            .await
            .map(drop)
        }
        _ => match t.get(group, id).await {
            Ok(Some(loaded)) if what == "delete" => t.delete(&loaded).await,
            Ok(Some(mut loaded)) => {
                loaded.token = token;
                loaded.code = value.code;
                if what == "merge" {
                    t.merge(&mut loaded).await.map(drop)
                } else {
                    t.replace(&mut loaded).await.map(drop)
                }
            }
            Ok(None) => return false,
            Err(e) => Err(e),
        },
    };
    done.is_ok()
}

/// A change the model expects: the item's keys, what the change did, and
/// the token it wrote (none for a delete).
pub type Expected = ((String, u32), ChangeOp, Option<i64>);

/// How many changes `op` records when it commits whole.
pub fn parts(op: &ModelOp) -> usize {
    match op {
        ModelOp::Single { .. } => 1,
        ModelOp::Move { .. } => 2,
        ModelOp::Many { items, .. } => items.len(),
    }
}

/// The changes of `op` that committed, read back from the store (through
/// `plain`, a table without faults) once nothing of it is left to run. A
/// move found at both its keys is a defect.
pub async fn resolve(plain: &Table<Item>, op: &ModelOp) -> Vec<Expected> {
    let token_at = |group: String, id: u32| async move {
        let stored = plain.get(group.as_str(), id).await.expect("read back");
        stored.map(|l| l.token)
    };
    let keys = |g: &str, id: u32| (g.to_owned(), id);
    match op {
        ModelOp::Single {
            what: "delete",
            group,
            id,
            ..
        } => match token_at(group.clone(), *id).await {
            None => vec![(keys(group, *id), ChangeOp::Delete, None)],
            Some(_) => Vec::new(),
        },
        ModelOp::Single {
            what,
            group,
            id,
            token,
        } => {
            let op = match *what {
                "insert" => ChangeOp::Insert,
                "replace" | "update" => ChangeOp::Replace,
                "merge" => ChangeOp::Merge,
                "upsert" => ChangeOp::Upsert,
                _ => ChangeOp::UpsertMerge,
            };
            match token_at(group.clone(), *id).await {
                Some(t) if t == *token => vec![(keys(group, *id), op, Some(*token))],
                _ => Vec::new(),
            }
        }
        ModelOp::Move {
            group,
            id,
            to,
            to_id,
            token,
        } => {
            if token_at(to.clone(), *to_id).await != Some(*token) {
                return Vec::new();
            }
            let old = token_at(group.clone(), *id).await;
            assert!(old.is_none(), "{op:?}: the item is at both its keys");
            vec![
                (keys(to, *to_id), ChangeOp::Insert, Some(*token)),
                (keys(group, *id), ChangeOp::Delete, None),
            ]
        }
        ModelOp::Many { group, items, .. } => {
            let mut committed = Vec::new();
            for &(id, token) in items {
                if token_at(group.clone(), id).await == Some(token) {
                    committed.push((keys(group, id), ChangeOp::Upsert, Some(token)));
                }
            }
            committed
        }
    }
}

/// A change as the model compares it: its id, the entity's RowKey, what
/// it did and the token it wrote.
pub type Seen = (ChangeId, String, ChangeOp, Option<i64>);

/// A change of the feed as the model compares it.
pub fn seen(change: &Change<Item>) -> Seen {
    let token = change.properties.get("token").and_then(|v| v.as_i64());
    (change.id.clone(), change.row_key.clone(), change.op, token)
}

/// Reads the whole feed of `plain`'s table, and checks that each item's
/// changes are exactly its committed writes of `expected`, in order, each
/// with the value before it (a move's delete may go without), and that
/// every partition's numbers run from 1 with no gap. The feed.
pub async fn check_feed(plain: &Table<Item>, expected: &[Expected]) -> Vec<Seen> {
    let feed = plain.changes();
    let mut all = Vec::new();
    let mut previous = Vec::new();
    for pk in feed.partitions().await.expect("the feed's partitions") {
        let mut after = 0;
        loop {
            let got = feed.read(&pk, after, 1000).await.expect("read the feed");
            let Some(last) = got.last() else { break };
            after = last.id.seq;
            all.extend(got.iter().map(seen));
            previous.extend(got.iter().map(|c| c.previous.as_ref().map(|p| p.token)));
        }
    }
    check_previous(&all, &previous);
    let mut numbers: BTreeMap<&str, u64> = BTreeMap::new();
    for (id, ..) in &all {
        let last = numbers.entry(id.partition_key.as_str()).or_default();
        assert_eq!(id.seq, *last + 1, "partition {:?}: a gap", id.partition_key);
        *last = id.seq;
    }
    type Entity = (String, String);
    let mut want: BTreeMap<Entity, Vec<(ChangeOp, Option<i64>)>> = BTreeMap::new();
    for ((group, id), op, token) in expected {
        let value = item(group, *id, 0);
        let pk = tablekit::schema::partition_key_of(&value).expect("the stored keys");
        let rk = tablekit::schema::row_key_of(&value).expect("the stored keys");
        want.entry((pk, rk)).or_default().push((*op, *token));
    }
    let mut got: BTreeMap<Entity, Vec<(ChangeOp, Option<i64>)>> = BTreeMap::new();
    for (id, rk, op, token) in &all {
        let key = (id.partition_key.clone(), rk.clone());
        got.entry(key).or_default().push((*op, *token));
    }
    for (entity, changes) in &want {
        assert_eq!(
            got.get(entity),
            Some(changes),
            "item {entity:?}: the feed is not its committed writes in order"
        );
    }
    for entity in got.keys() {
        assert!(
            want.contains_key(entity),
            "item {entity:?}: changes in the feed, yet no write committed: {:?}",
            got[entity]
        );
    }
    all
}

/// Checks that each change of `all` holds as its previous value the token
/// its entity's change before it wrote (none after a delete, or first);
/// a delete may hold none (a move's does not record it).
fn check_previous(all: &[Seen], previous: &[Option<i64>]) {
    let mut last: HashMap<(&str, &str), Option<i64>> = HashMap::new();
    for ((id, rk, op, token), before) in all.iter().zip(previous) {
        let entity = (id.partition_key.as_str(), rk.as_str());
        let held = last.get(&entity).copied().flatten();
        let fine = *before == held || (*op == ChangeOp::Delete && before.is_none());
        assert!(
            fine,
            "{id} ({op:?}): previous value {before:?}, yet {held:?} was there"
        );
        // A merge of the model writes every field: the token is the new one.
        last.insert(
            entity,
            if *op == ChangeOp::Delete {
                None
            } else {
                *token
            },
        );
    }
}

/// Checks what consumer `name` delivered against the `feed`: every change
/// at least once, nothing else, and each entity's changes in feed order
/// (a repeat goes back, never a change ahead of one not yet seen).
/// How many deliveries were repeats.
pub fn check_delivered(name: &str, feed: &[Seen], delivered: &[Seen]) -> usize {
    let by_id: HashMap<&ChangeId, &Seen> = feed.iter().map(|s| (&s.0, s)).collect();
    let mut firsts: HashSet<&ChangeId> = HashSet::new();
    let mut newest: HashMap<(&str, &str), u64> = HashMap::new();
    let mut repeats = 0;
    for change in delivered {
        let (id, rk, ..) = change;
        let stored = by_id
            .get(id)
            .unwrap_or_else(|| panic!("consumer {name} delivered {id}, which is not in the feed"));
        assert_eq!(*stored, change, "consumer {name}: {id} not as stored");
        let last = newest
            .entry((id.partition_key.as_str(), rk.as_str()))
            .or_default();
        if !firsts.insert(id) {
            repeats += 1;
            continue;
        }
        // A first delivery follows every earlier change of its entity.
        let before = feed
            .iter()
            .filter(|(f, frk, ..)| f.partition_key == id.partition_key && frk == rk)
            .take_while(|(f, ..)| f.seq < id.seq)
            .last()
            .map_or(0, |(f, ..)| f.seq);
        assert!(
            *last >= before,
            "consumer {name}: {id} delivered before change {before} of its entity"
        );
        *last = (*last).max(id.seq);
    }
    for id in by_id.keys() {
        assert!(firsts.contains(id), "consumer {name} never delivered {id}");
    }
    repeats
}

/// A consumer of the model that crashes now and then: it drops its handle
/// (and what it polled and did not commit), or is dropped in a poll or a
/// commit, and starts again from its checkpoints.
pub struct CrashingConsumer {
    name: String,
    handle: Option<Consumer<Item>>,
    /// Every change it delivered, repeats included.
    pub delivered: Vec<Seen>,
    /// How often it crashed.
    pub crashes: usize,
}

impl CrashingConsumer {
    /// The consumer `name`, not started.
    pub fn new(name: &str) -> CrashingConsumer {
        CrashingConsumer {
            name: name.to_owned(),
            handle: None,
            delivered: Vec::new(),
            crashes: 0,
        }
    }

    /// One random step on `t`: a poll (perhaps dropped), then a commit
    /// (perhaps dropped), a crash, or nothing.
    pub async fn step(&mut self, rng: &mut fastrand::Rng, t: &Table<Item>) {
        let handle = match self.handle.take() {
            Some(handle) => handle,
            None => t.changes().consumer(&self.name).expect("a consumer"),
        };
        let max = rng.usize(1..20);
        let polled = match rng.u8(..4) {
            0 => drop_after_polls(rng.usize(1..30), handle.poll(max)).await,
            _ => Some(handle.poll(max).await),
        };
        let Some(Ok(batch)) = polled else {
            self.crashes += 1;
            return;
        };
        self.delivered.extend(batch.changes.iter().map(seen));
        match rng.u8(..10) {
            0..=5 => {
                let committed = match rng.u8(..4) {
                    0 => drop_after_polls(rng.usize(1..30), handle.commit(&batch)).await,
                    _ => Some(handle.commit(&batch).await),
                };
                if matches!(committed, Some(Ok(()))) {
                    self.handle = Some(handle);
                } else {
                    self.crashes += 1;
                }
            }
            6 | 7 => self.crashes += 1,
            _ => self.handle = Some(handle),
        }
    }

    /// Reads (through `t`) and commits until nothing is left.
    pub async fn drain(&mut self, t: &Table<Item>) {
        let handle = t.changes().consumer(&self.name).expect("a consumer");
        loop {
            let batch: ChangeBatch<Item> = handle.poll(200).await.expect("poll");
            if batch.is_empty() {
                return;
            }
            self.delivered.extend(batch.changes.iter().map(seen));
            handle.commit(&batch).await.expect("commit");
        }
    }
}

/// What [`change_feed_model_runs`] did.
#[derive(Debug, Default, Clone)]
pub struct ChangeModelOutcomes {
    /// Writes made.
    pub writes: usize,
    /// Writes whose futures were dropped at a random poll.
    pub dropped: usize,
    /// Writes that failed (faults) or were dropped, yet committed whole.
    pub committed_unseen: usize,
    /// Changes in the feeds.
    pub changes: usize,
    /// Deliveries that were repeats.
    pub repeats: usize,
    /// Consumer crashes.
    pub crashes: usize,
}

/// `runs` runs of `writes` random writes each (see the [module
/// docs](self)): under faults (lost answers, resent and failed
/// transactions, failed reads), each future dropped at a random poll one
/// time in four, with two consumers that poll between the writes and crash
/// at random. After each run, the feed and both consumers' deliveries are
/// checked against the writes that committed.
pub async fn change_feed_model_runs(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    writes: usize,
    seed: u64,
) -> ChangeModelOutcomes {
    let mut outcomes = ChangeModelOutcomes::default();
    for run in 0..runs {
        let seed = seed.wrapping_add(run as u64);
        one_run(Arc::clone(&backend), writes, seed, &mut outcomes).await;
    }
    outcomes
}

async fn one_run(
    backend: Arc<dyn TableBackend>,
    writes: usize,
    seed: u64,
    outcomes: &mut ChangeModelOutcomes,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let name = fresh_table(&*backend, "chgmodel").await;
    let faulty = FaultInjection::new(Arc::clone(&backend));
    let handle = faulty.handle();
    handle.seed(seed);
    handle.set_yields(true);
    for (operation, fault) in [
        (Operation::SubmitTransaction, Fault::LostResponse),
        (Operation::SubmitTransaction, Fault::Resent),
        (Operation::SubmitTransaction, Fault::FailsAfterApply),
        (Operation::SubmitTransaction, Fault::Transient),
        (Operation::GetEntity, Fault::Transient),
        (Operation::QueryEntities, Fault::Transient),
    ] {
        handle.inject(
            Injection::on(operation)
                .probability(0.05)
                .times(usize::MAX)
                .fault(fault),
        );
    }
    let t: Table<Item> = Table::from_arc(Arc::new(faulty), &name);
    let plain: Table<Item> = Table::from_arc(Arc::clone(&backend), &name);
    let upkeep = Upkeep::new().watch(&plain);
    let ids = [0, 1, 2, 3];
    let mut next = 0;
    let mut expected = Vec::new();
    let mut consumers = [CrashingConsumer::new("a"), CrashingConsumer::new("b")];
    for _ in 0..writes {
        let op = choose(&mut rng, &plain, &ids, &mut next).await;
        outcomes.writes += 1;
        let acked = if rng.u8(..4) == 0 {
            outcomes.dropped += 1;
            drop_after_polls(rng.usize(1..40), perform(&t, &op))
                .await
                .unwrap_or(false)
        } else {
            perform(&t, &op).await
        };
        crate::settle().await;
        if matches!(op, ModelOp::Move { .. }) {
            // A mover that stopped after its copy leaves the rest to it.
            let round = upkeep.run_round_now().await;
            assert!(round.failures.is_empty(), "upkeep failed: {round:?}");
        }
        let committed = resolve(&plain, &op).await;
        if acked {
            assert_eq!(committed.len(), parts(&op), "{op:?} succeeded: lost");
        } else if committed.len() == parts(&op) {
            outcomes.committed_unseen += 1;
        }
        expected.extend(committed);
        if rng.bool() {
            let at = rng.usize(..consumers.len());
            consumers[at].step(&mut rng, &t).await;
        }
    }
    handle.clear();
    let feed = check_feed(&plain, &expected).await;
    outcomes.changes += feed.len();
    for consumer in &mut consumers {
        consumer.drain(&plain).await;
        outcomes.repeats += check_delivered(&consumer.name, &feed, &consumer.delivered);
        outcomes.crashes += consumer.crashes;
    }
}
