//! The tour of tablekit's foundations on the in-memory backend: tables,
//! zero-padded keys and range queries, optimistic concurrency, merge versus
//! replace, atomic batches, paging with resumable tokens, and the typed errors
//! of the store's limits.
//!
//! Run it with `cargo run -p tablekit-examples --example quickstart`.

use futures::TryStreamExt;
use tablekit::filter::{Filter, prop};
use tablekit::{
    BatchOperation, ContinuationToken, Entity, Error, IfMatch, Query, TableBackend,
    TableBackendExt, UpdateMode,
};
use tablekit_mem::MemBackend;

const TABLE: &str = "Employees";

#[tokio::main]
async fn main() -> Result<(), Error> {
    let backend = MemBackend::new();
    backend.create_table(TABLE).await?;
    println!("created table {TABLE}");

    // Pattern: PartitionKey = department, RowKey = zero-padded employee id, so
    // string order is numeric order and ranges work.
    let people = [
        (7, "Ada", 36),
        (42, "Grace", 45),
        (123, "Linus", 28),
        (150, "Barbara", 51),
        (199, "Ken", 39),
    ];
    let ops: Vec<_> = people
        .iter()
        .map(|(id, name, age)| {
            BatchOperation::Insert(
                Entity::new("Sales", format!("{id:06}"))
                    .with("Name", *name)
                    .with("Age", *age),
            )
        })
        .collect();
    backend.submit_transaction(TABLE, &ops).await?;
    println!(
        "inserted {} employees of Sales in one atomic batch",
        ops.len()
    );

    let range = Filter::partition_key().eq("Sales")
        & Filter::row_key().ge("000100")
        & Filter::row_key().le("000199");
    println!("range query: {range}");
    let mut hits = backend.query_stream(TABLE, Query::new().filter(range));
    while let Some(e) = hits.try_next().await? {
        println!(
            "  {} {}",
            e.row_key,
            e.get("Name").and_then(|v| v.as_str()).unwrap_or("?")
        );
    }

    // Optimistic concurrency: writes carry the ETag they read.
    let ada = backend
        .try_get_entity(TABLE, "Sales", "000007")
        .await?
        .expect("Ada exists");
    let etag = ada
        .etag
        .clone()
        .expect("entities read from a store have an ETag");
    println!("read Ada with ETag {etag}");
    let birthday = Entity::new("Sales", "000007").with("Age", 37);
    backend
        .update_entity(
            TABLE,
            &birthday,
            UpdateMode::Merge,
            &IfMatch::ETag(etag.clone()),
        )
        .await?;
    println!("merged Age = 37 under that ETag; Name is kept by merge");
    match backend
        .update_entity(TABLE, &birthday, UpdateMode::Merge, &IfMatch::ETag(etag))
        .await
    {
        Err(e @ Error::PreconditionFailed { .. }) => {
            println!("a second write with the stale ETag fails: {e}")
        }
        other => panic!("expected a precondition failure, got {other:?}"),
    }
    backend
        .update_entity(TABLE, &birthday, UpdateMode::Replace, &IfMatch::Any)
        .await?;
    let replaced = backend
        .try_get_entity(TABLE, "Sales", "000007")
        .await?
        .expect("exists");
    println!(
        "after replace Ada holds only {:?}",
        replaced
            .properties
            .iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    );

    // Batches are all or nothing; the error names the failing operation.
    let clash = [
        BatchOperation::Insert(Entity::new("Sales", "000300").with("Name", "New")),
        BatchOperation::Insert(Entity::new("Sales", "000042").with("Name", "Duplicate")),
    ];
    if let Err(Error::BatchFailed { index, source }) =
        backend.submit_transaction(TABLE, &clash).await
    {
        println!(
            "batch failed at operation {index} ({source}); 000300 exists: {}",
            backend
                .try_get_entity(TABLE, "Sales", "000300")
                .await?
                .is_some()
        );
    }

    // Paging: a page at a time, resumable from a token kept as a string.
    let page = backend.query_entities(TABLE, &Query::new().top(2)).await?;
    let saved = page.continuation.map(|t| t.to_string());
    println!(
        "first page: {} entities; saved token {:?}",
        page.entities.len(),
        saved
    );
    if let Some(text) = saved {
        let token: ContinuationToken = text.parse()?;
        let rest: Vec<_> = backend
            .query_stream(TABLE, Query::new().continuation(Some(token)))
            .try_collect()
            .await?;
        println!("resumed later: {} more entities", rest.len());
    }

    // The store's limits are typed errors, checked before anything is written.
    let bad = Entity::new("Sales", "a/b").with("Name", "slash in key");
    println!(
        "a key with '/': {}",
        backend.insert_entity(TABLE, &bad).await.unwrap_err()
    );
    let wide = (0..253).fold(Entity::new("Sales", "wide"), |e, i| {
        e.with(format!("p{i}"), i)
    });
    println!(
        "253 properties: {}",
        backend.insert_entity(TABLE, &wide).await.unwrap_err()
    );
    let over = Query::new().filter(prop("Age").gt(30)).top(1001);
    println!(
        "top = 1001: {}",
        backend.query_entities(TABLE, &over).await.unwrap_err()
    );
    Ok(())
}
