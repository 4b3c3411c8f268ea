//! `tablekit infer` on tables another client wrote (rows put raw, as
//! another SDK puts them), in three layouts: one kind with optional fields
//! of every EDM type, kinds told apart by an `EntityType` property, and
//! kinds told apart by RowKey prefixes with zero-padded compound keys. The
//! source is stable, names what it saw, reports a property of two types,
//! and compiles in a crate of its own, whose types read every row back
//! exactly as stored.

mod program;
use program::run;

#[path = "../../tablekit-azure/tests/azurite/mod.rs"]
mod azurite;
#[path = "../../tablekit-azure/tests/python_sdk/mod.rs"]
mod python_sdk;

use std::path::{Path, PathBuf};
use std::process::Command;

use tablekit::{DateTime, Entity, TableBackend, TableBackendExt, Value};
use tablekit_local::LocalStorage;

/// Customers: one kind; `Phone` and `Photo` only on some rows; a
/// property named as a keyword; keys of free text.
fn customers() -> Vec<Entity> {
    let at = DateTime::parse("2026-11-29T10:00:00.1234567Z").expect("a time");
    let id = tablekit::uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
    let row = |pk: &str, rk: &str, n: i32| {
        Entity::new(pk, rk)
            .with("FirstName", format!("name {n}"))
            .with("Age", n)
            .with("Balance", f64::from(n) * 1.5)
            .with("Points", i64::from(n) << 40)
            .with("Active", n % 2 == 0)
            .with("Joined", at)
            .with("ExternalId", id)
            .with("type", "retail")
    };
    vec![
        row("Oslo", "ada lovelace", 1).with("Phone", "+47 1"),
        row("Oslo", "bob", 2).with("Photo", Value::Binary(vec![0, 1, 255])),
        row("Zürich \u{202e}", "carol (c)", 3)
            .with("Phone", "+41 3")
            .with("Note", 7i32),
        row("Zürich \u{202e}", "dan", 4).with("Note", "seven"),
    ]
}

/// A ledger: kinds by `EntityType`, with properties of their own.
fn ledger() -> Vec<Entity> {
    vec![
        Entity::new("acct", "1")
            .with("EntityType", "Invoice")
            .with("Amount", 10.0)
            .with("DueDays", 30i32),
        Entity::new("acct", "2")
            .with("EntityType", "Payment")
            .with("Amount", 12.5)
            .with("Method", "card"),
        Entity::new("acct", "3")
            .with("EntityType", "Invoice")
            .with("Amount", 7.0)
            .with("DueDays", 14i32),
    ]
}

/// Employees and reviews: kinds by RowKey prefix, zero-padded numbers.
fn seeds() -> Vec<Entity> {
    vec![
        Entity::new("000007", "empid_000223").with("Name", "Jones"),
        Entity::new("000007", "empid_000224").with("Name", "Smith"),
        Entity::new("000007", "review_000223_2012").with("Rating", 4i32),
        Entity::new("000008", "review_000224_2013").with("Rating", 5i32),
    ]
}

/// Events, newest first: RowKeys are inverted timestamps.
fn events() -> Vec<Entity> {
    use tablekit::key::{InvertedTime, encode};
    (0..3)
        .map(|i| {
            let at = DateTime::parse(&format!("2026-11-2{i}T08:00:00Z")).expect("a time");
            Entity::new("device-1", encode(&InvertedTime(at))).with("Reading", f64::from(i))
        })
        .collect()
}

/// An employee directory: one kind keyed by id, one by email (text after
/// the prefix, kept verbatim in a template).
fn directory() -> Vec<Entity> {
    vec![
        Entity::new("sales", "email_jones.j@contoso.com").with("Id", 223i32),
        Entity::new("sales", "email_o'brien@contoso.com").with("Id", 224i32),
        Entity::new("sales", "empid_000223").with("Email", "jones.j@contoso.com"),
        Entity::new("sales", "empid_000224").with("Email", "o'brien@contoso.com"),
    ]
}

