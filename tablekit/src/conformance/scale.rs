//! Patterns for volume: sharded partitions read back merged.

use std::sync::Arc;

use futures::TryStreamExt as _;

use super::unique_table;
use crate::backend::{ContinuationToken, Query, TableBackend};
use crate::ext::TableBackendExt;
use crate::table::{Cursor, RowErrors, SkippedRows, Table};
use crate::{Entity, TableEntity};

/// A page hit, spread over 8 shards of its page's partition.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(crate = ::tablekit, table = "Conformance", kind = "HIT", shards = 8)]
pub struct Hit {
    /// The page: the logical partition.
    #[tablekit(partition_key)]
    pub page: String,
    /// The hit's number.
    #[tablekit(row_key)]
    pub seq: u32,
    /// Who hit it.
    pub user: String,
}

fn hit(page: &str, seq: u32) -> Hit {
    Hit {
        page: page.into(),
        seq,
        user: format!("user {}", seq % 7),
    }
}

/// Rows of a sharded kind spread over their shards by RowKey; point reads,
/// bulk writes, merged queries, pages with one token, cursors and counts
/// all see one logical partition in RowKey order.
pub async fn sharded_partitions_spread_and_merge(backend: Arc<dyn TableBackend>) {
    let name = unique_table("shards");
    let hits: Table<Hit> = Table::from_arc(Arc::clone(&backend), &name);
    hits.create_if_missing().await.expect("create table");
    // The bulk writer spreads one partition's rows over its 8 shards: one
    // transaction per shard.
    let a: Vec<Hit> = (0..240).map(|seq| hit("home", seq)).collect();
    let report = hits.bulk().insert(&a).await;
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.batches, 8, "one transaction per shard");
    for seq in 0..30 {
        hits.insert(&hit("home page", seq)).await.expect("insert");
    }

    // Stored: `{page}|{shard}`, the shard computed from the RowKey alone.
    let raw: Vec<Entity> = backend
        .query_stream(&name, Query::new())
        .try_collect()
        .await
        .expect("raw rows");
    assert_eq!(raw.len(), 270);
    let mut shards = std::collections::BTreeSet::new();
    for row in &raw {
        let shard = crate::shard::shard_of(&row.row_key, 8);
        let (page, suffix) = row.partition_key.rsplit_once('|').expect("a shard suffix");
        assert_eq!(suffix, format!("{shard:02}"), "{row:?}");
        if page == "home" {
            shards.insert(shard);
        }
    }
    assert_eq!(shards.len(), 8, "240 rows reach every shard");

    // A point read computes its shard.
    let one = hits
        .get("home", 117u32)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(*one, hit("home", 117));
    assert!(hits.exists("home page", 3u32).await.expect("exists"));
    assert!(hits.get("home page", 30u32).await.expect("get").is_none());

    // The logical partition, merged in RowKey order.
    let all = hits
        .query()
        .partition("home")
        .collect()
        .await
        .expect("query");
    assert!(all.iter().map(|h| h.seq).eq(0..240), "merged in key order");
    let range = hits.query().partition("home").rows(50..60).collect().await;
    assert!(range.expect("range").iter().map(|h| h.seq).eq(50..60));
    let filtered = hits
        .query()
        .partition("home")
        .filter(Hit::columns().user.eq("user 3"))
        .limit(5)
        .collect()
        .await
        .expect("filtered");
    assert!(filtered.iter().map(|h| h.seq).eq([3, 10, 17, 24, 31]));
    assert_eq!(
        hits.query().partition("home").count().await.expect("count"),
        240
    );
    assert_eq!(
        hits.query()
            .partition("home page")
            .count()
            .await
            .expect("count"),
        30
    );
    assert_eq!(hits.query().count().await.expect("count all"), 270);

    // Pages: one continuation token resumes every shard, through its text.
    for size in [1u32, 7, 100, 1000] {
        let mut seen = Vec::new();
        let mut token: Option<ContinuationToken> = None;
        loop {
            let mut query = hits.query().partition("home").page_size(size);
            if let Some(token) = token.take() {
                query = query.resume(token.to_string().parse().expect("a token"));
            }
            let (items, next) = query.page().await.expect("a page");
            assert!(items.len() <= size as usize);
            seen.extend(items.iter().map(|h| h.seq));
            match next {
                Some(next) => {
                    assert_eq!(items.len(), size as usize, "only the last page is short");
                    token = Some(next);
                }
                None => break,
            }
        }
        assert!(seen.iter().copied().eq(0..240), "pages of {size}");
    }
    // A token of another partition is refused.
    let (_, other) = hits
        .query()
        .partition("home page")
        .page_size(5)
        .page()
        .await
        .expect("page");
    let refused = hits
        .query()
        .partition("home")
        .resume(other.expect("more"))
        .page()
        .await;
    assert!(
        matches!(
            refused,
            Err(crate::Error::Invalid(
                crate::InvalidInput::ContinuationToken { .. }
            ))
        ),
        "{refused:?}"
    );

    // Cursors, for pages of N items.
    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let query = hits.query().partition("home");
        let query = match cursor.take() {
            Some(c) => query.after(c.to_string().parse().expect("a cursor")),
            None => query,
        };
        let page = query.page_of(33).await.expect("a page");
        seen.extend(page.items.iter().map(|h| h.seq));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(seen.iter().copied().eq(0..240), "cursor pages");

    // Deletes find their shard.
    hits.delete(&one).await.expect("delete");
    assert!(hits.get("home", 117u32).await.expect("get").is_none());

    // A row in the wrong shard is never read as the type: it is a row error.
    let row_key = crate::schema::row_key_of(&hit("home", 500)).expect("row key");
    let wrong = (crate::shard::shard_of(&row_key, 8) + 1) % 8;
    let stray = Entity::new(format!("home|{wrong:02}"), row_key)
        .with("_Kind", "HIT")
        .with("_Version", 1)
        .with("user", "stray");
    backend
        .insert_entity(&name, &stray)
        .await
        .expect("raw insert");
    let skipped = SkippedRows::default();
    let read = hits
        .query()
        .partition("home")
        .on_row_error(RowErrors::Skip(skipped.clone()))
        .collect()
        .await
        .expect("query");
    assert_eq!(read.len(), 239);
    assert_eq!(skipped.count(), 1, "the stray row is refused, not misread");
    backend.delete_table(&name).await.expect("delete table");
}
