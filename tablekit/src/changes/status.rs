//! Where the consumers of a table's change feeds stand, read from the raw
//! rows of its directory and heads: it needs no type, so a program that
//! shows a store (the `tablekit studio`) shows it for any table.

use crate::backend::{Query, TableBackend, TableBackendExt};
use crate::error::Result;
use crate::filter::Filter;
use crate::pending::changes::{
    CHECKPOINT_PREFIX, DIRECTORY, HEAD_KEY, LISTED_PREFIX, REGISTERED_PREFIX, SEQ,
};

/// One consumer's place in one partition's change feed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerLag {
    /// The consumer's name.
    pub consumer: String,
    /// The partition (its stored PartitionKey).
    pub partition_key: String,
    /// The number of the last change the consumer committed (0: none).
    pub checkpoint: u64,
    /// The number of the partition's newest change.
    pub newest: u64,
}

impl ConsumerLag {
    /// How many changes the consumer has still to read in the partition.
    pub fn lag(&self) -> u64 {
        self.newest.saturating_sub(self.checkpoint)
    }
}

/// Every registered consumer of the change feeds in `table`, in each
/// partition that has changes: its checkpoint and the partition's newest
/// change. Ordered by consumer, then partition. Two reads of the directory
/// and one point read per partition.
pub async fn consumer_lags(backend: &dyn TableBackend, table: &str) -> Result<Vec<ConsumerLag>> {
    let directory = Query::new().filter(Filter::partition_key().eq(DIRECTORY));
    let rows = backend.query_all(table, directory).await?;
    let mut consumers: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.row_key.strip_prefix(REGISTERED_PREFIX))
        .collect();
    consumers.sort_unstable();
    let mut partitions: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.row_key.strip_prefix(LISTED_PREFIX))
        .collect();
    partitions.sort_unstable();
    let mut newest = Vec::with_capacity(partitions.len());
    for pk in &partitions {
        let head = backend.try_get_entity(table, pk, HEAD_KEY).await?;
        newest.push(head.as_ref().map_or(0, |row| super::number(row, SEQ)));
    }
    let mut lags = Vec::new();
    for consumer in consumers {
        let prefix = format!("{CHECKPOINT_PREFIX}{consumer}|");
        for (pk, newest) in partitions.iter().zip(&newest) {
            let key = format!("{prefix}{pk}");
            let checkpoint = rows.iter().find(|r| r.row_key == key);
            lags.push(ConsumerLag {
                consumer: consumer.to_owned(),
                partition_key: (*pk).to_owned(),
                checkpoint: checkpoint.map_or(0, |row| super::number(row, SEQ)),
                newest: *newest,
            });
        }
    }
    Ok(lags)
}
