//! The derive end to end on the in-memory backend.

use futures::TryStreamExt;
use tablekit::TableBackendExt;
use tablekit::key::InvertedTime;
use tablekit::schema::{self, KIND_PROPERTY, VERSION_PROPERTY};
use tablekit::{
    DateTime, Entity, EntityKinds, Error, SchemaError, Table, TableEntity, TableFields,
    UnknownKind, Value,
};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP", rename_all = "PascalCase")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    age: Option<i32>,
    #[tablekit(rename = "Mail")]
    email: String,
    #[tablekit(skip)]
    cached: Option<String>,
    #[tablekit(default)]
    nickname: String,
    #[tablekit(flatten)]
    address: Address,
    #[tablekit(json)]
    tags: Vec<String>,
    #[tablekit(with = upper)]
    code: String,
    big: u64,
    hired: DateTime,
}

#[derive(TableFields, Debug, Clone, PartialEq, Default)]
#[tablekit(rename_all = "PascalCase")]
struct Address {
    street: String,
    city: Option<String>,
}

mod common;
use common::upper;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "DEPT")]
struct Department {
    #[tablekit(partition_key)]
    department: String,
    manager: String,
}

#[derive(EntityKinds, Debug, PartialEq)]
enum StaffRow {
    Employee(Employee),
    Department(Department),
}

fn ada() -> Employee {
    Employee {
        department: "Sales".into(),
        id: 123,
        name: "Ada".into(),
        age: Some(36),
        email: "ada@example.com".into(),
        cached: Some("not stored".into()),
        nickname: "A".into(),
        address: Address {
            street: "1 Main St".into(),
            city: None,
        },
        tags: vec!["math".into(), "engines".into()],
        code: "abc".into(),
        big: u64::MAX,
        hired: DateTime::parse("2020-01-02T03:04:05.1234567Z").unwrap(),
    }
}

