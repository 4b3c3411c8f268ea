//! Encrypted fields of entities larger than a row: values offloaded to the
//! blob store are sealed before they leave (the blob holds ciphertext
//! bound to its row), and a wide entity's sealed values spread over its
//! parts and open when the parts are joined. Every read path reads them
//! back equal; rotation and resealing carry them; a blob or part moved to
//! another row is an error, never a value.

use std::sync::Arc;
use std::time::Duration;

use tablekit::backend::{GetOptions, Query, TableBackend, UpdateMode};
use tablekit::blob::{BlobStore, ListBlobsOptions};
use tablekit::encryption::{ENVELOPE_PROPERTY, EncryptionError, LocalKey, LocalKeys};
use tablekit::table::Table;
use tablekit::{Entity, Error, TableBackendExt, TableEntity, Value, schema};

use super::encrypted::{encryption_error, key_one};
use super::{fresh_table, unique_table};

/// A medical record: the scan always in the blob store, the history there
/// when too large for a row, both encrypted; the record number encrypted
/// and unique.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Records", kind = "REC")]
struct Record {
    #[tablekit(partition_key)]
    ward: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(encrypted, unique = "mrn")]
    mrn: String,
    #[tablekit(encrypted, blob)]
    scan: Vec<u8>,
    #[tablekit(encrypted, offload)]
    history: String,
}

const SCAN_MARK: &[u8] = b"SCAN-PIXELS:";
const HISTORY_MARK: &str = "history-of-";

fn record(id: u32, scan: usize, history: usize) -> Record {
    Record {
        ward: "w1".into(),
        id,
        mrn: format!("MRN-{id:05}"),
        scan: SCAN_MARK.repeat(scan / SCAN_MARK.len() + 1)[..scan].to_vec(),
        // Three UTF-8 bytes a character: 30,000 of them fit a row as text
        // (one UTF-16 unit each), but not sealed, as 90,000 bytes.
        history: format!("{HISTORY_MARK}{id}:{}", "\u{939}".repeat(history)),
    }
}

async fn raw_row(backend: &dyn TableBackend, table: &str, id: u32) -> Entity {
    let rk = schema::row_key_of(&record(id, 0, 0)).expect("a key");
    backend
        .get_entity(table, "w1", &rk, &GetOptions::default())
        .await
        .expect("the raw row")
}

