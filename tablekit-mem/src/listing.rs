//! Listings by name prefix in pages, as the Blob and Queue services give
//! them: names in order, at most 5,000 a page, a marker for the next.

use std::collections::BTreeMap;
use std::ops::Bound;

/// A page's entries, and the name the next page starts at.
pub(crate) type Page<'m, V> = (Vec<(&'m String, &'m V)>, Option<String>);

/// One page of `map`'s entries whose names start with `prefix`, from
/// `marker` on, at most `limit` (the page size the method's door gave);
/// and the name the next page starts at, if any.
pub(crate) fn page<'m, V>(
    map: &'m BTreeMap<String, V>,
    prefix: Option<&str>,
    marker: Option<&str>,
    limit: u32,
) -> Page<'m, V> {
    let prefix = prefix.unwrap_or("");
    let start = marker.unwrap_or(prefix).max(prefix);
    let mut entries = Vec::new();
    for (name, value) in map.range::<str, _>((Bound::Included(start), Bound::Unbounded)) {
        if !name.starts_with(prefix) {
            break;
        }
        if entries.len() == limit as usize {
            return (entries, Some(name.clone()));
        }
        entries.push((name, value));
    }
    (entries, None)
}
