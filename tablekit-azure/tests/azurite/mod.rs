//! Starts Azurite (the npm package `azurite`) for the tests of this crate: on
//! loopback, free ports, in-memory persistence. It is installed into
//! `target/azurite` with npm on first use. If it cannot be installed or
//! started, the tests fail with the reason: they never skip.

#![allow(dead_code, unreachable_pub)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tablekit_azure::config::Account;

pub const VERSION: &str = "3.37.0";

/// A running Azurite.
pub struct Azurite {
    pub host: &'static str,
    pub table_port: u16,
    pub blob_port: u16,
    pub queue_port: u16,
}

impl Azurite {
    /// Its connection string, as the `tablekit` program and
    /// `tablekit_stores` read one.
    #[allow(dead_code)] // Used by the program's tests, which share this module.
    pub fn connection_string(&self) -> String {
        format!(
            "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://{};TablePort={};BlobPort={};QueuePort={}",
            self.host, self.table_port, self.blob_port, self.queue_port
        )
    }
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_owned()
}

fn install() -> PathBuf {
    let dir = workspace().join("target/azurite");
    let bin = dir.join("node_modules/.bin/azurite");
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&dir).expect("create target/azurite");
    let status = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&dir)
        .arg(format!("azurite@{VERSION}"))
        .status()
        .unwrap_or_else(|e| panic!("cannot run npm to install Azurite: {e}"));
    assert!(status.success(), "npm could not install azurite@{VERSION}");
    assert!(
        bin.exists(),
        "npm installed Azurite but {} is missing",
        bin.display()
    );
    bin
}

/// `N` distinct free loopback ports: every listener is held until all are
/// chosen, so the kernel cannot hand out one port twice (Azurite would then
/// fail to start one of its services, and the first request would fail).
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("a bound address").port())
}

fn start() -> Azurite {
    start_with(&[])
}

/// Another Azurite of this test process, with `extra` arguments (for
/// example `--oauth basic --cert … --key …`), on ports of its own.
pub fn start_with(extra: &[&str]) -> Azurite {
    static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let bin = install();
    let [blob_port, queue_port, table_port] = free_ports::<3>();
    let number = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let work =
        std::env::temp_dir().join(format!("tablekit-azurite-{}-{number}", std::process::id()));
    std::fs::create_dir_all(&work).expect("a work directory");
    let quoted: Vec<String> = extra
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    // A watcher shell ends Azurite when this test process is gone (its
    // standard input then reaches its end: see `until_this_process_ends`),
    // then removes the work directory.
    let script = format!(
        "\"$0\" --inMemoryPersistence --silent --skipApiVersionCheck \
         --blobHost 127.0.0.1 --blobPort {blob_port} --queueHost 127.0.0.1 --queuePort {queue_port} \
         --tableHost 127.0.0.1 --tablePort {table_port} {extra} </dev/null & child=$!; \
         while read -r _; do :; done; kill -9 $child; wait $child; \
         rm -rf \"$1\"",
        extra = quoted.join(" "),
    );
    // Not waited on: the watcher lives as long as this test process and ends
    // Azurite when the process is gone.
    #[allow(clippy::zombie_processes)]
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(&bin)
        .arg(&work)
        .current_dir(&work)
        .stdin(until_this_process_ends())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start Azurite: {e}"));
    let deadline = Instant::now() + Duration::from_secs(180);
    for port in [table_port, blob_port, queue_port] {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Azurite did not listen on port {port} within 180 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Azurite {
        host: "127.0.0.1",
        table_port,
        blob_port,
        queue_port,
    }
}

/// A standard input for a watcher that reaches its end exactly when this
/// test process is gone, however it ends: the read end of a pipe whose
/// write end only this process holds (it is never inherited: the standard
/// library opens pipes close-on-exec) and never closes. Unlike polling the
/// process id, it cannot be fooled by another process given the same id.
pub fn until_this_process_ends() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("a pipe for the watcher");
    // Kept open until this process ends: the kernel closes it then.
    std::mem::forget(writer);
    Stdio::from(reader)
}

/// The Azurite of this test process, started on first use.
pub fn azurite() -> &'static Azurite {
    static AZURITE: OnceLock<Azurite> = OnceLock::new();
    AZURITE.get_or_init(start)
}

/// The emulator account of the running Azurite.
pub fn account() -> Account {
    let a = azurite();
    Account::emulator(a.host, a.table_port, a.blob_port, a.queue_port)
}