/// A table's name, and the rows another client put there.
type Table = (&'static str, fn() -> Vec<Entity>);

const TABLES: [Table; 5] = [
    ("Customers", customers),
    ("Ledger", ledger),
    ("Seeds", seeds),
    ("Events", events),
    ("Directory", directory),
];

async fn store(path: &Path) {
    let store = LocalStorage::open(path).expect("a store");
    for (table, rows) in TABLES {
        store.create_table(table).await.expect("a table");
        for row in rows() {
            store.insert_entity(table, &row).await.expect("insert");
        }
    }
}

/// The generated source for `table`, run twice: the same bytes.
fn inferred(from: &str, table: &str) -> (String, String) {
    let (code, out, err) = run(&["infer", "--from", from, "--table", table]);
    assert_eq!(code, Some(0), "{err}");
    let (_, again, _) = run(&["infer", "--from", from, "--table", table]);
    assert_eq!(out, again, "the same table gives the same source");
    (out, err)
}

#[tokio::test]
async fn inferred_types_compile_and_read_every_row_back() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let from = format!("UseLocalStorage={}", path.display());

    let (customers, warnings) = inferred(&from, "Customers");
    for line in [
        "pub struct Customer {",
        "#[tablekit(table = \"Customers\", rename_all = \"PascalCase\")]",
        "    #[tablekit(partition_key)]\n    pub partition_key: tablekit::key::Verbatim,",
        "    /// \"FirstName\" (Edm.String).\n    pub first_name: String,",
        "    pub age: i32,",
        "    pub balance: f64,",
        "    pub points: i64,",
        "    pub active: bool,",
        "    pub joined: tablekit::DateTime,",
        "    pub external_id: tablekit::uuid::Uuid,",
        "    #[tablekit(rename = \"type\")]\n    pub type_: String,",
        "    pub phone: Option<String>,",
        "    pub photo: Option<Vec<u8>>,",
        "/// - \"Phone\": Edm.String, 2 of 4",
        "/// - \"Note\": Edm.Int32 in 1, Edm.String in 1, 2 of 4",
        // The right-to-left mark is escaped, never written raw.
        "PartitionKey \"Oslo\"",
    ] {
        assert!(customers.contains(line), "{line:?} in:\n{customers}");
    }
    assert!(!customers.contains('\u{202e}'), "{customers}");
    assert!(!customers.contains("pub note"), "{customers}");
    assert!(
        warnings.contains("property \"Note\" is Edm.Int32 in 1, Edm.String in 1"),
        "{warnings}"
    );

    let (ledger, _) = inferred(&from, "Ledger");
    for line in [
        "discriminator(property = \"EntityType\", value = \"Invoice\")",
        "pub struct Invoice {",
        "pub struct Payment {",
        "    pub due_days: i32,",
        // Numbers of one digit show no padding: kept verbatim.
        "    #[tablekit(row_key)]\n    pub row_key: tablekit::key::Verbatim,",
        "    pub method: String,",
        "pub enum LedgerRow {",
        "    Invoice(Invoice),",
    ] {
        assert!(ledger.contains(line), "{line:?} in:\n{ledger}");
    }
    assert!(!ledger.contains("pub entity_type"), "{ledger}");

    let (seeds, _) = inferred(&from, "Seeds");
    for line in [
        "#[tablekit(table = \"Seeds\", row_key = \"empid_{row_key}\", rename_all = \"PascalCase\")]",
        "#[tablekit(table = \"Seeds\", row_key = \"review_{row_key_1}_{row_key_2}\", rename_all = \"PascalCase\")]",
        "    pub partition_key: tablekit::key::Padded<6>,",
        "    pub row_key_1: tablekit::key::Padded<6>,",
        "    pub row_key_2: tablekit::key::Padded<4>,",
        "pub enum SeedsRow {",
    ] {
        assert!(seeds.contains(line), "{line:?} in:\n{seeds}");
    }

    let (events, _) = inferred(&from, "Events");
    for line in [
        "pub struct Event {",
        "    #[tablekit(row_key)]\n    pub row_key: tablekit::key::InvertedTime,",
    ] {
        assert!(events.contains(line), "{line:?} in:\n{events}");
    }

    let (directory, _) = inferred(&from, "Directory");
    for line in [
        "#[tablekit(table = \"Directory\", row_key = \"email_{row_key}\", rename_all = \"PascalCase\")]",
        "    pub row_key: tablekit::key::Verbatim,",
        "    pub row_key: tablekit::key::Padded<6>,",
    ] {
        assert!(directory.contains(line), "{line:?} in:\n{directory}");
    }

    let rows = |table: fn() -> Vec<Entity>| table().iter().map(tablekit::json::to_string).collect();
    let sources = [
        ("customers", customers, rows(TABLES[0].1)),
        ("ledger", ledger, rows(TABLES[1].1)),
        ("seeds", seeds, rows(TABLES[2].1)),
        ("events", events, rows(TABLES[3].1)),
        ("directory", directory, rows(TABLES[4].1)),
    ];
    compile_and_read_back(dir.path(), &sources);
}

/// The names of the structs `source` declares.
fn structs(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter_map(|line| line.strip_prefix("pub struct "))
        .filter_map(|rest| rest.strip_suffix(" {"))
        .collect()
}

