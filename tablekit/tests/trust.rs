//! Never a silent wrong value through the typed API: lossy narrowing, fields
//! shadowed by the loaded wrapper, stale ETags after one's own write.

use tablekit::TableBackendExt;
use tablekit::{DateTime, Entity, Error, Loaded, SchemaError, Table, TableBackend, TableEntity};
use tablekit_mem::MemBackend;

/// An entity whose field names are those of `Loaded`'s own bookkeeping.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Events", kind = "EV")]
struct Event {
    #[tablekit(partition_key)]
    stream: String,
    #[tablekit(row_key)]
    seq: u32,
    timestamp: DateTime,
    etag: String,
    value: i64,
    ratio: f32,
}

fn event(seq: u32) -> Event {
    Event {
        stream: "s".into(),
        seq,
        timestamp: DateTime::parse("2001-02-03T04:05:06Z").unwrap(),
        etag: "the entity's own".into(),
        value: 42,
        ratio: 0.25,
    }
}

async fn table() -> Table<Event> {
    let table = Table::new(MemBackend::new());
    table.create_if_missing().await.unwrap();
    table
}

/// `loaded.timestamp`, `loaded.etag` and `loaded.value` are the entity's
/// fields; the store's are reached through `Loaded::timestamp` and `Loaded::etag`.
#[tokio::test]
async fn loaded_never_shadows_entity_fields() {
    let events = table().await;
    events.insert(&event(1)).await.unwrap();
    let loaded = events.get("s", 1).await.unwrap().unwrap();
    assert_eq!(loaded.timestamp, event(1).timestamp);
    assert_eq!(loaded.etag, "the entity's own");
    assert_eq!(loaded.value, 42);
    let server_time = Loaded::timestamp(&loaded).expect("the store's time");
    assert_ne!(server_time, loaded.timestamp);
    assert!(Loaded::etag(&loaded).as_str().starts_with("W/"));
    assert_eq!(Loaded::into_inner(loaded), event(1));
}

/// A write through a `Loaded` refreshes its ETag and Timestamp: the same
/// writer can write again, and a second holder of the old version cannot.
#[tokio::test]
async fn writes_through_loaded_refresh_its_etag() {
    let events = table().await;
    events.insert(&event(1)).await.unwrap();
    let mut mine = events.get("s", 1).await.unwrap().unwrap();
    let mut theirs = mine.clone();
    let before = Loaded::etag(&mine).clone();

    mine.value = 43;
    let written = events.replace(&mut mine).await.unwrap();
    assert_eq!(Loaded::etag(&mine), &written);
    assert_ne!(written, before);
    assert_eq!(Loaded::timestamp(&mine), written.timestamp());

    mine.value = 44;
    events.replace(&mut mine).await.unwrap();
    mine.value = 45;
    events.merge(&mut mine).await.unwrap();
    let stored = events.get("s", 1).await.unwrap().unwrap();
    assert_eq!(stored.value, 45);
    assert_eq!(Loaded::etag(&stored), Loaded::etag(&mine));

    theirs.value = 0;
    let stale = events.replace(&mut theirs).await;
    assert!(
        matches!(stale, Err(Error::PreconditionFailed { .. })),
        "{stale:?}"
    );
    assert_eq!(
        Loaded::etag(&theirs),
        &before,
        "a refused write changes nothing"
    );
    events.delete(&mine).await.unwrap();
}

/// A Double an `f32` cannot hold exactly is an error naming the property,
/// through the row and through the wire JSON; values it can hold read back.
#[tokio::test]
async fn f32_fields_never_narrow_silently() {
    let events = table().await;
    events.insert(&event(1)).await.unwrap();
    for (seq, stored) in [(2u32, 0.1_f64), (3, 1e300), (4, 1e-60)] {
        let mut row = Entity::new("s", format!("EV_{seq:010}"));
        schema_row(&mut row, stored);
        events
            .backend()
            .insert_entity("Events", &row)
            .await
            .unwrap();
        let read = events.get("s", seq).await;
        assert!(
            matches!(&read, Err(Error::Schema(SchemaError::Property { property, .. })) if property == "ratio"),
            "{stored}: {read:?}"
        );
        let json = tablekit::json::to_string(&row);
        let typed = tablekit::schema::from_json::<Event>(&json);
        assert!(
            matches!(&typed, Err(Error::Schema(SchemaError::Property { property, .. })) if property == "ratio"),
            "{stored}: {typed:?}"
        );
    }
    let read = events.get("s", 1).await.unwrap().unwrap();
    assert_eq!(read.ratio, 0.25);
}

/// The properties of an `Event` row, with `ratio` as given.
fn schema_row(row: &mut Entity, ratio: f64) {
    let mut full = tablekit::schema::to_entity(&event(1)).unwrap();
    full.insert("ratio", tablekit::Value::Double(ratio));
    row.properties = full.properties;
}

/// A row written through `Table` carries its write history, which typed
/// reads (from the row and from its wire JSON) pass over; a table can be
/// told not to keep it.
#[tokio::test]
async fn write_history_is_invisible_to_typed_reads_and_optional() {
    let events = table().await;
    events.insert(&event(1)).await.unwrap();
    let row = events
        .backend()
        .get_entity("Events", "s", "EV_0000000001", &Default::default())
        .await
        .unwrap();
    assert!(
        row.properties
            .get(tablekit::table::update::WRITES_PROPERTY)
            .is_some()
    );
    let json = tablekit::json::to_string(&row);
    assert_eq!(
        tablekit::schema::from_json::<Event>(&json).unwrap(),
        event(1)
    );

    let plain = events.clone().without_write_history();
    plain.insert(&event(2)).await.unwrap();
    let mut loaded = plain.get("s", 2).await.unwrap().unwrap();
    loaded.value = 7;
    plain.replace(&mut loaded).await.unwrap();
    plain.update("s", 2, |e| e.value += 1).await.unwrap();
    let row = events
        .backend()
        .get_entity("Events", "s", "EV_0000000002", &Default::default())
        .await
        .unwrap();
    assert!(
        row.properties
            .get(tablekit::table::update::WRITES_PROPERTY)
            .is_none()
    );
    assert_eq!(plain.get("s", 2).await.unwrap().unwrap().value, 8);
}

/// A row at the store's property limit has no room for the write history:
/// it is written without it, not refused.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Full")]
struct Full {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(series)]
    v: Vec<i32>,
}

#[tokio::test]
async fn a_full_row_is_written_without_history() {
    let table: Table<Full> = Table::new(MemBackend::new());
    table.create_if_missing().await.unwrap();
    let full = Full {
        pk: "p".into(),
        v: (0..252).collect(),
    };
    table.insert(&full).await.unwrap();
    let mut loaded = table.get("p", ()).await.unwrap().unwrap();
    loaded.v[0] = 7;
    table.replace(&mut loaded).await.unwrap();
    let row = table
        .backend()
        .get_entity("Full", "p", "", &Default::default())
        .await
        .unwrap();
    assert_eq!(row.properties.len(), 252);
    assert!(
        row.properties
            .get(tablekit::table::update::WRITES_PROPERTY)
            .is_none()
    );
    assert_eq!(table.get("p", ()).await.unwrap().unwrap().v[0], 7);
}
