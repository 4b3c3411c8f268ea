//! What the derive costs beside hand-written code doing the same work:
//! key building beside a hand-written `String`, and entity conversion (to and
//! from the property map and the wire JSON) beside serde_json on an equivalent
//! plain struct.
//!
//! `cargo bench -p tablekit --bench derive`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tablekit::{DateTime, TableEntity, json, schema};

#[derive(TableEntity, Clone)]
#[tablekit(table = "Reviews", kind = "REV", rename_all = "PascalCase")]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 1)]
    year: u16,
    name: String,
    email: String,
    rating: i32,
    salary: f64,
    active: bool,
    hired: DateTime,
    badge: tablekit::uuid::Uuid,
    score: i64,
    notes: Option<String>,
}

/// The same data as a plain serde struct, with the fields serde would need to
/// carry the same information (keys as strings, as on the wire).
#[derive(serde::Serialize, serde::Deserialize, Clone)]
#[serde(rename_all = "PascalCase")]
struct PlainReview {
    partition_key: String,
    row_key: String,
    name: String,
    email: String,
    rating: i32,
    salary: f64,
    active: bool,
    hired: String,
    badge: String,
    score: i64,
    notes: Option<String>,
}

/// The entity's own fields and types as a plain serde struct: serde_json
/// formats and parses the time and the UUID as tablekit does.
#[derive(serde::Serialize, serde::Deserialize, Clone)]
#[serde(rename_all = "PascalCase")]
struct TypedPlainReview {
    department: String,
    employee: u32,
    year: u16,
    name: String,
    email: String,
    rating: i32,
    salary: f64,
    active: bool,
    #[serde(with = "time::serde::rfc3339")]
    hired: time::OffsetDateTime,
    badge: tablekit::uuid::Uuid,
    score: i64,
    notes: Option<String>,
}

/// A plain struct that serializes to the very document tablekit writes: the
/// kind and version members and the type annotations included, so both sides
/// produce and parse the same bytes.
#[derive(serde::Serialize, serde::Deserialize, Clone)]
struct SameDocument {
    #[serde(rename = "PartitionKey")]
    partition_key: String,
    #[serde(rename = "RowKey")]
    row_key: String,
    #[serde(rename = "_Kind")]
    kind: String,
    #[serde(rename = "_Version")]
    version: i32,
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Email")]
    email: String,
    #[serde(rename = "Rating")]
    rating: i32,
    #[serde(rename = "Salary")]
    salary: f64,
    #[serde(rename = "Salary@odata.type")]
    salary_type: String,
    #[serde(rename = "Active")]
    active: bool,
    #[serde(rename = "Hired")]
    hired: String,
    #[serde(rename = "Hired@odata.type")]
    hired_type: String,
    #[serde(rename = "Badge")]
    badge: String,
    #[serde(rename = "Badge@odata.type")]
    badge_type: String,
    #[serde(rename = "Score")]
    score: String,
    #[serde(rename = "Score@odata.type")]
    score_type: String,
    #[serde(rename = "Notes")]
    notes: Option<String>,
}

/// The same document read by serde's derive into borrowed texts, then
/// converted to the typed fields as `from_json` converts them: what a
/// hand-made serde reader of the wire form would do.
#[derive(serde::Deserialize)]
struct SameDocumentRef<'a> {
    #[serde(rename = "PartitionKey")]
    partition_key: &'a str,
    #[serde(rename = "RowKey")]
    row_key: &'a str,
    #[serde(rename = "_Kind")]
    kind: &'a str,
    #[serde(rename = "_Version")]
    version: i32,
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Email")]
    email: String,
    #[serde(rename = "Rating")]
    rating: i32,
    #[serde(rename = "Salary")]
    salary: f64,
    #[serde(rename = "Salary@odata.type")]
    salary_type: &'a str,
    #[serde(rename = "Active")]
    active: bool,
    #[serde(rename = "Hired")]
    hired: &'a str,
    #[serde(rename = "Hired@odata.type")]
    hired_type: &'a str,
    #[serde(rename = "Badge")]
    badge: &'a str,
    #[serde(rename = "Badge@odata.type")]
    badge_type: &'a str,
    #[serde(rename = "Score")]
    score: &'a str,
    #[serde(rename = "Score@odata.type")]
    score_type: &'a str,
    #[serde(rename = "Notes")]
    notes: Option<String>,
}