/// Builds a crate holding each source as a module and a program that reads
/// each table's rows (JSON lines, as `tablekit query` prints them) with
/// the generated types: every row is claimed by exactly one type, and
/// written back by it exactly as stored, but for the property left out.
fn compile_and_read_back(dir: &Path, sources: &[(&str, String, Vec<String>)]) {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned();
    let krate = dir.join("inferred");
    std::fs::create_dir_all(krate.join("src")).expect("a crate");
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"inferred\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
             [dependencies]\ntablekit = {{ path = {:?} }}\n\n[workspace]\n",
            workspace.join("tablekit")
        ),
    )
    .expect("a manifest");
    std::fs::copy(workspace.join("Cargo.lock"), krate.join("Cargo.lock")).expect("the lock");
    let mut main = String::from(CHECK);
    let mut expected = String::new();
    for (module, source, rows) in sources {
        std::fs::write(krate.join("src").join(format!("{module}.rs")), source).expect("a module");
        main.push_str(&format!("#[allow(dead_code)]\nmod {module};\n"));
        let lines: String = rows.iter().map(|row| format!("{row}\n")).collect();
        std::fs::write(krate.join(format!("{module}.jsonl")), lines).expect("rows");
        expected.push_str(&format!("{module}: {} rows\n", rows.len()));
        let checks: Vec<String> = (structs(source).iter())
            .map(|t| format!("check::<{module}::{t}>(&rows, &mut claimed)"))
            .collect();
        main.push_str(&format!(
            "fn read_{module}() {{\n    let rows = rows(\"{module}.jsonl\");\n    let mut claimed = vec![0; rows.len()];\n    {};\n    assert!(claimed.iter().all(|&n| n == 1), \"{module}: {{claimed:?}}\");\n    println!(\"{module}: {{}} rows\", rows.len());\n}}\n",
            checks.join(";\n    ")
        ));
    }
    main.push_str("fn main() {\n");
    for (module, ..) in sources {
        main.push_str(&format!("    read_{module}();\n"));
    }
    main.push_str("}\n");
    std::fs::write(krate.join("src/main.rs"), main).expect("the program");
    let target = workspace.join("target").join("infer-check");
    let out = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, expected, "{stderr}");
}

/// The generated program's reading and checking.
const CHECK: &str = r#"use tablekit::{Entity, TableEntity};

fn rows(file: &str) -> Vec<Entity> {
    let text = std::fs::read_to_string(file).expect("the rows");
    text.lines().map(|line| tablekit::json::from_str(line).expect("a row")).collect()
}

/// Each row `T` claims reads as `T` and writes back as stored (but for
/// the properties the inference left out).
fn check<T: TableEntity>(rows: &[Entity], claimed: &mut [usize]) {
    for (i, row) in rows.iter().enumerate() {
        if !tablekit::schema::claims::<T>(row) {
            continue;
        }
        claimed[i] += 1;
        let value: T = tablekit::schema::from_entity(row).expect("the row reads");
        let back = tablekit::schema::to_entity(&value).expect("the value writes");
        assert_eq!((&back.partition_key, &back.row_key), (&row.partition_key, &row.row_key));
        let mut written: Vec<_> = back.properties.iter().collect();
        let mut stored: Vec<_> = row.properties.iter().filter(|(n, _)| *n != "Note").collect();
        written.sort_by(|a, b| a.0.cmp(b.0));
        stored.sort_by(|a, b| a.0.cmp(b.0));
        assert_eq!(written, stored, "{}", std::any::type_name::<T>());
    }
}

"#;

