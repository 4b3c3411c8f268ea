//! Bytes per row after a day of a service's writes (`TABLEKIT_BENCH_MIX=N`,
//! N operations, 400,000 by default): the bulk load's 100,000 rows, then a
//! mix of single writes from 16 writers at once, each a replace of a row
//! (half of them), a delete of one (a quarter) or an insert of a new one (a
//! quarter), so that the table keeps about its size while every row is
//! rewritten several times. SQLite applies the same operations, in the
//! same order, in transactions of 100 (the space it takes does not depend
//! on how its commits are grouped, and single commits would take it an
//! hour). No compaction on either side, and SQLite's WAL is checkpointed
//! before it is measured, as after the load.

use std::path::Path;
use std::sync::Arc;

use tablekit::{Entity, IfMatch, TableBackendExt, UpdateMode};
use tablekit_local::LocalStorage;

use crate::{ROWS, TABLE, bytes_in, data, entity, local_load, pk, rk, sqlite, sqlite_load};

/// What the `i`th operation of the mix does.
#[derive(Clone, Copy)]
enum Op {
    Replace(usize),
    Delete(usize),
    Insert(usize),
}

impl Op {
    /// The row the operation writes.
    fn row(self) -> usize {
        match self {
            Op::Replace(n) | Op::Delete(n) | Op::Insert(n) => n,
        }
    }
}

/// The mix's operations: rows picked by a fixed pseudo-random sequence, so
/// that both stores get the same ones; new rows numbered from [`ROWS`].
fn operations(n: usize) -> Vec<Op> {
    let mut rng = fastrand::Rng::with_seed(0x5E55_1011);
    let mut live: Vec<usize> = (0..ROWS).collect();
    let mut next = ROWS;
    (0..n)
        .map(|_| match rng.u8(0..4) {
            0 | 1 => Op::Replace(live[rng.usize(0..live.len())]),
            2 => {
                let at = rng.usize(0..live.len());
                Op::Delete(live.swap_remove(at))
            }
            _ => {
                live.push(next);
                next += 1;
                Op::Insert(next - 1)
            }
        })
        .collect()
}

/// A replaced row's value: another 150 bytes.
fn changed(n: usize) -> Entity {
    Entity::new(pk(n), rk(n)).with("data", data(n + 7_777_777))
}

/// Live rows once `ops` are applied to the load.
fn live_after(ops: &[Op]) -> usize {
    let (deleted, inserted) = ops.iter().fold((0, 0), |(d, i), op| match op {
        Op::Delete(_) => (d + 1, i),
        Op::Insert(_) => (d, i + 1),
        Op::Replace(_) => (d, i),
    });
    ROWS + inserted - deleted
}

fn local_mix(runtime: &tokio::runtime::Runtime, dir: &Path, ops: &Arc<Vec<Op>>) {
    let store = LocalStorage::open(dir).unwrap();
    // Each row's operations go to one writer, in their order: a replace of
    // a new row must not overtake its insert.
    let tasks: Vec<_> = (0..crate::WRITERS)
        .map(|writer| {
            let (store, ops) = (store.clone(), Arc::clone(ops));
            runtime.spawn(async move {
                for op in ops.iter().filter(|op| op.row() % crate::WRITERS == writer) {
                    match *op {
                        Op::Replace(n) => {
                            let row = changed(n);
                            store.upsert_entity(TABLE, &row, UpdateMode::Replace).await
                        }
                        Op::Delete(n) => store
                            .delete_entity(TABLE, &pk(n), &rk(n), &IfMatch::Any)
                            .await
                            .map(|()| tablekit::ETag::new("")),
                        Op::Insert(n) => store.insert_entity(TABLE, &entity(n)).await,
                    }
                    .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        runtime.block_on(task).unwrap();
    }
}

fn sqlite_mix(path: &Path, ops: &[Op]) {
    let mut c = sqlite(path);
    for chunk in ops.chunks(100) {
        let txn = c.transaction().unwrap();
        for op in chunk {
            match *op {
                Op::Replace(n) => txn
                    .prepare_cached("UPDATE rows SET data = ?3 WHERE pk = ?1 AND rk = ?2")
                    .unwrap()
                    .execute((pk(n), rk(n), data(n + 7_777_777))),
                Op::Delete(n) => txn
                    .prepare_cached("DELETE FROM rows WHERE pk = ?1 AND rk = ?2")
                    .unwrap()
                    .execute((pk(n), rk(n))),
                Op::Insert(n) => txn
                    .prepare_cached("INSERT INTO rows (pk, rk, data) VALUES (?1, ?2, ?3)")
                    .unwrap()
                    .execute((pk(n), rk(n), data(n))),
            }
            .unwrap();
        }
        txn.commit().unwrap();
    }
    c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
}

/// Loads both stores, applies `n` operations to each, and prints the bytes
/// per live row after the load and after the mix.
pub(crate) fn report(runtime: &tokio::runtime::Runtime, base: &Path, n: usize) {
    let (local, lite) = (base.join("mix-local"), base.join("mix-sqlite"));
    local_load(runtime, &local);
    std::fs::create_dir_all(&lite).unwrap();
    sqlite_load(&lite.join("rows.sqlite"));
    let per_row = |dir: &Path, rows: usize| bytes_in(dir).0 as f64 / rows as f64;
    let (local_loaded, lite_loaded) = (per_row(&local, ROWS), per_row(&lite, ROWS));
    let ops = Arc::new(operations(n));
    let live = live_after(&ops);
    local_mix(runtime, &local, &ops);
    sqlite_mix(&lite.join("rows.sqlite"), &ops);
    let store = LocalStorage::open(&local).unwrap();
    let counted = runtime
        .block_on(store.query_all(TABLE, tablekit::Query::new()))
        .unwrap()
        .len();
    assert_eq!(counted, live, "the mix left the rows it should");
    drop(store);
    let (local_mixed, lite_mixed) = (per_row(&local, live), per_row(&lite, live));
    // What the files hold on disk: a file the engine grew and has not yet
    // written to the end is partly a hole.
    let allocated = |dir: &Path| bytes_in(dir).1 as f64 / live as f64;
    let (local_allocated, lite_allocated) = (allocated(&local), allocated(&lite));
    let engine = std::fs::metadata(local.join(tablekit_local::FILE_NAME))
        .unwrap()
        .len();
    crate::leaf_fill(&local);
    let store = LocalStorage::open(&local).unwrap();
    let started = std::time::Instant::now();
    runtime.block_on(store.compact()).unwrap();
    let took = started.elapsed();
    drop(store);
    println!(
        "after the mix: the engine's file {:.0} bytes per row; after compact() (in {:.0} ms) \
         the files {:.0} bytes per row long, {:.0} allocated",
        engine as f64 / live as f64,
        took.as_secs_f64() * 1000.0,
        per_row(&local, live),
        allocated(&local),
    );
    println!(
        "bytes per row (files' length): after the load tablekit-local {local_loaded:.0}, SQLite {lite_loaded:.0} \
         (+12: {:.2}x); after {n} single writes (replaces, deletes, inserts; {live} rows live) \
         tablekit-local {local_mixed:.0}, SQLite {lite_mixed:.0} (+12: {:.2}x); target <= 1.25x; \
         allocated on disk after the writes: tablekit-local {local_allocated:.0}, SQLite \
         {lite_allocated:.0} (+12: {:.2}x)",
        local_loaded / (lite_loaded + 12.0),
        local_mixed / (lite_mixed + 12.0),
        local_allocated / (lite_allocated + 12.0),
    );
}
