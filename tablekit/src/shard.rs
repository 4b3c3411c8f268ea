//! Sharded partitions: one logical partition spread over several stored
//! ones, so that a stream of inserts does not all land on one hot partition.
//!
//! A partition takes about 2,000 entities a second on the service. A kind
//! whose inserts all go to one partition (events of the current hour, a
//! queue of jobs, the log of one device) stops there. Declare a shard count
//! and the stored PartitionKey gets a shard suffix taken from the row's own
//! key:
//!
//! ```
//! use tablekit::{Table, TableEntity};
//!
//! #[derive(TableEntity, Debug, Clone, PartialEq)]
//! #[tablekit(table = "Clicks", shards = 8)]
//! struct Click {
//!     #[tablekit(partition_key)]
//!     page: String,
//!     #[tablekit(row_key)]
//!     seq: u64,
//!     user: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
//! let clicks: Table<Click> = Table::new(tablekit_mem::MemBackend::new());
//! clicks.create_if_missing().await?;
//! let batch: Vec<Click> = (0..100)
//!     .map(|seq| Click { page: "home".into(), seq, user: "ada".into() })
//!     .collect();
//! // The bulk writer groups rows by stored partition: the 100 rows go out
//! // as 8 transactions, one per shard, written side by side.
//! assert!(clicks.bulk().insert(&batch).await.is_complete());
//!
//! // A point read computes its shard: one request.
//! let one = clicks.get("home", 42u64).await?.expect("stored");
//! assert_eq!(one.user, "ada");
//!
//! // A read of the logical partition queries the 8 shards at once and
//! // merges them in key order.
//! let all = clicks.query().partition("home").collect().await?;
//! assert!(all.iter().map(|c| c.seq).eq(0..100));
//!
//! // Where a row is stored, and how to find its shard from the RowKey alone.
//! let stored = tablekit::schema::partition_key_of(&*one)?;
//! let rk = tablekit::schema::row_key_of(&*one)?;
//! assert_eq!(stored, format!("home|{:02}", tablekit::shard::shard_of(&rk, 8)));
//! # Ok(()) }
//! ```
//!
//! # Layout
//! The stored PartitionKey is the encoded key, `|`, and the shard number in
//! two digits: `home|05`. The shard is [`shard_of`] the stored RowKey
//! (FNV-1a, 64 bits, over its UTF-8 bytes, modulo the shard count), so any
//! client in any language can compute where a row lives. It never changes
//! for a given RowKey and count: changing the count of a kind that has rows
//! moves them all (read with the old type, write with the new).
//!
//! Rows of a wide entity take the shard of the entity's RowKey, so their
//! parts stay together and are still written in one transaction.
//!
//! # Reads
//! - `get`, `exists`, `delete` and every write compute the shard: one request,
//!   as before.
//! - `query().partition(pk)` queries every shard at once and merges them by
//!   RowKey as the pages arrive: its results come in RowKey order, exactly as
//!   from one partition. [`page`](crate::table::TableQuery::page) hands out a
//!   single continuation token that resumes every shard, and
//!   [`page_of`](crate::table::TableQuery::page_of) cursors work the same.
//! - A query without a partition, or over a partition prefix, reads the
//!   stored partitions in their own order: shard by shard within each
//!   logical partition.
//!
//! # What does not mix
//! One transaction covers one stored partition, so a sharded kind cannot
//! have index rows beside it (an index value would have to be unique
//! across shards), cannot nest in or head a `collection` (its rows would
//! scatter), and cannot be a kind of an [`EntityKinds`](crate::EntityKinds)
//! partition read. The derive refuses these at compile time.

use crate::schema::PartitionRule;

/// Separates the encoded PartitionKey from the shard number.
pub const SHARD_SEPARATOR: char = '|';

/// The most shards a kind may declare: the suffix has two digits.
pub const MAX_SHARDS: u16 = 100;

