//! Heap bytes per stored entity: the in-memory backend at 1,000,000 entities of
//! ten properties, beside the raw payload (keys, names and values) and beside a
//! plain `BTreeMap` holding the same data.
//!
//! `cargo bench -p tablekit-mem --bench memory`

// A counting allocator needs `unsafe impl GlobalAlloc`; it forwards to the
// system allocator and only adds to counters.
#![allow(unsafe_code)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use support::*;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the same arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn measure<T>(build: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let value = build();
    (value, LIVE.load(Ordering::Relaxed) - before)
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench` absent; only
    // measure when asked to benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let entities = PARTITIONS * ROWS_PER_PARTITION;
    let raw: usize = (0..PARTITIONS)
        .flat_map(|p| (0..ROWS_PER_PARTITION).map(move |r| (p, r)))
        .map(|(p, r)| raw_payload(&entity(p, r)))
        .sum();
    let (backend, mem_bytes) = measure(load_mem);
    let (baseline, baseline_bytes) = measure(load_baseline);
    let per = |bytes: usize| bytes as f64 / entities as f64;
    println!("entities:                         {entities}");
    println!("raw payload per entity:           {:8.1} B", per(raw));
    println!(
        "tablekit-mem heap per entity:     {:8.1} B  ({:.2}x raw payload)",
        per(mem_bytes),
        mem_bytes as f64 / raw as f64
    );
    println!(
        "BTreeMap baseline per entity:     {:8.1} B  ({:.2}x raw payload)",
        per(baseline_bytes),
        baseline_bytes as f64 / raw as f64
    );
    drop((backend, baseline));
}
