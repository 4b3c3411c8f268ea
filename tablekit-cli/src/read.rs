//! The commands that read a store and print what they read: `tables`,
//! `get` and `query`. Their output is stable (the same rows print the
//! same, in the order the store returns them) and pipes cleanly: no colour and no progress, on a
//! terminal or not. `--format json` (the default) prints one row per line
//! in the store's wire JSON with its type annotations, the lines `export`
//! writes and `import` reads; `table` aligns columns for people; `csv`
//! quotes as RFC 4180 does.

use std::io::Write;

use clap::{Arg, ArgMatches, Command};
use tablekit::backend::{GetOptions, ListTablesOptions, Query};
use tablekit::{Entity, Error, TableBackend};

use crate::{CliError, failed, filter_of, open};

/// How rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Table,
    Csv,
}

fn from_arg() -> Arg {
    Arg::new("from")
        .long("from")
        .required(true)
        .help("the store's connection string")
}

fn table_arg() -> Arg {
    Arg::new("table")
        .long("table")
        .required(true)
        .help("the table to read")
}

fn format_arg() -> Arg {
    Arg::new("format")
        .long("format")
        .value_parser(["json", "table", "csv"])
        .default_value("json")
        .help("json: a row per line, as `export` writes them; table: aligned columns; csv")
}

pub(crate) fn tables_command() -> Command {
    Command::new("tables")
        .about("Lists the tables of a store, one name per line")
        .arg(from_arg())
        .arg(
            Arg::new("prefix")
                .long("prefix")
                .help("only the tables whose names start with this"),
        )
}

pub(crate) fn get_command() -> Command {
    Command::new("get")
        .about("Prints one row, by its PartitionKey and RowKey")
        .arg(from_arg())
        .arg(table_arg())
        .arg(
            Arg::new("pk")
                .long("pk")
                .required(true)
                .help("the PartitionKey"),
        )
        .arg(Arg::new("rk").long("rk").required(true).help("the RowKey"))
        .arg(format_arg())
}

pub(crate) fn query_command() -> Command {
    Command::new("query")
        .about("Prints the rows of a table a filter matches")
        .arg(from_arg())
        .arg(table_arg())
        .arg(
            Arg::new("filter")
                .long("filter")
                .help("only the rows this filter matches (the service's syntax: \"Price gt 10\")"),
        )
        .arg(
            Arg::new("select")
                .long("select")
                .value_delimiter(',')
                .help("only these properties (and the keys): --select Name,Price"),
        )
        .arg(
            Arg::new("top")
                .long("top")
                .value_parser(clap::value_parser!(u64).range(1..))
                .help("at most this many rows"),
        )
        .arg(format_arg())
}

fn format_of(m: &ArgMatches) -> Format {
    match m.get_one::<String>("format").map(String::as_str) {
        Some("table") => Format::Table,
        Some("csv") => Format::Csv,
        _ => Format::Json,
    }
}

/// A store's error, naming the store (its host and port, or its directory).
pub(crate) fn at_store(location: &impl std::fmt::Display, error: Error) -> CliError {
    failed(format!("{location}: {error}"))
}

pub(crate) async fn tables(m: &ArgMatches) -> Result<(), CliError> {
    let from = open(m, "from")?;
    let mut options = ListTablesOptions::default();
    options.prefix = m.get_one::<String>("prefix").cloned();
    let mut out = std::io::stdout().lock();
    loop {
        let page =
            (from.tables.list_tables(&options).await).map_err(|e| at_store(from.location(), e))?;
        for table in &page.tables {
            writeln!(out, "{table}").map_err(output)?;
        }
        match page.continuation {
            Some(next) => options.continuation = Some(next),
            None => return Ok(()),
        }
    }
}

pub(crate) async fn get(m: &ArgMatches) -> Result<(), CliError> {
    let from = open(m, "from")?;
    let arg = |name: &str| m.get_one::<String>(name).cloned().unwrap_or_default();
    let (table, pk, rk) = (arg("table"), arg("pk"), arg("rk"));
    let read = from
        .tables
        .get_entity(&table, &pk, &rk, &GetOptions::default())
        .await;
    match read {
        Ok(row) => print(&[row], format_of(m)),
        Err(Error::EntityNotFound { .. }) => Err(failed(format!(
            "{}: table {table} holds no row with PartitionKey {pk:?} and RowKey {rk:?}",
            from.location()
        ))),
        Err(e) => Err(at_store(from.location(), e)),
    }
}

