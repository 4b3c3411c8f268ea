//! Keys as people and other clients read them: rows written by another
//! client read back typed.

use std::sync::Arc;

use super::unique_table;
use tablekit::TableBackendExt as _;
use tablekit::backend::TableBackend;
use tablekit::table::Table;

/// A row as another client (or a person in a storage browser) writes it.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Foreign")]
struct Contact {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    name: String,
    email: String,
}

/// Rows written by another client, with keys a person reads as they are
/// (`Ada Lovelace`, `O'Brien`, `100%`, `café`, empty keys), read back typed:
/// by point reads, by a query, and written back unchanged. A type without a
/// kind writes no `_Kind` or `_Version`.
pub async fn foreign_rows_read_back_typed(backend: Arc<dyn TableBackend>) {
    use tablekit::Entity;
    use tablekit::TableBackendExt;
    use tablekit::backend::Query;
    let name = unique_table("foreign");
    backend.create_table(&name).await.expect("create table");
    let keys = [
        ("Research", "Ada Lovelace"),
        ("Research", "O'Brien"),
        ("Research", "r 1"),
        ("Research", "100%"),
        ("Research", "a+b"),
        ("Research", "café"),
        ("Research", ""),
        ("", "nobody's team"),
        ("R&D Labs", "Grace Hopper"),
    ];
    for (pk, rk) in keys {
        let row = Entity::new(pk, rk).with("email", format!("{rk}@example.com"));
        backend
            .insert_entity(&name, &row)
            .await
            .expect("raw insert");
    }
    let contacts: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name);
    for (pk, rk) in keys {
        let read = contacts
            .get(pk, rk)
            .await
            .unwrap_or_else(|e| panic!("({pk:?}, {rk:?}): {e}"))
            .unwrap_or_else(|| panic!("({pk:?}, {rk:?}) is stored"));
        assert_eq!(read.team, pk);
        assert_eq!(read.name, rk);
        assert_eq!(read.email, format!("{rk}@example.com"));
    }
    let research = contacts
        .query()
        .partition("Research")
        .collect()
        .await
        .expect("typed query");
    assert_eq!(research.len(), 7);
    // Written back through the typed API, the keys stay as they were, and
    // nothing of tablekit's own is added but the write history.
    let mut ada = contacts
        .get("Research", "Ada Lovelace")
        .await
        .expect("get")
        .expect("stored");
    ada.email = "ada@example.com".into();
    contacts.replace(&mut ada).await.expect("replace");
    let raw = backend
        .query_all(
            &name,
            Query::new().filter(tablekit::filter::Filter::row_key().eq("Ada Lovelace")),
        )
        .await
        .expect("query");
    assert_eq!(raw.len(), 1, "the same row, not a new one");
    assert!(
        raw[0]
            .properties
            .get(tablekit::schema::KIND_PROPERTY)
            .is_none()
    );
    assert!(
        raw[0]
            .properties
            .get(tablekit::schema::VERSION_PROPERTY)
            .is_none()
    );
    // A table written only through tablekit without the write history holds
    // the entity's own properties and nothing else.
    let clean = contacts.clone().without_write_history();
    clean
        .insert(&Contact {
            team: "Sales".into(),
            name: "Katherine Johnson".into(),
            email: "kj@example.com".into(),
        })
        .await
        .expect("insert");
    let raw = backend
        .get_entity(&name, "Sales", "Katherine Johnson", &Default::default())
        .await
        .expect("stored under its readable keys");
    let names: Vec<&str> = raw.properties.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["email"]);
    backend.delete_table(&name).await.expect("delete table");
}

/// Rows another client keyed with text the default string codec would
/// escape, mapped through [`Verbatim`](tablekit::key::Verbatim) key fields.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Imported")]
struct Imported {
    #[tablekit(partition_key)]
    tenant: tablekit::key::Verbatim,
    #[tablekit(row_key)]
    legacy_id: tablekit::key::Verbatim,
    note: String,
}

