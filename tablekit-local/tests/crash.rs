//! Durability under SIGKILL: a child process writes single entities,
//! transactions, blobs and queue messages from 16 tasks at once (so that
//! writes share group commits), reporting each write on stdout
//! once the store acknowledged it, and is killed at a random moment; the
//! parent then reopens the store and checks that
//! - every acknowledged write is there, with its value;
//! - no transaction is partly applied;
//! - no ETag was handed out twice;
//! - every acknowledged message not acknowledged as deleted is still
//!   delivered.
//!
//! Every other child keeps 64 KiB of the file in memory (see `child`).
//!
//! First, another process opening the store this one holds is refused with
//! a clear error. Then 200 kills by default; `TABLEKIT_CRASH_KILLS=1000 cargo test -p
//! tablekit-local --test crash` runs the long form. A test of its own main
//! (`harness = false`), since the same binary is the child.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tablekit::clock::ManualClock;
use tablekit::queue::{MessageTtl, PutMessageOptions, QueueStore};
use tablekit::{
    BatchOperation, BlobStore, DateTime, Entity, Error, PutCondition, Query, TableBackend,
    TableBackendExt, UpdateMode, Value,
};
use tablekit_local::LocalStorage;

#[path = "support/libtest.rs"]
mod support;

const CHILD: &str = "TABLEKIT_CRASH_CHILD";
/// The child that only tries to open a store another process holds.
const PROBE: &str = "TABLEKIT_CRASH_PROBE";
const RUN: &str = "TABLEKIT_CRASH_RUN";
const TABLE: &str = "crashes";
const CONTAINER: &str = "crashes";
const QUEUE: &str = "crashes";

fn blob_bytes(id: &str) -> Vec<u8> {
    id.bytes().cycle().take(3000 + id.len() * 97).collect()
}

/// How many tasks of the child write at once: their writes share commits.
const WRITERS: u64 = 16;

/// The child: writes until it is killed, from [`WRITERS`] tasks at once, one
/// report line per acknowledged write.
async fn child(dir: &Path, run: u64) {
    // Every other run keeps almost nothing of the file in memory, so the
    // engine writes the pages of commits not yet checkpointed to the file
    // early, between checkpoints, where a kill finds them.
    let cache = if run % 2 == 1 {
        64 << 10
    } else {
        tablekit_local::DEFAULT_CACHE_SIZE
    };
    let store = LocalStorage::builder()
        .cache_size(cache)
        .open(dir)
        .expect("the child opens the store");
    // Every run makes what is missing: the first may be killed before it
    // has made everything (a new store takes a few syncs to be whole).
    match store.create_table(TABLE).await {
        Ok(()) | Err(Error::TableAlreadyExists { .. }) => {}
        Err(e) => panic!("create the table: {e}"),
    }
    match store.create_container(CONTAINER).await {
        Ok(()) | Err(Error::ContainerAlreadyExists { .. }) => {}
        Err(e) => panic!("create the container: {e}"),
    }
    store.create_queue(QUEUE).await.expect("create the queue");
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| tokio::spawn(write_until_killed(store.clone(), run, writer)))
        .collect();
    for writer in writers {
        writer.await.expect("a writer task");
    }
}

