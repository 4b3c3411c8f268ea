//! `tablekit infer`: Rust types for a table that already exists, from a
//! sample of its rows. One `#[derive(TableEntity)]` type per kind the rows
//! show, and an `EntityKinds` enum when there are several.
//!
//! What the rows show decides everything, and nothing is guessed:
//! - **Kinds.** A discriminator property held by every row (`--kind-property`,
//!   else `EntityType`, `Kind` or tablekit's own `_Kind`) splits the rows by
//!   its value; else RowKeys that all start with a word and a separator
//!   (`email_`, `order:`) split them by that prefix; else there is one kind.
//! - **Fields.** Each property's EDM type is its field's type; a property
//!   some rows lack is an `Option`. A property seen with two EDM types is
//!   reported and left out: the type still reads every row, and a replace
//!   keeps the property as a column the type does not know.
//! - **Keys.** Zero-padded numbers of one width (`000123`, compound as
//!   `000123_2012`) become `Padded` parts, 19-digit inverted timestamps
//!   `InvertedTime`, a RowKey prefix a template (`row_key = "empid_{id}"`);
//!   any other key is kept verbatim (`key::Verbatim`), so it reads back
//!   exactly as stored.
//!
//! The output is stable: the same rows give the same source. (Written by
//! hand: no crate infers Rust types from EDM-typed rows.)

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use clap::{Arg, ArgMatches, Command};
use tablekit::backend::Query;
use tablekit::{Entity, Value};

use crate::read::{at_store, read_pages};
use crate::{CliError, failed, open};

pub(crate) fn infer_command() -> Command {
    Command::new("infer")
        .about("Prints Rust types for the rows of a table: a #[derive(TableEntity)] type per kind")
        .arg(
            Arg::new("from")
                .long("from")
                .required(true)
                .help("the store's connection string"),
        )
        .arg(
            Arg::new("table")
                .long("table")
                .required(true)
                .help("the table to read"),
        )
        .arg(
            Arg::new("sample")
                .long("sample")
                .value_parser(clap::value_parser!(u64).range(1..))
                .default_value("1000")
                .help("how many rows to read (the first, in key order)"),
        )
        .arg(
            Arg::new("kind-property")
                .long("kind-property")
                .help("the property that holds each row's kind (else EntityType, Kind or _Kind when every row has it)"),
        )
        .arg(
            Arg::new("out")
                .long("out")
                .help("write the source to this file (else to standard output)"),
        )
}

pub(crate) async fn infer(m: &ArgMatches) -> Result<(), CliError> {
    let from = open(m, "from")?;
    let table = m.get_one::<String>("table").cloned().unwrap_or_default();
    let sample = m.get_one::<u64>("sample").copied();
    let mut rows = Vec::new();
    read_pages(&*from.tables, &table, Query::new(), sample, &mut |page| {
        rows.extend(page);
        Ok(())
    })
    .await?
    .map_err(|e| at_store(from.location(), e))?;
    let kind_property = m.get_one::<String>("kind-property").map(String::as_str);
    let inferred = infer_source(&table, &rows, kind_property);
    for warning in &inferred.warnings {
        eprintln!("warning: {warning}");
    }
    match m.get_one::<String>("out") {
        Some(path) => std::fs::write(path, &inferred.source)
            .map_err(|e| failed(format!("cannot write {path}: {e}"))),
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            (out.write_all(inferred.source.as_bytes()))
                .map_err(|e| failed(format!("cannot write the output: {e}")))
        }
    }
}

/// The properties that hold a kind, tried in this order.
const KIND_PROPERTIES: [&str; 3] = ["EntityType", "Kind", "_Kind"];
/// tablekit's own properties: never fields.
const BOOKKEEPING: [&str; 3] = ["_Kind", "_Version", "_Writes"];
/// The characters that may end a RowKey prefix naming a kind.
const SEPARATORS: [char; 5] = ['_', ':', '|', '-', '.'];

/// Rust source for the rows of `table`, and what the inference could not
/// decide (properties seen with two types), one line each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inferred {
    /// The generated source: it compiles as a module of a crate that
    /// depends on `tablekit`.
    pub source: String,
    /// Each property left out, and why.
    pub warnings: Vec<String>,
}

