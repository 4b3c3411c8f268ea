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

/// An `Option` the derive cannot see through, as a program's alias makes it.
type Maybe = Option<i32>;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Gauges", kind = "GAUGE", rename_all = "PascalCase")]
struct Gauge {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    day: u32,
    #[tablekit(series)]
    hourly: [Option<u32>; 4],
    #[tablekit(series)]
    readings: Vec<Maybe>,
    #[tablekit(series)]
    labels: BTreeMap<String, Maybe>,
    limit: Option<Maybe>,
}

fn gauge() -> Gauge {
    Gauge {
        site: "north".into(),
        day: 1,
        hourly: [None, Some(10), None, None],
        readings: vec![Some(1), Some(2)],
        labels: BTreeMap::from([("a".to_string(), Some(3))]),
        limit: Some(Some(7)),
    }
}

/// Whether `result` is the refusal of a value stored as no property, for
/// the property `property`.
fn refused<T: std::fmt::Debug>(result: tablekit::Result<T>, property: &str) -> bool {
    matches!(
        &result,
        Err(Error::Invalid(InvalidInput::PropertyValue { property: p, reason }))
            if p == property && reason.contains("no property")
    )
}

#[tokio::test]
async fn missing_elements_read_back_in_arrays_and_are_refused_elsewhere() {
    // An array keeps its `None` elements: only the others are stored, and
    // its length says where they were.
    let g = gauge();
    let e = schema::to_entity(&g).unwrap();
    assert_eq!(e.get("Hourly_1"), Some(&Value::Int64(10)));
    assert!(e.get("Hourly_0").is_none() && e.get("Hourly_3").is_none());
    assert_eq!(schema::from_entity::<Gauge>(&e).unwrap(), g);
    let json = schema::to_json(&g).unwrap();
    assert_eq!(schema::from_json::<Gauge>(&json).unwrap(), g);
    let none = Gauge {
        hourly: [None; 4],
        ..gauge()
    };
    assert_eq!(
        schema::from_entity::<Gauge>(&schema::to_entity(&none).unwrap()).unwrap(),
        none
    );
    // An element past the array's length is not a value of it.
    let mut past = schema::to_entity(&g).unwrap();
    past.insert("Hourly_4", 5i64);
    assert!(matches!(
        schema::from_entity::<Gauge>(&past),
        Err(Error::Schema(SchemaError::Property { .. }))
    ));

    // A `Vec`'s or a map's `None` element, and `Some(None)`, would read back
    // as something else: refused when written, and nothing is stored.
    let gauges: Table<Gauge> = Table::new(MemBackend::new());
    gauges.create_if_missing().await.unwrap();
    for (bad, property) in [
        (
            Gauge {
                readings: vec![Some(1), None, Some(3)],
                ..gauge()
            },
            "Readings",
        ),
        (
            Gauge {
                readings: vec![Some(1), None],
                ..gauge()
            },
            "Readings",
        ),
        (
            Gauge {
                labels: BTreeMap::from([("a".to_string(), None)]),
                ..gauge()
            },
            "Labels",
        ),
        (
            Gauge {
                limit: Some(None),
                ..gauge()
            },
            "Limit",
        ),
    ] {
        assert!(refused(schema::to_entity(&bad), property), "{bad:?}");
        assert!(refused(schema::to_json(&bad), property), "{bad:?}");
        assert!(refused(gauges.insert(&bad).await, property), "{bad:?}");
        assert!(gauges.get("north", 1).await.unwrap().is_none());
    }

    // What can be told apart is stored and read back as it was.
    for good in [
        gauge(),
        Gauge {
            limit: None,
            readings: vec![],
            labels: BTreeMap::new(),
            ..gauge()
        },
    ] {
        gauges.upsert(&good).await.unwrap();
        let back = gauges.get("north", 1).await.unwrap().unwrap();
        assert_eq!(Loaded::into_inner(back), good);
    }

    // A merge writes what it sends and removes nothing: merging a `None`
    // element would change nothing, so it is refused.
    let hourly = Gauge::columns().hourly;
    let merged = gauges
        .merge_element("north", 1, &hourly.at(1), &None, &IfMatch::Any)
        .await;
    assert!(refused(merged, "Hourly_1"));
    let after = gauges.get("north", 1).await.unwrap().unwrap();
    assert_eq!(after.hourly, [None, Some(10), None, None]);
    gauges
        .merge_element("north", 1, &hourly.at(3), &Some(30), &IfMatch::Any)
        .await
        .unwrap();
    let after = gauges.get("north", 1).await.unwrap().unwrap();
    assert_eq!(after.hourly, [None, Some(10), None, Some(30)]);
}