/// A missing table fails naming the store and writes no file; `--out`
/// writes the source there; `--kind-property` names the discriminator.
#[tokio::test]
async fn infer_fails_cleanly_and_writes_where_told() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let from = format!("UseLocalStorage={}", path.display());
    let out = dir.path().join("types.rs");
    let out_arg = out.to_str().expect("a path");
    let (code, stdout, err) = run(&[
        "infer", "--from", &from, "--table", "Missing", "--out", out_arg,
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(!out.exists(), "nothing is written for a failed read");

    let (code, stdout, err) = run(&[
        "infer", "--from", &from, "--table", "Ledger", "--out", out_arg,
    ]);
    assert_eq!((code, stdout.as_str()), (Some(0), ""), "{err}");
    let written = std::fs::read_to_string(&out).expect("the source");
    assert!(written.contains("pub enum LedgerRow {"), "{written}");

    // Another property as the discriminator: `Method` is not on every
    // row, so the rows stay one kind.
    let (_, by_method, _) = run(&[
        "infer",
        "--from",
        &from,
        "--table",
        "Ledger",
        "--kind-property",
        "Method",
    ]);
    assert!(by_method.contains("pub struct Ledger {"), "{by_method}");
    assert!(
        by_method.contains("    pub entity_type: String,"),
        "{by_method}"
    );
    // Sampling reads the first rows only.
    let (_, first, _) = run(&[
        "infer", "--from", &from, "--table", "Ledger", "--sample", "1",
    ]);
    assert!(
        first.contains("(1 rows sampled)") || first.contains("1 sampled row"),
        "{first}"
    );
    assert!(!first.contains("pub struct Payment"), "{first}");
}

/// The Azure SDK for Python's packages, pinned as `tablekit-azure`'s tests
/// pin them (so both use one installation).
const PACKAGES: [&str; 3] = [
    "azure-data-tables==12.7.0",
    "azure-storage-queue==12.18.1",
    "azure-storage-blob==12.31.1",
];

/// A value as `[EDM type, text]`, as `check.py` writes it.
fn canonical(value: &Value) -> serde_json::Value {
    use base64::Engine;
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Int32(i) => i.to_string(),
        Value::Int64(i) => i.to_string(),
        Value::Double(d) => format!("{:016x}", d.to_bits()),
        Value::Boolean(b) => b.to_string(),
        Value::DateTime(d) => d.to_string_7(),
        Value::Guid(g) => g.hyphenated().to_string(),
        Value::Binary(b) => base64::engine::general_purpose::STANDARD.encode(b),
    };
    let edm = format!("{:?}", value.edm_type());
    serde_json::json!([edm, text])
}

/// Writes `rows` into a new table `name` with the Python SDK.
fn python_writes(name: &str, rows: &[Entity]) {
    let sdk = python_sdk::install(&PACKAGES, "azure/data/tables");
    let a = azurite::azurite();
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let props: serde_json::Map<String, serde_json::Value> = (row.properties.iter())
                .map(|(name, value)| (name.to_owned(), canonical(value)))
                .collect();
            serde_json::json!({"pk": row.partition_key, "rk": row.row_key, "props": props})
        })
        .collect();
    let spec = std::env::temp_dir().join(format!("tablekit-infer-{name}.json"));
    std::fs::write(&spec, serde_json::json!({ "rows": rows }).to_string()).expect("the spec");
    let endpoint = |port: u16| format!("http://{}:{port}/devstoreaccount1", a.host);
    let output = Command::new("python3")
        .arg(python_sdk::workspace().join("tablekit-azure/tests/other_sdk/check.py"))
        .args(["write", "tables", name])
        .env("PYTHONPATH", sdk)
        .env("SPEC", &spec)
        .env("TABLE_ENDPOINT", endpoint(a.table_port))
        .env("QUEUE_ENDPOINT", endpoint(a.queue_port))
        .env("BLOB_ENDPOINT", endpoint(a.blob_port))
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}"));
    let _ = std::fs::remove_file(&spec);
    assert!(
        output.status.success(),
        "the Python SDK writing {name}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The same layouts written by the Azure SDK for Python into Azurite:
/// `infer` finds the same kinds, and its types compile and read every row
/// the SDK wrote back exactly as stored.
#[test]
fn types_inferred_from_rows_the_python_sdk_wrote_read_them_back() {
    let from = azurite::azurite().connection_string();
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    let mut sources = Vec::new();
    for (table, rows) in TABLES {
        let name = format!("{table}{suffix}");
        python_writes(&name, &rows());
        let (source, _) = inferred(&from, &name);
        let (code, lines, err) = run(&["query", "--from", &from, "--table", &name]);
        assert_eq!(code, Some(0), "{err}");
        let lines: Vec<String> = lines.lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), rows().len());
        sources.push((table.to_lowercase(), source, lines));
    }
    let kinds: Vec<Vec<&str>> = sources.iter().map(|(_, s, _)| structs(s)).collect();
    assert_eq!(
        kinds[1..3],
        [vec!["Invoice", "Payment"], vec!["Empid", "Review"]],
        "the kinds the rows show"
    );
    assert_eq!(kinds[0].len(), 1, "{:?}", kinds[0]);
    assert!(
        sources[0].1.contains("    pub photo: Option<Vec<u8>>,"),
        "{}",
        sources[0].1
    );
    let dir = tempfile::tempdir().expect("a directory");
    let sources: Vec<(&str, String, Vec<String>)> = sources
        .iter()
        .map(|(module, source, lines)| (module.as_str(), source.clone(), lines.clone()))
        .collect();
    compile_and_read_back(dir.path(), &sources);
}
