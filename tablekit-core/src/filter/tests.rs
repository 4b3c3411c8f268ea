use proptest::prelude::*;

use super::*;
use crate::datetime::DateTime;
use crate::entity::Entity;

#[test]
fn renders_typed_literals() {
    let t = DateTime::parse("2008-07-10T00:00:00Z").unwrap();
    let g = uuid::Uuid::parse_str("a455c695-df98-5678-aaaa-81d3367e5a34").unwrap();
    let cases: Vec<(Filter, &str)> = vec![
        (prop("S").eq("it's"), "S eq 'it''s'"),
        (prop("I").ge(123), "I ge 123"),
        (prop("L").lt(123i64), "L lt 123L"),
        (prop("D").gt(1.5), "D gt 1.5"),
        (prop("D").gt(2.0), "D gt 2.0"),
        (prop("D").gt(1e300), "D gt 1.0E+300"),
        (prop("D").gt(1.5e-7), "D gt 1.5E-7"),
        (prop("D").ne(f64::NAN), "D ne NaN"),
        (prop("D").ne(f64::NEG_INFINITY), "D ne -INF"),
        (prop("B").eq(true), "B eq true"),
        (prop("T").le(t), "T le datetime'2008-07-10T00:00:00Z'"),
        (
            prop("G").eq(g),
            "G eq guid'a455c695-df98-5678-aaaa-81d3367e5a34'",
        ),
        (prop("X").eq(vec![0x0a_u8, 0x0b]), "X eq X'0a0b'"),
    ];
    for (filter, text) in cases {
        assert_eq!(filter.to_string(), text);
        assert_eq!(Filter::parse(text).unwrap(), filter, "{text}");
    }
}

#[test]
fn hostile_strings_stay_literals() {
    let hostile = [
        "' or 1 eq 1 or '",
        "x') or (PartitionKey ne '",
        "''''",
        "a'b'c",
        "not (",
        "\u{0}\n\t",
        "PartitionKey eq 'a'",
        "'",
    ];
    for value in hostile {
        let f = Filter::partition_key().eq(value) & prop("Name").ne(value);
        let text = f.to_string();
        let back = Filter::parse(&text).unwrap();
        assert_eq!(back, f, "{text}");
        assert_eq!(back.comparison_count(), 2);
    }
}

#[test]
fn parses_the_service_dialect() {
    let f =
        Filter::parse("PartitionKey eq 'p' and RowKey ge 'a' and RowKey lt 'b' or not Age gt 30")
            .unwrap();
    let expected = ((Filter::partition_key().eq("p") & Filter::row_key().ge("a"))
        & Filter::row_key().lt("b"))
        | !prop("Age").gt(30);
    assert_eq!(f, expected);
    // A constant on the left is turned around.
    assert_eq!(Filter::parse("30 lt Age").unwrap(), prop("Age").gt(30));
    assert_eq!(
        Filter::parse("B eq binary'ff'").unwrap(),
        prop("B").eq(vec![255u8])
    );
    for bad in [
        "",
        "A eq",
        "A eq 'x",
        "A eq 1 B",
        "startswith(A, 'x')",
        "1 eq 1",
        "A B 1",
        "(A eq 1",
        "A eq 3000000000",
        "A eq datetime'nope'",
        "A eq guid'xyz'",
        "A eq X'abc'",
        "A eq foo'x'",
    ] {
        assert!(Filter::parse(bad).is_err(), "{bad:?} parsed");
    }
}

fn entity() -> Entity {
    Entity::new("p", "r")
        .with("S", "b")
        .with("I32", 5)
        .with("I64", 5i64)
        .with("D", 2.5)
        .with("Nan", f64::NAN)
        .with("B", true)
}

#[test]
fn missing_property_is_false_even_for_ne() {
    let e = entity();
    assert!(!prop("Missing").eq("x").matches(&e));
    assert!(!prop("Missing").ne("x").matches(&e));
    assert!((!prop("Missing").eq("x")).matches(&e));
}

#[test]
fn type_rules() {
    let e = entity();
    // Int64 vs Int32 constant, Double vs integers: numeric.
    assert!(prop("I64").eq(5).matches(&e));
    assert!(prop("I64").gt(4).matches(&e));
    assert!(prop("D").gt(2).matches(&e));
    assert!(prop("D").lt(3i64).matches(&e));
    // Int32 vs Int64 / Double constants never match.
    for op in [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Gt] {
        assert!(!prop("I32").compare(op, 5i64).matches(&e));
        assert!(!prop("I32").compare(op, 5.0).matches(&e));
    }
    // Other mismatches: eq/gt/ge false, ne/lt/le true.
    assert!(!prop("S").eq(1).matches(&e));
    assert!(prop("S").ne(1).matches(&e));
    assert!(prop("S").lt(1).matches(&e));
    assert!(prop("S").le(1).matches(&e));
    assert!(!prop("S").gt(1).matches(&e));
    assert!(!prop("S").ge(1).matches(&e));
    // Booleans: false < true.
    assert!(prop("B").gt(false).matches(&e));
    // NaN is unordered.
    assert!(!prop("Nan").eq(f64::NAN).matches(&e));
    assert!(prop("Nan").ne(1.0).matches(&e));
    // Keys compare by UTF-16 code units, case-sensitively.
    assert!(Filter::row_key().gt("B").matches(&e));
    assert!(!Filter::row_key().lt("R").matches(&e));
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::String),
        any::<i32>().prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        any::<f64>().prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        (DateTime::MIN.ticks()..=DateTime::MAX.ticks())
            .prop_map(|t| Value::DateTime(DateTime::from_ticks(t).unwrap())),
        any::<u128>().prop_map(|g| Value::Guid(uuid::Uuid::from_u128(g))),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Value::Binary),
    ]
}

