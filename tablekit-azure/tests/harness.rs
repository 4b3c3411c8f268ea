//! The test harness's own promise, which every test that starts Azurite
//! relies on: what it leaves running beside a test process (Azurite, and the
//! watcher that ends it) ends when that process ends, at once, however it
//! ends, and however many processes the test started besides.

#[path = "azurite/mod.rs"]
mod azurite;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "TABLEKIT_HARNESS_CHILD";

/// A watcher given `until_this_process_ends` as its input waits while the
/// process that started it runs, and notices its end at once, even while a
/// process that process started lives on (the pipe's write end is not
/// inherited). It watches a pipe, not a process id, so a process given the
/// same id later cannot keep it waiting.
#[test]
fn a_watcher_ends_with_its_test_process() {
    if let Some(marker) = std::env::var_os(CHILD) {
        // In the child test process: a watcher that makes the marker once
        // this process is gone, and a process that outlives this one (both
        // not waited on: they outlive this process on purpose).
        #[allow(clippy::zombie_processes)]
        Command::new("sh")
            .arg("-c")
            .arg("while read -r _; do :; done; : > \"$0\"")
            .arg(&marker)
            .stdin(azurite::until_this_process_ends())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a watcher");
        #[allow(clippy::zombie_processes)]
        Command::new("sleep")
            .arg("40")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a process that outlives the test");
        // While this process lives, the watcher waits.
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !std::path::Path::new(&marker).exists(),
            "the watcher ended while its test process was running"
        );
        return;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let marker =
        std::env::temp_dir().join(format!("tablekit-harness-{}-{nanos}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let status = Command::new(std::env::current_exe().expect("this test's program"))
        .args(["--exact", "a_watcher_ends_with_its_test_process"])
        .env(CHILD, &marker)
        .stdout(Stdio::null())
        .status()
        .expect("the child test process runs");
    assert!(status.success(), "the child test process failed: {status}");
    // Ended: the watcher must notice well before the 40 s the process the
    // child left behind lives for.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the watcher did not notice its test process end within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&marker);
}
