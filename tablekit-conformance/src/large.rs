//! Entities larger than a row, through the typed client: data series, wide
//! entities, blob offload, and their behaviour when any step fails.
//!
//! These tests take owned handles (`Arc<dyn …>`), since a [`Table`] keeps
//! its backend and blob store.

use std::sync::Arc;
use std::time::Duration;

use super::{fresh_table, unique_table};
use tablekit::Error;
use tablekit::IfMatch;
use tablekit::TableBackendExt;
use tablekit::backend::{Query, TableBackend};
use tablekit::blob::{BlobStore, ListBlobsOptions};
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::table::{Loaded, Table};
use tablekit::{TableEntity, table::wide};

/// An entity with a data series, wide enough to need several rows.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "DAYS", wide)]
pub struct Days {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The year.
    #[tablekit(row_key)]
    pub year: u16,
    /// One count per day.
    #[tablekit(series)]
    pub daily: Vec<u32>,
    /// A label.
    pub label: String,
}

/// An entity whose large values live in the blob store.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "DOC")]
pub struct Document {
    /// The folder.
    #[tablekit(partition_key)]
    pub folder: String,
    /// The document id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Always in the blob store.
    #[tablekit(blob)]
    pub body: Vec<u8>,
    /// In the blob store only when too large for a row.
    #[tablekit(offload)]
    pub summary: String,
}

fn days(site: &str, year: u16, count: u32, seed: u32) -> Days {
    Days {
        site: site.into(),
        year,
        daily: (0..count).map(|d| d * 3 + seed).collect(),
        label: format!("v{seed}"),
    }
}

fn document(id: u32, body: usize, summary: usize, seed: u8) -> Document {
    Document {
        folder: "f".into(),
        id,
        body: vec![seed; body],
        summary: "s".repeat(summary),
    }
}

/// A wide entity is written in one transaction over several rows, read with
/// one query, shrinks and grows without stray parts, and is deleted whole.
pub async fn wide_entities_span_rows(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "wide").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let handle = layer.handle();
    let table: Table<Days> = Table::from_arc(Arc::new(layer), &name);
    let rows = || async { backend.query_all(&name, Query::new()).await.expect("query") };

    table
        .insert(&days("n", 2024, 600, 1))
        .await
        .expect("insert a wide entity");
    assert_eq!(rows().await.len(), 3, "600 properties need three rows");
    assert!(rows().await.iter().all(|r| r.properties.len() <= 252));
    let (queries, gets) = (
        handle.calls(Operation::QueryEntities),
        handle.calls(Operation::GetEntity),
    );
    let mut loaded = table.get("n", 2024u16).await.expect("get").expect("stored");
    // One range query (which a backend may answer in several pages), never a read per part.
    assert!(
        handle.calls(Operation::QueryEntities) > queries,
        "the parts are read with a query"
    );
    assert_eq!(
        handle.calls(Operation::GetEntity),
        gets,
        "no point read per part"
    );
    assert_eq!(*loaded, days("n", 2024, 600, 1));

    let mut smaller = loaded.clone();
    *smaller = days("n", 2024, 10, 2);
    table
        .replace(&mut smaller)
        .await
        .expect("replace with fewer parts");
    assert_eq!(
        rows().await.len(),
        1,
        "the surplus parts went in the same transaction"
    );
    let stale = table.replace(&mut loaded).await;
    assert!(
        matches!(stale, Err(Error::PreconditionFailed { .. })),
        "a stale ETag: {stale:?}"
    );

    let current = table.get("n", 2024u16).await.expect("get").expect("stored");
    table.delete(&current).await.expect("delete");
    assert!(rows().await.is_empty(), "every part is deleted");
    backend.delete_table(&name).await.expect("delete table");
}

/// A failed write of a wide entity leaves the old version or the new one,
/// whole, and no stray part.
pub async fn wide_entities_are_never_half_written(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "widefail").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let handle = layer.handle();
    let table: Table<Days> = Table::from_arc(Arc::new(layer), &name);
    let old = days("f", 1, 400, 1);
    let new = days("f", 1, 900, 2);
    table.insert(&old).await.expect("insert");
    for fault in [Fault::Transient, Fault::LostResponse] {
        for operation in [Operation::QueryEntities, Operation::SubmitTransaction] {
            handle.inject(Injection::on(operation).fault(fault));
            let _ = table.upsert(&new).await;
            handle.clear();
            let seen =
                Loaded::into_inner(table.get("f", 1u16).await.expect("read").expect("stored"));
            assert!(
                seen == old || seen == new,
                "{fault:?} on {operation:?} left a mixed entity"
            );
            let parts = backend
                .query_all(&name, Query::new())
                .await
                .expect("query")
                .len();
            assert_eq!(
                parts,
                if seen == old { 2 } else { 4 },
                "stray parts after {fault:?} on {operation:?}"
            );
            table.replace_unconditionally(&old).await.expect("reset");
        }
    }
    backend.delete_table(&name).await.expect("delete table");
}

