//! What tablekit writes, another SDK reads as written, and the other way
//! round: the Azure SDK for Python (`other_sdk/check.py`) against the same
//! Azurite, for table rows of every EDM type and awkward keys, queue
//! messages and blobs. And tablekit's own filters and projections on the
//! names outside ASCII those rows hold.
//!
//! The tests' other checks read tablekit's writes back through tablekit,
//! where a mistake made the same way on both paths cannot show (a value
//! sent as the wrong EDM type and read back by the same rule, say). Here
//! the reader is not ours.
//!
//! The SDK is installed with pip into `target/python-sdk-…` on first use,
//! like Azurite with npm. If Python or the SDK cannot be had, the tests
//! fail with the reason: they never skip.

mod azurite;
mod python_sdk;

use python_sdk::workspace;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine;
use serde_json::{Value as Json, json};
use tablekit::queue::{PutMessageOptions, QueueStore};
use tablekit::{
    BlobStore, DateTime, Entity, GetOptions, PutCondition, Query, TableBackend, TableBackendExt,
    Value,
};
use tablekit_azure::{AzureBlobs, AzureQueues, AzureTables};

/// The SDK's packages, pinned: the directory they go into is named for them,
/// so a change here installs afresh.
const PACKAGES: [&str; 3] = [
    "azure-data-tables==12.7.0",
    "azure-storage-queue==12.18.1",
    "azure-storage-blob==12.31.1",
];

/// The directory the SDK is installed in (for `PYTHONPATH`), installed on
/// first use.
fn python_sdk() -> &'static Path {
    static SDK: OnceLock<PathBuf> = OnceLock::new();
    SDK.get_or_init(|| python_sdk::install(&PACKAGES, "azure/data/tables"))
}