/// Keys held verbatim read back whatever the store accepted, and a key the
/// store forbids is refused with a typed error before anything is sent.
pub async fn verbatim_keys_map_existing_rows(backend: Arc<dyn TableBackend>) {
    use tablekit::Entity;
    use tablekit::key::Verbatim;
    use tablekit::{Error, InvalidInput};
    let name = unique_table("verbatim");
    backend.create_table(&name).await.expect("create table");
    let keys = ["x\u{FFFD}y", "plain", "\u{FFFF}", "a  b ", "EMP_0000000123"];
    for rk in keys {
        let row = Entity::new("T 1", rk).with("note", rk);
        backend
            .insert_entity(&name, &row)
            .await
            .expect("raw insert");
    }
    let imported: Table<Imported> = Table::from_arc(Arc::clone(&backend), &name);
    for rk in keys {
        let read = imported
            .get("T 1", rk)
            .await
            .unwrap_or_else(|e| panic!("{rk:?}: {e}"))
            .unwrap_or_else(|| panic!("{rk:?} is stored"));
        assert_eq!(*read.legacy_id, *rk);
        assert_eq!(read.note, rk);
    }
    let all = imported
        .query()
        .partition("T 1")
        .collect()
        .await
        .expect("query");
    assert_eq!(all.len(), keys.len());
    let forbidden = imported
        .insert(&Imported {
            tenant: Verbatim::from("T 1"),
            legacy_id: Verbatim::from("a/b"),
            note: String::new(),
        })
        .await;
    assert!(
        matches!(
            forbidden,
            Err(Error::Invalid(InvalidInput::KeyForbiddenCharacter {
                character: '/',
                ..
            }))
        ),
        "{forbidden:?}"
    );
    backend.delete_table(&name).await.expect("delete table");
}

/// A typed query over rows of which some do not fit the type follows the
/// caller's policy: fail on the first (the default), skip and count, or
/// yield each row's error and go on.
pub async fn rows_that_do_not_fit_follow_the_policy(backend: Arc<dyn TableBackend>) {
    use futures::StreamExt;

    use tablekit::Entity;
    use tablekit::table::{RowErrors, SkippedRows};
    let name = unique_table("misfits");
    backend.create_table(&name).await.expect("create table");
    for (rk, email) in [
        ("a", Some("a@x")),
        ("b", None),
        ("c", Some("c@x")),
        ("d", None),
        ("e", Some("e@x")),
    ] {
        // Another client stored a number where the type wants text.
        let email = email.map_or(tablekit::Value::Int32(42), tablekit::Value::from);
        let row = Entity::new("T", rk).with("email", email);
        backend
            .insert_entity(&name, &row)
            .await
            .expect("raw insert");
    }
    let contacts: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name);

    let failed = contacts.query().partition("T").collect().await;
    assert!(
        matches!(&failed, Err(e) if e.is_row_error()),
        "the default fails: {failed:?}"
    );
    let first: Vec<_> = contacts.query().partition("T").stream().collect().await;
    assert_eq!(first.len(), 2, "the stream ends at the first misfit");
    assert!(first[0].is_ok() && first[1].is_err());

    let skipped = SkippedRows::default();
    let fitting = contacts
        .query()
        .partition("T")
        .on_row_error(RowErrors::Skip(skipped.clone()))
        .collect()
        .await
        .expect("skipping");
    let names: Vec<&str> = fitting.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["a", "c", "e"]);
    assert_eq!(skipped.count(), 2);

    let all: Vec<_> = contacts
        .query()
        .partition("T")
        .on_row_error(RowErrors::Yield)
        .stream()
        .collect()
        .await;
    let shape: Vec<bool> = all.iter().map(Result::is_ok).collect();
    assert_eq!(shape, [true, false, true, false, true]);

    let skipped = SkippedRows::default();
    let (page, _) = contacts
        .query()
        .partition("T")
        .on_row_error(RowErrors::Skip(skipped.clone()))
        .page()
        .await
        .expect("a page");
    assert!(page.len() <= 3 && skipped.count() <= 2);
    backend.delete_table(&name).await.expect("delete table");
}

/// The seeds' layouts, as a table made before tablekit holds them: an
/// employee under `empid_000223` (a RowKey template) and under
/// `email_jonesj@contoso.com` (a kind kept in the RowKey only), and a review
/// under `000123_2012`.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Seeds", row_key = "empid_{id}")]
struct EmployeeById {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: tablekit::key::Padded<6>,
    name: String,
}

