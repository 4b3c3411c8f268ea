//! Data series: collections stored as one property per element, read in one
//! request, one element merged without rewriting the others.

use std::collections::BTreeMap;

use tablekit::schema::{self, SeriesColumn};
use tablekit::{Error, IfMatch, InvalidInput, Loaded, SchemaError, Table, TableEntity, Value};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Meters", kind = "METER", rename_all = "PascalCase")]
struct Meter {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    day: u32,
    #[tablekit(series)]
    hourly: [u32; 24],
    #[tablekit(series)]
    readings: Vec<f64>,
    #[tablekit(series)]
    labels: BTreeMap<String, String>,
    note: Option<String>,
}

fn meter() -> Meter {
    let mut hourly = [0u32; 24];
    for (h, v) in hourly.iter_mut().enumerate() {
        *v = h as u32 * 10;
    }
    Meter {
        site: "north".into(),
        day: 20240301,
        hourly,
        readings: vec![1.5, 2.5, 3.5],
        labels: BTreeMap::from([
            ("owner".to_string(), "ops".to_string()),
            ("zone_a".to_string(), "x".to_string()),
        ]),
        note: None,
    }
}

#[test]
fn elements_are_properties_with_stable_names() {
    let e = schema::to_entity(&meter()).unwrap();
    assert_eq!(e.get("Hourly_0"), Some(&Value::Int64(0)));
    assert_eq!(e.get("Hourly_23"), Some(&Value::Int64(230)));
    assert_eq!(e.get("Readings_2"), Some(&Value::Double(3.5)));
    assert_eq!(e.get("Labels_owner"), Some(&Value::String("ops".into())));
    assert_eq!(e.get("Labels_zone_a"), Some(&Value::String("x".into())));
    assert_eq!(
        e.properties.len(),
        2 + 24 + 3 + 2,
        "kind, version, elements"
    );
    assert_eq!(schema::from_entity::<Meter>(&e).unwrap(), meter());

    let mut names = Vec::new();
    let complete = (Meter::DESCRIPTOR.property_names)(&mut names);
    assert!(!complete, "a Vec or map series cannot be listed");
    assert!(names.contains(&"Hourly_23".to_string()));
}

#[test]
fn bad_series_are_typed_errors() {
    let mut m = meter();
    m.labels.insert("not ok".into(), "x".into());
    assert!(matches!(
        schema::to_entity(&m),
        Err(Error::Invalid(InvalidInput::PropertyValue { .. }))
    ));

    let mut e = schema::to_entity(&meter()).unwrap();
    e.properties.remove("Readings_1");
    assert!(
        matches!(
            schema::from_entity::<Meter>(&e),
            Err(Error::Schema(SchemaError::Property { .. }))
        ),
        "a gap"
    );
    let mut e = schema::to_entity(&meter()).unwrap();
    e.properties.remove("Hourly_7");
    assert!(
        matches!(
            schema::from_entity::<Meter>(&e),
            Err(Error::Schema(SchemaError::Property { .. }))
        ),
        "an array element missing"
    );
}

#[tokio::test]
async fn merge_one_element_keeps_the_others() {
    let meters: Table<Meter> = Table::new(MemBackend::new());
    meters.create_if_missing().await.unwrap();
    meters.insert(&meter()).await.unwrap();
    let loaded = meters.get("north", 20240301).await.unwrap().unwrap();

    let hourly: SeriesColumn<[u32; 24]> = Meter::columns().hourly;
    let etag = meters
        .merge_element(
            "north",
            20240301,
            &hourly.at(5),
            &999,
            &IfMatch::ETag(Loaded::etag(&loaded).clone()),
        )
        .await
        .unwrap();
    let after = meters.get("north", 20240301).await.unwrap().unwrap();
    assert_eq!(after.hourly[5], 999);
    assert_eq!(after.hourly[6], 60, "the other elements are untouched");
    assert_eq!(after.readings, [1.5, 2.5, 3.5]);
    assert_eq!(Loaded::etag(&after), &etag);

    // The ETag we held is stale now: a guarded merge fails.
    let stale = meters
        .merge_element(
            "north",
            20240301,
            &hourly.at(6),
            &1,
            &IfMatch::ETag(Loaded::etag(&loaded).clone()),
        )
        .await;
    assert!(matches!(stale, Err(Error::PreconditionFailed { .. })));

    // Filters on one element.
    let busy = meters
        .query()
        .filter(hourly.at(5).gt(500u32))
        .collect()
        .await
        .unwrap();
    assert_eq!(busy.len(), 1);
}
