//! `tablekit studio` on a local store: it listens on 127.0.0.1 alone and
//! answers only requests with its token and its own host name; it pages
//! through a table, checks a filter before the store sees it, names
//! tablekit's own rows, hands hostile values back as data, refuses writes
//! unless started with `--write`, and then writes only over the version
//! shown. And in a real browser (headless Chromium): the page lists the
//! tables, shows a table's rows, filters, and shows hostile values as text.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value as Json;

#[path = "../../tablekit-azure/tests/azurite/mod.rs"]
mod azurite;
mod program;
use tablekit::{Entity, TableBackend, TableBackendExt};
use tablekit_local::LocalStorage;

/// A hostile value: markup, a right-to-left override, quotes.
const HOSTILE: &str = "<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>\u{202e}evil";

/// A ticket, whose kind records its changes.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Tickets", kind = "TICKET", changes)]
#[tablekit(index(name = "code", tag = "code"))]
struct Ticket {
    #[tablekit(partition_key)]
    queue: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "code")]
    code: String,
}

fn ticket(queue: &str, id: u32) -> Ticket {
    Ticket {
        queue: queue.into(),
        id,
        code: format!("{queue}-{id}"),
    }
}

async fn store(path: &Path) {
    let store = LocalStorage::open(path).expect("a store");
    // Tickets with a change feed, and a consumer one change behind in `a`.
    let tickets: tablekit::Table<Ticket> = tablekit::Table::new(store.clone());
    tickets.create_if_missing().await.expect("a table");
    for (queue, id) in [("a", 1), ("a", 2), ("b", 1)] {
        tickets.insert(&ticket(queue, id)).await.expect("insert");
    }
    let mailer = tickets.changes().consumer("mailer").expect("a consumer");
    let batch = mailer.poll(100).await.expect("poll");
    mailer.commit(&batch).await.expect("commit");
    tickets.insert(&ticket("a", 3)).await.expect("insert");
    // A ticket whose row is deleted behind the library's back: its index
    // row is left over.
    tickets.insert(&ticket("b", 2)).await.expect("insert");
    let (_, rk) = tablekit::schema::encode_keys::<Ticket>(&"b", &2u32).expect("keys");
    let any = tablekit::IfMatch::Any;
    store
        .delete_entity("Tickets", "b", &rk, &any)
        .await
        .expect("a raw delete");
    store.create_table("Orders").await.expect("a table");
    store.create_table("Notes").await.expect("a table");
    for i in 0..250 {
        let row = Entity::new(format!("c{}", i % 3), format!("o{i:04}"))
            .with("Total", i64::from(i))
            .with("Paid", i % 2 == 0);
        store.insert_entity("Orders", &row).await.expect("insert");
    }
    let hostile = Entity::new("<b onclick=alert(1)>pk", "\u{202e}rk")
        .with("Text", HOSTILE)
        .with("Long", "x".repeat(32_000));
    store
        .insert_entity("Notes", &hostile)
        .await
        .expect("insert");
    // One of tablekit's own rows: a change-feed head.
    let head = Entity::new("p", "~tk|changes").with("_ChangeSeq", 3i64);
    store.insert_entity("Notes", &head).await.expect("insert");
}

/// A running studio, killed when dropped.
struct Studio {
    child: Child,
    port: u16,
    token: String,
}

impl Drop for Studio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(path: &Path, write: bool) -> Studio {
    start_on(&format!("UseLocalStorage={}", path.display()), write)
}

