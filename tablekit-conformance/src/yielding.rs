//! Long work gives its thread back: a scan, a migration, a copy, an export
//! and a bulk write each return to the runtime between pages, on every
//! store, so that a timeout around them fires and the runtime's other tasks
//! run. (The embedded stores answer without ever waiting: without this, a
//! job over them ran to its end inside one poll.)

use std::sync::Arc;

use super::{drop_after_polls, fresh_table};
use tablekit::TableBackendExt;
use tablekit::backend::{Query, TableBackend};
use tablekit::copy::{Conflict, Copier, export_table};
use tablekit::table::Table;

/// A row of a long table.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Readings")]
struct Reading {
    #[tablekit(partition_key)]
    meter: String,
    #[tablekit(row_key)]
    at: u32,
    value: i64,
}

/// How many rows: three pages of a scan, 25 partitions of a bulk write.
const ROWS: u32 = 2_500;

/// Each long job, dropped after two polls, had not finished: it gave its
/// thread back at least once between its pages (a bulk write of 25
/// partitions, after ten polls).
pub async fn long_work_gives_the_thread_back(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "yields").await;
    let table: Table<Reading> = Table::from_arc(Arc::clone(&backend), &name);
    let items: Vec<Reading> = (0..ROWS)
        .map(|i| Reading {
            meter: format!("m{:02}", i / 100),
            at: i,
            value: i64::from(i),
        })
        .collect();
    let unfinished =
        |what: &str, done: bool| assert!(!done, "{what} ran to its end in a few polls");

    let bulk = drop_after_polls(10, table.bulk().unpaced().upsert(&items)).await;
    unfinished("a bulk write", bulk.is_some());
    let report = table.bulk().unpaced().upsert(&items).await;
    assert!(report.failures.is_empty(), "{report:?}");

    let scan = drop_after_polls(2, table.query().collect()).await;
    unfinished("a typed scan", scan.is_some());
    let raw = drop_after_polls(2, backend.query_all(&name, Query::new())).await;
    unfinished("a scan of rows", raw.is_some());
    let migration = drop_after_polls(2, table.migrate().dry_run().unpaced().run()).await;
    unfinished("a migration", migration.is_some());
    let copy = Copier::new(Arc::clone(&backend), Arc::clone(&backend))
        .table(name.clone())
        .conflict(Conflict::Overwrite)
        .unpaced();
    let copied = drop_after_polls(2, copy.run()).await;
    unfinished("a copy", copied.is_some());
    let mut out = Vec::new();
    let export = drop_after_polls(2, export_table(&*backend, &name, None, &mut out, &|_| {})).await;
    unfinished("an export", export.is_some());

    // Run to the end, each still does all its work.
    let all = table.query().collect().await.expect("scan");
    assert_eq!(all.len(), ROWS as usize);
    backend.delete_table(&name).await.expect("delete table");
}