fn any_op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(CompareOp::ALL.to_vec())
}

fn any_filter() -> impl Strategy<Value = Filter> {
    let op = any_op();
    // Names that are keywords of the dialect are not valid property names.
    let name = "[A-Za-z_][A-Za-z0-9_]{0,8}".prop_filter("keyword", |n| {
        ![
            "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false", "NaN", "INF",
        ]
        .contains(&n.as_str())
    });
    let leaf = (name, op, any_value()).prop_map(|(property, op, value)| Filter::Compare {
        property,
        op,
        value,
    });
    combined(leaf, 16)
}

/// Trees of `and`, `or` and `not` over `leaf`, up to `size` nodes.
fn combined(
    leaf: impl Strategy<Value = Filter> + 'static,
    size: u32,
) -> impl Strategy<Value = Filter> {
    leaf.prop_recursive(4, size, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a & b),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a | b),
            inner.prop_map(|f| !f),
        ]
    })
}

proptest! {
    /// Whatever the values, the rendered text parses back to the same tree:
    /// no value can change a filter's structure.
    #[test]
    fn render_parse_round_trip(filter in any_filter()) {
        let text = filter.to_string();
        let back = Filter::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(back, filter);
    }
}

/// 10,000 nested `(` and 100,000 `not`s are refused with a typed error, not a
/// stack overflow.
#[test]
fn deep_text_is_refused_not_a_crash() {
    let parens = format!("{}A eq 1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(matches!(
        Filter::parse(&parens),
        Err(crate::error::InvalidInput::FilterTooDeep { .. })
    ));
    let nots = format!("{}A eq 1", "not ".repeat(100_000));
    assert!(matches!(
        Filter::parse(&nots),
        Err(crate::error::InvalidInput::FilterTooDeep { .. })
    ));
    // Up to the limit it still parses.
    let depth = crate::validate::limits::MAX_FILTER_DEPTH;
    let fits = format!("{}A eq 1{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(Filter::parse(&fits).unwrap(), prop("A").eq(1));
}

/// A filter built in code with 100,000 terms (or `not`s) can be counted,
/// measured, validated, cloned, compared, rendered, evaluated and dropped.
#[test]
fn deep_trees_never_recurse() {
    let mut wide = prop("A").eq(0);
    for i in 1..100_000 {
        wide = wide | prop("A").eq(i);
    }
    assert_eq!(wide.comparison_count(), 100_000);
    assert_eq!(wide.depth(), 100_000);
    assert!(matches!(
        crate::validate::filter(&wide),
        Err(crate::error::InvalidInput::FilterTooComplex { count: 100_000, .. })
    ));
    let copy = wide.clone();
    assert!(copy == wide);
    assert!(wide.to_string().ends_with("(A eq 99999)"));
    let mut e = entity();
    e.insert("A", 99_999);
    assert!(wide.matches(&e));
    e.insert("A", 100_000);
    assert!(!wide.matches(&e));
    drop(copy);
    drop(wide);

    let mut nots = prop("A").eq(1);
    for _ in 0..100_000 {
        nots = !nots;
    }
    assert_eq!(nots.comparison_count(), 1);
    assert!(matches!(
        crate::validate::filter(&nots),
        Err(crate::error::InvalidInput::FilterTooDeep { depth: 100_001, .. })
    ));
    e.insert("A", 1);
    assert!(nots.matches(&e), "an even number of `not`s");
    drop(nots);
}

/// Names that would change the structure of the rendered text are refused by
/// the validator every backend runs; key and system names are accepted.
#[test]
fn hostile_property_names_are_refused() {
    for hostile in [
        "Name ne 'q') or (Name",
        "x eq 0) or (Daily_y",
        "a b",
        "",
        "a'b",
        "odata.type",
        "$x",
        "and",
        "OR",
        "Not",
        "true",
        "NaN",
        "eq",
    ] {
        let filter = prop(hostile).eq("x");
        assert!(
            matches!(
                crate::validate::filter(&filter),
                Err(crate::error::InvalidInput::FilterPropertyName { .. })
            ),
            "{hostile:?}"
        );
        let nested = Filter::partition_key().eq("tenant") & !prop(hostile).eq(1);
        assert!(crate::validate::filter(&nested).is_err(), "{hostile:?}");
    }
    for fine in [
        "PartitionKey",
        "RowKey",
        "Timestamp",
        "Name",
        "_x1",
        "Größe",
        "Android",
    ] {
        assert!(crate::validate::filter(&prop(fine).eq(1)).is_ok(), "{fine}");
    }
}

fn key_filter() -> impl Strategy<Value = Filter> {
    let op = any_op();
    let key = prop_oneof![Just("PartitionKey"), Just("RowKey"), Just("Other")];
    let leaf = (key, op, "[ab\u{E000}\u{10000}]{0,3}")
        .prop_map(|(key, op, value)| prop(key).compare(op, value));
    combined(leaf, 12)
}

proptest! {
    /// Every entity a filter matches lies inside the key ranges it reports.
    #[test]
    fn key_ranges_hold_every_match(
        filter in key_filter(),
        pk in "[ab\u{E000}\u{10000}]{0,3}",
        rk in "[ab\u{E000}\u{10000}]{0,3}",
    ) {
        let entity = Entity::new(pk.clone(), rk.clone()).with("Other", "a");
        if filter.matches(&entity) {
            prop_assert!(filter.key_range("PartitionKey").contains(&pk), "{} {:?}", filter, pk);
            prop_assert!(filter.key_range("RowKey").contains(&rk), "{} {:?}", filter, rk);
            prop_assert!(!filter.key_range("PartitionKey").is_empty());
        }
    }
}