/// One kind found in the rows.
struct Kind<'a> {
    /// The Rust type's name.
    type_name: String,
    /// How the rows of this kind are told apart.
    marker: Marker,
    rows: Vec<&'a Entity>,
}

/// How a kind's rows are told apart from the others'.
enum Marker {
    /// The only kind.
    None,
    /// By a property's value.
    Property(String, String),
    /// tablekit's own `_Kind`, with its RowKey prefix `<kind>_`.
    Tablekit(String),
    /// By a RowKey prefix.
    Prefix(String),
}

/// What a key's values show.
#[derive(Debug, Clone, PartialEq, Eq)]
enum KeyShape {
    /// Zero-padded numbers, one width per component, joined by `_`.
    Padded(Vec<usize>),
    /// `DateTime::MAX` ticks minus a time, 19 digits.
    Inverted,
    /// Anything else: the text as stored.
    Verbatim,
}

/// Infers the types of the rows of `table` (tablekit's own bookkeeping rows
/// are passed by). `kind_property` names the property that holds each row's
/// kind, if the caller knows it.
pub fn infer_source(table: &str, rows: &[Entity], kind_property: Option<&str>) -> Inferred {
    let mut rows: Vec<&Entity> = rows.iter().filter(|r| !is_bookkeeping_row(r)).collect();
    rows.sort_by(|a, b| (&a.partition_key, &a.row_key).cmp(&(&b.partition_key, &b.row_key)));
    let kinds = kinds_of(table, &rows, kind_property);
    let mut out = String::new();
    let mut warnings = Vec::new();
    let sampled = match rows.len() {
        1 => "1 row sampled".to_owned(),
        n => format!("{n} rows sampled"),
    };
    let _ = writeln!(
        out,
        "//! The rows of table `{table}`, as `tablekit infer` read them ({sampled}).\n"
    );
    for kind in &kinds {
        write_type(&mut out, &mut warnings, table, kind);
    }
    if kinds.len() > 1 {
        let _ = writeln!(
            out,
            "/// A row of table `{table}`, read as the type of its kind."
        );
        let _ = writeln!(
            out,
            "#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]"
        );
        let _ = writeln!(out, "pub enum {}Row {{", pascal_case(table));
        for kind in &kinds {
            let _ = writeln!(out, "    /// A row of kind `{}`.", kind.type_name);
            let _ = writeln!(out, "    {0}({0}),", kind.type_name);
        }
        out.push_str("}\n");
    }
    Inferred {
        source: out,
        warnings,
    }
}

/// Whether `row` is one of tablekit's own (index rows, outbox records,
/// change feeds), which no user type reads.
fn is_bookkeeping_row(row: &Entity) -> bool {
    row.partition_key.starts_with("~tk|") || row.row_key.starts_with("~tk|")
}

/// The kinds of `rows`, in order of their names.
fn kinds_of<'a>(table: &str, rows: &[&'a Entity], kind_property: Option<&str>) -> Vec<Kind<'a>> {
    let single = |rows: Vec<&'a Entity>| {
        vec![Kind {
            type_name: singular(&pascal_case(table)),
            marker: Marker::None,
            rows,
        }]
    };
    if rows.is_empty() {
        return single(Vec::new());
    }
    let candidates: Vec<&str> = match kind_property {
        Some(name) => vec![name],
        None => KIND_PROPERTIES.to_vec(),
    };
    let held_by_all = |name: &str| {
        rows.iter()
            .all(|r| matches!(r.properties.get(name), Some(Value::String(_))))
    };
    if let Some(property) = candidates.into_iter().find(|name| held_by_all(name)) {
        let mut groups: BTreeMap<String, Vec<&Entity>> = BTreeMap::new();
        for row in rows {
            if let Some(Value::String(value)) = row.properties.get(property) {
                groups.entry(value.clone()).or_default().push(row);
            }
        }
        return named(groups, |value, rows| {
            let prefix = format!("{value}_");
            if property == "_Kind" && rows.iter().all(|r| r.row_key.starts_with(&prefix)) {
                Marker::Tablekit(value.to_owned())
            } else {
                Marker::Property(property.to_owned(), value.to_owned())
            }
        });
    }
    let prefixes: Option<BTreeMap<String, Vec<&Entity>>> =
        rows.iter().try_fold(BTreeMap::new(), |mut groups, row| {
            let prefix = kind_prefix(&row.row_key)?;
            groups
                .entry(prefix.to_owned())
                .or_insert_with(Vec::new)
                .push(*row);
            Some(groups)
        });
    match prefixes {
        Some(groups) if (2..=20).contains(&groups.len()) => {
            named(groups, |prefix, _| Marker::Prefix(prefix.to_owned()))
        }
        _ => single(rows.to_vec()),
    }
}