/// One element of a series is merged without rewriting the others.
pub async fn series_elements_merge_alone(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "series").await;
    let table: Table<Days> = Table::from_arc(Arc::clone(&backend), &name);
    table.insert(&days("s", 7, 30, 0)).await.expect("insert");
    let element = Days::columns().daily.at(4);
    table
        .merge_element("s", 7u16, &element, &999, &IfMatch::Any)
        .await
        .expect("merge one element");
    let read = table.get("s", 7u16).await.expect("get").expect("stored");
    assert_eq!(read.daily[4], 999);
    assert_eq!(read.daily[5], 15, "the other elements are untouched");
    let found = table
        .query()
        .filter(element.gt(500u32))
        .collect()
        .await
        .expect("query");
    assert_eq!(found.len(), 1, "a filter on one element");
    backend.delete_table(&name).await.expect("delete table");
}

async fn blob_count(blobs: &dyn BlobStore, container: &str) -> usize {
    blobs
        .list_blobs(container, &ListBlobsOptions::default())
        .await
        .expect("list")
        .blobs
        .len()
}

/// Large values go to the blob store and come back; overwrites and deletes
/// remove the old blobs; a missing blob is an error, never wrong data.
pub async fn blob_offload_round_trips(backend: Arc<dyn TableBackend>, blobs: Arc<dyn BlobStore>) {
    let name = fresh_table(&*backend, "offload").await;
    let container = unique_table("c").to_ascii_lowercase();
    blobs
        .create_container(&container)
        .await
        .expect("create container");
    let table: Table<Document> = Table::from_arc(Arc::clone(&backend), &name)
        .with_blob_store(Arc::clone(&blobs), &container);

    let doc = document(1, 200_000, 10, 1);
    table.insert(&doc).await.expect("insert");
    let row = backend
        .try_get_entity(&name, "f", "DOC_0000000001")
        .await
        .expect("get")
        .expect("stored");
    assert!(
        row.get("body").is_none() && row.get("body_Blob").is_some(),
        "the row keeps a reference"
    );
    assert!(
        row.get("summary").is_some(),
        "a small offload field stays in the row"
    );
    assert_eq!(
        *table.get("f", 1u32).await.expect("get").expect("stored"),
        doc
    );

    let long = document(2, 10, 40_000, 2);
    table.insert(&long).await.expect("insert");
    assert_eq!(
        blob_count(&*blobs, &container).await,
        3,
        "a summary too long for a row goes to a blob"
    );

    let mut loaded = table.get("f", 1u32).await.expect("get").expect("stored");
    loaded.body = vec![7; 10];
    table.replace(&mut loaded).await.expect("replace");
    assert_eq!(
        blob_count(&*blobs, &container).await,
        3,
        "the old blob is removed after the overwrite"
    );
    let loaded = table.get("f", 2u32).await.expect("get").expect("stored");
    table.delete(&loaded).await.expect("delete");
    assert_eq!(
        blob_count(&*blobs, &container).await,
        1,
        "a delete removes the row's blobs"
    );
    assert!(
        table
            .orphan_blobs(Duration::ZERO)
            .await
            .expect("orphans")
            .is_empty()
    );

    let page = blobs
        .list_blobs(&container, &ListBlobsOptions::default())
        .await
        .expect("list");
    blobs
        .delete_blob(&container, &page.blobs[0].name, None)
        .await
        .expect("delete blob");
    assert!(
        matches!(table.get("f", 1u32).await, Err(Error::Schema(_))),
        "a missing blob is an error"
    );
    backend.delete_table(&name).await.expect("delete table");
    blobs
        .delete_container(&container)
        .await
        .expect("delete container");
}

