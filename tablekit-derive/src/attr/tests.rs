use super::*;

/// Every attribute the derive reads is on its reference page, the docs
/// of `tablekit::TableEntity` (the one table of them users read).
#[test]
fn every_attribute_is_on_the_reference_page() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tablekit/src/schema/mod.rs");
    let page = std::fs::read_to_string(path).expect("the reference page");
    let table: String = page
        .lines()
        .filter(|line| line.starts_with("/// | `"))
        .map(|line| line.split(" | ").nth(1).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let named = |name: &str| {
        [" ", " =", "(", "`", ",", ")"].iter().any(|after| {
            ["`", "(", " ", ", "]
                .iter()
                .any(|before| table.contains(&format!("{before}{name}{after}")))
        })
    };
    // The derive's own lists (a new attribute joins them to be read at
    // all), and the options inside `index(…)`, `discriminator(…)` and
    // `flatten(…)`.
    let nested = [
        NAME, TAG, COPY, LIST, PARTITION, PROPERTY, VALUE, PREFIX, DELIMITER,
    ];
    let attributes = ENTITY_ATTRIBUTES
        .iter()
        .chain(FIELD_KEYWORDS)
        .chain(&nested)
        .copied();
    let missing: Vec<&str> = attributes.filter(|a| !named(a)).collect();
    assert!(missing.is_empty(), "not on TableEntity's page: {missing:?}");
    assert!(!named("no_such_attribute"), "the check can fail");
}