/// Kinds named after the values that mark them (each name once).
fn named<'a>(
    groups: BTreeMap<String, Vec<&'a Entity>>,
    marker: impl Fn(&str, &[&Entity]) -> Marker,
) -> Vec<Kind<'a>> {
    let mut taken = BTreeSet::new();
    groups
        .into_iter()
        .map(|(value, rows)| {
            let mut type_name = pascal_case(&value);
            if type_name.is_empty() || type_name.starts_with(|c: char| c.is_ascii_digit()) {
                type_name = format!("Kind{type_name}");
            }
            let type_name = unique(type_name, &mut taken);
            Kind {
                type_name,
                marker: marker(&value, &rows),
                rows,
            }
        })
        .collect()
}

/// A RowKey's prefix naming a kind: ASCII letters, then a separator.
fn kind_prefix(key: &str) -> Option<&str> {
    let end = key.find(|c: char| !c.is_ascii_alphabetic())?;
    let separator = key[end..].chars().next()?;
    (end > 0 && SEPARATORS.contains(&separator)).then(|| &key[..end + separator.len_utf8()])
}

/// `name`, or `name` with a number after it if that is taken.
fn unique(name: String, taken: &mut BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = format!("{name}{n}");
        n += 1;
    }
    candidate
}

/// What the values of a key show.
fn shape_of<'a>(keys: impl Iterator<Item = &'a str> + Clone) -> KeyShape {
    let mut widths: Option<Vec<usize>> = None;
    for key in keys.clone() {
        let parts: Vec<&str> = key.split('_').collect();
        let numeric = parts.len() <= 4
            && parts
                .iter()
                .all(|p| (1..=19).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        let these: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        match &widths {
            _ if !numeric => return KeyShape::Verbatim,
            None => widths = Some(these),
            Some(w) if *w == these => {}
            Some(_) => return KeyShape::Verbatim,
        }
    }
    // Numbers of one width are zero-padded when some value shows it (a
    // leading zero): `1`, `2`, `3` are numbers a later `10` would follow.
    let padded = keys
        .clone()
        .any(|key| key.split('_').any(|p| p.len() > 1 && p.starts_with('0')));
    match widths {
        None => KeyShape::Verbatim,
        Some(w) if w == [19] && keys.into_iter().all(is_inverted_time) => KeyShape::Inverted,
        Some(w) if padded => KeyShape::Padded(w),
        Some(_) => KeyShape::Verbatim,
    }
}

/// Whether 19 digits read as an inverted timestamp of a plausible time
/// (between the years 1900 and 2300).
fn is_inverted_time(key: &str) -> bool {
    const MAX_TICKS: u64 = 3_155_378_975_999_999_999;
    key.parse::<u64>()
        .ok()
        .and_then(|inverted| MAX_TICKS.checked_sub(inverted))
        .is_some_and(|ticks| (599_000_000_000_000_000..725_500_000_000_000_000).contains(&ticks))
}

/// The Rust type of a key part of `shape`'s component `i`.
fn key_types(shape: &KeyShape) -> Vec<String> {
    match shape {
        KeyShape::Padded(widths) => widths
            .iter()
            .map(|w| format!("tablekit::key::Padded<{w}>"))
            .collect(),
        KeyShape::Inverted => vec!["tablekit::key::InvertedTime".into()],
        KeyShape::Verbatim => vec!["tablekit::key::Verbatim".into()],
    }
}

/// The RowKeys of `kind` without the prefix its marker gives them, and
/// that prefix.
fn row_keys<'a>(kind: &'a Kind<'_>) -> (String, Vec<&'a str>) {
    let prefix = match &kind.marker {
        Marker::Tablekit(value) => format!("{value}_"),
        Marker::Prefix(prefix) => prefix.clone(),
        Marker::None | Marker::Property(..) => String::new(),
    };
    let keys = kind
        .rows
        .iter()
        .map(|r| {
            r.row_key
                .strip_prefix(prefix.as_str())
                .unwrap_or(&r.row_key)
        })
        .collect();
    (prefix, keys)
}

