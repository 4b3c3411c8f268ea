//! How many of tablekit's frames a typed write walks through from
//! `Table::insert` to the backend's method: the frames of a backtrace taken
//! where the backend is called. The walk is a budget: a change that makes
//! it longer fails here. (Frames are named from the symbol table, which
//! test builds keep.)

use std::sync::{Arc, Mutex};

use tablekit::{
    BatchOperation, ETag, Entity, EntityWrite, GetOptions, ListTablesOptions, Query, QueryPage,
    Result, Table, TableBackend, TableEntity, TablePage,
};
use tablekit_mem::MemBackend;

/// A backend that takes a backtrace at each write it passes on.
#[derive(Debug)]
struct Tracing {
    inner: MemBackend,
    traces: Mutex<Vec<String>>,
}

impl Tracing {
    fn trace(&self) {
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        self.traces.lock().unwrap().push(trace);
    }
}

#[async_trait::async_trait]
impl TableBackend for Tracing {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.inner.create_table(table).await
    }
    async fn delete_table(&self, table: &str) -> Result<()> {
        self.inner.delete_table(table).await
    }
    async fn list_tables(&self, options: &ListTablesOptions) -> Result<TablePage> {
        self.inner.list_tables(options).await
    }
    async fn get_entity(&self, t: &str, pk: &str, rk: &str, o: &GetOptions) -> Result<Entity> {
        self.inner.get_entity(t, pk, rk, o).await
    }
    async fn query_entities(&self, table: &str, query: &Query) -> Result<QueryPage> {
        self.inner.query_entities(table, query).await
    }
    async fn write_entity(&self, table: &str, write: EntityWrite<'_>) -> Result<Option<ETag>> {
        self.trace();
        self.inner.write_entity(table, write).await
    }
    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[BatchOperation],
    ) -> Result<Vec<Option<ETag>>> {
        self.trace();
        self.inner.submit_transaction(table, operations).await
    }
}

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Users", kind = "User")]
struct User {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(unique = "email")]
    email: String,
}

/// The frames of `trace` that are tablekit's own (the typed layer and the
/// core), from `Table::insert` down to the backend's method, innermost
/// first.
fn tablekit_frames(trace: &str) -> Vec<String> {
    let names: Vec<&str> = trace
        .lines()
        .filter_map(|line| {
            let (number, name) = line.trim().split_once(": ")?;
            number.parse::<usize>().ok().map(|_| name)
        })
        .collect();
    let top = names
        .iter()
        .position(|name| name.starts_with("tablekit::table::Table<T>::insert"))
        .expect("the write's trace reaches Table::insert");
    names[..=top]
        .iter()
        .filter(|name| name.contains("tablekit::") || name.contains("tablekit_core::"))
        .filter(|name| !name.contains("as tablekit_core::backend::TableBackend>"))
        .map(|name| (*name).to_owned())
        .collect()
}

/// An insert of an entity with a unique index is one transaction (its row
/// and its index row), sent through at most `BUDGET` of tablekit's frames.
#[tokio::test]
async fn an_insert_walks_a_short_way_to_the_store() {
    // `insert`, its observed call, `apply` (the write lowered to its row),
    // `execute` (the one loop of single-entity writes), `send_row`,
    // `write_planned`, the transaction runner's `run`, and `exec`'s send.
    const BUDGET: usize = 8;
    let backend = Arc::new(Tracing {
        inner: MemBackend::new(),
        traces: Mutex::new(Vec::new()),
    });
    let users: Table<User> = Table::from_arc(backend.clone(), "Users");
    users.create_if_missing().await.unwrap();
    backend.traces.lock().unwrap().clear();
    users
        .insert(&User {
            tenant: "t".into(),
            id: "1".into(),
            email: "a@example.com".into(),
        })
        .await
        .unwrap();
    let traces = backend.traces.lock().unwrap();
    assert_eq!(traces.len(), 1, "one call to the store");
    let frames = tablekit_frames(&traces[0]);
    assert!(
        frames.len() <= BUDGET,
        "{} frames from Table::insert to the store, over the budget of {BUDGET}:\n{}",
        frames.len(),
        frames.join("\n")
    );
    // The count reads real frames: the entry and the send are among them.
    assert!(
        frames
            .last()
            .is_some_and(|f| f.contains("Table<T>::insert"))
    );
    assert!(frames.len() >= 3, "{frames:?}");
}