fn read_same_document(text: &str) -> Option<Review> {
    let d: SameDocumentRef<'_> = serde_json::from_str(text).ok()?;
    let types = (d.salary_type, d.hired_type, d.badge_type, d.score_type);
    if d.kind != "REV"
        || d.version != 1
        || types != ("Edm.Double", "Edm.DateTime", "Edm.Guid", "Edm.Int64")
    {
        return None;
    }
    let (employee, year) = d.row_key.strip_prefix("REV_")?.split_once('_')?;
    Some(Review {
        department: d.partition_key.to_owned(),
        employee: employee.parse().ok()?,
        year: year.parse().ok()?,
        name: d.name,
        email: d.email,
        rating: d.rating,
        salary: d.salary,
        active: d.active,
        hired: DateTime::parse(d.hired).ok()?,
        badge: tablekit::uuid::Uuid::try_parse(d.badge).ok()?,
        score: d.score.parse().ok()?,
        notes: d.notes,
    })
}

fn review() -> Review {
    Review {
        department: "Sales".into(),
        employee: 123,
        year: 2021,
        name: "Ada Lovelace".into(),
        email: "ada@example.com".into(),
        rating: 5,
        salary: 1250.5,
        active: true,
        hired: DateTime::parse("2020-01-02T03:04:05.1234567Z").unwrap(),
        badge: tablekit::uuid::Uuid::from_u128(0xc9da6455_213d_42c9_9a79_3e9149a57833),
        score: 9_000_000_000,
        notes: Some("excellent".into()),
    }
}

fn plain(r: &Review) -> PlainReview {
    PlainReview {
        partition_key: r.department.clone(),
        row_key: format!("REV_{:010}_{:05}", r.employee, r.year),
        name: r.name.clone(),
        email: r.email.clone(),
        rating: r.rating,
        salary: r.salary,
        active: r.active,
        hired: r.hired.to_string(),
        badge: r.badge.to_string(),
        score: r.score,
        notes: r.notes.clone(),
    }
}

fn typed_plain(r: &Review) -> TypedPlainReview {
    TypedPlainReview {
        department: r.department.clone(),
        employee: r.employee,
        year: r.year,
        name: r.name.clone(),
        email: r.email.clone(),
        rating: r.rating,
        salary: r.salary,
        active: r.active,
        hired: r.hired.into(),
        badge: r.badge,
        score: r.score,
        notes: r.notes.clone(),
    }
}

/// The keys as a careful hand-written baseline would build them.
fn hand_written_keys(department: &str, employee: u32, year: u16) -> (String, String) {
    use std::fmt::Write;
    let mut rk = String::with_capacity(20);
    let _ = write!(rk, "REV_{employee:010}_{year:05}");
    (department.to_owned(), rk)
}

