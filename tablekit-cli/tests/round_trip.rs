//! The copy program's round trip: 100,000 rows of every EDM type, edge
//! values and awkward keys go Azurite → a local directory (the `tablekit`
//! program, killed mid-way and run again with its checkpoint) → JSON Lines
//! (`tablekit export`) → memory (`import_table`) → Azurite (`Copier`,
//! dropped mid-way and resumed from its checkpoint), and every row comes
//! back with its keys, values and types: 0 mismatches.

#[path = "../../tablekit-azure/tests/azurite/mod.rs"]
mod azurite;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tablekit::copy::{Checkpoint, Conflict, Copier, import_table};
use tablekit::{BatchOperation, DateTime, Entity, Query, TableBackend, TableBackendExt, Value};
use tablekit_azure::AzureTables;

const ROWS: usize = 100_000;
const PARTITIONS: usize = 250;

fn azurite_connection() -> String {
    azurite::azurite().connection_string()
}

/// A key of awkward characters: quotes, spaces, percent signs, characters
/// whose UTF-16 order differs from their code points' (U+E000 and above,
/// supplementary ones), and none the store forbids.
fn key(rng: &mut fastrand::Rng, n: usize) -> String {
    const PARTS: &[&str] = &[
        "a", "Z", "'", " ", "%", "é", "\u{E000}", "\u{FFFD}", "😀", "𝄞", "-", "_", "~", "0",
    ];
    let mut key: String = (0..rng.usize(1..8))
        .map(|_| PARTS[rng.usize(..PARTS.len())])
        .collect();
    key.push_str(&format!("{n:06}"));
    key
}

fn value(rng: &mut fastrand::Rng) -> Value {
    match rng.u8(..9) {
        0 => Value::String(
            [
                "",
                "plain",
                "quote ' and \" and \\",
                "line\nbreak\ttab",
                "ünïcödé 😀 \u{E000}",
                "&$filter=x",
            ][rng.usize(..6)]
            .to_owned(),
        ),
        1 => Value::Int32([i32::MIN, -1, 0, 1, i32::MAX, rng.i32(..)][rng.usize(..6)]),
        2 => Value::Int64([i64::MIN, -1, 0, i64::MAX, rng.i64(..)][rng.usize(..5)]),
        3 => Value::Double(
            [
                0.0,
                1.5,
                -2.25e-300,
                f64::MAX,
                f64::MIN_POSITIVE,
                5e-324,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                rng.f64() * 1e9,
            ][rng.usize(..10)],
        ),
        4 => Value::Boolean(rng.bool()),
        5 => {
            let min = DateTime::parse("1601-01-01T00:00:00Z").unwrap().ticks();
            let max = DateTime::parse("9999-12-31T23:59:59.9999999Z")
                .unwrap()
                .ticks();
            Value::DateTime(
                DateTime::from_ticks([min, max, rng.i64(min..max)][rng.usize(..3)]).unwrap(),
            )
        }
        6 => Value::Guid(tablekit::uuid::Uuid::from_u128(rng.u128(..))),
        7 => Value::Binary((0..rng.usize(..40)).map(|_| rng.u8(..)).collect()),
        _ => Value::String("x".repeat(rng.usize(..300))),
    }
}

fn rows() -> Vec<Entity> {
    let mut rng = fastrand::Rng::with_seed(0x0C0F);
    let partitions: Vec<String> = (0..PARTITIONS).map(|p| key(&mut rng, p)).collect();
    (0..ROWS)
        .map(|n| {
            let mut e = Entity::new(partitions[n % PARTITIONS].clone(), key(&mut rng, n));
            for p in 0..rng.usize(1..12) {
                e.insert(format!("P{p}"), value(&mut rng));
            }
            e
        })
        .collect()
}

/// Every row of `table`, by keys.
async fn read(backend: &dyn TableBackend, table: &str) -> HashMap<(String, String), Entity> {
    backend
        .query_all(table, Query::new())
        .await
        .unwrap()
        .into_iter()
        .map(|e| ((e.partition_key.clone(), e.row_key.clone()), e))
        .collect()
}

