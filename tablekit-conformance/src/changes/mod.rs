//! The change feed: every typed write path records its change in its own
//! transaction, in commit order per partition; consumers keep their own
//! checkpoints; faults and dropped futures never leave a change without its
//! write, or a write without its change.

use std::sync::Arc;

use tablekit::backend::TableBackend;
use tablekit::changes::{Change, ChangeOp};
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::table::Table;
use tablekit::{Error, IfMatch, InvalidInput, TableEntity};

use super::{drop_after_polls, fresh_table};

mod writes;
pub use writes::*;
mod consumers;
pub use consumers::*;
mod idle;
pub use idle::*;

/// An order, whose kind records its changes.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "ORDER", changes)]
struct Order {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
    total: i64,
    note: Option<String>,
}

/// A customer with a unique email: its changes ride with its index rows.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "CUST", changes)]
#[tablekit(index(name = "email", tag = "email"))]
struct Customer {
    #[tablekit(partition_key)]
    region: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
}

/// A shipment as version 1 wrote it, in kilograms. Its writes record
/// changes too.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "SHIP", changes)]
struct ShipmentV1 {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
    weight: i64,
}

/// Version 2: the weight in grams, and a carrier.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "SHIP", version = 2, upgrade_from = ShipmentV1, changes)]
struct Shipment {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
    grams: i64,
    carrier: String,
}

impl From<ShipmentV1> for Shipment {
    fn from(old: ShipmentV1) -> Shipment {
        Shipment {
            customer: old.customer,
            id: old.id,
            grams: old.weight * 1000,
            carrier: "post".into(),
        }
    }
}

/// A migration rewrites each older row with its change; a row already
/// current is not rewritten and records nothing.
pub async fn migrations_record_their_changes(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgmig").await;
    let old: Table<ShipmentV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<Shipment> = Table::from_arc(Arc::clone(&backend), &name);
    for id in 1..=3 {
        let shipment = ShipmentV1 {
            customer: "ann".into(),
            id,
            weight: i64::from(id),
        };
        old.insert(&shipment).await.expect("insert version 1");
    }
    let report = new.migrate().run().await.expect("migrate");
    assert_eq!(report.upgraded, 3);
    let seen = changes(&new, "ann").await;
    use ChangeOp::*;
    assert_eq!(
        ops(&seen),
        [Insert, Insert, Insert, Replace, Replace, Replace]
    );
    let grams: Vec<i64> = seen[3..]
        .iter()
        .map(|c| c.value.as_ref().expect("the value").grams)
        .collect();
    assert_eq!(
        grams,
        [1000, 2000, 3000],
        "the changes hold the rows as rewritten"
    );
    let again = new.migrate().run().await.expect("migrate again");
    assert_eq!(again.upgraded, 0);
    assert_eq!(
        changes(&new, "ann").await.len(),
        6,
        "nothing rewritten, nothing recorded"
    );
}

/// An order whose changes record the value before them too.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "PREV", changes(previous))]
struct Priced {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
    total: i64,
    note: Option<String>,
}

fn priced(id: u32, total: i64) -> Priced {
    Priced {
        customer: "ann".into(),
        id,
        total,
        note: None,
    }
}

/// With `changes(previous)`, each change holds the entity's value before
/// it, whatever the write: none before an insert or an upsert of a new
/// entity, the value replaced, merged over or deleted otherwise.
pub async fn previous_values_ride_with_their_changes(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgprev").await;
    let t: Table<Priced> = Table::from_arc(Arc::clone(&backend), &name);
    t.insert(&priced(1, 10)).await.expect("insert");
    let mut loaded = t.get("ann", 1u32).await.expect("get").expect("stored");
    loaded.total = 11;
    t.replace(&mut loaded).await.expect("replace");
    loaded.note = Some("gift".into());
    t.merge(&mut loaded).await.expect("merge");
    t.upsert(&priced(1, 12)).await.expect("upsert");
    t.upsert(&priced(2, 20)).await.expect("upsert a new one");
    t.update("ann", 1u32, |p| p.total = 13)
        .await
        .expect("update");
    t.delete_unconditionally("ann", 1u32).await.expect("delete");
    let mut batch = t.batch();
    batch.upsert(&priced(2, 21)).expect("batch upsert");
    batch.submit().await.expect("batch");
    let report = t.bulk().upsert(&[priced(2, 22), priced(3, 30)]).await;
    assert!(report.is_complete(), "{:?}", report.failures);
    let seen = changes(&t, "ann").await;
    assert_numbered(&seen, "writes with previous values");
    let before: Vec<Option<(i64, Option<&str>)>> = seen
        .iter()
        .map(|c| c.previous.as_ref().map(|p| (p.total, p.note.as_deref())))
        .collect();
    assert_eq!(
        before,
        [
            None,
            Some((10, None)),
            Some((11, None)),
            Some((11, Some("gift"))),
            None,
            Some((12, None)),
            Some((13, None)),
            Some((20, None)),
            Some((21, None)),
            None,
        ],
        "each change's previous value"
    );
    assert!(seen.iter().all(|c| c.decode_error.is_none()));
    use ChangeOp::*;
    assert_eq!(
        ops(&seen),
        [
            Insert, Replace, Merge, Upsert, Upsert, Replace, Delete, Upsert, Upsert, Upsert
        ]
    );
    let values: Vec<Option<i64>> = seen
        .iter()
        .map(|c| c.value.as_ref().map(|p| p.total))
        .collect();
    assert_eq!(
        values,
        [
            Some(10),
            Some(11),
            None,
            Some(12),
            Some(20),
            Some(13),
            None,
            Some(21),
            Some(22),
            Some(30)
        ],
        "the values written, beside the previous ones"
    );
    let plain = t.query().partition("ann").collect().await.expect("query");
    assert_eq!(plain.len(), 2, "the feed's rows are not read as entities");
}

