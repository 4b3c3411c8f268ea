//! Columns a type does not know: another client's columns survive every
//! typed write through what was read, values and EDM types alike.

use std::sync::Arc;

use super::unique_table;
use tablekit::TableBackendExt;
use tablekit::backend::{GetOptions, TableBackend, UpdateMode};
use tablekit::table::{Loaded, Table};
use tablekit::{DateTime, Entity, Value};

/// Part of a row another client writes: it knows two of its columns.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Ledger")]
struct Payment {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(rename = "Amount")]
    amount: f64,
    #[tablekit(rename = "EntityType")]
    entity_type: String,
    #[tablekit(rename = "Tags", json)]
    tags: Vec<String>,
    #[tablekit(rename = "Memo")]
    memo: Option<String>,
}

/// The columns only the other client knows, of every EDM type.
fn foreign_columns() -> Vec<(&'static str, Value)> {
    vec![
        ("Extra", Value::String("kept".into())),
        ("Count", Value::Int64(1 << 40)),
        ("Small", Value::Int32(-7)),
        ("Ratio", Value::Double(0.25)),
        ("Flag", Value::Boolean(false)),
        ("Raw", Value::Binary(vec![0, 1, 2, 255])),
        (
            "Id",
            Value::Guid(tablekit::uuid::Uuid::from_u128(
                0x1234_5678_9abc_def0_1234_5678_9abc_def0,
            )),
        ),
        (
            "When",
            Value::DateTime(DateTime::parse("2024-02-29T12:34:56.1234567Z").expect("time")),
        ),
    ]
}

/// A row as the other client writes it.
fn row(id: &str) -> Entity {
    let mut row = Entity::new("acct", id)
        .with("Amount", 12.5)
        .with("EntityType", "Payment")
        .with("Tags", r#"["a","b"]"#)
        .with("Memo", "m");
    for (name, value) in foreign_columns() {
        row.properties.insert(name, value);
    }
    row
}

/// The stored row of `id`.
async fn stored(backend: &dyn TableBackend, table: &str, id: &str) -> Entity {
    backend
        .get_entity(table, "acct", id, &GetOptions::default())
        .await
        .expect("raw get")
}

/// Whether the stored row holds every foreign column, of the same value and type.
fn assert_kept(row: &Entity, how: &str) {
    for (name, value) in foreign_columns() {
        assert_eq!(row.properties.get(name), Some(&value), "{how}: {name}");
    }
}

/// Whether the stored row holds none of them.
fn assert_dropped(row: &Entity, how: &str) {
    for (name, _) in foreign_columns() {
        assert_eq!(row.properties.get(name), None, "{how}: {name}");
    }
}

/// A type that maps part of another client's table keeps that client's
/// columns on every write through what it read: `replace`, `update`, a
/// transaction's `replace`, a move to other keys. A field the type knows
/// and sets to `None` is removed, not brought back. Dropping the unknown
/// properties, an upsert and an unconditional replace remove them; merges
/// keep them.
pub async fn foreign_columns_survive_typed_writes(backend: Arc<dyn TableBackend>) {
    let name = unique_table("foreigncols");
    backend.create_table(&name).await.expect("create table");
    for id in ["p1", "p2", "p3", "p4", "p5"] {
        backend
            .insert_entity(&name, &row(id))
            .await
            .expect("raw insert");
    }
    let table: Table<Payment> = Table::from_arc(Arc::clone(&backend), &name);

    // Replace through what was read.
    let mut read = table.get("acct", "p1").await.expect("get").expect("stored");
    let unknown = Loaded::unknown_properties(&read);
    assert_eq!(unknown.len(), foreign_columns().len(), "{unknown:?}");
    for known in ["Amount", "EntityType", "Tags", "Memo"] {
        assert!(unknown.get(known).is_none(), "{known} is the type's own");
    }
    read.amount = 20.0;
    read.memo = None;
    table.replace(&mut read).await.expect("replace");
    let after = stored(&*backend, &name, "p1").await;
    assert_kept(&after, "replace");
    assert_eq!(after.properties.get("Amount"), Some(&Value::Double(20.0)));
    assert_eq!(
        after.properties.get("Memo"),
        None,
        "a known field set to None is removed"
    );
    // Written again through the same value: still there.
    read.amount = 21.0;
    table.replace(&mut read).await.expect("replace again");
    assert_kept(&stored(&*backend, &name, "p1").await, "second replace");

    // `update`.
    let updated = table
        .update("acct", "p2", |p| p.amount += 1.0)
        .await
        .expect("update");
    assert_eq!(updated.amount, 13.5);
    assert_kept(&stored(&*backend, &name, "p2").await, "update");
    assert_eq!(
        Loaded::unknown_properties(&updated).len(),
        foreign_columns().len()
    );

    // A transaction's replace.
    let mut in_batch = table.get("acct", "p3").await.expect("get").expect("stored");
    in_batch.entity_type = "Refund".into();
    let mut transaction = table.transaction();
    transaction.replace(&in_batch).expect("plan");
    transaction.submit().await.expect("submit");
    assert_kept(&stored(&*backend, &name, "p3").await, "transaction");

    // A move to other keys takes the columns along.
    let moving = table.get("acct", "p4").await.expect("get").expect("stored");
    let mut moved = Loaded::into_inner(moving.clone());
    moved.id = "p4-moved".into();
    table.move_to(&moving, &moved).await.expect("move");
    assert_kept(&stored(&*backend, &name, "p4-moved").await, "move");

    // Dropped on request.
    let mut forget = table.get("acct", "p5").await.expect("get").expect("stored");
    Loaded::drop_unknown_properties(&mut forget);
    table.replace(&mut forget).await.expect("replace");
    assert_dropped(&stored(&*backend, &name, "p5").await, "dropped");

    // Merges keep them; an upsert of a value alone replaces the row.
    let merged = Payment {
        account: "acct".into(),
        id: "p2".into(),
        amount: 1.0,
        entity_type: "Payment".into(),
        tags: Vec::new(),
        memo: None,
    };
    table.upsert_merge(&merged).await.expect("upsert merge");
    assert_kept(&stored(&*backend, &name, "p2").await, "upsert merge");
    table.upsert(&merged).await.expect("upsert");
    assert_dropped(&stored(&*backend, &name, "p2").await, "upsert");

    // The other client's own write is untouched by a typed read.
    let raw = row("p6");
    backend
        .upsert_entity(&name, &raw, UpdateMode::Replace)
        .await
        .expect("raw upsert");
    let typed = table.get("acct", "p6").await.expect("get").expect("stored");
    assert_eq!(typed.amount, 12.5);
    assert_kept(&stored(&*backend, &name, "p6").await, "read only");
    backend.delete_table(&name).await.expect("delete table");
}

/// An invoice of another client's ledger, told apart by its `EntityType`.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Ledger",
    discriminator(property = "EntityType", value = "Invoice")
)]
struct Invoice {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(rename = "Amount")]
    amount: f64,
}