/// The rows of `got` that differ from `expected`: keys, names, types and
/// values (doubles by their bits, so -0.0 and NaN count).
fn mismatches(expected: &[Entity], got: &HashMap<(String, String), Entity>) -> Vec<String> {
    let same = |a: &Value, b: &Value| match (a, b) {
        (Value::Double(x), Value::Double(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    };
    let mut out = Vec::new();
    for e in expected {
        match got.get(&(e.partition_key.clone(), e.row_key.clone())) {
            None => out.push(format!("missing {:?}/{:?}", e.partition_key, e.row_key)),
            Some(g) => {
                let equal = g.properties.len() == e.properties.len()
                    && e.properties
                        .iter()
                        .all(|(n, v)| g.properties.get(n).is_some_and(|w| same(v, w)));
                if !equal {
                    out.push(format!(
                        "{:?}/{:?}: {:?} != {:?}",
                        e.partition_key, e.row_key, e.properties, g.properties
                    ));
                }
            }
        }
    }
    if got.len() != expected.len() {
        out.push(format!("{} rows, not {}", got.len(), expected.len()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azurite_local_jsonl_mem_azurite_round_trip_of_100_000_rows() {
    let started = Instant::now();
    let expected = rows();
    let azure: Arc<dyn TableBackend> =
        Arc::new(AzureTables::from_connection_string(&azurite_connection()).unwrap());
    let run = std::process::id();
    let source = format!("Source{run}");
    azure.create_table(&source).await.unwrap();
    let mut by_partition: HashMap<&str, Vec<BatchOperation>> = HashMap::new();
    for e in &expected {
        by_partition
            .entry(&e.partition_key)
            .or_default()
            .push(BatchOperation::Insert(e.clone()));
    }
    let batches: Vec<Vec<BatchOperation>> = by_partition
        .into_values()
        .flat_map(|ops| ops.chunks(100).map(<[_]>::to_vec).collect::<Vec<_>>())
        .collect();
    futures::stream::iter(batches)
        .map(|ops| {
            let (azure, source) = (Arc::clone(&azure), source.clone());
            async move { azure.submit_transaction(&source, &ops).await.unwrap() }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    let stored = read(&*azure, &source).await;
    let azurite_keeps = mismatches(&expected, &stored);
    assert!(
        azurite_keeps.is_empty(),
        "Azurite itself: {:?}",
        &azurite_keeps[..azurite_keeps.len().min(5)]
    );
    eprintln!(
        "loaded {} rows into Azurite in {:.1} s",
        stored.len(),
        started.elapsed().as_secs_f64()
    );

    // Azurite → local, by the program, killed once mid-way and run again.
    let work = tempfile::tempdir().unwrap();
    let local = format!("UseLocalStorage={}", work.path().join("local").display());
    let checkpoint = work.path().join("copy.json");
    let copy = |kill_after: Option<Duration>| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tablekit"))
            .args([
                "copy",
                "--from",
                &azurite_connection(),
                "--to",
                &local,
                "--table",
                &source,
                "--unpaced",
                "--checkpoint",
            ])
            .arg(&checkpoint)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(after) = kill_after {
            let deadline = Instant::now() + Duration::from_secs(120);
            // Killed once the first pages are kept, before the end.
            while !checkpoint.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(after);
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(())
    };
    copy(Some(Duration::from_millis(300)));
    let kept: Checkpoint = serde_json::from_slice(&std::fs::read(&checkpoint).unwrap()).unwrap();
    assert!(
        matches!(
            kept.tables.get(&source),
            Some(tablekit::copy::TableCheckpoint::At(..))
        ),
        "killed mid-way: {kept:?}"
    );
    copy(None);
    {
        let stores = tablekit_stores::Stores::open(&local).unwrap();
        let got = read(&*stores.tables, &source).await;
        let wrong = mismatches(&expected, &got);
        assert!(
            wrong.is_empty(),
            "local: {:?}",
            &wrong[..wrong.len().min(5)]
        );
    }
    eprintln!(
        "copied to a local directory by the program at {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Azurite frees a deleted table's name at once: the rows come back into
    // a table of the same name, from nothing.
    azure.delete_table(&source).await.unwrap();

    // Local → JSON Lines, by the program.
    let jsonl = work.path().join("export");
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(["export", "--from", &local, "--table", &source, "--out"])
        .arg(&jsonl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = jsonl.join(format!("{source}.jsonl"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), ROWS);
    assert!(
        text.contains("@odata.type\":\"Edm.Int64\""),
        "typed wire form"
    );

    // JSON Lines → memory.
    let mem: Arc<dyn TableBackend> = Arc::new(tablekit_mem::MemBackend::new());
    let mut input = std::io::BufReader::new(std::fs::File::open(&file).unwrap());
    let counts = import_table(&*mem, &source, &mut input, Conflict::Fail, 0, &|_, _| {})
        .await
        .unwrap();
    assert_eq!(counts.written, ROWS as u64);

    // Memory → Azurite, dropped after some pages and resumed.
    let last = Arc::new(Mutex::new(Checkpoint::default()));
    let pages = Arc::new(Mutex::new(0));
    let copier = {
        let (last, pages) = (Arc::clone(&last), Arc::clone(&pages));
        Copier::new(Arc::clone(&mem), Arc::clone(&azure))
            .table(source.clone())
            .on_checkpoint(move |c| {
                *last.lock().unwrap() = c.clone();
                *pages.lock().unwrap() += 1;
            })
    };
    // Boxed, so that it is dropped for real (as a cancelled task is).
    let mut first = Box::pin({
        let copier = copier.clone();
        async move { copier.run().await }
    });
    let stopped = loop {
        tokio::select! {
            result = &mut first => break result.map(|_| false).unwrap(),
            () = tokio::time::sleep(Duration::from_millis(10)) => {
                if *pages.lock().unwrap() >= 20 { break true; }
            }
        }
    };
    assert!(stopped, "the copy was stopped before its end");
    drop(first);
    let resume = last.lock().unwrap().clone();
    let report = Copier::new(mem, Arc::clone(&azure))
        .table(source.clone())
        .resume(resume)
        .conflict(Conflict::Fail)
        .run()
        .await
        .unwrap();
    assert!(
        report.read < ROWS as u64,
        "the resumed copy did not read everything again: {report:?}"
    );
    let got = read(&*azure, &source).await;
    let wrong = mismatches(&expected, &got);
    assert!(
        wrong.is_empty(),
        "{} mismatches: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    eprintln!(
        "round trip of {ROWS} rows: 0 mismatches, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    azure.delete_table(&source).await.unwrap();
}