/// Runs `check.py <mode> <what> <name>` on `spec`; panics with what it
/// printed unless it found everything as the spec says.
fn python(mode: &str, what: &str, name: &str, spec: &Json) {
    let sdk = python_sdk();
    let a = azurite::azurite();
    let file = std::env::temp_dir().join(format!(
        "tablekit-other-sdk-{}-{what}-{name}.json",
        std::process::id()
    ));
    std::fs::write(&file, spec.to_string()).expect("write the spec");
    let endpoint = |port: u16| format!("http://{}:{port}/devstoreaccount1", a.host);
    let output = Command::new("python3")
        .arg(workspace().join("tablekit-azure/tests/other_sdk/check.py"))
        .args([mode, what, name])
        .env("PYTHONPATH", sdk)
        .env("SPEC", &file)
        .env("TABLE_ENDPOINT", endpoint(a.table_port))
        .env("QUEUE_ENDPOINT", endpoint(a.queue_port))
        .env("BLOB_ENDPOINT", endpoint(a.blob_port))
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}"));
    let _ = std::fs::remove_file(&file);
    assert!(
        output.status.success(),
        "the Python SDK, {mode} {what} {name}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A value as `[EDM type, text]`, the form both sides compare: a Double by
/// its bits, a DateTime with its seven digits.
fn canonical(value: &Value) -> Json {
    let base64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    match value {
        Value::String(s) => json!(["String", s]),
        Value::Int32(i) => json!(["Int32", i.to_string()]),
        Value::Int64(i) => json!(["Int64", i.to_string()]),
        Value::Double(d) if d.is_nan() => json!(["Double", "NaN"]),
        Value::Double(d) => json!(["Double", format!("{:016x}", d.to_bits())]),
        Value::Boolean(b) => json!(["Boolean", b.to_string()]),
        Value::DateTime(d) => json!(["DateTime", d.to_string_7()]),
        Value::Guid(g) => json!(["Guid", g.hyphenated().to_string()]),
        Value::Binary(b) => json!(["Binary", base64(b)]),
    }
}

fn double(d: f64) -> Value {
    Value::Double(d)
}

fn datetime(text: &str) -> Value {
    Value::DateTime(DateTime::parse(text).expect("a DateTime"))
}

/// The rows both SDKs write and read: keys that need quoting or escaping in
/// a URL or a filter, names outside ASCII, and every EDM type at its edges.
fn rows() -> Vec<Entity> {
    let keys = [
        ("plain", "1"),
        ("quote'd", "it''s"),
        ("dq\"x", "a\"b"),
        ("per%cent+plus", "sp ace&amp=q"),
        ("uni\u{e9}\u{4e2d}", "\u{1f600}emoji"),
        ("", ""),
        ("x", ""),
        ("~!@$^*()_-[]{};:,.<>|`", "colon:semicolon;"),
        ("nb\u{a0}sp", "\u{2028}ls"),
    ];
    let mut rows: Vec<Entity> = keys
        .iter()
        .enumerate()
        .map(|(i, (pk, rk))| Entity::new(*pk, *rk).with("N", i as i32))
        .collect();
    let guid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    rows.push(
        Entity::new("types", "edges")
            .with("I32Min", i32::MIN)
            .with("I32Max", i32::MAX)
            .with("I64Min", i64::MIN)
            .with("I64Max", i64::MAX)
            .with("I64Small", 5i64)
            .with("D1", double(0.1))
            .with("DHuge", double(1e308))
            .with("DTiny", double(5e-324))
            .with("DWhole", double(3.0))
            .with("DMax", double(f64::MAX))
            .with("DMinPositive", double(f64::MIN_POSITIVE))
            .with("DPi", double(std::f64::consts::PI))
            .with("DInf", double(f64::INFINITY))
            .with("DNegInf", double(f64::NEG_INFINITY))
            .with("DNaN", double(f64::NAN))
            .with("True", true)
            .with("False", false)
            .with("DtMin", datetime("1601-01-01T00:00:00.0000000Z"))
            .with("DtMax", datetime("9999-12-31T23:59:59.9999999Z"))
            .with("DtTicks", datetime("2026-11-28T06:17:53.1234567Z"))
            .with("DtWhole", datetime("2026-11-28T06:17:53Z"))
            .with("DtMicros", datetime("2026-11-28T06:17:53.123456Z"))
            .with("Guid", Value::Guid(guid.parse().expect("a GUID")))
            .with("GuidZero", Value::Guid(tablekit::uuid::Uuid::nil()))
            .with("Bytes", Value::Binary(vec![0, 1, 2, 255, 0, 254]))
            .with("NoBytes", Value::Binary(Vec::new()))
            .with("Empty", "")
            .with(
                "Awkward",
                "line\nbreak\ttab\r\u{0}nul\u{7f}\u{1f600}\u{fffd}\\back\"q'",
            )
            .with("LooksLikeDate", "2026-11-28T06:17:53Z")
            .with("LooksLikeNumber", "12345")
            .with("LooksLikeGuid", guid)
            .with("LooksLikeBool", "true")
            .with("OData", "@odata.type")
            .with("Gr\u{f6}\u{df}e", "a name outside ASCII")
            .with("\u{540d}\u{524d}", 7i64)
            .with("Longest", "\u{1f600}".repeat(16_000)),
    );
    let mut wide = Entity::new("types", "wide");
    for i in 0..252 {
        wide = wide.with(format!("P{i:03}"), i);
    }
    rows.push(wide);
    rows
}

fn spec_rows(rows: &[Entity]) -> Json {
    rows.iter()
        .map(|e| {
            let props: serde_json::Map<String, Json> = e
                .properties
                .iter()
                .map(|(name, value)| (name.to_string(), canonical(value)))
                .collect();
            json!({"pk": e.partition_key, "rk": e.row_key, "props": props})
        })
        .collect()
}

/// The rows of `table` read through tablekit, by key and by a query, are
/// `rows` exactly.
async fn assert_reads(backend: &AzureTables, table: &str, rows: &[Entity]) {
    let listed = backend
        .query_all(table, Query::new())
        .await
        .expect("query the table");
    assert_eq!(listed.len(), rows.len(), "every row listed");
    for want in rows {
        let got = backend
            .get_entity(
                table,
                &want.partition_key,
                &want.row_key,
                &GetOptions::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("get {:?}/{:?}: {e}", want.partition_key, want.row_key));
        let in_list = listed
            .iter()
            .find(|e| e.partition_key == want.partition_key && e.row_key == want.row_key)
            .unwrap_or_else(|| panic!("{:?}/{:?} listed", want.partition_key, want.row_key));
        for read in [&got, in_list] {
            let have = spec_rows(std::slice::from_ref(read));
            let wanted = spec_rows(std::slice::from_ref(want));
            assert_eq!(have, wanted, "{:?}/{:?}", want.partition_key, want.row_key);
        }
    }
}

#[tokio::test]
async fn rows_tablekit_writes_read_the_same_in_python() {
    let backend = AzureTables::new(azurite::account()).expect("a client");
    let table = "FromTablekit";
    backend.create_table(table).await.expect("create the table");
    let rows = rows();
    for row in &rows {
        backend
            .insert_entity(table, row)
            .await
            .unwrap_or_else(|e| panic!("insert {:?}/{:?}: {e}", row.partition_key, row.row_key));
    }
    assert_reads(&backend, table, &rows).await;
    python(
        "read",
        "tables",
        table,
        &json!({ "rows": spec_rows(&rows) }),
    );
}

/// Names outside ASCII in a filter and a projection reach the service
/// (percent-encoded UTF-8 in the URL) as the names the rows hold.
#[tokio::test]
async fn names_outside_ascii_filter_and_select() {
    let backend = AzureTables::new(azurite::account()).expect("a client");
    let table = "NamesOutsideAscii";
    backend.create_table(table).await.expect("create the table");
    for row in rows() {
        backend.insert_entity(table, &row).await.expect("insert");
    }
    let query = Query::new()
        .filter(tablekit::filter::prop("\u{540d}\u{524d}").eq(7i64))
        .select(["Gr\u{f6}\u{df}e"]);
    let got = backend.query_all(table, query).await.expect("query");
    assert_eq!(got.len(), 1, "the one row of that value");
    let names: Vec<&str> = got[0].properties.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["Gr\u{f6}\u{df}e"]);
    let got = backend
        .get_entity(
            table,
            "types",
            "edges",
            &GetOptions::default().select(["\u{540d}\u{524d}"]),
        )
        .await
        .expect("get");
    assert_eq!(got.get("\u{540d}\u{524d}"), Some(&Value::Int64(7)));
    assert_eq!(got.properties.len(), 1);
}