/// The same employee under the email index's layout.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Seeds", kind = "email", kind_properties = false)]
struct EmployeeByEmail {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    email: String,
    name: String,
}

/// A review keyed by employee id and year.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Seeds")]
struct ReviewByYear {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    employee: tablekit::key::Padded<6>,
    #[tablekit(row_key)]
    year: tablekit::key::Padded<4>,
    rating: i32,
}

/// The seeds' partition read as one enum: each row told apart by its key
/// layout (a template, a kind kept in the RowKey only, a plain compound
/// key), none of them with a `_Kind`.
#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]
enum SeedRows {
    ById(EmployeeById),
    ByEmail(EmployeeByEmail),
    Review(ReviewByYear),
}

/// Rows in the layouts a table had before tablekit read back typed, and
/// typed writes produce exactly those keys, with no property of tablekit's
/// own (the write history aside, which this table leaves out).
pub async fn existing_layouts_map_exactly(backend: Arc<dyn TableBackend>) {
    use tablekit::Entity;
    use tablekit::key::Padded;
    let name = unique_table("seeds");
    backend.create_table(&name).await.expect("create table");
    for (rk, extra) in [
        ("empid_000223", ("name", tablekit::Value::from("Jones"))),
        (
            "email_jonesj@contoso.com",
            ("name", tablekit::Value::from("Jones")),
        ),
        ("000123_2012", ("rating", tablekit::Value::Int32(4))),
    ] {
        let row = Entity::new("Sales", rk).with(extra.0, extra.1);
        backend
            .insert_entity(&name, &row)
            .await
            .expect("raw insert");
    }
    let by_id =
        Table::<EmployeeById>::from_arc(Arc::clone(&backend), &name).without_write_history();
    let by_email =
        Table::<EmployeeByEmail>::from_arc(Arc::clone(&backend), &name).without_write_history();
    let reviews =
        Table::<ReviewByYear>::from_arc(Arc::clone(&backend), &name).without_write_history();
    let id = Padded::<6>::new(223).expect("six digits");
    let jones = by_id.get("Sales", id).await.expect("get").expect("stored");
    assert_eq!(jones.name, "Jones");
    let jones = by_email
        .get("Sales", "jonesj@contoso.com")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(jones.name, "Jones");
    let key = (
        Padded::<6>::new(123).expect("digits"),
        Padded::<4>::new(2012).expect("digits"),
    );
    let review = reviews
        .get("Sales", key)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(review.rating, 4);
    // Of the kind `empid`, only the `empid_` rows: one range, no other kind.
    let ids = by_id
        .query()
        .partition("Sales")
        .collect()
        .await
        .expect("query");
    assert_eq!(ids.len(), 1);

    by_id
        .insert(&EmployeeById {
            department: "Sales".into(),
            id: Padded::new(224).expect("digits"),
            name: "Smith".into(),
        })
        .await
        .expect("insert");
    let raw = backend
        .get_entity(&name, "Sales", "empid_000224", &Default::default())
        .await
        .expect("stored under the table's own layout");
    let names: Vec<&str> = raw.properties.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["name"], "no _Kind or _Version");

    partitions_read_by_layout(&*backend, &name, &by_id).await;
    backend.delete_table(&name).await.expect("delete table");
}

/// The whole partition as one enum, each row by its layout; a row no layout
/// claims follows the unknown-kind policy.
async fn partitions_read_by_layout(
    backend: &dyn TableBackend,
    name: &str,
    by_id: &Table<EmployeeById>,
) {
    use futures::TryStreamExt;
    use tablekit::Entity;
    // The whole partition as one enum, each row by its layout; a row no
    // layout claims follows the unknown-kind policy.
    let rows = by_id.of::<SeedRows>();
    let read: Vec<tablekit::table::Loaded<SeedRows>> = rows
        .read_partition("Sales", tablekit::UnknownKind::Fail)
        .try_collect()
        .await
        .expect("every row has its layout");
    let kinds: Vec<&str> = read
        .iter()
        .map(|row| match &**row {
            SeedRows::ById(_) => "by id",
            SeedRows::ByEmail(_) => "by email",
            SeedRows::Review(_) => "review",
        })
        .collect();
    assert_eq!(kinds, ["review", "by email", "by id", "by id"]);
    backend
        .insert_entity(name, &Entity::new("Sales", "stray").with("x", 1i32))
        .await
        .expect("a row of no layout");
    assert!(
        rows.read_partition("Sales", tablekit::UnknownKind::Fail)
            .try_collect::<Vec<_>>()
            .await
            .is_err(),
        "refused under Fail"
    );
    let skipped: Vec<_> = rows
        .read_partition("Sales", tablekit::UnknownKind::Skip)
        .try_collect()
        .await
        .expect("left out under Skip");
    assert_eq!(skipped.len(), 4);
}