/// A wide entity whose kind records its changes, and their previous
/// values.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "WIDE", wide, changes(previous))]
struct Readings {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    year: u16,
    #[tablekit(series)]
    daily: Vec<u32>,
}

/// A document whose body lives in the blob store, and whose kind records
/// its changes.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Orders", kind = "FDOC", changes)]
struct Filed {
    #[tablekit(partition_key)]
    folder: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(blob)]
    body: Vec<u8>,
}

/// Wide entities and offloaded values record their changes like any
/// other: a wide entity's change holds its value when it fits in one row
/// beside the change (else it is recorded without it, and says so), and
/// an offloaded value is read back from the blob store while its blob is
/// there.
pub async fn wide_and_offloaded_kinds_record_their_changes(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn tablekit::blob::BlobStore>,
) {
    use ChangeOp::*;
    let name = fresh_table(&*backend, "chgwide").await;
    let wide: Table<Readings> = Table::from_arc(Arc::clone(&backend), &name);
    let readings = |count: u32, seed: u32| Readings {
        site: "s".into(),
        year: 2026,
        daily: (0..count).map(|d| d * 7 + seed).collect(),
    };
    wide.insert(&readings(20, 0)).await.expect("insert");
    // Over 255 properties: several rows.
    wide.upsert(&readings(600, 1)).await.expect("upsert wide");
    let element = Readings::columns().daily.at(4);
    wide.merge_element("s", 2026u16, &element, &999, &IfMatch::Any)
        .await
        .expect("merge one element");
    wide.upsert(&readings(30, 2)).await.expect("upsert narrow");
    wide.delete_unconditionally("s", 2026u16)
        .await
        .expect("delete");
    let seen = changes(&wide, "s").await;
    assert_numbered(&seen, "a wide entity's writes");
    assert_eq!(ops(&seen), [Insert, Upsert, Merge, Upsert, Delete]);
    assert_eq!(seen[0].value, Some(readings(20, 0)));
    assert!(
        seen[1].value.is_none() && seen[1].properties.is_empty(),
        "too wide to ride beside its change: recorded without it"
    );
    assert_eq!(
        seen[2].properties.len(),
        1,
        "a merged element records that element"
    );
    assert_eq!(seen[3].value, Some(readings(30, 2)));
    assert_eq!(seen[4].previous, Some(readings(30, 2)));
    assert!(seen.iter().all(|c| c.decode_error.is_none()));
    let all = wide.query().partition("s").collect().await.expect("query");
    assert!(all.is_empty(), "the feed's rows are not read as entities");

    let container = crate::unique_table("c").to_ascii_lowercase();
    blobs
        .create_container(&container)
        .await
        .expect("create container");
    let filed: Table<Filed> = Table::from_arc(Arc::clone(&backend), &name)
        .with_blob_store(Arc::clone(&blobs), &container);
    let doc = |seed: u8| Filed {
        folder: "f".into(),
        id: 1,
        body: vec![seed; 100_000],
    };
    filed.insert(&doc(1)).await.expect("insert");
    let first = changes(&filed, "f").await;
    assert_eq!(first[0].value, Some(doc(1)), "read back from its blob");
    filed.upsert(&doc(2)).await.expect("upsert");
    let seen = changes(&filed, "f").await;
    // An upsert of an offloaded value replaces the version it read (so its
    // old blobs can go): its change says so.
    assert_eq!(ops(&seen), [Insert, Replace]);
    assert_eq!(seen[1].value, Some(doc(2)));
    // The first version's blob goes once the second commits: its change
    // says why it holds no value.
    assert!(
        seen[0].value.is_none() && seen[0].decode_error.is_some(),
        "{:?}",
        seen[0].decode_error
    );
}

fn order(customer: &str, id: u32, total: i64) -> Order {
    Order {
        customer: customer.into(),
        id,
        total,
        note: None,
    }
}

/// Every change of partition `pk`, in order.
async fn changes<T: tablekit::changes::RecordsChanges>(t: &Table<T>, pk: &str) -> Vec<Change<T>> {
    t.changes().read(pk, 0, 10_000).await.expect("read changes")
}

fn ops<T>(changes: &[Change<T>]) -> Vec<ChangeOp> {
    changes.iter().map(|c| c.op).collect()
}

/// Numbered 1, 2, 3… with no gap.
fn assert_numbered<T>(changes: &[Change<T>], what: &str) {
    for (i, change) in changes.iter().enumerate() {
        assert_eq!(
            change.id.seq,
            i as u64 + 1,
            "{what}: change numbers have a gap"
        );
        assert!(change.committed_at.is_some(), "{what}: no commit time");
    }
}