fn start_on(store: &str, write: bool) -> Studio {
    let mut args = vec!["studio", "--store", store];
    if write {
        args.push("--write");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the studio starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its output"))
        .read_line(&mut line)
        .expect("the line it prints");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let rest = url.strip_prefix("http://127.0.0.1:").expect("on 127.0.0.1");
    let (port, token) = rest.split_once("/?token=").expect("a token in the address");
    assert_eq!(token.len(), 64, "{token}");
    Studio {
        child,
        port: port.parse().expect("a port"),
        token: token.to_owned(),
    }
}

/// An answer: status, headers (lower-case names) and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn json(&self) -> Json {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request to the studio, over a connection of its own.
fn request(
    studio: &Studio,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", studio.port)).expect("a connection");
    let mut text = format!(
        "{method} {target} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: 127.0.0.1:{}\r\n", studio.port));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).expect("the request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("the answer");
    let raw = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .expect("a status line")
        .split(' ')
        .nth(1)
        .expect("a status");
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
        .collect::<Vec<_>>();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    Answer {
        status: status.parse().expect("a number"),
        headers,
        body: if chunked {
            unchunk(body)
        } else {
            body.to_owned()
        },
    }
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

fn api(studio: &Studio, target: &str) -> Answer {
    request(
        studio,
        "GET",
        target,
        &[("X-Studio-Token", &studio.token)],
        "",
    )
}

#[tokio::test]
async fn the_studio_answers_its_token_alone_and_shows_rows_as_data() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let s = start(&path, false);

    // Loopback alone: the listening socket's address is 127.0.0.1.
    let listening = std::fs::read_to_string("/proc/net/tcp").expect("the sockets");
    let local = format!("0100007F:{:04X}", s.port);
    assert!(
        listening
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(local.as_str())),
        "not listening on 127.0.0.1:{}",
        s.port
    );
    // No token, a wrong one, another host: refused.
    assert_eq!(request(&s, "GET", "/", &[], "").status, 403);
    assert_eq!(request(&s, "GET", "/api/tables", &[], "").status, 403);
    let wrong = "0".repeat(64);
    assert_eq!(
        request(&s, "GET", &format!("/?token={wrong}"), &[], "").status,
        403
    );
    let evil = [
        ("Host", "evil.example"),
        ("X-Studio-Token", s.token.as_str()),
    ];
    assert_eq!(request(&s, "GET", "/api/tables", &evil, "").status, 403);
    let page = request(&s, "GET", &format!("/?token={}", s.token), &[], "");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("tablekit studio"));
    let policy = page.header("content-security-policy").expect("a policy");
    assert!(policy.contains("script-src 'self'"), "{policy}");

    assert_eq!(
        api(&s, "/api/tables").json()["tables"],
        serde_json::json!(["Notes", "Orders", "Tickets"])
    );
    // The consumers of a change feed, and how far behind each is.
    let feeds = api(&s, "/api/feeds?table=Tickets").json();
    assert_eq!(
        feeds["consumers"],
        serde_json::json!([
            {"consumer": "mailer", "partition": "a", "checkpoint": 2, "newest": 3, "lag": 1},
            {"consumer": "mailer", "partition": "b", "checkpoint": 1, "newest": 2, "lag": 1},
        ])
    );
    // The index rows audited from the raw rows: in step in `a`, one left
    // over in `b`.
    let a = api(&s, "/api/verify?table=Tickets&pk=a").json();
    assert_eq!(
        (&a["index_rows"], &a["orphans"]),
        (&Json::from(3), &serde_json::json!([]))
    );
    // What the upkeep has to do: nothing in this table.
    let work = api(&s, "/api/upkeep?table=Tickets").json();
    assert_eq!(
        work,
        serde_json::json!({"outbox_records": 0, "expiring": 0, "expired": 0})
    );
    let b = api(&s, "/api/verify?table=Tickets&pk=b").json();
    assert_eq!(
        b["orphans"],
        serde_json::json!([["code_b-2", "TICKET_0000000002"]]),
        "{b}"
    );

    // Pages of at most 100, to the end.
    let mut target = "/api/rows?table=Orders&top=100".to_owned();
    let mut sizes = Vec::new();
    loop {
        let page = api(&s, &target).json();
        sizes.push(page["rows"].as_array().expect("rows").len());
        match page["next"].as_object() {
            Some(next) => {
                target = format!(
                    "/api/rows?table=Orders&top=100&next_pk={}",
                    next["pk"].as_str().expect("pk")
                );
                if let Some(rk) = next["rk"].as_str() {
                    target.push_str(&format!("&next_rk={rk}"));
                }
            }
            None => break,
        }
    }
    assert_eq!(sizes.iter().sum::<usize>(), 250, "{sizes:?}");
    assert!(sizes.iter().all(|&n| n <= 100), "{sizes:?}");
    // Partitions, without reading their rows: all, then two at a time.
    let all = api(&s, "/api/partitions?table=Orders").json();
    assert_eq!(
        all,
        serde_json::json!({"partitions": ["c0", "c1", "c2"], "next": null})
    );
    let two = api(&s, "/api/partitions?table=Orders&count=2").json();
    assert_eq!(
        two,
        serde_json::json!({"partitions": ["c0", "c1"], "next": "c1"})
    );
    let rest = api(&s, "/api/partitions?table=Orders&count=2&after=c1").json();
    assert_eq!(rest["partitions"], serde_json::json!(["c2"]));
    // A filter is checked before it is sent.
    let bad = api(&s, "/api/rows?table=Orders&filter=Total%20gt");
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.json()["error"]
            .as_str()
            .expect("a message")
            .starts_with("the filter")
    );
    let paid = api(
        &s,
        "/api/rows?table=Orders&filter=Total%20lt%2010%20and%20Paid%20eq%20true",
    );
    assert_eq!(paid.json()["rows"].as_array().expect("rows").len(), 5);

    // Hostile values come back as data, exactly; tablekit's rows are named.
    let notes = api(&s, "/api/rows?table=Notes").json();
    let rows = notes["rows"].as_array().expect("rows");
    let hostile = rows
        .iter()
        .find(|r| r["rk"] == "\u{202e}rk")
        .expect("the hostile row");
    assert_eq!(hostile["pk"], "<b onclick=alert(1)>pk");
    let text = hostile["properties"].as_array().expect("properties");
    assert!(
        text.iter()
            .any(|p| p["name"] == "Text" && p["value"] == HOSTILE && p["type"] == "Edm.String")
    );
    assert!(
        text.iter()
            .any(|p| p["name"] == "Long" && p["value"].as_str().map(str::len) == Some(32_000))
    );
    let head = rows
        .iter()
        .find(|r| r["rk"] == "~tk|changes")
        .expect("the head");
    assert_eq!(head["role"], "tablekit: change-feed head");

    // Read-only: no write, whatever the ETag.
    let etag = hostile["etag"].as_str().expect("an ETag").to_owned();
    let target = "/api/row?table=Notes&pk=%3Cb%20onclick%3Dalert(1)%3Epk&rk=%E2%80%AErk";
    let refused = request(
        &s,
        "DELETE",
        target,
        &[("X-Studio-Token", &s.token), ("If-Match", &etag)],
        "",
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(api(&s, target).status, 200, "the row is still there");
}

