//! The rows of the change feed (see [`changes`](crate::changes)), which a
//! typed write of a kind with `#[tablekit(changes)]` adds to its own
//! transaction, in the entity's partition:
//!
//! - the partition's *head* (`~tk|changes`), whose `_ChangeSeq` is the
//!   number of the newest change; every transaction that records changes
//!   moves it on under its ETag, so changes are numbered in the order they
//!   commit, with no gaps;
//! - one *change row* per write (`~tk|change|` and the number, in 16 hex
//!   digits so that they sort as numbers), holding the operation, the
//!   entity's RowKey and, when the row fits, the properties written.
//!
//! A partition's first change also lists the partition in the *directory*
//! (the partition `~tk|changes` of the same table), where consumers find
//! the partitions to read and keep their checkpoints.

use crate::entity::Entity;

/// The RowKey of a partition's head.
pub(crate) const HEAD_KEY: &str = "~tk|changes";
/// The start of every change row's RowKey.
pub(crate) const CHANGE_PREFIX: &str = "~tk|change|";
/// The first RowKey after every change row.
pub(crate) const CHANGE_END: &str = "~tk|change}";
/// The newest change's number, on the head.
pub(crate) const SEQ: &str = "_ChangeSeq";
/// What a change row's write did: `insert`, `replace`, `merge`, `upsert`,
/// `upsert_merge` or `delete`.
pub(crate) const OP: &str = "_ChangeOp";
/// The RowKey of the entity a change row is about.
pub(crate) const ROW: &str = "_ChangeRow";
/// `false` on a change row whose write's properties did not fit beside it
/// (the change is recorded without them).
pub(crate) const FULL: &str = "_ChangeFull";
/// The partition of the directory.
pub(crate) const DIRECTORY: &str = "~tk|changes";
/// The start of a directory row that lists a partition with changes.
pub(crate) const LISTED_PREFIX: &str = "p|";
/// The start of a directory row that holds a consumer's checkpoint.
pub(crate) const CHECKPOINT_PREFIX: &str = "c|";
/// The start of a directory row that registers a consumer, whose
/// checkpoints hold back trimming.
pub(crate) const REGISTERED_PREFIX: &str = "r|";
/// The last change number trimmed from a partition, on its directory row.
pub(crate) const TRIMMED: &str = "_ChangeTrimmed";
/// The start of a directory row that leases a partition to one instance
/// of a consumer.
pub(crate) const LEASE_PREFIX: &str = "l|";
/// The instance holding a lease.
pub(crate) const LEASE_OWNER: &str = "_LeaseOwner";
/// Until when it holds it.
pub(crate) const LEASE_UNTIL: &str = "_LeaseUntil";

/// The RowKey of change `seq`.
pub(crate) fn change_key(seq: u64) -> String {
    format!("{CHANGE_PREFIX}{seq:016x}")
}

/// The number of the change row `row_key`, if it is one.
pub(crate) fn seq_of_change(row_key: &str) -> Option<u64> {
    let digits = row_key.strip_prefix(CHANGE_PREFIX)?;
    if digits.len() != 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The directory row that lists `partition_key`.
pub(crate) fn listed_key(partition_key: &str) -> String {
    format!("{LISTED_PREFIX}{partition_key}")
}

/// Whether `row` is a head or a change row of the change feed.
pub(crate) fn is_change_row(row: &Entity) -> bool {
    (row.row_key == HEAD_KEY && row.properties.contains(SEQ))
        || (row.row_key.starts_with(CHANGE_PREFIX) && row.properties.contains(OP))
}

/// The names of the properties a change row adds to those written.
pub(crate) fn is_change_property(name: &str) -> bool {
    matches!(name, OP | ROW | FULL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_keys_sort_as_their_numbers() {
        let keys: Vec<String> = [0, 1, 9, 10, 255, 256, u64::MAX]
            .iter()
            .map(|&s| change_key(s))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for (key, seq) in keys.iter().zip([0, 1, 9, 10, 255, 256, u64::MAX]) {
            assert_eq!(seq_of_change(key), Some(seq));
            assert!(key.as_str() < CHANGE_END && key.as_str() > HEAD_KEY);
        }
        assert_eq!(seq_of_change("~tk|change|12"), None);
        assert_eq!(seq_of_change("~tk|change|zzzzzzzzzzzzzzzz"), None);
    }
}
