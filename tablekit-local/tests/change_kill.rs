//! The change feed under SIGKILL: a child process makes random typed
//! writes of a kind with a change feed (inserts, replaces, merges,
//! updates, upserts, deletes, moves, batches and the bulk writer, with a
//! unique index) from several tasks, while a consumer in the same process
//! polls the feed, reports each change it delivers, and commits or crashes
//! at random. The child is killed at a random moment, again and again;
//! between kills the parent reopens the store, lets the upkeep finish what
//! the child left (a move cut in half), and reads back whether each write
//! in flight at the kill committed. At the end:
//! - the feed of each item is exactly its committed writes, in order;
//! - the consumer delivered every change at least once, nothing else, and
//!   each item's changes in order.
//!
//! 30 kills by default; `TABLEKIT_CHANGE_KILLS=300 cargo test -p
//! tablekit-local --test change_kill` runs longer. A test of its own main
//! (`harness = false`), since the same binary is the child.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

#[path = "support/libtest.rs"]
mod support;

use tablekit::TableBackend;
use tablekit::changes::{ChangeId, ChangeOp};
use tablekit::table::Table;
use tablekit::upkeep::Upkeep;
use tablekit_conformance::change_model::{
    Expected, Item, ModelOp, Seen, check_delivered, check_feed, choose, parts, perform, resolve,
    seen,
};
use tablekit_local::LocalStorage;

const CHILD: &str = "TABLEKIT_CHANGE_CHILD";
const RUN: &str = "TABLEKIT_CHANGE_RUN";
const TABLE: &str = "Changes";
/// Writer tasks of the child; writer `w` owns the items `2w` and `2w + 1`.
const WRITERS: u32 = 4;
const CONSUMER: &str = "feed";

fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

fn table(store: &LocalStorage) -> Table<Item> {
    let backend: Arc<dyn TableBackend> = Arc::new(store.clone());
    Table::from_arc(backend, TABLE)
}

/// The child: writers and a consumer, until it is killed.
async fn child(dir: &Path, run: u64) {
    let store = LocalStorage::open(dir).expect("the child opens the store");
    let t = table(&store);
    t.create_if_missing().await.expect("create the table");
    let mut tasks: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write_until_killed(t.clone(), run, w)))
        .collect();
    tasks.push(tokio::spawn(consume_until_killed(t.clone(), run)));
    for task in tasks {
        task.await.expect("a task of the child");
    }
}

/// One writer: reports `B w op` before each write, `E w part` for each of
/// its parts that committed, then `A w`.
async fn write_until_killed(t: Table<Item>, run: u64, w: u32) {
    let mut rng = fastrand::Rng::with_seed(run * 1000 + u64::from(w));
    let ids = [2 * w, 2 * w + 1];
    // Tokens never repeat: each run and writer has its own range.
    let mut next = (run as i64 * 16 + i64::from(w)) * 1_000_000;
    loop {
        let op = choose(&mut rng, &t, &ids, &mut next).await;
        report(&format!("B {w} {}", op.line()));
        let acked = perform(&t, &op).await;
        let committed = resolve(&t, &op).await;
        if acked {
            assert_eq!(committed.len(), parts(&op), "{op:?} succeeded: lost");
        }
        for ((group, id), change, token) in committed {
            let token = token.map_or("-".to_owned(), |t| t.to_string());
            report(&format!("E {w} {group} {id} {change:?} {token}"));
        }
        report(&format!("A {w}"));
    }
}

/// The consumer: reports `D pk seq rk op token` for each change it
/// delivers, then commits, or crashes (a new handle, from the checkpoints).
async fn consume_until_killed(t: Table<Item>, run: u64) {
    let mut rng = fastrand::Rng::with_seed(run ^ 0xFEED);
    let mut consumer = t.changes().consumer(CONSUMER).expect("a consumer");
    loop {
        tokio::time::sleep(Duration::from_millis(rng.u64(1..6))).await;
        let batch = consumer.poll(rng.usize(1..30)).await.expect("poll");
        for change in &batch.changes {
            let (id, rk, op, token) = seen(change);
            let token = token.map_or("-".to_owned(), |t| t.to_string());
            report(&format!(
                "D {} {} {rk} {op:?} {token}",
                id.partition_key, id.seq
            ));
        }
        if rng.u8(..10) < 7 {
            consumer.commit(&batch).await.expect("commit");
        } else {
            consumer = t.changes().consumer(CONSUMER).expect("a consumer");
        }
    }
}