/// The studio looks at a store, never makes one: a directory that is not
/// there (a typo) is refused, with or without `--write`, and nothing is
/// made. Without `--write`, a local store is opened read-only: its files
/// are the same bytes after the studio ran.
#[tokio::test]
async fn the_studio_makes_no_store_and_changes_none_it_only_reads() {
    let dir = tempfile::tempdir().expect("a directory");
    let typo = dir.path().join("no-such-store");
    for write in [false, true] {
        let mut args = vec![
            "studio".to_owned(),
            "--store".to_owned(),
            format!("UseLocalStorage={}", typo.display()),
        ];
        if write {
            args.push("--write".to_owned());
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_tablekit"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the studio runs");
        // It ends at once; one that serves instead is stopped and fails.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("its state") {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut err);
        }
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{err}");
        assert!(err.contains("does not exist"), "{err}");
        assert!(!typo.exists(), "a typo made a store");
    }
    let path = dir.path().join("store");
    store(&path).await;
    let files = |path: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .expect("the store's directory")
            .map(|e| {
                let path = e.expect("an entry").path();
                let bytes = std::fs::read(&path).expect("a file");
                (path, bytes)
            })
            .collect();
        files.sort();
        files
    };
    let before = files(&path);
    {
        let s = start(&path, false);
        let answer = api(&s, "/api/tables");
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.body.contains("Tickets"), "{}", answer.body);
    }
    assert!(
        before == files(&path),
        "the read-only studio changed the store's files"
    );
}