#[tokio::test]
async fn rows_python_writes_read_the_same_in_tablekit() {
    let backend = AzureTables::new(azurite::account()).expect("a client");
    let table = "FromPython";
    let rows = rows();
    python(
        "write",
        "tables",
        table,
        &json!({ "rows": spec_rows(&rows) }),
    );
    assert_reads(&backend, table, &rows).await;
}

fn messages() -> Vec<String> {
    [
        "plain",
        "a & b < c > d \"q\" 'a'",
        "line\nbreak\r\ncrlf\ttab\rcr",
        "\u{e9}\u{4e2d}\u{1f600}",
        "<xml>&amp;</xml>",
        "   spaced   ",
        "",
        "]]>",
        "\u{fffd}",
        "aGVsbG8=",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "x".repeat(tablekit::queue::MAX_MESSAGE_BYTES),
        "\u{e9}".repeat(tablekit::queue::MAX_MESSAGE_BYTES / 2),
    ])
    .collect()
}

#[tokio::test]
async fn messages_cross_between_the_sdks_unchanged() {
    let queues = AzureQueues::new(azurite::account()).expect("a client");
    let spec = json!({ "messages": messages() });
    queues.create_queue("from-tablekit").await.expect("a queue");
    for text in messages() {
        queues
            .put_message("from-tablekit", &text, &PutMessageOptions::default())
            .await
            .unwrap_or_else(|e| panic!("put {:.40?}: {e}", text));
    }
    python("read", "queue", "from-tablekit", &spec);

    // Python's SDK sends a message's text as it is, and Azurite may store a
    // character split between two reads of a body past 64 KiB as
    // replacement characters (Azure/Azurite#2670): the text outside ASCII
    // that long goes only from tablekit, whose bodies to the emulator are
    // ASCII.
    let from_python: Vec<String> = messages()
        .into_iter()
        .filter(|text| text.is_ascii() || text.len() < 32 * 1024)
        .collect();
    python(
        "write",
        "queue",
        "from-python",
        &json!({ "messages": from_python }),
    );
    let mut got = Vec::new();
    loop {
        let batch = queues
            .get_messages("from-python", 32, std::time::Duration::from_secs(300))
            .await
            .expect("get messages");
        if batch.is_empty() {
            break;
        }
        got.extend(batch.into_iter().map(|m| m.text));
    }
    let mut want = from_python;
    got.sort();
    want.sort();
    assert_eq!(got, want, "the messages Python put");
}

/// A blob's bytes, as `check.py` makes them from the same length and seed.
fn blob_bytes(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 31 + seed) % 251) as u8).collect()
}

fn blobs() -> Vec<(String, usize, usize)> {
    vec![
        ("plain".into(), 5, 1),
        ("dir/sub/x.bin".into(), 256, 2),
        ("sp ace & plus+%25".into(), 0, 3),
        ("\u{e9}\u{1f600}".into(), 3 << 20, 4),
        ("q'uote\"d".into(), 1, 5),
    ]
}

#[tokio::test]
async fn blobs_cross_between_the_sdks_unchanged() {
    let store = AzureBlobs::new(azurite::account()).expect("a client");
    let spec = json!({
        "blobs": blobs()
            .iter()
            .map(|(name, len, seed)| json!({"name": name, "len": len, "seed": seed}))
            .collect::<Vec<_>>()
    });
    store
        .create_container("from-tablekit")
        .await
        .expect("a container");
    for (name, len, seed) in blobs() {
        store
            .put_blob(
                "from-tablekit",
                &name,
                blob_bytes(len, seed),
                &PutCondition::None,
            )
            .await
            .unwrap_or_else(|e| panic!("put {name:?}: {e}"));
    }
    python("read", "blobs", "from-tablekit", &spec);

    // Python puts the 3 MiB blob in blocks: the Blob service keeps no MD5
    // for it, and tablekit still reads it (checking its length).
    python("write", "blobs", "from-python", &spec);
    for (name, len, seed) in blobs() {
        let blob = store
            .get_blob("from-python", &name)
            .await
            .unwrap_or_else(|e| panic!("get {name:?}: {e}"));
        assert!(blob.data == blob_bytes(len, seed), "{name:?}: other bytes");
    }
}
