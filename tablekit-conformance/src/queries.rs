//! Queries: ordering, paging, continuation, filters.

use super::{assert_invalid, fresh_table};
use tablekit::DateTime;
use tablekit::Entity;
use tablekit::TableBackendExt;
use tablekit::backend::{BatchOperation, ContinuationToken, Query, TableBackend};
use tablekit::filter::{Filter, prop};
use tablekit::keyorder::cmp_utf16;
use tablekit::{Error, InvalidInput};

/// Inserts entities through batches of up to 100 (one partition each).
pub async fn load(backend: &dyn TableBackend, table: &str, entities: Vec<Entity>) {
    let mut by_partition: std::collections::BTreeMap<String, Vec<Entity>> = Default::default();
    for e in entities {
        by_partition
            .entry(e.partition_key.clone())
            .or_default()
            .push(e);
    }
    for (_, group) in by_partition {
        for chunk in group.chunks(100) {
            let ops: Vec<_> = chunk.iter().cloned().map(BatchOperation::Insert).collect();
            backend
                .submit_transaction(table, &ops)
                .await
                .expect("load batch");
        }
    }
}

/// Keys as the store was seen to order them, in UTF-16 order.
pub const ORDERED_KEYS: [&str; 30] = tablekit::keyorder::VERIFIED_ORDER;

/// Results come sorted by PartitionKey, then RowKey, by UTF-16 code units:
/// case-sensitive, upper case first, supplementary characters before U+E000.
pub async fn keys_sort_by_utf16_code_units(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "order").await;
    let mut entities = Vec::new();
    for (i, pk) in ORDERED_KEYS.iter().enumerate().rev().step_by(7) {
        for rk in ORDERED_KEYS.iter().rev() {
            entities.push(Entity::new(*pk, *rk).with("i", i as i32));
        }
    }
    load(backend, &table, entities.clone()).await;
    let read = backend
        .query_all(&table, Query::new())
        .await
        .expect("query");
    let keys: Vec<(String, String)> = read
        .into_iter()
        .map(|e| (e.partition_key, e.row_key))
        .collect();
    let mut expected: Vec<(String, String)> = entities
        .into_iter()
        .map(|e| (e.partition_key, e.row_key))
        .collect();
    expected.sort_by(|a, b| cmp_utf16(&a.0, &b.0).then_with(|| cmp_utf16(&a.1, &b.1)));
    assert_eq!(
        keys, expected,
        "results must be in (PartitionKey, RowKey) order by UTF-16 code units"
    );

    // Range filters use the same order. (Partitions are every 7th key from the end.)
    let pk = ORDERED_KEYS[29];
    let range = Filter::partition_key().eq(pk) & Filter::row_key().ge("\u{E000}");
    let found = backend
        .query_all(&table, Query::new().filter(range))
        .await
        .expect("range query");
    let rows: Vec<&str> = found.iter().map(|e| e.row_key.as_str()).collect();
    assert_eq!(
        rows,
        ["\u{E000}", "\u{FF21}"],
        "RowKey ge U+E000 excludes supplementary characters"
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// Queries return at most 1,000 entities a page; following the tokens (also
/// through their string form, as a resumed query would) yields every match
/// exactly once, and in key order unless the backend says its order is
/// unspecified. Pages may be short or empty before the end.
pub async fn queries_page_and_resume(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "paging").await;
    let mut entities = Vec::new();
    for (pk, count) in [("pa", 1000), ("pb", 1000), ("pc", 505)] {
        for i in 0..count {
            entities.push(Entity::new(pk, format!("r{i:05}")).with("n", i));
        }
    }
    load(backend, &table, entities).await;

    let mut query = Query::new();
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = backend.query_entities(&table, &query).await.expect("page");
        pages += 1;
        assert!(
            page.entities.len() <= 1000,
            "a page holds at most 1,000 entities"
        );
        seen.extend(
            page.entities
                .into_iter()
                .map(|e| (e.partition_key, e.row_key)),
        );
        let Some(token) = page.continuation else {
            break;
        };
        // Resume from the serialized token, as after a restart.
        let text = token.to_string();
        query.continuation = Some(text.parse::<ContinuationToken>().expect("token parses"));
        assert!(pages < 10_000, "paging does not end");
    }
    assert!(
        pages >= 3,
        "2,505 entities need at least three pages, got {pages}"
    );
    assert_eq!(seen.len(), 2505, "every entity exactly once");
    if backend.query_order() == tablekit::QueryOrder::Keys {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "pages continue in key order without repeats"
        );
    } else {
        // A store that does not sort still returns each match once.
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 2505, "no entity twice");
    }

    // A filtered query pages the same way.
    let filter = prop("n").ge(500) & prop("n").lt(502);
    let found = backend
        .query_all(&table, Query::new().filter(filter))
        .await
        .expect("filtered");
    assert_eq!(found.len(), 6, "two matches in each of three partitions");
    backend.delete_table(&table).await.expect("delete table");
}