#[tokio::test]
async fn with_write_edits_go_over_the_version_shown_alone() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let s = start(&path, true);
    let target = "/api/row?table=Orders&pk=c0&rk=o0003";
    let shown = api(&s, target).json();
    let etag = shown["etag"].as_str().expect("an ETag").to_owned();
    let token = ("X-Studio-Token", s.token.as_str());
    let edited = shown["json"]
        .as_str()
        .expect("its JSON")
        .replace("\"Total\":\"3\"", "\"Total\":\"30\"");
    assert_ne!(
        edited,
        shown["json"].as_str().expect("its JSON"),
        "{edited}"
    );

    // Without If-Match, or with a stale one: refused, nothing written.
    let put = |guard: Option<&str>, body: &str| {
        let mut headers = vec![token];
        if let Some(etag) = guard {
            headers.push(("If-Match", etag));
        }
        request(&s, "PUT", target, &headers, body)
    };
    assert_eq!(put(None, &edited).status, 428);
    let stale = "W/\"datetime'2000-01-01T00%3A00%3A00Z'\"";
    let conflict = put(Some(stale), &edited);
    assert_eq!(conflict.status, 412, "{}", conflict.body);
    // The version shown: written.
    let saved = put(Some(&etag), &edited);
    assert_eq!(saved.status, 200, "{}", saved.body);
    let now = api(&s, target).json();
    let total = now["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .find(|p| p["name"] == "Total")
        .cloned();
    assert_eq!(total.expect("Total")["value"], "30");
    // The old ETag is stale now: a delete through it is a conflict.
    let delete = |etag: &str| request(&s, "DELETE", target, &[token, ("If-Match", etag)], "");
    assert_eq!(delete(&etag).status, 412);
    let fresh = now["etag"].as_str().expect("an ETag").to_owned();
    assert_eq!(delete(&fresh).status, 204);
    assert_eq!(api(&s, target).status, 404);
}

/// Headless Chromium, from Debian's package.
fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(
        path.exists(),
        "the browser test needs Debian's chromium (apt-get install chromium; .ci/run installs it)"
    );
    path
}

/// Where the screenshots are kept.
fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join("target/studio-screenshots");
    std::fs::create_dir_all(&dir).expect("a directory");
    dir
}

/// Chromium on `url`, after its scripts ran: the page's DOM, and a
/// screenshot in `shot`.
fn browse(url: &str, shot: &Path) -> String {
    let profile = tempfile::tempdir().expect("a profile");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=10000",
        "--window-size=1400,900",
    ];
    let user = format!("--user-data-dir={}", profile.path().display());
    let run = |what: &str| {
        let out = Command::new(chromium())
            .args(common)
            .args([user.as_str(), what, url])
            .output()
            .expect("chromium runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let dom = run("--dump-dom");
    run(&format!("--screenshot={}", shot.display()));
    assert!(shot.exists(), "no screenshot at {}", shot.display());
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

#[tokio::test]
async fn a_browser_lists_tables_shows_rows_filters_and_keeps_values_text() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let s = start(&path, false);
    let base = format!("http://127.0.0.1:{}/?token={}", s.port, s.token);
    let shots = shots();

    let dom = browse(&format!("{base}#table=Orders"), &shots.join("orders.png"));
    assert!(
        dom.contains(">Notes</button>") && dom.contains(">Orders</button>"),
        "{dom}"
    );
    assert!(dom.contains("100 rows; more follow"), "{dom}");
    assert!(
        dom.contains(">c2</button>"),
        "the partitions are listed: {dom}"
    );
    assert!(dom.contains("<td>o0000</td>"), "{dom}");

    let filtered = browse(
        &format!("{base}#table=Orders&filter=Total%20lt%203"),
        &shots.join("filtered.png"),
    );
    assert!(filtered.contains("3 rows"), "{filtered}");
    assert!(!filtered.contains("<td>o0003</td>"), "{filtered}");

    let tickets = browse(&format!("{base}#table=Tickets"), &shots.join("tickets.png"));
    assert!(tickets.contains("Change-feed consumers"), "{tickets}");
    assert!(tickets.contains("<td>mailer</td>"), "{tickets}");
    assert!(
        tickets.contains("tablekit: change-feed change"),
        "{tickets}"
    );

    let notes = browse(&format!("{base}#table=Notes"), &shots.join("notes.png"));
    assert!(
        notes.contains("&lt;b onclick=alert(1)&gt;pk"),
        "shown as text: {notes}"
    );
    assert!(notes.contains("tablekit: change-feed head"), "{notes}");
    // A right-to-left override is shown as its code point, not obeyed.
    assert!(notes.contains("\u{27e8}U+202E\u{27e9}rk"), "{notes}");
    assert!(!notes.contains('\u{202e}'), "{notes}");
    assert!(!notes.contains("owned"), "a hostile value ran: {notes}");
}

/// Playwright's driver (`playwright-core`, pinned), installed with npm into
/// `target/` on first use, as Azurite is; it drives Debian's Chromium.
fn playwright() -> PathBuf {
    const VERSION: &str = "1.64.1";
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_owned();
    let dir = workspace.join(format!("target/playwright-core-{VERSION}"));
    let module = dir.join("node_modules/playwright-core");
    if module.join("package.json").exists() {
        return module;
    }
    let partial = workspace.join(format!(
        "target/playwright-core.partial-{}",
        std::process::id()
    ));
    let out = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&partial)
        .arg(format!("playwright-core@{VERSION}"))
        .output()
        .expect("npm runs");
    assert!(
        out.status.success(),
        "npm could not install playwright-core: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::fs::rename(&partial, &dir).is_err() {
        // Another test process put its installation in place first.
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(
        module.join("package.json").exists(),
        "no playwright-core in {}",
        dir.display()
    );
    module
}

/// With `--write`, in the browser: a row clicked, edited and saved; a save
/// over a version another writer replaced shows a conflict and writes
/// nothing.
#[tokio::test]
async fn a_browser_edits_a_row_and_sees_a_conflict() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("store");
    store(&path).await;
    let s = start(&path, true);
    chromium();
    let url = format!("http://127.0.0.1:{}/?token={}", s.port, s.token);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/studio/edit.cjs");
    let out = Command::new("node")
        .arg(script)
        .arg(&url)
        .env("PLAYWRIGHT_CORE", playwright())
        .env("SHOTS", shots())
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let row = api(&s, "/api/row?table=Orders&pk=c0&rk=o0003").json();
    assert!(
        row["json"]
            .as_str()
            .expect("its JSON")
            .contains("\"Total\":\"44\""),
        "{row}"
    );
}

