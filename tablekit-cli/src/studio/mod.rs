//! `tablekit studio`: a web page on this machine to look at a store, and
//! (with `--write`) to edit or delete a row.
//!
//! It listens on 127.0.0.1 alone, on the port it prints, and answers only
//! requests that carry the random token of the address it prints (as
//! Jupyter does) and name that address as their `Host` (so a page of
//! another site cannot reach it through a name that resolves here). The
//! page is plain HTML, CSS and JavaScript served by the program, under a
//! policy that runs no script but its own; it writes every name and value
//! as text, never as markup. Filters are parsed here, in the service's
//! syntax, before anything is sent to the store. Edits and deletes go with
//! `If-Match` of the row shown: a row changed meanwhile is a conflict,
//! shown as such, never overwritten.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query as Params, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde_json::{Value as Json, json};
use tablekit::backend::{ContinuationToken, ListTablesOptions, Query, UpdateMode};
use tablekit::filter::Filter;
use tablekit::{Entity, Error, IfMatch, TableBackend, TableBackendExt, Value};

use crate::{CliError, failed, open};

/// The page, its script and its style.
const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");
/// The most rows one page of the table holds.
const MAX_TOP: u32 = 1000;

pub(crate) fn studio_command() -> Command {
    Command::new("studio")
        .about("Serves a web page on 127.0.0.1 to look at a store (and, with --write, edit it)")
        .arg(
            Arg::new("store")
                .long("store")
                .required(true)
                .help("the store's connection string"),
        )
        .arg(
            Arg::new("port")
                .long("port")
                .value_parser(clap::value_parser!(u16))
                .default_value("0")
                .help("the port to listen on (0: any free one)"),
        )
        .arg(
            Arg::new("write")
                .long("write")
                .action(ArgAction::SetTrue)
                .help("allow edits and deletes (each guarded by the ETag of the row shown)"),
        )
}

/// What every request is served with.
struct Studio {
    tables: Arc<dyn TableBackend>,
    /// The store, as errors name it.
    location: String,
    token: String,
    /// The `Host` values a request may name.
    hosts: [String; 2],
    write: bool,
}

pub(crate) async fn studio(m: &ArgMatches) -> Result<(), CliError> {
    let store = open(m, "store")?;
    let port = m.get_one::<u16>("port").copied().unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| failed(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| failed(format!("the port listened on: {e}")))?
        .port();
    let studio = Arc::new(Studio {
        tables: Arc::clone(&store.tables),
        location: store.location().to_string(),
        token: token()?,
        hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        write: m.get_flag("write"),
    });
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let mode = if studio.write {
            "read and write"
        } else {
            "read-only"
        };
        let line = format!(
            "tablekit studio ({mode}) on {}: http://127.0.0.1:{port}/?token={}\n",
            studio.location, studio.token
        );
        (out.write_all(line.as_bytes()).and_then(|()| out.flush()))
            .map_err(|e| failed(format!("cannot write the output: {e}")))?;
    }
    axum::serve(listener, router(studio))
        .await
        .map_err(|e| failed(format!("the studio stopped: {e}")))
}

/// 32 random bytes from the operating system, as hex.
fn token() -> Result<String, CliError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| failed(format!("no random token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn router(studio: Arc<Studio>) -> Router {
    Router::new()
        .route("/", get(page))
        .route(
            "/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/api/store", get(store_info))
        .route("/api/tables", get(tables))
        .route("/api/rows", get(rows))
        .route("/api/partitions", get(partitions))
        .route("/api/feeds", get(feeds))
        .route("/api/verify", get(verify))
        .route("/api/upkeep", get(upkeep))
        .route("/api/row", get(row).put(put_row).delete(delete_row))
        .layer(middleware::from_fn_with_state(Arc::clone(&studio), guard))
        .with_state(studio)
}

/// Refuses a request without the token, or naming another host; adds the
/// headers that keep the page to itself.
async fn guard(State(studio): State<Arc<Studio>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| studio.hosts.iter().any(|ok| ok == h)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this studio answers at 127.0.0.1 alone",
        );
    }
    let given = request
        .headers()
        .get("x-studio-token")
        .and_then(|t| t.to_str().ok())
        .map(str::to_owned)
        .or_else(|| token_in(request.uri().query().unwrap_or("")));
    if !given.is_some_and(|t| same(&t, &studio.token)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "missing or wrong token: open the address the program printed",
        );
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let fixed = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The `token` parameter of a query string.
fn token_in(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_owned)
}