/// Fail each step of each offload protocol in turn, as a failure and as a lost
/// response: a reader sees the old or the new entity, and the orphan sweep
/// finds every blob no row references.
pub async fn blob_offload_survives_failures(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn BlobStore>,
) {
    let name = fresh_table(&*backend, "offfail").await;
    let container = unique_table("c").to_ascii_lowercase();
    blobs
        .create_container(&container)
        .await
        .expect("create container");
    let table_layer = FaultInjection::new(Arc::clone(&backend));
    let blob_layer = FaultInjection::new(Arc::clone(&blobs));
    let (table_faults, blob_faults) = (table_layer.handle(), blob_layer.handle());
    let table: Table<Document> = Table::from_arc(Arc::new(table_layer), &name)
        .with_blob_store(Arc::new(blob_layer), &container);
    let old = document(1, 2000, 5, 1);
    let new = document(1, 3000, 50_000, 2);
    let steps = [
        (true, Operation::PutBlob),
        (true, Operation::DeleteBlob),
        (false, Operation::GetEntity),
        (false, Operation::InsertEntity),
        (false, Operation::UpdateEntity),
        (false, Operation::DeleteEntity),
    ];
    for write in ["insert", "replace", "upsert", "delete"] {
        for (on_blobs, operation) in steps {
            for fault in [Fault::Transient, Fault::LostResponse] {
                let _ = table.delete_unconditionally("f", 1u32).await;
                if write != "insert" {
                    table.insert(&old).await.expect("start from the old entity");
                }
                let loaded = match write {
                    "replace" => table.get("f", 1u32).await.expect("get"),
                    _ => None,
                };
                let handle = if on_blobs {
                    &blob_faults
                } else {
                    &table_faults
                };
                handle.inject(Injection::on(operation).fault(fault));
                let result = match write {
                    "insert" => table.insert(&new).await.map(drop),
                    "replace" => {
                        let mut changed = loaded.expect("loaded");
                        *changed = new.clone();
                        table.replace(&mut changed).await.map(drop)
                    }
                    "upsert" => table.upsert(&new).await.map(drop),
                    _ => table.delete_unconditionally("f", 1u32).await,
                };
                table_faults.clear();
                blob_faults.clear();
                let context = format!("{write} with {fault:?} on {operation:?} ({result:?})");
                match table.get("f", 1u32).await {
                    Ok(Some(seen)) => {
                        assert!(*seen == old || *seen == new, "{context}: mixed entity")
                    }
                    Ok(None) => assert!(
                        write == "insert" || write == "delete",
                        "{context}: entity vanished"
                    ),
                    Err(e) => panic!("{context}: a reader failed: {e}"),
                }
                blobs_add_up(&*backend, &*blobs, &table, (&name, &container), &context).await;
            }
        }
    }
    backend.delete_table(&name).await.expect("delete table");
    blobs
        .delete_container(&container)
        .await
        .expect("delete container");
}

/// Every blob is referenced by a row or an orphan the sweep finds, and after
/// the sweep none is left unreferenced.
async fn blobs_add_up(
    backend: &dyn TableBackend,
    blobs: &dyn BlobStore,
    table: &Table<Document>,
    (name, container): (&str, &str),
    context: &str,
) {
    let rows = backend.query_all(name, Query::new()).await.expect("query");
    let referenced: usize = rows
        .iter()
        .map(|r| {
            r.properties
                .iter()
                .filter(|(n, _)| n.ends_with("_Blob"))
                .count()
        })
        .sum();
    let orphans = table
        .orphan_blobs(Duration::ZERO)
        .await
        .expect("orphans")
        .len();
    assert_eq!(
        blob_count(blobs, container).await,
        referenced + orphans,
        "{context}"
    );
    assert_eq!(
        table
            .sweep_orphan_blobs(Duration::ZERO)
            .await
            .expect("sweep"),
        orphans,
        "{context}"
    );
    assert_eq!(
        blob_count(blobs, container).await,
        referenced,
        "{context}: orphans left"
    );
}

/// Part keys never collide with entity keys: a key can be any text.
pub async fn wide_part_keys_cannot_collide(backend: Arc<dyn TableBackend>) {
    let base = "YEAR_prefix";
    let part = wide::part_key(base, 1);
    assert_eq!(wide::base_of(&part), Some(base));
    for text in ["a\u{FFFD}\u{FFFD}01", "\u{FFFD}", "x\u{FFFD}0"] {
        let mut encoded = String::new();
        tablekit::key::write_escaped(text, &mut encoded);
        assert_eq!(
            wide::base_of(&encoded),
            None,
            "an encoded key {encoded:?} looks like a part key"
        );
    }
    let _ = backend;
}