/// `top` limits each page, not the total.
pub async fn top_limits_each_page(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "top").await;
    load(
        backend,
        &table,
        (0..25)
            .map(|i| Entity::new("p", format!("{i:03}")))
            .collect(),
    )
    .await;
    let mut query = Query::new().top(7);
    let mut total = 0;
    loop {
        let page = backend.query_entities(&table, &query).await.expect("page");
        assert!(
            page.entities.len() <= 7,
            "a page holds at most `top` entities"
        );
        total += page.entities.len();
        if page.continuation.is_none() {
            break;
        }
        query.continuation = page.continuation;
    }
    assert_eq!(total, 25);
    backend.delete_table(&table).await.expect("delete table");
}

/// Filters compare typed values as the service does: every operator, and/or/not,
/// a missing property makes a comparison false.
pub async fn filters_follow_the_service_rules(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "filter").await;
    let t0 = DateTime::parse("2020-01-01T00:00:00Z").expect("valid");
    let t1 = DateTime::parse("2021-06-15T12:30:00.1234567Z").expect("valid");
    let g = tablekit::uuid::Uuid::from_u128(42);
    let rows = vec![
        Entity::new("p", "a")
            .with("n", 1)
            .with("l", 10i64)
            .with("d", 1.5)
            .with("b", true)
            .with("t", t0),
        Entity::new("p", "b")
            .with("n", 2)
            .with("l", 20i64)
            .with("d", 2.5)
            .with("b", false)
            .with("t", t1)
            .with("g", g),
        Entity::new("p", "c")
            .with("n", 3)
            .with("s", "x")
            .with("bin", vec![1u8, 2]),
        Entity::new("q", "a").with("n", 4),
    ];
    load(backend, &table, rows).await;
    let rows_of = |filter: Filter| {
        let table = table.clone();
        async move {
            let found = backend
                .query_all(&table, Query::new().filter(filter.clone()))
                .await
                .expect("query");
            found
                .into_iter()
                .map(|e| format!("{}{}", e.partition_key, e.row_key))
                .collect::<Vec<_>>()
        }
    };
    let cases: Vec<(Filter, &[&str])> = vec![
        (prop("n").eq(2), &["pb"]),
        (prop("n").ne(2), &["pa", "pc", "qa"]),
        (prop("n").gt(2), &["pc", "qa"]),
        (prop("n").ge(2), &["pb", "pc", "qa"]),
        (prop("n").lt(2), &["pa"]),
        (prop("n").le(2), &["pa", "pb"]),
        (prop("l").gt(15i64), &["pb"]),
        (prop("d").lt(2.0), &["pa"]),
        (prop("b").eq(true), &["pa"]),
        (prop("t").gt(t0), &["pb"]),
        (prop("t").eq(t1), &["pb"]),
        // The bounds a typed filter compares a time outside them with.
        (prop("t").ge(DateTime::MIN), &["pa", "pb"]),
        (prop("t").lt(DateTime::MIN), &[]),
        (prop("t").le(DateTime::MAX), &["pa", "pb"]),
        (prop("t").gt(DateTime::MAX), &[]),
        (prop("g").eq(g), &["pb"]),
        (prop("bin").eq(vec![1u8, 2]), &["pc"]),
        (prop("s").eq("x"), &["pc"]),
        (Filter::partition_key().eq("q"), &["qa"]),
        (
            Filter::partition_key().eq("p") & Filter::row_key().gt("a"),
            &["pb", "pc"],
        ),
        (
            Filter::row_key().eq("a") | prop("n").eq(3),
            &["pa", "pc", "qa"],
        ),
        (!prop("n").lt(3), &["pc", "qa"]),
        // A missing property makes the comparison false, `ne` included.
        (prop("s").ne("y"), &["pc"]),
        (prop("missing").eq(1), &[]),
        (!prop("missing").eq(1), &["pa", "pb", "pc", "qa"]),
    ];
    for (filter, expected) in cases {
        let text = filter.to_string();
        assert_eq!(rows_of(filter).await, expected, "filter {text}");
    }
    backend.delete_table(&table).await.expect("delete table");
}

