//! Key order on every store: reads that promise rows sorted by PartitionKey,
//! then RowKey, get them so even from a store that returns pages in another
//! order (Cosmos DB for Table, [`QueryOrder::Unspecified`]).
//!
//! On such a store an ordered read follows the store's pages to the end,
//! sorts the rows on the client, and hands them out. A page read
//! ([`ordered_page`] with a page size) keeps the first rows and ends with a
//! *key token*: a continuation token that names the first key not handed
//! out, so the next page is the query again from that key on. Key tokens are
//! marked by a control character, which no key may hold (the service refuses
//! keys with control characters), so no store's own token is ever taken for
//! one.

use std::cmp::Ordering;

use crate::backend::{ContinuationToken, Query, QueryOrder, QueryPage, TableBackend};
use crate::entity::Entity;
use crate::error::{InvalidInput, Result};
use crate::filter::Filter;
use crate::keyorder::cmp_utf16;

/// Starts a key token's PartitionKey.
const KEY_TOKEN_MARK: char = '\u{1}';

/// The token that resumes an ordered read at the key (`pk`, `rk`).
pub fn key_token(pk: &str, rk: &str) -> ContinuationToken {
    ContinuationToken::new(format!("{KEY_TOKEN_MARK}{pk}"), Some(rk.to_owned()))
}

/// The key a key token resumes at; `None` for a store's own token.
fn key_token_start(token: &ContinuationToken) -> Option<(&str, &str)> {
    let pk = token.next_partition_key().strip_prefix(KEY_TOKEN_MARK)?;
    Some((pk, token.next_row_key().unwrap_or("")))
}

/// Compares two keys in the store's order.
pub fn cmp_keys(a: (&str, &str), b: (&str, &str)) -> Ordering {
    cmp_utf16(a.0, b.0).then_with(|| cmp_utf16(a.1, b.1))
}

/// Lets the runtime run its other tasks between two pages of long work
/// (a scan, a copy, a migration, a bulk write). The embedded stores answer
/// without ever waiting, so without this a job over them would hold its
/// thread, and a timeout around it, until it ended.
pub async fn between_pages() {
    tokio::task::yield_now().await;
}

/// `query` as a backend that passes its rows by reference in key order
/// ([`TableBackend::read_rows`]) reads it, and whether it resumes from an
/// earlier page; `None` when the backend does not read it so.
pub fn rows_query<B: TableBackend + ?Sized>(backend: &B, query: &Query) -> Option<(Query, bool)> {
    // A backend that passes no rows by reference answers before the query is copied.
    if backend.query_order() != QueryOrder::Keys
        || query.select.is_some()
        || !backend.reads_rows(query)
    {
        return None;
    }
    let mut query = query.clone();
    let resuming = query.continuation.is_some();
    resume_from_key(&mut query);
    backend.reads_rows(&query).then_some((query, resuming))
}

/// One page of `query` in the store's order, for reads that need no order
/// (counts): a key token becomes a condition on the keys, and the rest goes
/// to the store as it is.
pub async fn unordered_page<B: TableBackend + ?Sized>(
    backend: &B,
    table: &str,
    mut query: Query,
) -> Result<QueryPage> {
    if query.continuation.is_some() {
        between_pages().await;
    }
    resume_from_key(&mut query);
    backend.query_entities(table, &query).await
}

/// Turns a key token in `query.continuation` into a condition on the keys.
fn resume_from_key(query: &mut Query) {
    if let Some((pk, rk)) = query.continuation.as_ref().and_then(key_token_start) {
        let from = Filter::partition_key().gt(pk)
            | (Filter::partition_key().eq(pk) & Filter::row_key().ge(rk));
        query.filter = Some(match query.filter.take() {
            Some(filter) => filter & from,
            None => from,
        });
        query.continuation = None;
    }
}