/// A quarterly report under `2012-Q3`: a template with a text between its
/// fields.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Layouts", row_key = "{year}-Q{quarter}")]
struct QuarterReport {
    #[tablekit(partition_key)]
    region: String,
    #[tablekit(row_key)]
    year: tablekit::key::Padded<4>,
    #[tablekit(row_key)]
    quarter: tablekit::key::Padded<1>,
    revenue: i64,
}

/// A document under `doc:Annual report 2012.json`: a template around a
/// string.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Layouts", row_key = "doc:{title}.json")]
struct Document {
    #[tablekit(partition_key)]
    region: String,
    #[tablekit(row_key)]
    title: tablekit::key::Verbatim,
    pages: i32,
}

/// A typed write of a report and of a document stores the rows as the
/// templates lay them out, with no kind property.
async fn typed_writes_keep_the_layout(
    backend: &dyn TableBackend,
    name: &str,
    reports: &Table<QuarterReport>,
    documents: &Table<Document>,
) {
    use tablekit::key::Padded;
    reports
        .insert(&QuarterReport {
            region: "EU".into(),
            year: Padded::new(2013).expect("digits"),
            quarter: Padded::new(2).expect("digit"),
            revenue: 60,
        })
        .await
        .expect("insert");
    documents
        .insert(&Document {
            region: "EU".into(),
            title: "Plan 2014".into(),
            pages: 3,
        })
        .await
        .expect("insert");
    for rk in ["2013-Q2", "doc:Plan 2014.json"] {
        let raw = backend
            .get_entity(name, "EU", rk, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{rk:?} is stored: {e}"));
        assert!(
            raw.properties
                .get(tablekit::schema::KIND_PROPERTY)
                .is_none()
        );
    }
}

/// RowKey templates map layouts that other clients wrote, texts between
/// and around the fields included: rows written raw read back typed, typed
/// writes produce exactly the same keys, prefix queries and ranges stay
/// inside the template, and rows of another layout in the same partition
/// are never read as the type.
pub async fn key_templates_map_other_layouts(backend: Arc<dyn TableBackend>) {
    use tablekit::Entity;
    use tablekit::key::Padded;
    let name = unique_table("layouts");
    backend.create_table(&name).await.expect("create table");
    for (rk, property, value) in [
        ("2012-Q3", "revenue", tablekit::Value::Int64(30)),
        ("2012-Q4", "revenue", tablekit::Value::Int64(40)),
        ("2013-Q1", "revenue", tablekit::Value::Int64(50)),
        (
            "doc:Annual report 2012.json",
            "pages",
            tablekit::Value::Int32(12),
        ),
        ("doc:a.json.json", "pages", tablekit::Value::Int32(1)),
        ("zz other layout", "pages", tablekit::Value::Int32(0)),
    ] {
        let row = Entity::new("EU", rk).with(property, value);
        backend
            .insert_entity(&name, &row)
            .await
            .expect("raw insert");
    }
    let reports =
        Table::<QuarterReport>::from_arc(Arc::clone(&backend), &name).without_write_history();
    let documents = reports.of::<Document>();
    let q3 = reports
        .get(
            "EU",
            (
                Padded::<4>::new(2012).expect("4 digits"),
                Padded::<1>::new(3).expect("1 digit"),
            ),
        )
        .await
        .expect("get")
        .expect("stored");
    assert_eq!((q3.year.get(), q3.quarter.get(), q3.revenue), (2012, 3, 30));
    let of_2012 = reports
        .query()
        .partition("EU")
        .row_prefix((Padded::<4>::new(2012).expect("4 digits"),))
        .collect()
        .await
        .expect("prefix query");
    let quarters: Vec<u64> = of_2012.iter().map(|r| r.quarter.get()).collect();
    assert_eq!(quarters, [3, 4]);
    let report = documents
        .get("EU", "Annual report 2012")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(report.pages, 12);
    let odd = documents
        .get("EU", "a.json")
        .await
        .expect("get")
        .expect("the suffix is taken off once");
    assert_eq!(odd.pages, 1);
    // The documents' own query reads `doc:` rows only.
    let all = documents
        .query()
        .partition("EU")
        .collect()
        .await
        .expect("documents");
    assert_eq!(all.len(), 2);
    // Typed writes produce the same layout.
    typed_writes_keep_the_layout(&*backend, &name, &reports, &documents).await;
    let before_2013 = reports
        .query()
        .partition("EU")
        .rows(
            ..(
                Padded::new(2013).expect("digits"),
                Padded::new(0).expect("digit"),
            ),
        )
        .collect()
        .await
        .expect("a range");
    assert_eq!(before_2013.len(), 2);
    // A template without a leading text reads the whole partition: a row of
    // another layout is no row of the type, never a wrong value.
    let skipped = tablekit::table::SkippedRows::default();
    let fitting = reports
        .query()
        .partition("EU")
        .on_row_error(tablekit::table::RowErrors::Skip(skipped.clone()))
        .collect()
        .await
        .expect("a query");
    assert_eq!(fitting.len(), 4);
    assert_eq!(
        skipped.count(),
        4,
        "two documents, one other layout, one document written above"
    );
    backend.delete_table(&name).await.expect("delete table");
}

/// A web API's pages: `page_of(n)` hands out `n` items and a cursor valid
/// after any item, over partitions and the store's own short pages; the
/// pages together hold every item once; a cursor of another query, or text
/// that is no cursor, is refused.
pub async fn cursor_pages_cover_every_item_once(backend: Arc<dyn TableBackend>) {
    let name = unique_table("cursors");
    let contacts: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name);
    contacts.create_if_missing().await.expect("create table");
    let mut expected = Vec::new();
    for team in ["a", "a b", "b"] {
        for i in 0..7 {
            let contact = Contact {
                team: team.into(),
                name: format!("person {i:02}"),
                email: format!("{i}@{team}"),
            };
            expected.push((contact.team.clone(), contact.name.clone()));
            contacts.insert(&contact).await.expect("insert");
        }
    }
    for n in [1usize, 2, 5, 7, 20, 21, 1000] {
        let mut seen = Vec::new();
        let mut cursor: Option<tablekit::table::Cursor> = None;
        loop {
            let query = contacts
                .query()
                .filter(tablekit::filter::prop("email").ne(""));
            let query = match cursor.take() {
                // Through its text, as a web API hands it out and back.
                Some(c) => query.after(c.to_string().parse().expect("a cursor")),
                None => query,
            };
            let page = query.page_of(n).await.expect("a page");
            assert!(page.items.len() <= n);
            match page.next {
                Some(next) => {
                    assert_eq!(page.items.len(), n, "only the last page is short");
                    cursor = Some(next);
                }
                None => {
                    seen.extend(page.items.iter().map(|c| (c.team.clone(), c.name.clone())));
                    break;
                }
            }
            seen.extend(page.items.iter().map(|c| (c.team.clone(), c.name.clone())));
        }
        assert_eq!(seen, expected, "pages of {n}");
    }
    // A cursor belongs to its query.
    let page = contacts
        .query()
        .partition("a")
        .page_of(3)
        .await
        .expect("a page");
    let cursor = page.next.expect("more follow");
    let other = contacts
        .query()
        .partition("b")
        .after(cursor.clone())
        .page_of(3)
        .await;
    assert!(
        matches!(
            other,
            Err(tablekit::Error::Invalid(
                tablekit::InvalidInput::Cursor { .. }
            ))
        ),
        "{other:?}"
    );
    let same = contacts
        .query()
        .partition("a")
        .after(cursor)
        .page_of(3)
        .await
        .expect("the same query");
    assert_eq!(same.items[0].name, "person 03");
    damaged_cursors_are_refused();
    assert!(contacts.query().page_of(0).await.is_err());
    backend.delete_table(&name).await.expect("delete table");
}