fn change_op(text: &str) -> ChangeOp {
    match text {
        "Insert" => ChangeOp::Insert,
        "Replace" => ChangeOp::Replace,
        "Merge" => ChangeOp::Merge,
        "Upsert" => ChangeOp::Upsert,
        "UpsertMerge" => ChangeOp::UpsertMerge,
        "Delete" => ChangeOp::Delete,
        other => panic!("unknown change {other:?}"),
    }
}

fn token(text: &str) -> Option<i64> {
    (text != "-").then(|| text.parse().unwrap())
}

/// What the children reported, over every run.
#[derive(Default)]
struct Reports {
    /// The committed parts of every finished write, in order per writer.
    expected: Vec<Expected>,
    /// Per writer, the write in flight and the parts reported of it.
    open: HashMap<u32, (ModelOp, Vec<Expected>)>,
    delivered: Vec<Seen>,
    writes: usize,
    /// Writes in flight at a kill, and how many of them committed whole.
    in_flight: usize,
    in_flight_committed: usize,
}

impl Reports {
    fn record(&mut self, line: &str) {
        let words: Vec<&str> = line.split(' ').collect();
        let writer = || words[1].parse::<u32>().unwrap();
        match words[0] {
            "B" => {
                let op = ModelOp::parse(&words[2..].join(" ")).expect("a write");
                self.open.insert(writer(), (op, Vec::new()));
            }
            "E" => {
                let part = (
                    (words[2].to_owned(), words[3].parse().unwrap()),
                    change_op(words[4]),
                    token(words[5]),
                );
                self.open
                    .get_mut(&writer())
                    .expect("a write begun")
                    .1
                    .push(part);
            }
            "A" => {
                let (_, parts) = self.open.remove(&writer()).expect("a write begun");
                self.expected.extend(parts);
                self.writes += 1;
            }
            "D" => {
                let id = ChangeId {
                    partition_key: words[1].to_owned(),
                    seq: words[2].parse().unwrap(),
                };
                let change = (
                    id,
                    words[3].to_owned(),
                    change_op(words[4]),
                    token(words[5]),
                );
                self.delivered.push(change);
            }
            other => panic!("unknown report {other:?}"),
        }
    }

    /// After a kill: what each write in flight did, read back once the
    /// upkeep has finished what it left.
    async fn settle(&mut self, dir: &Path) {
        let store = LocalStorage::open(dir).expect("the store reopens after a kill");
        let t = table(&store);
        if t.create_if_missing().await.expect("the table") {
            assert!(self.open.is_empty() && self.writes == 0);
            return;
        }
        let round = Upkeep::new().watch(&t).run_round_now().await;
        assert!(round.failures.is_empty(), "upkeep failed: {round:?}");
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_by_key(|(w, _)| *w);
        for (_, (op, _)) in open {
            let committed = resolve(&t, &op).await;
            self.in_flight += 1;
            self.in_flight_committed += usize::from(committed.len() == parts(&op));
            self.expected.extend(committed);
            self.writes += 1;
        }
    }
}

fn parent(kills: u32) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let runtime = support::runtime();
    let mut reports = Reports::default();
    let mut rng = fastrand::Rng::with_seed(0xC4A6);
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .env(CHILD, dir.path())
            .env(RUN, (round + 1).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.u64(20..250)));
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("the child stopped by itself ({status}): {err}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            reports.record(&line.unwrap());
        }
        runtime.block_on(reports.settle(dir.path()));
    }
    runtime.block_on(async {
        let store = LocalStorage::open(dir.path()).unwrap();
        let t = table(&store);
        let feed = check_feed(&t, &reports.expected).await;
        let consumer = t.changes().consumer(CONSUMER).unwrap();
        loop {
            let batch = consumer.poll(500).await.unwrap();
            if batch.is_empty() {
                break;
            }
            reports.delivered.extend(batch.changes.iter().map(seen));
            consumer.commit(&batch).await.unwrap();
        }
        let repeats = check_delivered(CONSUMER, &feed, &reports.delivered);
        println!(
            "{kills} kills: {} writes ({} in flight at a kill, {} of them committed), {} changes in the feed, {} delivered ({repeats} repeats)",
            reports.writes,
            reports.in_flight,
            reports.in_flight_committed,
            feed.len(),
            reports.delivered.len()
        );
        assert!(
            feed.len() > kills as usize,
            "the children wrote too little to test anything"
        );
    });
}

fn main() {
    if let Some(dir) = std::env::var_os(CHILD) {
        let run = std::env::var(RUN).unwrap().parse().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(child(Path::new(&dir), run));
        return;
    }
    let kills = std::env::var("TABLEKIT_CHANGE_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(30);
    support::run_test("kills_lose_no_change", || parent(kills));
}