/// A payment of the same ledger: the same keys, another `EntityType`.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Ledger",
    discriminator(property = "EntityType", value = "Payment")
)]
struct Paid {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(rename = "Amount")]
    amount: f64,
}

/// The rows of a ledger, by their `EntityType`.
#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]
enum Ledger {
    Invoice(Invoice),
    Paid(Paid),
}

/// Kinds another client tells apart by a property (`EntityType`), not by
/// the RowKey: each row is read as its own type, a query of one type keeps
/// to its rows, a read of another type's row is refused, and a write
/// stores the property.
pub async fn kinds_told_apart_by_a_property(backend: Arc<dyn TableBackend>) {
    use futures::TryStreamExt;
    let name = unique_table("ledger");
    backend.create_table(&name).await.expect("create table");
    for (id, kind, amount) in [
        ("1", "Invoice", 10.0),
        ("2", "Payment", 12.5),
        ("3", "Invoice", 7.0),
    ] {
        let row = Entity::new("acct", id)
            .with("EntityType", kind)
            .with("Amount", amount);
        backend
            .insert_entity(&name, &row)
            .await
            .expect("raw insert");
    }
    let ledger: Table<Ledger> = Table::from_arc(Arc::clone(&backend), &name);
    let rows: Vec<Loaded<Ledger>> = ledger
        .read_partition("acct", tablekit::UnknownKind::Fail)
        .try_collect()
        .await
        .expect("read the partition");
    let read: Vec<Ledger> = rows.into_iter().map(Loaded::into_inner).collect();
    let invoice = |id: &str, amount| Invoice {
        account: "acct".into(),
        id: id.into(),
        amount,
    };
    let paid = Paid {
        account: "acct".into(),
        id: "2".into(),
        amount: 12.5,
    };
    assert_eq!(
        read,
        [
            Ledger::Invoice(invoice("1", 10.0)),
            Ledger::Paid(paid.clone()),
            Ledger::Invoice(invoice("3", 7.0)),
        ]
    );
    // A query of one type keeps to its rows (the filter goes to the store).
    let invoices = ledger
        .of::<Invoice>()
        .query()
        .collect()
        .await
        .expect("query");
    assert_eq!(invoices.len(), 2);
    let payments = ledger.of::<Paid>().query().collect().await.expect("query");
    assert_eq!(
        payments.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        ["2"]
    );
    // Another type's row is refused, never misread.
    let err = ledger
        .of::<Paid>()
        .get("acct", "1")
        .await
        .expect_err("an invoice is no payment");
    assert!(err.is_row_error(), "{err:?}");
    // A write stores the property; the read takes it as the type's own.
    let payments = ledger.of::<Paid>();
    payments
        .insert(&Paid {
            id: "4".into(),
            ..paid
        })
        .await
        .expect("insert");
    let stored = stored_in(&*backend, &name, "acct", "4").await;
    assert_eq!(
        stored.properties.get("EntityType"),
        Some(&Value::String("Payment".into()))
    );
    let again = payments
        .get("acct", "4")
        .await
        .expect("get")
        .expect("stored");
    assert!(Loaded::unknown_properties(&again).is_empty());
    backend.delete_table(&name).await.expect("delete table");
}

/// The stored row `(pk, rk)` of `table`.
async fn stored_in(backend: &dyn TableBackend, table: &str, pk: &str, rk: &str) -> Entity {
    backend
        .get_entity(table, pk, rk, &GetOptions::default())
        .await
        .expect("raw get")
}