/// A cursor that is not one, longer than any cursor written, or with keys
/// no row can have is refused as it is read, never sent to the store.
fn damaged_cursors_are_refused() {
    for junk in ["", "abc", "dGtjMQ", "%%%"] {
        assert!(junk.parse::<tablekit::table::Cursor>().is_err(), "{junk:?}");
    }
    // Longer than any cursor written, or keys no row can have: refused as
    // they are read, never sent to the store.
    use base64::Engine as _;
    let encode = |text: String| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let longest = encode(format!(
        "tkc1\n{:016x}\n{}\n{}",
        0u64,
        "\u{10000}".repeat(256),
        "\u{FFFF}".repeat(512)
    ));
    assert!(
        longest.parse::<tablekit::table::Cursor>().is_ok(),
        "the longest keys"
    );
    for junk in [
        "A".repeat(20_000),
        encode(format!("tkc1\n{:016x}\np\n{}", 0u64, "r".repeat(513))),
        encode(format!("tkc1\n{:016x}\np/q\nr", 0u64)),
    ] {
        assert!(
            matches!(
                junk.parse::<tablekit::table::Cursor>(),
                Err(tablekit::InvalidInput::Cursor { .. })
            ),
            "{:?}",
            &junk[..junk.len().min(40)]
        );
    }
}

