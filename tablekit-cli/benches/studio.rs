//! `tablekit studio` on a local store of 1,000,000 rows: how long the first
//! page of a table (100 rows) takes to come back over HTTP, the first
//! request after the studio starts and the median of 20 more.
//!
//! `cargo bench -p tablekit-cli --bench studio` (`-- 100000` for fewer
//! rows). A load measurement, not a statistical micro-benchmark.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Instant;

use tablekit::{BatchOperation, Entity, TableBackend};
use tablekit_local::LocalStorage;

/// One GET to the studio; the answer's body length.
fn get(port: u16, token: &str, target: &str) -> usize {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("a connection");
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Studio-Token: {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("the request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("the answer");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer[..200.min(answer.len())])
    );
    answer.len()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let n: usize = (args.iter().skip(1))
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    {
        let store = LocalStorage::open(&path).expect("a store");
        store.create_table("Big").await.expect("a table");
        let started = Instant::now();
        for chunk in 0..n.div_ceil(100) {
            let operations: Vec<BatchOperation> = (chunk * 100..((chunk + 1) * 100).min(n))
                .map(|i| {
                    let row = Entity::new(format!("p{:04}", chunk % 1000), format!("r{i:09}"))
                        .with("Name", format!("row {i}"))
                        .with("Total", i as i64);
                    BatchOperation::Insert(row)
                })
                .collect();
            store
                .submit_transaction("Big", &operations)
                .await
                .expect("a load");
        }
        println!(
            "loaded {n} rows in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let store = format!("UseLocalStorage={}", path.display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(["studio", "--store", &store])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the studio");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its output"))
        .read_line(&mut line)
        .expect("its address");
    let rest = line.split("http://127.0.0.1:").nth(1).expect("an address");
    let (port, token) = rest.trim().split_once("/?token=").expect("a token");
    let port: u16 = port.parse().expect("a port");
    let target = "/api/rows?table=Big&top=100";
    let started = Instant::now();
    let bytes = get(port, token, target);
    let first = started.elapsed();
    let mut times = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        get(port, token, target);
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "the first page of {n} rows ({bytes} bytes): {:.1} ms the first time, {:.1} ms median of 20 (max {:.1} ms)",
        first.as_secs_f64() * 1e3,
        times[times.len() / 2] * 1e3,
        times[times.len() - 1] * 1e3
    );
    let _ = child.kill();
    let _ = child.wait();
}
