//! Enough of libtest's interface for a test binary with a main of its own
//! (`harness = false`: the binary is also the child process it kills), so
//! that `cargo test` filters and nextest list and run it.

/// Runs the test `name` with `run`, unless the arguments list tests or
/// filter it out; prints libtest's lines around it.
pub(crate) fn run_test(name: &str, run: impl FnOnce()) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("{name}: test");
        }
        return;
    }
    if args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .any(|filter| !name.contains(filter.as_str()))
    {
        println!("test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out");
        return;
    }
    let started = std::time::Instant::now();
    run();
    println!(
        "test {name} ... ok ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}

/// A runtime on the current thread, for the parent's checks.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}