fn benches(c: &mut Criterion) {
    let r = review();
    let p = plain(&r);
    assert_eq!(
        hand_written_keys("Sales", 123, 2021).1,
        schema::row_key_of(&r).unwrap()
    );

    let mut g = c.benchmark_group("keys");
    g.bench_function("derived", |b| {
        b.iter(|| {
            let r = black_box(&r);
            (
                schema::partition_key_of(r).unwrap(),
                schema::row_key_of(r).unwrap(),
            )
        })
    });
    g.bench_function("hand_written", |b| {
        b.iter(|| {
            let r = black_box(&r);
            hand_written_keys(&r.department, r.employee, r.year)
        })
    });
    g.finish();

    let text = json::to_string(&schema::to_entity(&r).unwrap());
    let plain_text = serde_json::to_string(&p).unwrap();
    let mut g = c.benchmark_group("to_json");
    assert_eq!(
        schema::to_json(&r).unwrap(),
        text,
        "one document either way"
    );
    g.bench_function("derived", |b| {
        b.iter(|| schema::to_json(black_box(&r)).unwrap())
    });
    g.bench_function("via_entity", |b| {
        b.iter(|| json::to_string(&schema::to_entity(black_box(&r)).unwrap()))
    });
    g.bench_function("serde_json", |b| {
        b.iter(|| serde_json::to_string(black_box(&p)).unwrap())
    });
    let tp = typed_plain(&r);
    g.bench_function("serde_json_typed", |b| {
        b.iter(|| serde_json::to_string(black_box(&tp)).unwrap())
    });
    g.finish();

    let same = serde_json::from_str::<SameDocument>(&text)
        .expect("the plain struct reads tablekit's document");
    assert_eq!(
        serde_json::to_string(&same).unwrap(),
        text,
        "both write the same bytes"
    );
    let mut g = c.benchmark_group("same_document");
    g.bench_function("write_serde_json", |b| {
        b.iter(|| serde_json::to_string(black_box(&same)).unwrap())
    });
    g.bench_function("read_serde_json", |b| {
        b.iter(|| serde_json::from_str::<SameDocument>(black_box(&text)).unwrap())
    });
    assert!(read_same_document(&text).is_some());
    g.bench_function("read_typed_serde_json", |b| {
        b.iter(|| read_same_document(black_box(&text)).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("from_json");
    assert!(schema::from_json::<Review>(&text).is_ok());
    g.bench_function("derived", |b| {
        b.iter(|| schema::from_json::<Review>(black_box(&text)).unwrap())
    });
    g.bench_function("via_entity", |b| {
        b.iter(|| {
            schema::from_entity_owned::<Review>(json::from_str(black_box(&text)).unwrap()).unwrap()
        })
    });
    g.bench_function("serde_json", |b| {
        b.iter(|| serde_json::from_str::<PlainReview>(black_box(&plain_text)).unwrap())
    });
    let typed_text = serde_json::to_string(&tp).unwrap();
    g.bench_function("serde_json_typed", |b| {
        b.iter(|| serde_json::from_str::<TypedPlainReview>(black_box(&typed_text)).unwrap())
    });
    g.finish();

    let entity = schema::to_entity(&r).unwrap();
    let mut g = c.benchmark_group("wire_json");
    g.bench_function("write", |b| b.iter(|| json::to_string(black_box(&entity))));
    g.bench_function("read", |b| {
        b.iter(|| json::from_str(black_box(&text)).unwrap())
    });
    // What the bulk writer pays to size a batch operation.
    g.bench_function("encoded_len", |b| {
        b.iter(|| json::encoded_len(black_box(&entity)))
    });
    g.bench_function("encoded_len_bound", |b| {
        b.iter(|| json::encoded_len_bound(black_box(&entity)))
    });
    g.finish();

    // The property map beside serde's own map of a value (`serde_json::Value`).
    let tree = serde_json::to_value(&p).unwrap();
    let mut g = c.benchmark_group("property_map");
    g.bench_function("to_entity", |b| {
        b.iter(|| schema::to_entity(black_box(&r)).unwrap())
    });
    g.bench_function("to_value_serde_json", |b| {
        b.iter(|| serde_json::to_value(black_box(&p)).unwrap())
    });
    g.bench_function("from_entity", |b| {
        b.iter(|| schema::from_entity::<Review>(black_box(&entity)).unwrap())
    });
    g.bench_function("from_value_serde_json", |b| {
        b.iter(|| serde_json::from_value::<PlainReview>(black_box(&tree).clone()).unwrap())
    });
    g.bench_function("from_entity_owned", |b| {
        b.iter_batched(
            || entity.clone(),
            |e| schema::from_entity_owned::<Review>(e).unwrap(),
            criterion::BatchSize::SmallInput,
        )
    });
    g.bench_function("from_value_serde_json_owned", |b| {
        b.iter_batched(
            || tree.clone(),
            |t| serde_json::from_value::<PlainReview>(t).unwrap(),
            criterion::BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = derive;
    config = Criterion::default().sample_size(40).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(derive);