/// Every blob of `container`, by name, with its bytes.
async fn blobs_of(blobs: &dyn BlobStore, container: &str) -> Vec<(String, Vec<u8>)> {
    let page = blobs
        .list_blobs(container, &ListBlobsOptions::default())
        .await
        .expect("list");
    let mut all = Vec::new();
    for blob in page.blobs {
        let data = blobs.get_blob(container, &blob.name).await.expect("a blob");
        all.push((blob.name, data.data));
    }
    all
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Offloaded encrypted values: the blobs hold ciphertext alone, the rows
/// references marked sealed; get, queries and the unique index read them
/// back; a reference moved to another row does not open; fetching a
/// sealed blob alone is refused; a rewrap leaves the blobs as they are and
/// a reseal writes them anew, leaving no orphan.
pub async fn encrypted_values_offloaded_to_blobs_stay_sealed(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn BlobStore>,
) {
    let name = fresh_table(&*backend, "sealedblob").await;
    let container = unique_table("c").to_ascii_lowercase();
    blobs.create_container(&container).await.expect("container");
    let table = |keys: LocalKeys| -> Table<Record> {
        Table::from_arc(Arc::clone(&backend), &name)
            .with_blob_store(Arc::clone(&blobs), &container)
            .with_encryption(Arc::new(keys))
    };
    let t = table(LocalKeys::new(key_one()));
    let (small, large) = (record(1, 3000, 20), record(2, 5000, 30_000));
    t.insert(&small).await.expect("insert");
    t.insert(&large)
        .await
        .expect("insert a history too large sealed");

    let stored = blobs_of(&*blobs, &container).await;
    assert_eq!(stored.len(), 3, "two scans and one history");
    for (blob, data) in &stored {
        assert!(
            !holds(data, SCAN_MARK) && !holds(data, HISTORY_MARK.as_bytes()),
            "{blob} holds plain text"
        );
    }
    let (one, two) = (
        raw_row(&*backend, &name, 1).await,
        raw_row(&*backend, &name, 2).await,
    );
    assert!(one.get("scan").is_none() && one.get("scan_Blob").is_some());
    assert!(matches!(one.get("history"), Some(Value::Binary(_))));
    assert!(two.get("history").is_none() && two.get("history_Blob").is_some());
    assert!(!format!("{one:?}{two:?}").contains(HISTORY_MARK));

    for want in [&small, &large] {
        let read = t.get("w1", want.id).await.expect("get").expect("stored");
        assert_eq!(&*read, want);
    }
    let all = t.query().partition("w1").collect().await.expect("a query");
    assert_eq!(all.len(), 2);
    assert_eq!(*all[1], large);
    let by_mrn = t.index(Record::indexes().mrn);
    let found = by_mrn.get("w1", "MRN-00002").await.expect("by mrn");
    assert_eq!(found.as_ref(), Some(&large));

    // A sealed blob alone is refused: it opens only with its row.
    let references = t.blob_references("w1", 1u32).await.expect("refs");
    let references = references.expect("stored");
    assert!(references.iter().all(|(_, r)| r.sealed));
    let refused = t.fetch_blob(&references[0].1).await;
    assert!(
        matches!(refused, Err(Error::NotSupported { .. })),
        "{refused:?}"
    );

    // Another row's scan under this row's reference: an error, never a value.
    let mut moved = two.clone();
    moved
        .properties
        .insert("scan_Blob", one.get("scan_Blob").cloned().expect("ref"));
    moved.etag = None;
    backend
        .upsert_entity(&name, &moved, UpdateMode::Replace)
        .await
        .expect("a raw write");
    let refused = encryption_error(t.get("w1", 2u32).await);
    assert!(
        matches!(refused, EncryptionError::Tampered { .. }),
        "{refused}"
    );
    let mut back = two.clone();
    back.etag = None;
    backend
        .upsert_entity(&name, &back, UpdateMode::Replace)
        .await
        .expect("a raw write");

    rotate_and_reseal(&t, &table, &[small, large]).await;
    assert!(
        t.orphan_blobs(Duration::ZERO)
            .await
            .expect("orphans")
            .is_empty(),
        "every blob replaced by the reseal is gone"
    );
    assert_eq!(blobs_of(&*blobs, &container).await.len(), 3);
    backend.delete_table(&name).await.expect("drop");
    blobs.delete_container(&container).await.expect("drop");
}

/// A rewrap under a second key leaves every blob as it was, readable by
/// that key alone; a reseal under a third writes them anew.
async fn rotate_and_reseal(
    t: &Table<Record>,
    table: &dyn Fn(LocalKeys) -> Table<Record>,
    records: &[Record],
) {
    let (second, third) = (LocalKey::new("k2", [22; 32]), LocalKey::new("k3", [33; 32]));
    let before = t.blob_references("w1", 2u32).await.expect("refs");
    let rotating = table(LocalKeys::new(key_one()).with(second.clone(), true));
    let report = rotating
        .migrate()
        .rewrap_only()
        .run()
        .await
        .expect("rewrap");
    assert_eq!((report.rewrapped, report.failed), (2, 0), "{report:?}");
    assert_eq!(
        t.blob_references("w1", 2u32).await.expect("refs"),
        before,
        "a rewrap does not touch the values"
    );
    let second_alone = table(LocalKeys::new(second.clone()));
    for want in records {
        let read = second_alone
            .get("w1", want.id)
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(&*read, want);
    }

    let resealing = table(
        LocalKeys::new(key_one())
            .with(second, false)
            .with(third.clone(), true),
    );
    let report = resealing.migrate().run().await.expect("reseal");
    assert_eq!((report.resealed, report.failed), (2, 0), "{report:?}");
    assert_ne!(
        t.blob_references("w1", 2u32).await.expect("refs"),
        before,
        "a reseal writes new blobs"
    );
    for want in records {
        let read = resealing
            .get("w1", want.id)
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(&*read, want);
    }
    let envelope = raw_row(t.backend().as_ref(), t.name(), 2).await;
    let envelope = format!("{:?}", envelope.get(ENVELOPE_PROPERTY));
    assert!(envelope.contains("k3"), "{envelope}");
}

/// A wide entity whose encrypted values spread over its parts.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Records", kind = "LED", wide)]
struct Ledger {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    year: u16,
    #[tablekit(series)]
    daily: Vec<u32>,
    #[tablekit(encrypted)]
    owner: String,
    #[tablekit(encrypted, json)]
    notes: Vec<String>,
    #[tablekit(encrypted)]
    audit: Vec<u8>,
}

const OWNER_MARK: &str = "owner-of-";

fn ledger(year: u16, days: u32, seed: u32) -> Ledger {
    Ledger {
        site: "s".into(),
        year,
        daily: (0..days).map(|d| d * 7 + seed).collect(),
        owner: format!("{OWNER_MARK}{seed}"),
        notes: (0..3).map(|i| format!("note {i} of {seed}")).collect(),
        audit: vec![seed as u8; 50_000],
    }
}

/// A wide entity with encrypted fields: parts hold ciphertext alone (one
/// envelope for the whole), get and queries read it back equal as it grows
/// and shrinks, a sealed value moved into another entity's part does not
/// open, and a delete takes every part.
pub async fn wide_entities_seal_their_encrypted_fields(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "sealedwide").await;
    let t: Table<Ledger> =
        Table::from_arc(Arc::clone(&backend), &name).with_encryption(Arc::new(key_one()));
    let rows = || async { backend.query_all(&name, Query::new()).await.expect("rows") };
    let (first, other) = (ledger(2024, 600, 1), ledger(2025, 10, 2));
    t.insert(&first).await.expect("insert a wide entity");
    t.insert(&other).await.expect("insert");
    let stored = rows().await;
    assert_eq!(stored.len(), 4, "three parts and one");
    let envelopes = stored.iter().filter(|r| r.get(ENVELOPE_PROPERTY).is_some());
    assert_eq!(envelopes.count(), 2, "one envelope an entity");
    assert!(!format!("{stored:?}").contains(OWNER_MARK));
    assert!(
        stored
            .iter()
            .all(|r| !matches!(r.get("owner"), Some(Value::String(_))))
    );

    for want in [&first, &other] {
        let read = t.get("s", want.year).await.expect("get").expect("stored");
        assert_eq!(&*read, want);
    }
    let all = t.query().partition("s").collect().await.expect("a query");
    assert_eq!(all.len(), 2);
    assert_eq!(*all[0], first);

    // Shrunk to one part and grown again: still read back equal.
    let mut loaded = t.get("s", 2024u16).await.expect("get").expect("stored");
    *loaded = ledger(2024, 5, 3);
    t.replace(&mut loaded).await.expect("shrink");
    assert_eq!(rows().await.len(), 2);
    t.update("s", 2024u16, |l: &mut Ledger| *l = ledger(2024, 700, 4))
        .await
        .expect("grow");
    let read = t.get("s", 2024u16).await.expect("get").expect("stored");
    assert_eq!(*read, ledger(2024, 700, 4));

    // The other entity's sealed owner copied into this entity's part.
    let owner = (rows().await.into_iter())
        .find(|r| {
            r.row_key
                .starts_with(&schema::row_key_of(&other).expect("a key"))
        })
        .and_then(|r| r.get("owner").cloned())
        .expect("a sealed owner");
    let mut part = (rows().await.into_iter())
        .find(|r| r.get("owner").is_some() && r.row_key.contains("2024"))
        .expect("the part with the owner");
    part.properties.insert("owner", owner);
    part.etag = None;
    backend
        .upsert_entity(&name, &part, UpdateMode::Replace)
        .await
        .expect("a raw write");
    let refused = encryption_error(t.get("s", 2024u16).await);
    assert!(
        matches!(refused, EncryptionError::Tampered { .. }),
        "{refused}"
    );

    let other = t.get("s", 2025u16).await.expect("get").expect("stored");
    t.delete(&other).await.expect("delete");
    assert!(
        rows().await.iter().all(|r| !r.row_key.contains("2025")),
        "every part is deleted"
    );
    backend.delete_table(&name).await.expect("drop");
}