/// Whether two tokens are equal, in a time that does not tell how much of
/// them is.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// The page, with the token its script sends (hex: nothing to escape).
async fn page(State(studio): State<Arc<Studio>>) -> Response {
    let page = PAGE.replace("{token}", &studio.token);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// A store's error as an answer: a conflict as such, a bad request as such.
fn store_error(studio: &Studio, error: Error) -> Response {
    let status = match &error {
        Error::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
        Error::EntityNotFound { .. } | Error::TableNotFound { .. } => StatusCode::NOT_FOUND,
        Error::Invalid(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::BAD_GATEWAY,
    };
    refuse(status, &format!("{}: {error}", studio.location))
}

async fn store_info(State(studio): State<Arc<Studio>>) -> Response {
    axum::Json(json!({ "store": studio.location, "write": studio.write })).into_response()
}

async fn tables(State(studio): State<Arc<Studio>>) -> Response {
    let mut options = ListTablesOptions::default();
    let mut names = Vec::new();
    loop {
        match studio.tables.list_tables(&options).await {
            Ok(page) => {
                names.extend(page.tables);
                match page.continuation {
                    Some(next) => options.continuation = Some(next),
                    None => break,
                }
            }
            Err(e) => return store_error(&studio, e),
        }
    }
    axum::Json(json!({ "tables": names })).into_response()
}

/// One page of a table's rows: `table`, `filter` (the service's syntax),
/// `top`, and where the page starts (`next_pk`, `next_rk`, from the last).
async fn rows(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
) -> Response {
    let Some(table) = p.get("table") else {
        return refuse(StatusCode::BAD_REQUEST, "name a table");
    };
    let mut query = Query::new();
    if let Some(text) = p.get("filter").filter(|f| !f.trim().is_empty()) {
        match Filter::parse(text) {
            Ok(filter) => query.filter = Some(filter),
            Err(e) => return refuse(StatusCode::BAD_REQUEST, &format!("the filter: {e}")),
        }
    }
    let top = p
        .get("top")
        .and_then(|t| t.parse::<u32>().ok())
        .unwrap_or(100);
    query.top = Some(top.clamp(1, MAX_TOP));
    if let Some(pk) = p.get("next_pk") {
        let rk = p.get("next_rk").cloned();
        query.continuation = Some(ContinuationToken::new(pk.clone(), rk));
    }
    let page = match studio.tables.query_entities(table, &query).await {
        Ok(page) => page,
        Err(e) => return store_error(&studio, e),
    };
    let next = page
        .continuation
        .as_ref()
        .map(|c| json!({ "pk": c.next_partition_key(), "rk": c.next_row_key() }));
    let mut shown = Vec::new();
    for row in page.into_rows() {
        match row {
            Ok(row) => shown.push(row_json(&row)),
            Err(e) => shown.push(json!({ "error": e.to_string() })),
        }
    }
    axum::Json(json!({ "rows": shown, "next": next })).into_response()
}

/// The partitions of a table in key order, `count` at most (50 by
/// default) after `after`.
async fn partitions(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
) -> Response {
    let Some(table) = p.get("table") else {
        return refuse(StatusCode::BAD_REQUEST, "name a table");
    };
    let count = (p.get("count").and_then(|c| c.parse::<usize>().ok()))
        .unwrap_or(50)
        .clamp(1, 200);
    let after = p.get("after").cloned();
    match list_partitions(&*studio.tables, table, after, count).await {
        Ok((found, next)) => {
            axum::Json(json!({ "partitions": found, "next": next })).into_response()
        }
        Err(e) => store_error(&studio, e),
    }
}

/// At most `count` partitions of `table` after `after`, in key order, and
/// where the next ones start (`None` at the end). On a store that sorts
/// its rows, one request of a single key per partition, each past the
/// last, so the rows are never read; on one that does not (Cosmos DB for
/// Table), a single key may come from any partition, so every key after
/// `after` is read and sorted: slower, never missing one.
async fn list_partitions(
    backend: &dyn TableBackend,
    table: &str,
    mut after: Option<String>,
    count: usize,
) -> tablekit::Result<(Vec<String>, Option<String>)> {
    let query_after = |after: &Option<String>| {
        let mut query = Query::new();
        query.filter = after.as_deref().map(|pk| Filter::partition_key().gt(pk));
        query.select = Some(vec!["PartitionKey".into()]);
        query
    };
    if backend.query_order() != tablekit::backend::QueryOrder::Keys {
        let rows = backend.query_all(table, query_after(&after)).await?;
        let all: std::collections::BTreeSet<String> =
            rows.into_iter().map(|r| r.partition_key).collect();
        let more = all.len() > count;
        let found: Vec<String> = all.into_iter().take(count).collect();
        let next = more.then(|| found.last().cloned()).flatten();
        return Ok((found, next));
    }
    let mut found = Vec::new();
    while found.len() < count {
        let mut query = query_after(&after);
        query.top = Some(1);
        // A page may come back empty with more to follow (a store that
        // stops at a boundary): read on until a row or the end.
        let first = loop {
            let page = backend.query_entities(table, &query).await?;
            match (page.entities.into_iter().next(), page.continuation) {
                (Some(row), _) => break Some(row),
                (None, Some(next)) => query.continuation = Some(next),
                (None, None) => break None,
            }
        };
        match first {
            Some(row) => {
                after = Some(row.partition_key.clone());
                found.push(row.partition_key);
            }
            None => return Ok((found, None)),
        }
    }
    Ok((found, after))
}

/// Where each consumer of the table's change feeds stands, by partition.
async fn feeds(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
) -> Response {
    let Some(table) = p.get("table") else {
        return refuse(StatusCode::BAD_REQUEST, "name a table");
    };
    match tablekit::changes::consumer_lags(&*studio.tables, table).await {
        Ok(lags) => {
            let lags: Vec<Json> = (lags.iter())
                .map(|l| {
                    json!({
                        "consumer": l.consumer, "partition": l.partition_key,
                        "checkpoint": l.checkpoint, "newest": l.newest, "lag": l.lag(),
                    })
                })
                .collect();
            axum::Json(json!({ "consumers": lags })).into_response()
        }
        Err(e) => store_error(&studio, e),
    }
}

/// The audit of a partition's index rows from its raw rows: orphans,
/// stale copies and dangling list entries (no type needed).
async fn verify(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
) -> Response {
    let (Some(table), Some(pk)) = (p.get("table"), p.get("pk")) else {
        return refuse(StatusCode::BAD_REQUEST, "name a table and a pk");
    };
    match tablekit::index::audit_raw(&*studio.tables, table, pk).await {
        Ok(audit) => axum::Json(json!({
            "entities": audit.entities,
            "index_rows": audit.index_rows,
            "orphans": audit.orphans,
            "stale": audit.stale,
            "dangling": audit.dangling,
        }))
        .into_response(),
        Err(e) => store_error(&studio, e),
    }
}

/// What the upkeep has still to do in a table: outbox records waiting,
/// entities that will expire and those already due.
async fn upkeep(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
) -> Response {
    let Some(table) = p.get("table") else {
        return refuse(StatusCode::BAD_REQUEST, "name a table");
    };
    let now = tablekit::DateTime::now();
    match tablekit::upkeep::pending_work(&*studio.tables, table, now).await {
        Ok(work) => axum::Json(json!({
            "outbox_records": work.outbox_records,
            "expiring": work.expiring,
            "expired": work.expired,
        }))
        .into_response(),
        Err(e) => store_error(&studio, e),
    }
}

/// A row as the page shows it: keys, ETag, time, what it is, and each
/// property with its EDM type and its value as text.
fn row_json(row: &Entity) -> Json {
    let role = match tablekit::outbox::bookkeeping_of(row) {
        Some(kind) => format!("tablekit: {}", kind.describe()),
        None => match row.properties.get(tablekit::schema::KIND_PROPERTY) {
            Some(Value::String(kind)) => format!("entity of kind {kind}"),
            _ => "row".to_owned(),
        },
    };
    let properties: Vec<Json> = row
        .properties
        .iter()
        .map(|(name, value)| {
            json!({ "name": name, "type": format!("Edm.{:?}", value.edm_type()), "value": shown(value) })
        })
        .collect();
    json!({
        "pk": row.partition_key,
        "rk": row.row_key,
        "etag": row.etag.as_ref().map(|e| e.as_str().to_owned()),
        "timestamp": row.timestamp.map(|t| t.to_string_7()),
        "role": role,
        "properties": properties,
        "json": tablekit::json::to_string(row),
    })
}

/// A value as text.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Int32(i) => i.to_string(),
        Value::Int64(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::DateTime(d) => d.to_string_7(),
        Value::Guid(g) => g.hyphenated().to_string(),
        Value::Binary(b) => {
            let hex: String = b.iter().take(64).map(|x| format!("{x:02x}")).collect();
            let more = if b.len() > 64 { "…" } else { "" };
            format!("{} bytes: {hex}{more}", b.len())
        }
    }
}

/// Why a request is refused before the store is asked.
type Refusal = (StatusCode, &'static str);

/// The table and keys a row request names.
fn keys(p: &HashMap<String, String>) -> Result<(&str, &str, &str), Refusal> {
    match (p.get("table"), p.get("pk"), p.get("rk")) {
        (Some(t), Some(pk), Some(rk)) => Ok((t, pk, rk)),
        _ => Err((StatusCode::BAD_REQUEST, "name a table, a pk and an rk")),
    }
}

async fn row(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
) -> Response {
    let (table, pk, rk) = match keys(&p) {
        Ok(keys) => keys,
        Err((status, why)) => return refuse(status, why),
    };
    match studio.tables.try_get_entity(table, pk, rk).await {
        Ok(Some(row)) => axum::Json(row_json(&row)).into_response(),
        Ok(None) => refuse(StatusCode::NOT_FOUND, "no such row"),
        Err(e) => store_error(&studio, e),
    }
}

/// The ETag a write is guarded by: the `If-Match` of the row shown.
fn if_match(headers: &HeaderMap) -> Result<IfMatch, Refusal> {
    match headers.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) {
        Some(etag) if !etag.is_empty() && etag != "*" => {
            Ok(IfMatch::ETag(tablekit::ETag::new(etag)))
        }
        _ => Err((
            StatusCode::PRECONDITION_REQUIRED,
            "an edit goes with If-Match: the ETag of the row shown",
        )),
    }
}

/// What a write names: the table and keys of the row shown, and its ETag;
/// refused when the studio is read-only.
fn write_of<'p>(
    studio: &Studio,
    p: &'p HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<((&'p str, &'p str, &'p str), IfMatch), Refusal> {
    if !studio.write {
        return Err((
            StatusCode::FORBIDDEN,
            "read-only: start the studio with --write to edit or delete",
        ));
    }
    Ok((keys(p)?, if_match(headers)?))
}