/// Hostile string values stay literals: they match only themselves and never
/// widen the filter.
pub async fn filter_values_cannot_inject(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "inject").await;
    let hostile = [
        "' or 1 eq 1 or '",
        "x') or (PartitionKey ne '",
        "O'Brien",
        "''",
        "a' or RowKey ne 'b",
        "%27 or true",
    ];
    let mut rows = vec![Entity::new("p", "plain").with("Name", "plain")];
    for (i, value) in hostile.iter().enumerate() {
        rows.push(Entity::new("p", format!("h{i}")).with("Name", *value));
    }
    load(backend, &table, rows).await;
    for (i, value) in hostile.iter().enumerate() {
        let found = backend
            .query_all(&table, Query::new().filter(prop("Name").eq(*value)))
            .await
            .expect("query");
        let keys: Vec<&str> = found.iter().map(|e| e.row_key.as_str()).collect();
        assert_eq!(
            keys,
            [format!("h{i}")],
            "Name eq {value:?} must match exactly that entity"
        );
        let by_key = Filter::partition_key().eq(*value);
        let none = backend
            .query_all(&table, Query::new().filter(by_key))
            .await
            .expect("query");
        assert!(
            none.is_empty(),
            "PartitionKey eq {value:?} must match nothing"
        );
    }
    backend.delete_table(&table).await.expect("delete table");
}

/// Property names that would change a filter's structure (or a `$select`'s)
/// are refused before any request, as typed errors; nothing is returned.
pub async fn filter_names_cannot_inject(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "names").await;
    let mut rows = Vec::new();
    for tenant in ["t1", "t2", "t3"] {
        for i in 0..3 {
            rows.push(Entity::new(tenant, format!("r{i}")).with("Name", "x"));
        }
    }
    load(backend, &table, rows).await;
    let hostile = [
        "Name ne 'q') or (Name",
        "x eq 0) or (Daily_y",
        "Name eq 'x' or PartitionKey",
        "Name,PartitionKey",
        "a b",
        "",
        "not",
        "OR",
        "true",
    ];
    for name in hostile {
        let scoped = Filter::partition_key().eq("t1") & prop(name).eq("x");
        assert_invalid(
            backend
                .query_entities(&table, &Query::new().filter(scoped))
                .await,
            &format!("filter naming {name:?}"),
            |e| matches!(e, InvalidInput::FilterPropertyName { .. }),
        );
        let negated = Filter::partition_key().eq("t1") & !prop(name).ne(1);
        assert_invalid(
            backend
                .query_entities(&table, &Query::new().filter(negated))
                .await,
            &format!("negated filter naming {name:?}"),
            |e| matches!(e, InvalidInput::FilterPropertyName { .. }),
        );
        // In `$select` only the characters matter: a keyword is a fine name there.
        if tablekit::validate::property_name(name).is_err() {
            let select = backend
                .query_entities(&table, &Query::new().select([name]))
                .await;
            assert!(
                matches!(select, Err(Error::Invalid(_))),
                "$select of {name:?} must be refused, got {select:?}"
            );
        }
    }
    // A deep filter is refused too, whoever built it.
    let mut deep = Filter::partition_key().eq("t1");
    for _ in 0..1000 {
        deep = !deep;
    }
    assert_invalid(
        backend
            .query_entities(&table, &Query::new().filter(deep))
            .await,
        "a filter 1,001 levels deep",
        |e| matches!(e, InvalidInput::FilterTooDeep { .. }),
    );
    // The key names and ordinary names still work, and stay in the tenant.
    let scoped = Filter::partition_key().eq("t1") & prop("Name").eq("x");
    let found = backend
        .query_all(&table, Query::new().filter(scoped))
        .await
        .expect("query");
    assert_eq!(found.len(), 3);
    assert!(found.iter().all(|e| e.partition_key == "t1"));
    backend.delete_table(&table).await.expect("delete table");
}