/// One property as the rows of a kind hold it.
struct Seen {
    name: String,
    rows: usize,
    types: BTreeMap<&'static str, usize>,
}

/// The properties of `rows`, in the order they are first seen.
fn properties_of(rows: &[&Entity], skip: &[&str]) -> Vec<Seen> {
    let mut seen: Vec<Seen> = Vec::new();
    for row in rows {
        for (name, value) in row.properties.iter() {
            if skip.contains(&name) || BOOKKEEPING.contains(&name) {
                continue;
            }
            let at = match seen.iter().position(|s| s.name == name) {
                Some(at) => at,
                None => {
                    seen.push(Seen {
                        name: name.to_owned(),
                        rows: 0,
                        types: BTreeMap::new(),
                    });
                    seen.len() - 1
                }
            };
            seen[at].rows += 1;
            *seen[at].types.entry(edm_name(value)).or_default() += 1;
        }
    }
    seen
}

fn edm_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "Edm.String",
        Value::Int32(_) => "Edm.Int32",
        Value::Int64(_) => "Edm.Int64",
        Value::Double(_) => "Edm.Double",
        Value::Boolean(_) => "Edm.Boolean",
        Value::DateTime(_) => "Edm.DateTime",
        Value::Guid(_) => "Edm.Guid",
        Value::Binary(_) => "Edm.Binary",
    }
}

fn rust_type(edm: &str) -> &'static str {
    match edm {
        "Edm.Int32" => "i32",
        "Edm.Int64" => "i64",
        "Edm.Double" => "f64",
        "Edm.Boolean" => "bool",
        "Edm.DateTime" => "tablekit::DateTime",
        "Edm.Guid" => "tablekit::uuid::Uuid",
        "Edm.Binary" => "Vec<u8>",
        _ => "String",
    }
}

/// Writes the type of `kind`, with a comment saying what was seen.
fn write_type(out: &mut String, warnings: &mut Vec<String>, table: &str, kind: &Kind<'_>) {
    let total = kind.rows.len();
    let skip: Vec<&str> = match &kind.marker {
        Marker::Property(property, _) => vec![property.as_str()],
        _ => Vec::new(),
    };
    let properties = properties_of(&kind.rows, &skip);
    let (prefix, keys) = row_keys(kind);
    let pk_shape = shape_of(kind.rows.iter().map(|r| r.partition_key.as_str()));
    let rk_shape = shape_of(keys.iter().copied());
    let rows = if total == 1 { "row" } else { "rows" };
    let _ = writeln!(
        out,
        "/// Inferred from {total} sampled {rows} of table `{table}`."
    );
    if let Some(example) = kind.rows.first() {
        let _ = writeln!(
            out,
            "/// For example PartitionKey {:?}, RowKey {:?}.",
            example.partition_key, example.row_key
        );
    }
    match &kind.marker {
        Marker::None => {}
        Marker::Property(p, v) => {
            let _ = writeln!(out, "/// The rows whose {p:?} is {v:?}.");
        }
        Marker::Tablekit(v) => {
            let _ = writeln!(out, "/// tablekit's kind {v:?}.");
        }
        Marker::Prefix(p) => {
            let _ = writeln!(out, "/// The rows whose RowKey starts with {p:?}.");
        }
    }
    let _ = writeln!(out, "///\n/// Properties (rows holding each, of {total}):");
    for seen in &properties {
        let types: Vec<String> = (seen.types.iter())
            .map(|(t, n)| match seen.types.len() {
                1 => (*t).to_owned(),
                _ => format!("{t} in {n}"),
            })
            .collect();
        let _ = writeln!(
            out,
            "/// - {:?}: {}, {} of {total}",
            seen.name,
            types.join(", "),
            seen.rows
        );
        if seen.types.len() > 1 {
            let _ = writeln!(
                out,
                "///   (left out: seen with {} types; a replace keeps it as it is)",
                seen.types.len()
            );
            warnings.push(format!(
                "{}: property {:?} is {}; left out of the type (a replace keeps it)",
                kind.type_name,
                seen.name,
                types.join(", ")
            ));
        }
    }
    let _ = writeln!(
        out,
        "#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]"
    );
    let fields = fields_of(&properties, total);
    let rule = rename_rule(&fields);
    let mut attrs = container_attrs(table, kind, &prefix, &rk_shape);
    if let Some((name, _)) = rule {
        attrs.push_str(&format!(", rename_all = \"{name}\""));
    }
    let _ = writeln!(out, "#[tablekit({attrs})]");
    let _ = writeln!(out, "pub struct {} {{", kind.type_name);
    write_fields(
        out,
        &fields,
        rule.map(|(_, apply)| apply),
        &pk_shape,
        &rk_shape,
    );
    out.push_str("}\n\n");
}

