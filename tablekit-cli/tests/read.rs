//! `tablekit tables`, `get` and `query` on a local store: what they print
//! in each format (exactly), what they refuse and how they say it, and
//! that `query`'s JSON lines are `import`'s input.

mod program;
use program::run;

use tablekit::{DateTime, Entity, TableBackend, TableBackendExt, Value};
use tablekit_local::LocalStorage;

/// The rows of `Orders`: text that needs quoting, numbers, a time, bytes.
fn orders() -> Vec<Entity> {
    let at = DateTime::parse("2026-11-29T10:00:00Z").expect("a time");
    vec![
        Entity::new("p", "r1")
            .with("N", 1i64)
            .with("Note", "plain")
            .with("At", at),
        Entity::new("p", "r2")
            .with("N", 2i64)
            .with("Note", "comma, \"quote\"\nand a line")
            .with("Bytes", Value::Binary(vec![1, 2, 3])),
        Entity::new("q", "r3").with("N", 3i64),
    ]
}

async fn store(path: &std::path::Path) {
    let store = LocalStorage::open(path).expect("a store");
    for table in ["Orders", "Zeta", "Other"] {
        store.create_table(table).await.expect("a table");
    }
    for row in orders() {
        store.insert_entity("Orders", &row).await.expect("insert");
    }
}

#[tokio::test]
async fn tables_get_and_query_print_what_the_store_holds() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let from = format!("UseLocalStorage={}", path.display());

    let (code, out, err) = run(&["tables", "--from", &from]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "Orders\nOther\nZeta\n");
    let (_, out, _) = run(&["tables", "--from", &from, "--prefix", "O"]);
    assert_eq!(out, "Orders\nOther\n");

    // One row, as `export` writes it.
    let (code, out, err) = run(&[
        "get", "--from", &from, "--table", "Orders", "--pk", "p", "--rk", "r2",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        format!("{}\n", tablekit::json::to_string(&orders()[1]))
    );
    let (code, _, err) = run(&[
        "get", "--from", &from, "--table", "Orders", "--pk", "p", "--rk", "nope",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&path.display().to_string()) && err.contains("\"nope\""),
        "{err}"
    );

    // A filter, a projection and a limit.
    let (code, out, err) = run(&[
        "query", "--from", &from, "--table", "Orders", "--filter", "N ge 2", "--select", "N",
        "--top", "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let only = Entity::new("p", "r2").with("N", 2i64);
    assert_eq!(out, format!("{}\n", tablekit::json::to_string(&only)));

    // csv quotes as RFC 4180 does; table keeps each row on one line.
    let (_, csv, _) = run(&[
        "query", "--from", &from, "--table", "Orders", "--select", "N,Note", "--format", "csv",
    ]);
    assert_eq!(
        csv,
        "PartitionKey,RowKey,Timestamp,N,Note\r\n".to_owned()
            + &csv_row("p", "r1", &csv, 1)
            + &csv_row("p", "r2", &csv, 2)
            + &csv_row("q", "r3", &csv, 3)
    );
    assert!(
        csv.contains(",2,\"comma, \"\"quote\"\"\nand a line\"\r\n"),
        "{csv}"
    );
    let (_, table, _) = run(&[
        "query", "--from", &from, "--table", "Orders", "--format", "table",
    ]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[0].starts_with("PartitionKey  RowKey  Timestamp"),
        "{table}"
    );
    assert!(
        lines[2].contains("comma, \"quote\"\\nand a line"),
        "{table}"
    );
    assert!(lines[1].contains("2026-11-29T10:00:00"), "{table}");

    // A mistyped filter, a missing table: a message and exit 1, nothing printed.
    for args in [
        vec![
            "query", "--from", &from, "--table", "Orders", "--filter", "N gt",
        ],
        vec!["query", "--from", &from, "--table", "Missing"],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            out.is_empty() && err.starts_with("error:"),
            "{args:?}: {out}{err}"
        );
    }
}

/// The csv line of the row `(pk, rk)` with `N` = `n`, its Timestamp as
/// printed in `csv` (a time the store gave).
fn csv_row(pk: &str, rk: &str, csv: &str, n: i64) -> String {
    let start = format!("{pk},{rk},");
    let line = csv
        .split("\r\n")
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no line for {pk}/{rk}: {csv}"));
    let stamp = line[start.len()..].split(',').next().expect("a Timestamp");
    let note = match n {
        1 => "plain".to_owned(),
        2 => "\"comma, \"\"quote\"\"\nand a line\"".to_owned(),
        _ => String::new(),
    };
    format!("{start}{stamp},{n},{note}\r\n")
}

#[tokio::test]
async fn query_lines_are_what_import_reads() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let from = format!("UseLocalStorage={}", path.display());
    let (code, out, err) = run(&["query", "--from", &from, "--table", "Orders"]);
    assert_eq!(code, Some(0), "{err}");
    let file = dir.path().join("Orders.jsonl");
    std::fs::write(&file, out).expect("write");
    let to_path = dir.path().join("copy");
    let to = format!("UseLocalStorage={}", to_path.display());
    let (code, _, err) = run(&["import", "--to", &to, "--in", &file.to_string_lossy()]);
    assert_eq!(code, Some(0), "{err}");
    let copy = LocalStorage::open(&to_path).expect("the copy");
    let rows = copy
        .query_all("Orders", tablekit::Query::new())
        .await
        .expect("rows");
    let strip = |rows: Vec<Entity>| -> Vec<_> {
        rows.into_iter()
            .map(|r| (r.partition_key, r.row_key, r.properties))
            .collect()
    };
    assert_eq!(strip(rows), strip(orders()));
}

#[tokio::test]
async fn query_reads_past_a_page_and_stops_at_top() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    {
        let store = LocalStorage::open(&path).expect("a store");
        store.create_table("Big").await.expect("a table");
        let rows: Vec<Entity> = (0..1100)
            .map(|i| Entity::new("p", format!("r{i:04}")).with("N", i64::from(i)))
            .collect();
        for chunk in rows.chunks(100) {
            let ops: Vec<_> = chunk
                .iter()
                .map(|r| tablekit::BatchOperation::Insert(r.clone()))
                .collect();
            store
                .submit_transaction("Big", &ops)
                .await
                .expect("a batch");
        }
    }
    let from = format!("UseLocalStorage={}", path.display());
    let lines = |args: &[&str]| {
        let (code, out, err) = run(args);
        assert_eq!(code, Some(0), "{err}");
        out.lines().count()
    };
    let query = ["query", "--from", from.as_str(), "--table", "Big"];
    assert_eq!(lines(&query), 1100);
    assert_eq!(lines(&[&query[..], &["--top", "1050"]].concat()), 1050);
    assert_eq!(lines(&[&query[..], &["--format", "csv"]].concat()), 1101);
}