/// Random filters over rows holding a property of every type agree with the
/// filter's own evaluation ([`Filter::matches`], the service's rules): the
/// store reads the filter as the library meant it. Over REST this checks
/// how every literal and name is rendered; on a backend that evaluates
/// trees, that it evaluates them by those rules. Comparisons stay within
/// one type, with values a millisecond apart or more, where the emulator
/// is known to follow the service.
pub async fn random_filters_agree_with_the_evaluator(backend: &dyn TableBackend) {
    use tablekit::Value;
    use tablekit::filter::CompareOp;
    let table = fresh_table(backend, "randfilter").await;
    let mut rng = fastrand::Rng::with_seed(0x7ab1e);
    let texts = [
        "", "a", "A", "a b", "O'Brien", "''", "ß", "ss", "é", "\u{E000}", "😀", "z%20&+",
    ];
    let times = [
        "1601-01-01T00:00:00Z",
        "1999-12-31T23:59:59.999Z",
        "2020-01-01T00:00:00Z",
        "2020-01-01T00:00:00.001Z",
        "9999-12-31T23:59:59Z",
    ]
    .map(|t| DateTime::parse(t).expect("valid"));
    let guids = [0u128, 1, u128::MAX].map(tablekit::uuid::Uuid::from_u128);
    let binaries: [&[u8]; 3] = [&[], &[0], &[1, 2, 255]];
    // One value of `name`'s type, drawn from a small pool so equal values
    // occur.
    let value_of = |rng: &mut fastrand::Rng, name: &str| -> Value {
        match name {
            "S" => Value::String(texts[rng.usize(..texts.len())].to_owned()),
            "I" => Value::Int32([i32::MIN, -1, 0, 1, 7, i32::MAX][rng.usize(..6)]),
            "L" => Value::Int64([i64::MIN, -1, 0, 1, 1 << 40, i64::MAX][rng.usize(..6)]),
            "D" => Value::Double([-1.5, 0.0, 0.25, 1e10, -1e-3, 3.0][rng.usize(..6)]),
            "B" => Value::Boolean(rng.bool()),
            "T" => Value::DateTime(times[rng.usize(..times.len())]),
            "G" => Value::Guid(guids[rng.usize(..guids.len())]),
            _ => Value::Binary(binaries[rng.usize(..binaries.len())].to_vec()),
        }
    };
    const NAMES: [&str; 8] = ["S", "I", "L", "D", "B", "T", "G", "X"];
    let partitions = ["p", "O'x", "é"];
    let mut rows = Vec::new();
    for i in 0..36 {
        let mut e = Entity::new(
            partitions[i % 3],
            format!("{}{i:02}", texts[i % texts.len()]),
        );
        for name in NAMES {
            // Some rows lack some properties: a comparison with a missing
            // property is false.
            if rng.u8(..5) != 0 {
                e.properties.insert(name, value_of(&mut rng, name));
            }
        }
        rows.push(e);
    }
    load(backend, &table, rows.clone()).await;
    fn random_filter(
        rng: &mut fastrand::Rng,
        depth: usize,
        value_of: &dyn Fn(&mut fastrand::Rng, &str) -> Value,
        texts: &[&str],
    ) -> Filter {
        if depth == 0 || rng.u8(..3) == 0 {
            let op = CompareOp::ALL[rng.usize(..CompareOp::ALL.len())];
            return match rng.u8(..10) {
                0 => Filter::partition_key().compare(op, ["p", "O'x", "é", "q"][rng.usize(..4)]),
                1 => Filter::row_key().compare(op, texts[rng.usize(..texts.len())]),
                _ => {
                    let name = NAMES[rng.usize(..NAMES.len())];
                    // Booleans, GUIDs and binaries are compared for equality
                    // only: the emulator orders them as texts.
                    let op = match name {
                        "B" | "G" | "X" => [CompareOp::Eq, CompareOp::Ne][rng.usize(..2)],
                        _ => op,
                    };
                    prop(name).compare(op, value_of(rng, name))
                }
            };
        }
        let a = random_filter(rng, depth - 1, value_of, texts);
        match rng.u8(..3) {
            0 => !a,
            1 => a & random_filter(rng, depth - 1, value_of, texts),
            _ => a | random_filter(rng, depth - 1, value_of, texts),
        }
    }
    let key = |e: &Entity| format!("{}|{}", e.partition_key, e.row_key);
    for _ in 0..200 {
        let filter = random_filter(&mut rng, 3, &value_of, &texts);
        let text = filter.to_string();
        let mut expected: Vec<String> =
            rows.iter().filter(|e| filter.matches(e)).map(key).collect();
        let mut found: Vec<String> = backend
            .query_all(&table, Query::new().filter(filter))
            .await
            .unwrap_or_else(|e| panic!("filter {text}: {e}"))
            .iter()
            .map(key)
            .collect();
        expected.sort();
        found.sort();
        assert_eq!(found, expected, "filter {text}");
    }
    backend.delete_table(&table).await.expect("delete table");
}