/// The same studio on Azurite: the store's tables and rows, through the
/// REST backend.
#[test]
fn the_studio_reads_azurite_too() {
    let conn = azurite::azurite().connection_string();
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    let table = format!("Studio{suffix}");
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("rows.jsonl");
    // Partition keys a filter must quote: a quote, a space, a percent sign.
    let lines: String = ["p", "o'brien", "a b%20c"]
        .iter()
        .map(|pk| tablekit::json::to_string(&Entity::new(*pk, "r1").with("Text", HOSTILE)) + "\n")
        .collect();
    std::fs::write(&file, lines).expect("rows");
    let file = file.to_str().expect("a path");
    let (code, _, err) = program::run(&["import", "--to", &conn, "--in", file, "--table", &table]);
    assert_eq!(code, Some(0), "{err}");
    let s = start_on(&conn, false);
    let tables = api(&s, "/api/tables").json();
    assert!(
        tables["tables"]
            .as_array()
            .expect("tables")
            .iter()
            .any(|t| t == table.as_str()),
        "{tables}"
    );
    let rows = api(&s, &format!("/api/rows?table={table}")).json();
    let text = &rows["rows"][0]["properties"][0];
    assert_eq!(
        (&text["name"], &text["value"]),
        (&Json::from("Text"), &Json::from(HOSTILE))
    );
    // The partitions, one at a time: each request starts past a key that
    // the service's filter syntax must quote.
    let mut after: Option<String> = None;
    let mut seen = Vec::new();
    loop {
        let mut target = format!("/api/partitions?table={table}&count=1");
        if let Some(pk) = &after {
            let escaped: String = pk
                .bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect();
            target.push_str(&format!("&after={escaped}"));
        }
        let page = api(&s, &target).json();
        seen.extend(
            page["partitions"]
                .as_array()
                .expect("partitions")
                .iter()
                .cloned(),
        );
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(
        seen,
        [
            Json::from("a b%20c"),
            Json::from("o'brien"),
            Json::from("p")
        ]
    );
    // A filter on such a key reaches the service quoted as it must be.
    let quoted = api(
        &s,
        &format!("/api/rows?table={table}&filter=PartitionKey%20eq%20%27o%27%27brien%27"),
    )
    .json();
    assert_eq!(
        quoted["rows"].as_array().expect("rows").len(),
        1,
        "{quoted}"
    );
}
