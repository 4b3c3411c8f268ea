use tablekit::key::InvertedTime;
use tablekit::{DateTime, TableEntity, TableFields};

#[derive(TableFields, Default)]
struct Address {
    street: String,
    #[tablekit(flatten(prefix = "Geo", delimiter = ""))]
    geo: Geo,
}

#[derive(TableFields, Default)]
struct Geo {
    lat: f64,
    lon: f64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Prefs {
    theme: String,
}

mod as_text {
    use tablekit::{Value, ValueError};
    pub fn to_value(v: &u128) -> Result<Option<Value>, ValueError> {
        Ok(Some(Value::String(v.to_string())))
    }
    pub fn from_value(v: Option<&Value>) -> Result<u128, ValueError> {
        match v {
            Some(Value::String(s)) => s.parse().map_err(|_| ValueError::Invalid("not a number".into())),
            _ => Err(ValueError::Missing),
        }
    }
}

#[derive(TableEntity)]
#[tablekit(table = "Everything", kind = "ALL", version = 3, min_version = 2, rename_all = "camelCase")]
struct Everything {
    #[tablekit(partition_key = 0)]
    tenant: String,
    #[tablekit(partition_key = 1)]
    region: u8,
    #[tablekit(row_key = 0)]
    day: DateTime,
    #[tablekit(row_key = 1)]
    newest: InvertedTime,
    #[tablekit(row_key = 2)]
    id: uuid::Uuid,
    #[tablekit(row_key = 3)]
    flag: bool,
    s: String,
    b: bool,
    i8_: i8,
    i16_: i16,
    i32_: i32,
    i64_: i64,
    u8_: u8,
    u16_: u16,
    u32_: u32,
    u64_: u64,
    f32_: f32,
    f64_: f64,
    bytes: Vec<u8>,
    guid: uuid::Uuid,
    when: DateTime,
    offset: time::OffsetDateTime,
    maybe: Option<String>,
    #[tablekit(default)]
    defaulted: Vec<u8>,
    #[tablekit(skip)]
    skipped: std::collections::HashMap<String, String>,
    #[tablekit(flatten)]
    address: Address,
    #[tablekit(json)]
    prefs: Prefs,
    #[tablekit(with = as_text)]
    huge: u128,
}

#[derive(TableEntity)]
struct Generic<T: Send + Sync + 'static> {
    #[tablekit(partition_key)]
    key: String,
    value: T,
}

fn main() {
    let columns = Everything::columns();
    let _ = columns.i32_.gt(3) & columns.maybe.eq("x") & columns.when.lt(DateTime::MAX);
    let generic: Generic<i64> = Generic { key: "k".into(), value: 1 };
    let entity = tablekit::schema::to_entity(&generic).unwrap();
    assert_eq!(entity.partition_key, "k");
    let _ = Generic::<i64>::columns().value.ge(2i64);
}