#[test]
fn entity_layout() {
    let e = schema::to_entity(&ada()).unwrap();
    assert_eq!(e.partition_key, "Sales");
    assert_eq!(e.row_key, "EMP_0000000123");
    assert_eq!(e.get(KIND_PROPERTY), Some(&Value::String("EMP".into())));
    assert_eq!(e.get(VERSION_PROPERTY), Some(&Value::Int32(1)));
    assert_eq!(e.get("Name"), Some(&Value::String("Ada".into())));
    assert_eq!(
        e.get("Mail"),
        Some(&Value::String("ada@example.com".into()))
    );
    assert_eq!(
        e.get("Address_Street"),
        Some(&Value::String("1 Main St".into()))
    );
    assert_eq!(e.get("Address_City"), None, "None is not stored");
    assert_eq!(
        e.get("Tags"),
        Some(&Value::String(r#"["math","engines"]"#.into()))
    );
    assert_eq!(e.get("Code"), Some(&Value::String("ABC".into())));
    assert_eq!(
        e.get("Big"),
        Some(&Value::Int64(-1)),
        "u64 keeps its bits in an Int64"
    );
    assert_eq!(e.get("Cached"), None, "skipped");
    assert!(
        e.get("Department").is_none() && e.get("Id").is_none(),
        "keys are not repeated as properties"
    );

    let back: Employee = schema::from_entity(&e).unwrap();
    assert_eq!(
        back,
        Employee {
            cached: None,
            ..ada()
        }
    );

    let mut names = Vec::new();
    (Employee::DESCRIPTOR.property_names)(&mut names);
    assert_eq!(
        names,
        [
            "Name",
            "Age",
            "Mail",
            "Nickname",
            "Address_Street",
            "Address_City",
            "Tags",
            "Code",
            "Big",
            "Hired"
        ]
    );
}

#[test]
fn reading_checks_kind_version_and_types() {
    let mut e = schema::to_entity(&ada()).unwrap();
    // A Department row is not an Employee.
    let dept = schema::to_entity(&Department {
        department: "Sales".into(),
        manager: "Bob".into(),
    })
    .unwrap();
    assert!(matches!(
        schema::from_entity::<Employee>(&dept),
        Err(Error::Schema(SchemaError::WrongKind {
            expected: "EMP",
            ..
        }))
    ));
    // A newer version is refused.
    e.insert(VERSION_PROPERTY, 2);
    assert!(matches!(
        schema::from_entity::<Employee>(&e),
        Err(Error::Schema(SchemaError::UnsupportedVersion {
            found: 2,
            ..
        }))
    ));
    let newer = schema::from_entity::<Employee>(&e).unwrap_err().to_string();
    let row = format!(
        "row ({:?}, {:?}) of kind `EMP` version 2",
        e.partition_key, e.row_key
    );
    assert!(newer.contains(&row), "names the row: {newer}");
    e.insert(VERSION_PROPERTY, 1);
    // A property of another type is an error naming it, and the row: its
    // keys, its kind and the version it was written with.
    e.insert("Name", 5);
    match schema::from_entity::<Employee>(&e) {
        Err(Error::Schema(SchemaError::Property { property, row, .. })) => {
            assert_eq!(property, "Name");
            let row = row.expect("the row is named");
            assert_eq!(
                (row.partition_key.as_str(), row.row_key.as_str()),
                (e.partition_key.as_str(), e.row_key.as_str())
            );
            assert_eq!((row.kind, row.version), (Some("EMP"), Some(1)));
        }
        other => panic!("{other:?}"),
    }
    let message = schema::from_entity::<Employee>(&e).unwrap_err().to_string();
    let row = format!(
        "row ({:?}, {:?}) of kind `EMP` version 1",
        e.partition_key, e.row_key
    );
    assert!(
        message.starts_with("property `Name`: expected") && message.ends_with(&row),
        "{message}"
    );
    // The same from the wire form.
    let json = tablekit::json::to_string(&e);
    let message = schema::from_json::<Employee>(&json)
        .unwrap_err()
        .to_string();
    assert!(message.ends_with(&row), "{message}");
    e.insert("Name", "Ada");
    // A missing required property too; a missing `default` one is defaulted.
    e.properties.remove("Mail");
    assert!(matches!(
        schema::from_entity::<Employee>(&e),
        Err(Error::Schema(SchemaError::Property { .. }))
    ));
    e.insert("Mail", "x");
    e.properties.remove("Nickname");
    assert_eq!(schema::from_entity::<Employee>(&e).unwrap().nickname, "");
    // A RowKey that does not decode.
    e.row_key = "EMP_12".into();
    assert!(matches!(
        schema::from_entity::<Employee>(&e),
        Err(Error::Schema(SchemaError::KeyDecode { .. }))
    ));
}

#[tokio::test]
async fn typed_client_round_trip() {
    let backend = MemBackend::new();
    let staff: Table<Employee> = Table::new(backend.clone());
    staff.create_if_missing().await.unwrap();
    staff.insert(&ada()).await.unwrap();
    let mut loaded = staff.get("Sales", 123).await.unwrap().expect("stored");
    let mut stale = loaded.clone();
    assert_eq!(loaded.name, "Ada");
    loaded.age = Some(37);
    staff.replace(&mut loaded).await.unwrap();
    // The ETag of the version read first is now stale.
    assert!(matches!(
        staff.replace(&mut stale).await,
        Err(Error::PreconditionFailed { .. })
    ));
    let updated = staff
        .update("Sales", 123, |e| e.nickname = "Countess".into())
        .await
        .unwrap();
    assert_eq!(updated.nickname, "Countess");
    assert_eq!(
        staff.get("Sales", 123).await.unwrap().unwrap().age,
        Some(37)
    );

    let depts = staff.of::<Department>();
    depts
        .insert(&Department {
            department: "Sales".into(),
            manager: "Bob".into(),
        })
        .await
        .unwrap();
    // Same partition, two kinds: a typed query reads only its kind.
    assert_eq!(
        staff
            .query()
            .partition("Sales")
            .collect()
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        depts
            .query()
            .partition("Sales")
            .collect()
            .await
            .unwrap()
            .len(),
        1
    );
    let rows: Vec<_> = staff
        .of::<StaffRow>()
        .read_partition("Sales", UnknownKind::Fail)
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(*rows[0], StaffRow::Department(_)));
    assert!(matches!(*rows[1], StaffRow::Employee(_)));

    // A row of an unknown kind: skipped or an error, as asked.
    backend
        .insert_entity("Staff", &Entity::new("Sales", "ZZZ_1"))
        .await
        .unwrap();
    let skipped: Vec<_> = staff
        .of::<StaffRow>()
        .read_partition("Sales", UnknownKind::Skip)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(skipped.len(), 2);
    let failed: Result<Vec<_>, _> = staff
        .of::<StaffRow>()
        .read_partition("Sales", UnknownKind::Fail)
        .try_collect()
        .await;
    assert!(matches!(
        failed,
        Err(Error::Schema(SchemaError::UnknownKind { .. }))
    ));
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Logs", kind = "LOG")]
struct LogLine {
    #[tablekit(partition_key)]
    source: String,
    #[tablekit(row_key)]
    at: InvertedTime,
    text: String,
}

#[tokio::test]
async fn inverted_time_reads_newest_first() {
    let logs: Table<LogLine> = Table::new(MemBackend::new());
    logs.create_if_missing().await.unwrap();
    for (i, t) in [
        "2020-01-01T00:00:00Z",
        "2022-01-01T00:00:00Z",
        "2021-01-01T00:00:00Z",
    ]
    .iter()
    .enumerate()
    {
        let at = InvertedTime(DateTime::parse(t).unwrap());
        logs.insert(&LogLine {
            source: "web".into(),
            at,
            text: format!("line {i}"),
        })
        .await
        .unwrap();
    }
    let newest: Vec<_> = logs
        .query()
        .partition("web")
        .limit(2)
        .collect()
        .await
        .unwrap();
    let years: Vec<_> = newest
        .iter()
        .map(|l| l.at.0.to_string()[..4].to_owned())
        .collect();
    assert_eq!(years, ["2022", "2021"]);
}

#[derive(tablekit::TableValue, Debug, Clone, Copy, PartialEq)]
#[tablekit(rename_all = "snake_case")]
enum Status {
    Active,
    OnLeave,
    #[tablekit(rename = "gone")]
    Left,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Statuses")]
struct WithStatus {
    #[tablekit(partition_key)]
    status: Status,
    current: Status,
    previous: Option<Status>,
}

#[tokio::test]
async fn unit_enums_are_strings() {
    let v = WithStatus {
        status: Status::OnLeave,
        current: Status::Left,
        previous: Some(Status::Active),
    };
    let e = schema::to_entity(&v).unwrap();
    assert_eq!(e.partition_key, "on_leave");
    assert_eq!(e.get("current"), Some(&Value::String("gone".into())));
    assert_eq!(schema::from_entity::<WithStatus>(&e).unwrap(), v);
    let mut bad = e.clone();
    bad.insert("current", "retired");
    assert!(matches!(
        schema::from_entity::<WithStatus>(&bad),
        Err(Error::Schema(SchemaError::Property { .. }))
    ));

    let table: Table<WithStatus> = Table::new(MemBackend::new());
    table.create_if_missing().await.unwrap();
    table.insert(&v).await.unwrap();
    let found = table
        .query()
        .filter(WithStatus::columns().current.eq(Status::Left))
        .collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Clash")]
struct Clash {
    #[tablekit(partition_key)]
    key: String,
    #[tablekit(rename = "Home_Street")]
    street: String,
    #[tablekit(flatten(prefix = "Home"))]
    home: Address,
}

#[test]
fn flattened_name_collisions_are_typed_errors() {
    assert!(matches!(
        schema::check_names::<Clash>(),
        Err(Error::Schema(SchemaError::NameCollision { ref name })) if name == "Home_Street"
    ));
    let value = Clash {
        key: "k".into(),
        street: "a".into(),
        home: Address {
            street: "b".into(),
            city: None,
        },
    };
    assert!(matches!(
        schema::to_entity(&value),
        Err(Error::Schema(SchemaError::NameCollision { ref name })) if name == "Home_Street"
    ));
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Reading {
    mean: f64,
    peak: Option<f32>,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Readings", kind = "READ")]
struct Sensor {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(json)]
    last: Reading,
    #[tablekit(json)]
    history: Vec<f64>,
}

/// JSON has no number for NaN or the infinities, and serde_json writes them
/// as `null`: a value holding one would read back as another (`None`) or not
/// at all, so it is refused when written, naming the field, nothing stored.
#[tokio::test]
async fn json_fields_refuse_floats_json_cannot_hold() {
    let sensors: Table<Sensor> = Table::new(MemBackend::new());
    sensors.create_if_missing().await.unwrap();
    let good = Sensor {
        site: "north".into(),
        last: Reading {
            mean: -0.0,
            peak: Some(f32::MAX),
        },
        history: vec![0.1, 1e308, f64::MIN_POSITIVE],
    };
    let bad = [
        (
            Sensor {
                last: Reading {
                    mean: f64::NAN,
                    peak: None,
                },
                ..good.clone()
            },
            "last",
        ),
        (
            Sensor {
                last: Reading {
                    mean: 1.0,
                    peak: Some(f32::INFINITY),
                },
                ..good.clone()
            },
            "last",
        ),
        (
            Sensor {
                history: vec![1.0, f64::NEG_INFINITY],
                ..good.clone()
            },
            "history",
        ),
    ];
    for (sensor, field) in bad {
        let refused = sensors.insert(&sensor).await;
        assert!(
            matches!(&refused, Err(Error::Invalid(tablekit::InvalidInput::PropertyValue { property, reason }))
                if property == field && reason.contains("null")),
            "{refused:?}"
        );
        assert!(sensors.get("north", ()).await.unwrap().is_none());
    }
    sensors.insert(&good).await.unwrap();
    let back = sensors.get("north", ()).await.unwrap().unwrap();
    assert_eq!(tablekit::Loaded::into_inner(back), good);
}
