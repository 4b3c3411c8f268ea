//! What the benchmarks share.

/// Runs `f` to its end on this thread's runtime of one thread (the
/// in-memory stores never wait, but long reads give the thread back
/// between pages).
pub(crate) fn now<F: std::future::Future>(f: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
    }
    RUNTIME.with(|runtime| runtime.block_on(f))
}
