//! Reads of several stored partitions merged into one stream in RowKey
//! order: the shards of a sharded partition.
//!
//! Every shard's first page is fetched at once; a shard's next page is
//! fetched when the merge has handed out its last row (while the other
//! shards' next pages load too). The merge yields a row as soon as every
//! shard that still has rows has one waiting. Written here rather than taken from
//! a crate: `futures` merges streams only in arrival order.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream};

use crate::backend::{Query, QueryPage, TableBackend};
use crate::entity::Entity;
use crate::error::{Error, Result};
use crate::keyorder::cmp_utf16;

/// The RowKey a row of a page sorts by (an undecodable row's, as far as it
/// was read).
pub(crate) fn row_key(row: &Result<Entity>) -> &str {
    match row {
        Ok(entity) => &entity.row_key,
        Err(Error::UndecodableRow { row_key, .. }) => row_key,
        Err(_) => "",
    }
}

struct Shard {
    /// The rows of its last page not yet handed out: read in place, each
    /// moved once, when it goes.
    rows: std::vec::IntoIter<Result<Entity>>,
    query: Query,
    /// The next page, under way.
    fetch: Option<BoxFuture<'static, Result<QueryPage>>>,
    /// Whether a page follows those fetched.
    more: bool,
}

struct Merge {
    backend: Arc<dyn TableBackend>,
    table: Arc<str>,
    kind: Option<&'static str>,
    shards: Vec<Shard>,
    /// Shards whose next page is under way.
    fetching: usize,
    failed: bool,
    /// The shards with a row waiting, by their first row's RowKey; rebuilt
    /// when a page arrives (`stale`), kept in order by binary search as
    /// rows are handed out: about 3 comparisons per row for 8 shards.
    order: Vec<usize>,
    stale: bool,
}

fn fetch(
    backend: &Arc<dyn TableBackend>,
    table: &Arc<str>,
    kind: Option<&'static str>,
    query: Query,
) -> BoxFuture<'static, Result<QueryPage>> {
    let (backend, table) = (Arc::clone(backend), Arc::clone(table));
    async move {
        super::operation(&*backend, "query", &table, kind, None)
            .run_counted(
                crate::order::ordered_page(&*backend, &table, query, true),
                |page| Some(page.entities.len()),
            )
            .await
    }
    .boxed()
}

impl Merge {
    /// Starts fetching the next page of every shard that has run out of
    /// rows and has more, and drives every fetch under way; `Err` when one
    /// failed. Several shards' pages load at once.
    fn load(&mut self, cx: &mut Context<'_>) -> Result<()> {
        for shard in &mut self.shards {
            if shard.rows.as_slice().is_empty() && shard.more && shard.fetch.is_none() {
                let query = shard.query.clone();
                shard.fetch = Some(fetch(&self.backend, &self.table, self.kind, query));
                self.fetching += 1;
            }
        }
        if self.fetching == 0 {
            return Ok(());
        }
        for shard in &mut self.shards {
            let Some(pending) = shard.fetch.as_mut() else {
                continue;
            };
            let Poll::Ready(page) = pending.poll_unpin(cx) else {
                continue;
            };
            shard.fetch = None;
            self.fetching -= 1;
            let mut page = page?;
            match page.continuation.take() {
                Some(next) => shard.query.continuation = Some(next),
                None => shard.more = false,
            }
            // A page is fetched only when the last one is used up.
            debug_assert!(shard.rows.as_slice().is_empty());
            shard.rows = page.into_row_vec().into_iter();
            self.stale = true;
            if shard.rows.as_slice().is_empty() && shard.more {
                // An empty page with more to come: fetch the next one now.
                cx.waker().wake_by_ref();
            }
        }
        Ok(())
    }
}

impl Stream for Merge {
    type Item = Result<Entity>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        if let Err(e) = this.load(cx) {
            this.failed = true;
            return Poll::Ready(Some(Err(e)));
        }
        // A shard without a row waiting but with more to come holds the merge.
        if this
            .shards
            .iter()
            .any(|s| s.rows.as_slice().is_empty() && s.more)
        {
            return Poll::Pending;
        }
        let shards = &this.shards;
        if this.stale {
            this.order.clear();
            this.order
                .extend((0..shards.len()).filter(|&i| !shards[i].rows.as_slice().is_empty()));
            // Stable: of equal keys (not in a well-formed store), the lower
            // shard first, as a scan would.
            this.order
                .sort_by(|&a, &b| cmp_utf16(front_of(shards, a), front_of(shards, b)));
            this.stale = false;
        }
        if this.order.is_empty() {
            return Poll::Ready(None);
        }
        let i = this.order.remove(0);
        let row = this.shards[i].rows.next();
        let shards = &this.shards;
        if let Some(next) = shards[i].rows.as_slice().first() {
            let key = row_key(next);
            let at = this
                .order
                .partition_point(|&j| cmp_utf16(front_of(shards, j), key).is_le());
            this.order.insert(at, i);
        }
        Poll::Ready(row)
    }
}

/// The RowKey of shard `i`'s first waiting row.
fn front_of(shards: &[Shard], i: usize) -> &str {
    shards[i].rows.as_slice().first().map_or("", row_key)
}

/// The rows of `queries` (each over one stored partition, in RowKey order),
/// merged in RowKey order.
pub(crate) fn merged_rows(
    backend: Arc<dyn TableBackend>,
    table: &str,
    queries: Vec<Query>,
    kind: Option<&'static str>,
) -> BoxStream<'static, Result<Entity>> {
    let table: Arc<str> = table.into();
    let shards = queries
        .into_iter()
        .map(|query| Shard {
            rows: Vec::new().into_iter(),
            fetch: None,
            query,
            more: true,
        })
        .collect();
    Box::pin(Merge {
        backend,
        table,
        kind,
        shards,
        fetching: 0,
        failed: false,
        order: Vec::new(),
        stale: true,
    })
}