/// Reports one acknowledged write.
fn report(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// One writer task of the child: the writes numbered `writer`, `writer +
/// WRITERS`, and so on.
async fn write_until_killed(store: LocalStorage, run: u64, writer: u64) {
    for i in (writer..).step_by(WRITERS as usize) {
        let id = format!("{run}-{i}");
        let line = match i % 5 {
            0 => {
                let e = Entity::new("single", id.as_str()).with("I", i as i64);
                let etag = store
                    .upsert_entity(TABLE, &e, UpdateMode::Replace)
                    .await
                    .unwrap();
                format!("S {id} {}", etag.as_str())
            }
            1 => {
                let ops: Vec<_> = (0..5)
                    .map(|k| {
                        BatchOperation::Insert(
                            Entity::new(format!("batch-{id}"), k.to_string()).with("K", k),
                        )
                    })
                    .collect();
                let etags = store.submit_transaction(TABLE, &ops).await.unwrap();
                let etag = etags[0].as_ref().unwrap();
                format!("B {id} {}", etag.as_str())
            }
            2 => {
                store
                    .put_blob(CONTAINER, &id, blob_bytes(&id), &PutCondition::IfNotExists)
                    .await
                    .unwrap();
                format!("L {id}")
            }
            3 => {
                let options = PutMessageOptions::default().ttl(MessageTtl::Never);
                store.put_message(QUEUE, &id, &options).await.unwrap();
                format!("Q {id}")
            }
            _ => {
                let got = store
                    .get_messages(QUEUE, 1, Duration::from_secs(30))
                    .await
                    .unwrap();
                let Some(m) = got.first() else { continue };
                // Received: reported before the delete, which may land
                // with its report cut off by the kill.
                report(&format!("G {}", m.text));
                store
                    .delete_message(QUEUE, &m.id, &m.pop_receipt)
                    .await
                    .unwrap();
                format!("D {}", m.text)
            }
        };
        report(&line);
    }
}

/// What the children reported as acknowledged, over every run.
#[derive(Default)]
struct Acknowledged {
    singles: HashMap<String, i64>,
    batches: HashSet<String>,
    blobs: HashSet<String>,
    messages: HashSet<String>,
    received: HashSet<String>,
    deleted: HashSet<String>,
    etags: HashSet<String>,
    writes: usize,
}

impl Acknowledged {
    fn record(&mut self, line: &str) {
        let mut parts = line.split(' ');
        let (kind, id) = (parts.next().unwrap(), parts.next().unwrap().to_owned());
        if let Some(etag) = parts.next() {
            assert!(
                self.etags.insert(etag.to_owned()),
                "ETag {etag} handed out twice"
            );
        }
        self.writes += 1;
        match kind {
            "S" => {
                let i = id.split('-').nth(1).unwrap().parse().unwrap();
                self.singles.insert(id, i);
            }
            "B" => {
                self.batches.insert(id);
            }
            "L" => {
                self.blobs.insert(id);
            }
            "Q" => {
                self.messages.insert(id);
            }
            "G" => {
                self.received.insert(id);
            }
            "D" => {
                self.deleted.insert(id);
            }
            other => panic!("unknown report {other:?}"),
        }
    }
}

/// Checks the store against what was acknowledged. `round` moves the
/// queue's clock an hour on per round, so every message taken before is
/// visible again.
async fn verify(dir: &Path, ack: &Acknowledged, round: u32) {
    let clock = ManualClock::new();
    clock.set(DateTime::now().saturating_add(Duration::from_secs(3600 * (u64::from(round) + 1))));
    let store = LocalStorage::builder()
        .clock(clock)
        .open(dir)
        .expect("the store reopens after a kill");
    if ack.writes == 0
        && store
            .list_tables(&Default::default())
            .await
            .unwrap()
            .tables
            .is_empty()
    {
        return;
    }
    let rows = store.query_all(TABLE, Query::new()).await.unwrap();
    let mut batches: HashMap<&str, usize> = HashMap::new();
    let mut singles = HashMap::new();
    for row in &rows {
        if let Some(id) = row.partition_key.strip_prefix("batch-") {
            *batches.entry(id).or_default() += 1;
        } else {
            singles.insert(row.row_key.as_str(), row.get("I").cloned());
        }
    }
    for (id, count) in &batches {
        assert_eq!(*count, 5, "transaction {id} is partly applied");
    }
    for id in &ack.batches {
        assert!(
            batches.contains_key(id.as_str()),
            "acknowledged transaction {id} is lost"
        );
    }
    for (id, i) in &ack.singles {
        assert_eq!(
            singles.get(id.as_str()),
            Some(&Some(Value::Int64(*i))),
            "acknowledged write {id}"
        );
    }
    for id in &ack.blobs {
        let blob = store
            .get_blob(CONTAINER, id)
            .await
            .unwrap_or_else(|e| panic!("acknowledged blob {id}: {e}"));
        assert_eq!(blob.data, blob_bytes(id), "blob {id}");
    }
    let mut delivered = HashSet::new();
    loop {
        let got = match store.get_messages(QUEUE, 32, Duration::from_secs(30)).await {
            // Killed before it made the queue: no message was sent.
            Err(Error::QueueNotFound { .. }) if ack.messages.is_empty() => break,
            got => got.unwrap(),
        };
        if got.is_empty() {
            break;
        }
        delivered.extend(got.into_iter().map(|m| m.text));
    }
    for id in &ack.messages {
        // A message the child received may be gone: its delete may have
        // landed with its report cut off. Any other is delivered still.
        if ack.deleted.contains(id) {
            assert!(
                !delivered.contains(id),
                "message {id} was deleted, yet came back"
            );
        } else if !ack.received.contains(id) {
            assert!(
                delivered.contains(id),
                "acknowledged message {id} is no longer delivered"
            );
        }
    }
}

fn parent(kills: u32) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let runtime = support::runtime();
    let mut ack = Acknowledged::default();
    let mut rng = fastrand::Rng::with_seed(0xC4A5);
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .env(CHILD, dir.path())
            .env(RUN, round.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.u64(5..60)));
        child.kill().unwrap();
        child.wait().unwrap();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            ack.record(&line.unwrap());
        }
        runtime.block_on(verify(dir.path(), &ack, round));
    }
    println!(
        "{kills} kills, {} acknowledged writes checked ({} singles, {} transactions, {} blobs, {} messages, {} deletes)",
        ack.writes,
        ack.singles.len(),
        ack.batches.len(),
        ack.blobs.len(),
        ack.messages.len(),
        ack.deleted.len()
    );
    assert!(
        ack.writes > kills as usize,
        "the children wrote too little to test anything"
    );
}

/// Another process opening a store this one holds gets a clear error, and
/// the store is whole afterwards.
fn a_second_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = support::runtime();
    let store = LocalStorage::open(dir.path()).unwrap();
    runtime.block_on(store.create_table(TABLE)).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .env(PROBE, dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("Locked")
            && said.contains("another handle, in this process or another, has it open"),
        "the second process was told: {said}"
    );
    let rows = runtime
        .block_on(store.query_all(TABLE, Query::new()))
        .unwrap();
    assert!(rows.is_empty());
    println!("a second process opening the store: {}", said.trim());
}

fn main() {
    if let Some(dir) = std::env::var_os(PROBE) {
        match LocalStorage::open(Path::new(&dir)) {
            Ok(_) => println!("opened"),
            Err(e) => match &e {
                tablekit::Error::Storage { failure, .. } => println!("{failure:?}: {e}"),
                other => println!("{other:?}"),
            },
        }
        return;
    }
    if let Some(dir) = std::env::var_os(CHILD) {
        let run = std::env::var(RUN).unwrap().parse().unwrap();
        let runtime = support::runtime();
        runtime.block_on(child(Path::new(&dir), run));
        return;
    }
    let kills = std::env::var("TABLEKIT_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(200);
    support::run_test("kills_lose_nothing_acknowledged", || {
        a_second_process_is_refused();
        parent(kills);
    });
}