/// The shard, `0..shards`, of the row whose stored RowKey is `row_key`:
/// FNV-1a (64-bit) over its UTF-8 bytes, modulo `shards`. Stable: the same
/// key always lands on the same shard.
///
/// ```
/// assert_eq!(u64::from(tablekit::shard::shard_of("", 8)), 0xcbf2_9ce4_8422_2325 % 8);
/// assert!(tablekit::shard::shard_of("EVT_0000000042", 8) < 8);
/// ```
pub fn shard_of(row_key: &str, shards: u16) -> u16 {
    // FNV-1a: written here as it is three lines, and its exact definition
    // is part of the stored layout.
    let hash = row_key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % u64::from(shards.max(1))) as u16
}

/// Appends the shard suffix (`|05`) of `shard`.
pub(crate) fn push_suffix(out: &mut String, shard: u16) {
    use std::fmt::Write as _;
    let _ = write!(out, "{SHARD_SEPARATOR}{shard:02}");
}

/// The stored PartitionKey of shard `shard` of the logical partition `pk`.
pub(crate) fn stored(pk: &str, shard: u16) -> String {
    let mut out = String::with_capacity(pk.len() + 3);
    out.push_str(pk);
    push_suffix(&mut out, shard);
    out
}

/// The logical PartitionKey of a stored one, checked: the suffix must name
/// the shard the RowKey belongs to.
pub(crate) fn strip<'a>(
    stored: &'a str,
    row_key: &str,
    shards: u16,
) -> std::result::Result<&'a str, String> {
    let bytes = stored.as_bytes();
    let n = bytes.len();
    let digits = |b: &[u8]| b.iter().all(u8::is_ascii_digit);
    if n < 3 || bytes[n - 3] != SHARD_SEPARATOR as u8 || !digits(&bytes[n - 2..]) {
        return Err(format!(
            "no shard suffix (`{SHARD_SEPARATOR}` and two digits) on a kind stored in {shards} shards"
        ));
    }
    let found = u16::from(bytes[n - 2] - b'0') * 10 + u16::from(bytes[n - 1] - b'0');
    let expected = shard_of(row_key, shards);
    if found != expected {
        return Err(format!(
            "stored in shard {found}, but its RowKey belongs in shard {expected} of {shards}"
        ));
    }
    Ok(&stored[..n - 3])
}

/// The shard part of an entity's descriptor (`#[tablekit(shards = N)]`):
/// each logical partition is stored as `shards` partitions, `PK|00` …,
/// the RowKey picking one by [`shard_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRule {
    /// How many stored partitions (2–[`MAX_SHARDS`]).
    pub shards: u16,
}

impl PartitionRule for ShardRule {
    fn count(&self) -> u16 {
        self.shards
    }

    fn push_suffix(&self, partition_key: &mut String, row_key: &str) {
        push_suffix(partition_key, shard_of(row_key, self.shards));
    }

    fn logical<'a>(&self, partition_key: &'a str, row_key: &str) -> Result<&'a str, String> {
        strip(partition_key, row_key, self.shards)
    }

    fn stored(&self, partition_key: &str) -> Vec<String> {
        (0..self.shards)
            .map(|shard| stored(partition_key, shard))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_spread() {
        // Fixed values: the layout other clients compute must never move.
        assert_eq!(shard_of("a", 8), (0xaf63_dc4c_8601_ec8c_u64 % 8) as u16);
        let mut counts = [0usize; 8];
        for i in 0..8000 {
            counts[usize::from(shard_of(&format!("EVT_{i:010}"), 8))] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn suffixes_round_trip_and_wrong_ones_are_refused() {
        let rk = "EVT_0000000042";
        let shard = shard_of(rk, 8);
        let pk = stored("Sales|x", shard);
        assert_eq!(strip(&pk, rk, 8), Ok("Sales|x"));
        let wrong = stored("Sales", (shard + 1) % 8);
        assert!(
            strip(&wrong, rk, 8)
                .unwrap_err()
                .contains("belongs in shard")
        );
        for bad in ["", "ab", "Sales", "Sales|7", "Sales_07", "Sales|0x"] {
            assert!(strip(bad, rk, 8).is_err(), "{bad}");
        }
    }
}