/// Replaces a row with the one in the body (its wire JSON, as shown), if
/// it is still the version shown.
async fn put_row(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let ((table, pk, rk), guard) = match write_of(&studio, &p, &headers) {
        Ok(write) => write,
        Err((status, why)) => return refuse(status, why),
    };
    let mut row = match tablekit::json::from_str(&body) {
        Ok(row) => row,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &format!("the row: {e}")),
    };
    if row.partition_key != pk || row.row_key != rk {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the row's keys are not the ones shown",
        );
    }
    row.etag = None;
    row.timestamp = None;
    let written = (studio.tables)
        .update_entity(table, &row, UpdateMode::Replace, &guard)
        .await;
    match written {
        Ok(etag) => axum::Json(json!({ "etag": etag.as_str() })).into_response(),
        Err(e) => store_error(&studio, e),
    }
}

/// Deletes a row, if it is still the version shown.
async fn delete_row(
    State(studio): State<Arc<Studio>>,
    Params(p): Params<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let ((table, pk, rk), guard) = match write_of(&studio, &p, &headers) {
        Ok(write) => write,
        Err((status, why)) => return refuse(status, why),
    };
    match studio.tables.delete_entity(table, pk, rk, &guard).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => store_error(&studio, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekit_mem::{Adversarial, MemBackend};

    /// Partitions listed a few at a time cover every one once, in order,
    /// on a store that sorts and on one that does not.
    #[tokio::test]
    async fn partitions_are_listed_whole_and_in_order() {
        for backend in [
            MemBackend::new(),
            MemBackend::builder()
                .adversarial(Adversarial::unsorted())
                .build(),
        ] {
            backend.create_table("Parts").await.expect("a table");
            for p in 0..7 {
                for r in 0..3 {
                    let row = Entity::new(format!("p{p}"), format!("r{r}"));
                    backend.insert_entity("Parts", &row).await.expect("insert");
                }
            }
            let (mut seen, mut after) = (Vec::new(), None);
            loop {
                let (found, next) = list_partitions(&backend, "Parts", after, 3)
                    .await
                    .expect("a list");
                assert!(found.len() <= 3);
                seen.extend(found);
                match next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            let want: Vec<String> = (0..7).map(|p| format!("p{p}")).collect();
            assert_eq!(seen, want);
        }
    }
}
