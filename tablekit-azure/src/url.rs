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

/// Appends the OData literal of a key to `out`: single quotes doubled,
/// then percent-encoded (a quote is `%27%27`). Written into one string, as
/// every request builds one or two.
fn push_key_literal(out: &mut String, key: &str) {
    for chunk in utf8_percent_encode(key, COMPONENT) {
        out.push_str(chunk);
        if chunk == "%27" {
            out.push_str(chunk);
        }
    }
}

/// The path of one entity: `/Table(PartitionKey='…',RowKey='…')`.
///
/// ```
/// use tablekit_azure::url::entity_path;
/// assert_eq!(entity_path("ops", "o'p", "a b"), "/ops(PartitionKey='o%27%27p',RowKey='a%20b')");
/// ```
pub fn entity_path(table: &str, pk: &str, rk: &str) -> String {
    let mut path = String::with_capacity(table.len() + pk.len() + rk.len() + 32);
    path.push('/');
    path.push_str(table);
    path.push_str("(PartitionKey='");
    push_key_literal(&mut path, pk);
    path.push_str("',RowKey='");
    push_key_literal(&mut path, rk);
    path.push_str("')");
    path
}

/// The path of a table in the table list: `/Tables('name')`.
pub fn table_path(table: &str) -> String {
    let mut path = String::from("/Tables('");
    push_key_literal(&mut path, table);
    path.push_str("')");
    path
}

/// A query string from pairs, each value percent-encoded.
pub fn query_string(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The host of an endpoint URL (`acme.table.core.windows.net` of
/// `https://acme.table.core.windows.net:443/`), as written; `[::1]` keeps
/// its brackets.
///
/// ```
/// use tablekit_azure::url::host_of;
/// assert_eq!(host_of("https://acme.table.core.windows.net:443/x"), "acme.table.core.windows.net");
/// assert_eq!(host_of("http://[::1]:10002/devstoreaccount1"), "[::1]");
/// assert_eq!(host_of("http://user@host"), "host");
/// ```
pub fn host_of(endpoint: &str) -> &str {
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or(authority);
    }
    authority.split(':').next().unwrap_or_default()
}

/// The account an endpoint names: the first segment of its path where it
/// has one (`https://127.0.0.1:10712/devstoreaccount1`, the emulator's
/// path-style form, `true`), else its host's first label
/// (`https://acme.table.core.windows.net`, `false`). `None` when neither
/// names one: no path, and a host that is an IP address or a single label
/// (`https://10.1.2.3`, `https://localhost:10002`), whose first label is
/// no account.
///
/// ```
/// use tablekit_azure::url::account_of;
/// assert_eq!(account_of("https://acme.table.core.windows.net/"), Some(("acme", false)));
/// assert_eq!(account_of("https://127.0.0.1:10712/devstoreaccount1"), Some(("devstoreaccount1", true)));
/// assert_eq!(account_of("https://[::1]:10002/dev/"), Some(("dev", true)));
/// assert_eq!(account_of("https://127.0.0.1:10712"), None);
/// assert_eq!(account_of("https://localhost"), None);
/// ```
pub fn account_of(endpoint: &str) -> Option<(&str, bool)> {
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let first_segment = rest
        .find('/')
        .map(|at| &rest[at..])
        .and_then(|path| path.trim_start_matches('/').split(['/', '?', '#']).next())
        .filter(|segment| !segment.is_empty());
    if let Some(name) = first_segment {
        return Some((name, true));
    }
    let host = host_of(endpoint);
    let is_address = host.starts_with('[') || host.parse::<std::net::IpAddr>().is_ok();
    match host.split_once('.') {
        Some((label, _)) if !is_address && !label.is_empty() => Some((label, false)),
        _ => None,
    }
}

/// The path an endpoint puts before every resource: `/devstoreaccount1` for
/// the emulator's path-style URLs, empty for the cloud's.
pub(crate) fn path_prefix(endpoint: &str) -> String {
    endpoint
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_owned()))
        .unwrap_or_default()
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
        // Written in one pass, the path is the quoting then the encoding of
        // each key, whatever the key holds.
        let keys = [
            "",
            "'",
            "a'b'",
            "''x",
            "日本'語",
            "\u{1F600}'",
            "a b/c?d#e",
            "%27",
        ];
        for pk in keys {
            for rk in keys {
                let quoted = |k: &str| encode(&k.replace('\'', "''"));
                assert_eq!(
                    entity_path("t", pk, rk),
                    format!("/t(PartitionKey='{}',RowKey='{}')", quoted(pk), quoted(rk)),
                    "{pk:?} {rk:?}"
                );
            }
        }
        assert_eq!(
            query_string(&[("$filter", "PartitionKey eq 'a b'"), ("$top", "5")]),
            "$filter=PartitionKey%20eq%20%27a%20b%27&$top=5"
        );
    }
}