/// The container attribute's contents.
fn container_attrs(table: &str, kind: &Kind<'_>, prefix: &str, rk: &KeyShape) -> String {
    let mut attrs = vec![format!("table = {table:?}")];
    match &kind.marker {
        Marker::None | Marker::Prefix(_) => {}
        Marker::Property(p, v) => {
            attrs.push(format!("discriminator(property = {p:?}, value = {v:?})"));
        }
        Marker::Tablekit(v) => attrs.push(format!("kind = {v:?}")),
    }
    if !prefix.is_empty() && !matches!(kind.marker, Marker::Tablekit(_)) {
        let fields: Vec<String> = (0..key_types(rk).len())
            .map(|i| format!("{{{}}}", key_field("row_key", i, key_types(rk).len())))
            .collect();
        attrs.push(format!("row_key = \"{prefix}{}\"", fields.join("_")));
    }
    attrs.join(", ")
}

/// The name of a key's field `i` of `n`.
fn key_field(base: &str, i: usize, n: usize) -> String {
    match n {
        1 => base.to_owned(),
        _ => format!("{base}_{}", i + 1),
    }
}

/// A field of a generated type: its name, the stored property's, its
/// EDM type and its Rust type.
struct Field {
    name: String,
    stored: String,
    edm: &'static str,
    ty: String,
}

/// The fields of the properties seen with one type (the others are left
/// out), named after them, each name once (the keys' names taken first).
fn fields_of(properties: &[Seen], total: usize) -> Vec<Field> {
    let mut taken: BTreeSet<String> = ["partition_key", "row_key"].map(String::from).into();
    (taken.extend((1..=4).flat_map(|i| [format!("partition_key_{i}"), format!("row_key_{i}")])));
    let single = properties.iter().filter(|s| s.types.len() == 1);
    single
        .map(|seen| {
            let edm = seen.types.keys().next().copied().unwrap_or("Edm.String");
            let ty = rust_type(edm);
            let ty = match seen.rows == total {
                true => ty.to_owned(),
                false => format!("Option<{ty}>"),
            };
            Field {
                name: unique(field_name(&seen.name), &mut taken),
                stored: seen.name.clone(),
                edm,
                ty,
            }
        })
        .collect()
}

/// A `rename_all` rule: its name, and what it makes of a field's name.
type Rule = (&'static str, fn(&str) -> String);

/// The `rename_all` rule most stored names follow (the derive's
/// `PascalCase` or `camelCase`, made again here: a derive crate exports no
/// functions), when it saves more `rename`s than it costs.
fn rename_rule(fields: &[Field]) -> Option<Rule> {
    let rules: [Rule; 2] = [
        ("PascalCase", |f| pascal_words(f, true)),
        ("camelCase", |f| pascal_words(f, false)),
    ];
    let verbatim = fields.iter().filter(|f| f.name == f.stored).count();
    rules
        .into_iter()
        .map(|(name, apply)| {
            let follows = fields.iter().filter(|f| apply(&f.name) == f.stored).count();
            (follows, name, apply)
        })
        .filter(|(follows, ..)| *follows > verbatim && *follows * 2 > fields.len())
        .max_by_key(|(follows, ..)| *follows)
        .map(|(_, name, apply)| (name, apply))
}

/// A snake_case field name's words joined, each capitalised (the first
/// too when `upper`): the derive's `PascalCase` and `camelCase`.
fn pascal_words(field: &str, upper: bool) -> String {
    let mut out = String::new();
    for word in field.split('_').filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            match out.is_empty() && !upper {
                true => out.push(first),
                false => out.extend(first.to_uppercase()),
            }
            out.push_str(chars.as_str());
        }
    }
    out
}