/// One page of `query`, its rows in key order on any backend.
///
/// A key token in `query.continuation` becomes a condition on the keys. On a
/// store that sorts, this is one request. On one that does not, the store's
/// pages are read to the end and sorted; with `whole` every row comes back
/// in one page, otherwise at most `query.top` rows (1,000 when unset) and a
/// key token when more follow.
pub async fn ordered_page<B: TableBackend + ?Sized>(
    backend: &B,
    table: &str,
    mut query: Query,
    whole: bool,
) -> Result<QueryPage> {
    if query.continuation.is_some() {
        between_pages().await;
    }
    resume_from_key(&mut query);
    if backend.query_order() == QueryOrder::Keys {
        return backend.query_entities(table, &query).await;
    }
    if query.continuation.is_some() {
        // Ordered reads on this store hand out key tokens only: a store's own
        // token would resume in the store's order, not in key order.
        return Err(InvalidInput::ContinuationToken {
            reason: "on a store that does not sort query results, an ordered read resumes \
                     only from a token tablekit made",
        }
        .into());
    }
    let size = match (whole, query.top) {
        (true, _) => usize::MAX,
        (false, top) => top.unwrap_or(crate::validate::limits::MAX_PAGE_SIZE) as usize,
    };
    query.top = None;
    let mut all = QueryPage::new(Vec::new(), None);
    loop {
        let mut page = backend.query_entities(table, &query).await?;
        all.entities.append(&mut page.entities);
        all.undecodable.append(&mut page.undecodable);
        match page.continuation {
            Some(next) => query.continuation = Some(next),
            None => break,
        }
        between_pages().await;
    }
    all.entities
        .sort_by(|a, b| cmp_keys(entity_key(a), entity_key(b)));
    all.undecodable.sort_by(|a, b| {
        cmp_keys(
            (&a.partition_key, &a.row_key),
            (&b.partition_key, &b.row_key),
        )
    });
    if all.entities.len() + all.undecodable.len() > size {
        cut(&mut all, size);
    }
    Ok(all)
}

fn entity_key(entity: &Entity) -> (&str, &str) {
    (&entity.partition_key, &entity.row_key)
}

/// Keeps the first `size` rows of a sorted page (entities and undecodable
/// rows together) and ends it with a key token at the first row left out.
fn cut(page: &mut QueryPage, size: usize) {
    let (mut e, mut u) = (0, 0);
    while e + u < size {
        let take_entity = match (page.entities.get(e), page.undecodable.get(u)) {
            (Some(a), Some(b)) => {
                cmp_keys(entity_key(a), (&b.partition_key, &b.row_key)) != Ordering::Greater
            }
            (Some(_), None) => true,
            (None, _) => false,
        };
        if take_entity {
            e += 1;
        } else {
            u += 1;
        }
    }
    let next = match (page.entities.get(e), page.undecodable.get(u)) {
        (Some(a), Some(b)) => {
            if cmp_keys(entity_key(a), (&b.partition_key, &b.row_key)) == Ordering::Greater {
                (b.partition_key.as_str(), b.row_key.as_str())
            } else {
                entity_key(a)
            }
        }
        (Some(a), None) => entity_key(a),
        (None, Some(b)) => (b.partition_key.as_str(), b.row_key.as_str()),
        (None, None) => return,
    };
    page.continuation = Some(key_token(next.0, next.1));
    page.entities.truncate(e);
    page.undecodable.truncate(u);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_tokens_are_told_from_store_tokens_and_round_trip() {
        let token = key_token("p|01", "r'1");
        let text = token.to_string();
        let back: ContinuationToken = text.parse().expect("parses");
        assert_eq!(key_token_start(&back), Some(("p|01", "r'1")));
        let store = ContinuationToken::new("1!8!cGFydA--", Some("1!4!cjE-".into()));
        assert_eq!(key_token_start(&store), None);
    }

    #[test]
    fn a_cut_page_ends_at_the_first_row_left_out() {
        let row = |pk: &str, rk: &str| Entity::new(pk, rk);
        let bad = |pk: &str, rk: &str| crate::backend::UndecodableRow {
            partition_key: pk.into(),
            row_key: rk.into(),
            reason: InvalidInput::ContinuationToken { reason: "test" },
        };
        let mut page = QueryPage::new(vec![row("a", "1"), row("a", "3"), row("b", "1")], None);
        page.undecodable = vec![bad("a", "2"), bad("a", "4")];
        cut(&mut page, 3);
        let keys: Vec<_> = page.entities.iter().map(|e| e.row_key.as_str()).collect();
        assert_eq!(keys, ["1", "3"]);
        assert_eq!(page.undecodable.len(), 1);
        let next = page.continuation.expect("more follow");
        assert_eq!(key_token_start(&next), Some(("a", "4")));
    }
}
