//! Request paths and query strings, with keys quoted and percent-encoded.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but the unreserved characters of RFC 3986 is encoded.
pub const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A value as a URL component.
pub fn encode(value: &str) -> String {
    utf8_percent_encode(value, COMPONENT).to_string()
}

/// The OData literal of a key: single quotes doubled, then percent-encoded.
fn key_literal(key: &str) -> String {
    encode(&key.replace('\'', "''"))
}

/// The path of one entity: `/Table(PartitionKey='…',RowKey='…')`.
///
/// ```
/// use tablekit_azure::url::entity_path;
/// assert_eq!(entity_path("ops", "o'p", "a b"), "/ops(PartitionKey='o%27%27p',RowKey='a%20b')");
/// ```
pub fn entity_path(table: &str, pk: &str, rk: &str) -> String {
    format!(
        "/{table}(PartitionKey='{}',RowKey='{}')",
        key_literal(pk),
        key_literal(rk)
    )
}

/// The path of a table in the table list: `/Tables('name')`.
pub fn table_path(table: &str) -> String {
    format!("/Tables('{}')", key_literal(table))
}

/// A query string from pairs, each value percent-encoded.
pub fn query_string(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_quoted_then_encoded() {
        assert_eq!(entity_path("t", "", ""), "/t(PartitionKey='',RowKey='')");
        assert_eq!(
            entity_path("t", "a\"b", "é%+&*"),
            "/t(PartitionKey='a%22b',RowKey='%C3%A9%25%2B%26%2A')"
        );
        assert_eq!(
            entity_path("t", "''", "x"),
            "/t(PartitionKey='%27%27%27%27',RowKey='x')"
        );
        assert_eq!(table_path("MyTable"), "/Tables('MyTable')");
        assert_eq!(
            query_string(&[("$filter", "PartitionKey eq 'a b'"), ("$top", "5")]),
            "$filter=PartitionKey%20eq%20%27a%20b%27&$top=5"
        );
    }
}