/// Writes the key fields and the fields of one type; a field whose stored
/// name `rule` (the container's `rename_all`) does not give is renamed.
fn write_fields(
    out: &mut String,
    fields: &[Field],
    rule: Option<fn(&str) -> String>,
    pk: &KeyShape,
    rk: &KeyShape,
) {
    for (attr, shape) in [("partition_key", pk), ("row_key", rk)] {
        let types = key_types(shape);
        for (i, ty) in types.iter().enumerate() {
            let name = key_field(attr, i, types.len());
            let _ = writeln!(out, "    /// The {}.", attr.replace('_', " "));
            let _ = writeln!(out, "    #[tablekit({attr})]\n    pub {name}: {ty},");
        }
    }
    for field in fields {
        let _ = writeln!(out, "    /// {:?} ({}).", field.stored, field.edm);
        let named = rule.map_or(field.name.clone(), |apply| apply(&field.name));
        if named != field.stored {
            let _ = writeln!(out, "    #[tablekit(rename = {:?})]", field.stored);
        }
        let _ = writeln!(out, "    pub {}: {},", field.name, field.ty);
    }
}

/// `name` as a Rust field: snake case, ASCII, never a keyword.
fn field_name(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
            continue;
        }
        if c.is_ascii_uppercase() && i > 0 && !out.ends_with('_') {
            let before = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if before.is_ascii_lowercase()
                || before.is_ascii_digit()
                || (before.is_ascii_uppercase() && next_lower)
            {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    let out = out.trim_end_matches('_').to_owned();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        return format!("field_{out}").trim_end_matches('_').to_owned();
    }
    if is_keyword(&out) {
        return format!("{out}_");
    }
    out
}

/// `name` as a Rust type name: upper camel case, ASCII.
fn pascal_case(name: &str) -> String {
    pascal_words(&field_name(name), true)
}

/// A table's name, as the name of the type of one of its rows.
fn singular(name: &str) -> String {
    let trimmed = name
        .strip_suffix('s')
        .filter(|rest| rest.len() >= 3 && !rest.ends_with('s'));
    let name = trimmed.unwrap_or(name);
    match name {
        "" => "Row".into(),
        name if is_keyword(name) || name == "Self" => format!("{name}Row"),
        name => name.to_owned(),
    }
}

fn is_keyword(word: &str) -> bool {
    const KEYWORDS: [&str; 52] = [
        "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn",
        "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
        "return", "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe",
        "use", "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do",
        "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try",
        "gen",
    ];
    KEYWORDS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rust_conventions() {
        assert_eq!(field_name("FirstName"), "first_name");
        assert_eq!(field_name("HTTPStatus"), "http_status");
        assert_eq!(field_name("type"), "type_");
        assert_eq!(field_name("Amount2Pay"), "amount2_pay");
        assert_eq!(field_name("2fa"), "field_2fa");
        assert_eq!(field_name("é"), "field");
        assert_eq!(pascal_case("order-lines"), "OrderLines");
        assert_eq!(singular("Customers"), "Customer");
        assert_eq!(singular("Address"), "Address");
    }

    #[test]
    fn key_shapes_are_read_from_the_values() {
        let shape = |keys: &[&str]| shape_of(keys.iter().copied());
        assert_eq!(shape(&["000123", "000045"]), KeyShape::Padded(vec![6]));
        assert_eq!(
            shape(&["000123_2012", "000045_2013"]),
            KeyShape::Padded(vec![6, 4])
        );
        assert_eq!(shape(&["000123", "45"]), KeyShape::Verbatim);
        assert_eq!(shape(&["a1", "b2"]), KeyShape::Verbatim);
        assert_eq!(shape(&["2518245695838765432"]), KeyShape::Inverted);
        assert_eq!(shape(&["0999999999999999999"]), KeyShape::Padded(vec![19]));
        assert_eq!(shape(&["1", "2", "3"]), KeyShape::Verbatim);
        assert_eq!(shape(&["123456", "234567"]), KeyShape::Verbatim);
        assert_eq!(kind_prefix("empid_000123"), Some("empid_"));
        assert_eq!(kind_prefix("order:7"), Some("order:"));
        assert_eq!(kind_prefix("1234"), None);
        assert_eq!(kind_prefix("plain"), None);
    }
}