/// A row as a comparison sees it: keys, ETag, Timestamp and properties
/// sorted by name.
type Seen = (
    String,
    String,
    String,
    Option<DateTime>,
    Vec<(String, String)>,
);

/// What an entity read says of its row ([`seen_of`]).
fn seen_entity(e: &Entity) -> Seen {
    let etag = e.etag.as_ref().expect("an entity read has an ETag");
    seen_of(
        &e.partition_key,
        &e.row_key,
        etag,
        e.timestamp,
        &e.properties,
    )
}

/// What a row passed by reference says of itself ([`seen_of`]).
fn seen_row(row: &tablekit::RowRef<'_>) -> Seen {
    seen_of(
        row.partition_key,
        row.row_key,
        row.etag,
        Some(row.timestamp),
        row.properties,
    )
}

fn seen_of(
    partition_key: &str,
    row_key: &str,
    etag: &tablekit::ETag,
    timestamp: Option<DateTime>,
    properties: &tablekit::Properties,
) -> Seen {
    let mut props: Vec<_> = properties
        .iter()
        .map(|(name, value)| (name.to_owned(), format!("{value:?}")))
        .collect();
    props.sort();
    (
        partition_key.to_owned(),
        row_key.to_owned(),
        etag.to_string(),
        timestamp,
        props,
    )
}

/// The pages of `query`, read as entities and passed row by row
/// ([`TableBackend::read_rows`]) where the backend passes them by reference: the same
/// rows in the same order, each as the entities give it, each way following
/// its own continuation tokens.
/// A query the backend does not pass by reference is refused as such, passing nothing.
pub async fn borrowed_rows_are_the_entities(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "borrowed").await;
    let entities = rows_of_every_type();
    load(backend, &table, entities).await;
    let queries = [
        Query::new(),
        Query::new().filter(Filter::partition_key().eq("lb\u{E000}")),
        Query::new().filter(
            Filter::partition_key().eq("la")
                & Filter::row_key().ge("r0010")
                & Filter::row_key().lt("r0100"),
        ),
        Query::new().top(7),
        Query::new().filter(prop("n").lt(20)),
        Query::new().select(["n"]),
    ];
    let mut by_reference_queries = 0;
    for query in queries {
        let mut query = query;
        if !backend.reads_rows(&query) {
            let mut passed = 0;
            let refused = backend
                .read_rows(&table, &query, &mut |_| {
                    passed += 1;
                    Ok(())
                })
                .await;
            assert!(
                matches!(refused, Err(Error::NotSupported { .. })),
                "a query not passed by reference is refused: {refused:?}"
            );
            assert_eq!(passed, 0, "and nothing is passed");
            continue;
        }
        by_reference_queries += 1;
        // Each way follows its own continuation tokens: a store may end its
        // pages anywhere (short and empty pages), so the rows of the whole
        // query are compared, which also holds the tokens to their rows.
        let mut as_entities = Vec::new();
        let mut by_entities = query.clone();
        loop {
            let page = backend
                .query_entities(&table, &by_entities)
                .await
                .expect("page");
            as_entities.extend(page.entities.iter().map(seen_entity));
            match page.continuation {
                Some(token) => by_entities.continuation = Some(token),
                None => break,
            }
        }
        let mut as_borrowed = Vec::new();
        loop {
            let mut read = |row: tablekit::RowRef<'_>| {
                as_borrowed.push(seen_row(&row));
                Ok(())
            };
            let next = backend
                .read_rows(&table, &query, &mut read)
                .await
                .expect("borrowed page");
            match next {
                Some(token) => query.continuation = Some(token),
                None => break,
            }
        }
        assert_eq!(as_borrowed, as_entities, "the rows of {query:?}");
        assert!(!as_entities.is_empty(), "{query:?} reads rows");
    }
    if backend.reads_rows(&Query::new()) {
        assert!(
            by_reference_queries >= 4,
            "every key range is passed by reference"
        );
    }
    rows_read_by_key_are_the_entities(backend, &table).await;
    backend.delete_table(&table).await.expect("delete table");
}