pub(crate) async fn query(m: &ArgMatches) -> Result<(), CliError> {
    let from = open(m, "from")?;
    let table = m.get_one::<String>("table").cloned().unwrap_or_default();
    let top = m.get_one::<u64>("top").copied();
    let mut query = Query::new();
    query.filter = filter_of(m)?;
    query.select = m
        .get_many::<String>("select")
        .map(|names| names.map(|n| n.trim().to_owned()).collect());
    let format = format_of(m);
    let mut rows = Vec::new();
    // JSON lines go out page by page; a table or csv needs every row's
    // columns first.
    let streamed = format == Format::Json;
    read_pages(&*from.tables, &table, query, top, &mut |page| {
        if streamed {
            print(&page, format)
        } else {
            rows.extend(page);
            Ok(())
        }
    })
    .await?
    .map_err(|e| at_store(from.location(), e))?;
    match streamed {
        true => Ok(()),
        false => print(&rows, format),
    }
}

/// Hands each page of `query` to `each`, at most `top` rows in all; the
/// store's error, or `each`'s.
pub(crate) async fn read_pages(
    backend: &dyn TableBackend,
    table: &str,
    mut query: Query,
    top: Option<u64>,
    each: &mut dyn FnMut(Vec<Entity>) -> Result<(), CliError>,
) -> Result<Result<(), Error>, CliError> {
    let mut left = top.map_or(usize::MAX, |t| usize::try_from(t).unwrap_or(usize::MAX));
    loop {
        let page = match backend.query_entities(table, &query).await {
            Ok(page) => page,
            Err(e) => return Ok(Err(e)),
        };
        let next = page.continuation.clone();
        let mut rows = Vec::new();
        for row in page.into_rows().take(left) {
            match row {
                Ok(row) => rows.push(row),
                Err(e) => return Ok(Err(e)),
            }
        }
        left -= rows.len();
        each(rows)?;
        match next {
            Some(next) if left > 0 => query.continuation = Some(next),
            _ => return Ok(Ok(())),
        }
    }
}

fn output(e: std::io::Error) -> CliError {
    failed(format!("standard output: {e}"))
}

/// Prints `rows` to standard output in `format`.
fn print(rows: &[Entity], format: Format) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            let mut line = Vec::new();
            for row in rows {
                line.clear();
                tablekit::json::write(row, &mut line);
                line.push(b'\n');
                out.write_all(&line).map_err(output)?;
            }
        }
        Format::Table | Format::Csv => {
            let (columns, cells) = grid(rows);
            let text = match format {
                Format::Csv => csv(&columns, &cells),
                _ => aligned(&columns, &cells),
            };
            out.write_all(text.as_bytes()).map_err(output)?;
        }
    }
    out.flush().map_err(output)
}

/// The columns (the keys and Timestamp, then each property in the order
/// first met) and each row's cells, as text.
fn grid(rows: &[Entity]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut columns: Vec<String> = ["PartitionKey", "RowKey", "Timestamp"]
        .map(String::from)
        .to_vec();
    for row in rows {
        for (name, _) in row.properties.entries() {
            if !columns.iter().any(|c| c.as_str() == name.as_ref()) {
                columns.push(name.to_string());
            }
        }
    }
    let cells = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|column| match column.as_str() {
                    "PartitionKey" => row.partition_key.clone(),
                    "RowKey" => row.row_key.clone(),
                    "Timestamp" => row.timestamp.map(|t| t.to_string()).unwrap_or_default(),
                    name => row.get(name).map(text).unwrap_or_default(),
                })
                .collect()
        })
        .collect();
    (columns, cells)
}

/// A value as text: as in its JSON, without the quotes of a string.
fn text(value: &tablekit::Value) -> String {
    match tablekit::json::value_to_json(value).0 {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }
}

/// A cell as a table shows it: control characters (a line break, a tab)
/// escaped, so each row stays one line.
fn shown(cell: &str) -> String {
    let mut shown = String::with_capacity(cell.len());
    for c in cell.chars() {
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    shown
}

fn aligned(columns: &[String], cells: &[Vec<String>]) -> String {
    let shown_cells: Vec<Vec<String>> = cells
        .iter()
        .map(|row| row.iter().map(|c| shown(c)).collect())
        .collect();
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            shown_cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([columns[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |row: &[String]| -> String {
        let padded: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut text = line(columns);
    for row in &shown_cells {
        text.push_str(&line(row));
    }
    text
}

fn csv(columns: &[String], cells: &[Vec<String>]) -> String {
    let field = |cell: &String| -> String {
        if cell.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", cell.replace('"', "\"\""))
        } else {
            cell.clone()
        }
    };
    let line = |row: &[String]| -> String {
        let fields: Vec<String> = row.iter().map(field).collect();
        format!("{}\r\n", fields.join(","))
    };
    let mut text = line(columns);
    for row in cells {
        text.push_str(&line(row));
    }
    text
}