/// A replace of an entity whose encrypted values are offloaded, dropped
/// after each of its polls: the entity always reads as one of the values
/// written (never an error), and once the writes are done the orphan sweep
/// leaves exactly the blobs its row refers to. (A dropped write may still
/// land after the drop, on a store whose writer works on: the sweep waits
/// for the end, as its `min_age` must exceed the longest write.)
pub async fn sealed_blob_writes_are_safe_to_drop(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn BlobStore>,
) {
    let name = fresh_table(&*backend, "sealedblobdrop").await;
    let container = unique_table("c").to_ascii_lowercase();
    blobs.create_container(&container).await.expect("container");
    let (table_layer, blob_layer) = (
        tablekit::layer::FaultInjection::new(Arc::clone(&backend)),
        tablekit::layer::FaultInjection::new(Arc::clone(&blobs)),
    );
    table_layer.handle().set_yields(true);
    blob_layer.handle().set_yields(true);
    let t: Table<Record> = Table::from_arc(Arc::new(table_layer), &name)
        .with_blob_store(Arc::new(blob_layer), &container)
        .with_encryption(Arc::new(key_one()));
    t.insert(&record(1, 100, 10)).await.expect("insert");
    // The scans written so far, by length (each write's is one longer).
    let mut written = vec![100];
    let mut dropped = 0;
    for k in 1.. {
        assert!(k < 2_000, "the write never finished");
        let mut after = t.get("w1", 1u32).await.expect("get").expect("stored");
        after.scan = vec![k as u8; 100 + k];
        written.push(100 + k);
        let run = super::cancel::drop_after_polls(k, t.replace(&mut after)).await;
        let read = t.get("w1", 1u32).await.expect("a read, never an error");
        let length = read.expect("stored").scan.len();
        assert!(written.contains(&length), "k={k}: a scan of {length} bytes");
        match run {
            Some(Ok(_)) => break,
            // An earlier dropped write landed after this one read.
            Some(Err(Error::PreconditionFailed { .. })) => {}
            Some(Err(e)) => panic!("k={k}: {e}"),
            None => dropped += 1,
        }
    }
    assert!(dropped >= 3, "dropped {dropped} times");
    t.sweep_orphan_blobs(Duration::ZERO).await.expect("a sweep");
    let references = t.blob_references("w1", 1u32).await.expect("refs");
    assert_eq!(
        blobs_of(&*blobs, &container).await.len(),
        references.expect("stored").len(),
        "the blobs are those the row refers to"
    );
    assert!(t.get("w1", 1u32).await.expect("get").is_some());
    backend.delete_table(&name).await.expect("drop");
    blobs.delete_container(&container).await.expect("drop");
}
