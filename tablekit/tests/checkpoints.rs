//! A migration's checkpoint belongs to its migration: another migration's,
//! a damaged or edited text, and absurd counts are refused or held, never
//! read as "finished"; and its report names the rows that failed.

use std::sync::{Arc, Mutex};

use tablekit::table::{Loaded, MigrationCheckpoint};
use tablekit::{Entity, Error, InvalidInput, Table, TableBackendExt, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Items", kind = "ITEM", version = 1)]
struct ItemV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    price: u32,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Items", kind = "ITEM", version = 2, upgrade_from = ItemV1)]
struct Item {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    price_cents: u64,
}

impl From<ItemV1> for Item {
    fn from(v1: ItemV1) -> Item {
        Item {
            shop: v1.shop,
            sku: v1.sku,
            price_cents: u64::from(v1.price) * 100,
        }
    }
}

async fn tables() -> (MemBackend, Table<ItemV1>, Table<Item>) {
    let backend = MemBackend::new();
    let old: Table<ItemV1> = Table::new(backend.clone());
    old.create_if_missing().await.unwrap();
    for i in 0..3 {
        old.insert(&ItemV1 {
            shop: "north".into(),
            sku: format!("s{i}"),
            price: i,
        })
        .await
        .unwrap();
    }
    let new: Table<Item> = Table::new(backend.clone());
    (backend, old, new)
}

/// The checkpoints a dry run of `new`'s migration over `shop` hands out.
async fn checkpoints_of(new: &Table<Item>, shop: &str) -> Vec<MigrationCheckpoint> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    new.migrate()
        .partition(shop)
        .dry_run()
        .on_checkpoint(move |c| kept.lock().unwrap().push(c.clone()))
        .run()
        .await
        .unwrap();
    seen.lock().unwrap().clone()
}

#[tokio::test]
async fn a_checkpoint_names_its_migration_and_another_is_refused() {
    let (_backend, _old, new) = tables().await;
    let finished = checkpoints_of(&new, "north").await.pop().unwrap();
    assert!(finished.is_finished());
    let job = finished.job();
    assert_eq!(
        (job.table.as_str(), job.kind.as_deref()),
        ("Items", Some("ITEM"))
    );
    assert_eq!((job.version, job.min_version), (2, 1));

    // Resumed by a migration of another partition: refused, naming the scope.
    let err = new
        .migrate()
        .partition("south")
        .resume(finished.clone())
        .run()
        .await
        .unwrap_err();
    let Error::Invalid(InvalidInput::CheckpointMismatch { field, .. }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*field, "scope", "{err}");
    // Resumed by a migration of another table: refused, naming the table.
    let elsewhere = new.named("Items2");
    let err = elsewhere
        .migrate()
        .partition("north")
        .resume(finished.clone())
        .run()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("its table is \"Items\""), "{err}");
    // By a real migration: refused, since a dry run's checkpoint counted
    // rows it never rewrote.
    let err = new
        .migrate()
        .partition("north")
        .resume(finished.clone())
        .run()
        .await
        .unwrap_err();
    let Error::Invalid(InvalidInput::CheckpointMismatch { field, .. }) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*field, "dry run", "{err}");
    // By its own migration (a dry run): finished, nothing read again.
    let report = new
        .migrate()
        .partition("north")
        .dry_run()
        .resume(finished)
        .run()
        .await
        .unwrap();
    assert_eq!(report.scanned, 3);
}

#[tokio::test]
async fn a_damaged_checkpoint_is_refused_never_taken_as_finished() {
    let (_backend, _old, new) = tables().await;
    let finished = checkpoints_of(&new, "north").await.pop().unwrap();
    let text = serde_json::to_value(&finished).unwrap();

    // Without its position (it used to read as finished, leaving every row
    // at version 1, and say Ok).
    let mut cut = text.clone();
    cut.as_object_mut().unwrap().remove("position");
    assert!(serde_json::from_value::<MigrationCheckpoint>(cut).is_err());
    // Without the migration it belongs to.
    let mut nameless = text.clone();
    nameless.as_object_mut().unwrap().remove("job");
    assert!(serde_json::from_value::<MigrationCheckpoint>(nameless).is_err());
    // With a member it does not have, at either level.
    let mut extra = text.clone();
    extra["next"] = serde_json::json!(null);
    assert!(serde_json::from_value::<MigrationCheckpoint>(extra).is_err());
    let mut extra = text.clone();
    extra["report"]["rows"] = serde_json::json!(1);
    assert!(serde_json::from_value::<MigrationCheckpoint>(extra).is_err());
    // Whole: it reads back as it was.
    let back: MigrationCheckpoint = serde_json::from_value(text).unwrap();
    assert_eq!(back, finished);
}

#[tokio::test]
async fn counts_saturate_rather_than_overflow() {
    let (_backend, _old, new) = tables().await;
    // A checkpoint taken before the last page, its count at the maximum.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let page = new
        .migrate()
        .partition("north")
        .dry_run()
        .scope(|q| q.page_size(1))
        .on_checkpoint(move |c| kept.lock().unwrap().push(c.clone()))
        .run()
        .await
        .unwrap();
    assert_eq!(page.scanned, 3);
    let first = seen.lock().unwrap()[0].clone();
    assert!(!first.is_finished());
    let mut text = serde_json::to_value(&first).unwrap();
    text["report"]["scanned"] = serde_json::json!(usize::MAX);
    let resumed: MigrationCheckpoint = serde_json::from_value(text).unwrap();
    let report = new
        .migrate()
        .partition("north")
        .dry_run()
        .scope(|q| q.page_size(1))
        .resume(resumed)
        .run()
        .await
        .unwrap();
    assert_eq!(report.scanned, usize::MAX);
}

#[tokio::test]
async fn a_report_names_the_rows_that_failed_and_why() {
    let (backend, _old, new) = tables().await;
    // A version-1 row whose price is text: it cannot be read as either version.
    let mut bad = backend
        .query_all("Items", tablekit::Query::new())
        .await
        .unwrap()
        .into_iter()
        .find(|row| row.row_key.ends_with("s1"))
        .unwrap();
    bad.properties.insert("price", "twelve");
    let bad = Entity { etag: None, ..bad };
    backend
        .upsert_entity("Items", &bad, tablekit::UpdateMode::Replace)
        .await
        .unwrap();
    let report = new.migrate().partition("north").run().await.unwrap();
    assert_eq!((report.upgraded, report.failed), (2, 1), "{report:?}");
    assert_eq!(report.failures.len(), 1);
    let failure = &report.failures[0];
    assert_eq!(failure.partition_key.as_deref(), Some("north"));
    assert_eq!(failure.row_key.as_deref(), Some(bad.row_key.as_str()));
    assert!(failure.error.contains("price"), "{failure}");
    let read: Option<Loaded<Item>> = new.get("north", "s0").await.unwrap();
    assert_eq!(read.map(|r| Loaded::version(&r)), Some(Some(2)));
}