/// Each row of `table` read by key and passed by reference
/// ([`TableBackend::read_row`]) is the entity `get_entity` gives, where the
/// backend reads rows so (it must, when it passes a query's rows by
/// reference); a missing row passes nothing, and a missing table is
/// `TableNotFound`. A backend that does not read rows so refuses, passing
/// nothing.
async fn rows_read_by_key_are_the_entities(backend: &dyn TableBackend, table: &str) {
    let every = tablekit::TableBackendExt::query_all(backend, table, Query::new())
        .await
        .expect("every row");
    let missing = [
        (every[0].partition_key.as_str(), "no such row"),
        ("no such partition", every[0].row_key.as_str()),
    ];
    let mut by_key = 0;
    for entity in every.iter().step_by(7) {
        let (pk, rk) = (&*entity.partition_key, &*entity.row_key);
        let mut passed = Vec::new();
        let found = backend
            .read_row(table, pk, rk, &mut |row: tablekit::RowRef<'_>| {
                passed.push(seen_row(&row));
                Ok(())
            })
            .await;
        match found {
            Ok(true) => {
                let expected = backend
                    .get_entity(table, pk, rk, &Default::default())
                    .await
                    .expect("get");
                assert_eq!(passed, vec![seen_entity(&expected)], "{pk:?} {rk:?}");
                by_key += 1;
            }
            Err(Error::NotSupported { .. }) => {
                assert!(passed.is_empty(), "a refusal passes nothing");
                assert!(
                    !backend.reads_rows(&Query::new()),
                    "a backend that passes a query's rows by reference reads them by key too"
                );
            }
            other => panic!("{pk:?} {rk:?}: {other:?}"),
        }
    }
    if by_key == 0 {
        return;
    }
    for (pk, rk) in missing {
        let mut passed = 0;
        let found = backend
            .read_row(table, pk, rk, &mut |_| {
                passed += 1;
                Ok(())
            })
            .await;
        assert!(matches!(found, Ok(false)), "{pk:?} {rk:?}: {found:?}");
        assert_eq!(passed, 0, "nothing is passed for a missing row");
    }
    let (pk, rk) = (&*every[0].partition_key, &*every[0].row_key);
    let found = backend
        .read_row("NoSuchTable0", pk, rk, &mut |_| Ok(()))
        .await;
    assert!(
        matches!(found, Err(Error::TableNotFound { .. })),
        "{found:?}"
    );
}

/// Rows in three partitions (keys with private-use and astral characters),
/// with a value of every type and properties that differ from row to row.
fn rows_of_every_type() -> Vec<Entity> {
    let mut entities = Vec::new();
    for pk in ["la", "lb\u{E000}", "lc\u{1F600}"] {
        for i in 0..120 {
            entities.push(
                Entity::new(pk, format!("r{i:04}\u{FFFD}"))
                    .with("n", i)
                    .with("text", format!("row {i} of {pk}"))
                    .with("flag", i % 2 == 0)
                    .with(format!("only{}", i % 7), i64::from(i) * 3)
                    .with("ratio", f64::from(i) / 7.0)
                    .with("bytes", vec![i as u8; (i % 5) as usize])
                    .with("id", tablekit::uuid::Uuid::from_u128(u128::from(i as u32)))
                    .with(
                        "when",
                        DateTime::from_ticks(638_000_000_000_000_000 + i64::from(i))
                            .expect("a time"),
                    ),
            );
        }
    }
    entities
}