/// A log keyed by an inverted timestamp and a sequence number.
#[derive(tablekit::TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Log", kind = "LOG")]
struct LogLine {
    #[tablekit(partition_key)]
    source: String,
    #[tablekit(row_key)]
    at: tablekit::key::InvertedTime,
    #[tablekit(row_key)]
    seq: u32,
    text: String,
}

/// A range over the leading RowKey component, whatever follows it: a log
/// tail from a time on, with no sentinel for the sequence number, on every
/// backend (the bounds reach the store as RowKey comparisons).
pub async fn row_prefix_ranges_need_no_sentinels(backend: Arc<dyn TableBackend>) {
    use tablekit::key::InvertedTime;
    let name = unique_table("logtail");
    let log: Table<LogLine> = Table::from_arc(Arc::clone(&backend), &name);
    log.create_if_missing().await.unwrap();
    let minute = |m: u32| {
        InvertedTime(tablekit::DateTime::parse(&format!("2026-11-23T10:{m:02}:00Z")).unwrap())
    };
    for m in 1..=5 {
        for seq in [0u32, 1, u32::MAX] {
            log.insert(&LogLine {
                source: "api".into(),
                at: minute(m),
                seq,
                text: format!("{m}/{seq}"),
            })
            .await
            .unwrap();
        }
    }
    let texts = |lines: Vec<tablekit::table::Loaded<LogLine>>| -> Vec<String> {
        lines.iter().map(|l| l.text.clone()).collect()
    };
    // From minute 3 back in time, newest first, every sequence number.
    let older = log
        .query()
        .partition("api")
        .row_prefix_range(minute(3)..)
        .limit(4)
        .collect()
        .await
        .unwrap();
    assert_eq!(texts(older), ["3/0", "3/1", "3/4294967295", "2/0"]);
    // Newer than minute 3: up to it, excluded.
    let newer = log
        .query()
        .partition("api")
        .row_prefix_range(..minute(3))
        .collect()
        .await
        .unwrap();
    assert_eq!(newer.len(), 6);
    assert!(
        newer
            .iter()
            .all(|l| l.text.starts_with('5') || l.text.starts_with('4'))
    );
    // Between two minutes, both included; and a start excluded.
    let between = log
        .query()
        .partition("api")
        .row_prefix_range(minute(4)..=minute(2))
        .collect()
        .await
        .unwrap();
    assert_eq!(between.len(), 9);
    let after = log
        .query()
        .partition("api")
        .row_prefix_range((
            std::ops::Bound::Excluded(minute(2)),
            std::ops::Bound::Unbounded,
        ))
        .collect()
        .await
        .unwrap();
    assert_eq!(texts(after), ["1/0", "1/1", "1/4294967295"]);
    backend.delete_table(&name).await.unwrap();
}
