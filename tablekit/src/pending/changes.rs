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
//! the partitions to read and keep their checkpoints. A writer also
//! *announces* the partition there (its directory row written again, with
//! the time) before it sends changes, at most every [`ANNOUNCE_EVERY`]:
//! a consumer reads a partition whose row is unchanged, and was announced
//! longer than [`QUIET_AFTER`] before its last read, no more (see
//! [`changes`](crate::changes)).

use std::sync::Arc;

use crate::backend::{BatchOperation, GetOptions, TableBackend, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::filter::RowView;

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
/// The start of the name of each property of the entity's previous value
/// on a change row (a kind with `changes(previous)`).
pub(crate) const PREVIOUS_PREFIX: &str = "_Prev_";
/// `false` on a change row whose entity's previous value did not fit
/// beside it (or was not known).
pub(crate) const PREVIOUS_FULL: &str = "_ChangePrevFull";
/// On a change row written by a typed write, the tag of the transaction
/// that wrote it: a transaction whose answer was lost (or whose head move
/// was refused after a resend) reads its first change row back and knows
/// by the tag whether it committed.
pub(crate) const TAG: &str = "_ChangeTag";
/// Why a delete was made, on its change row when the library made it for a
/// reason of its own: [`EXPIRED`] for the expiry sweep's. The delete's
/// row (its keys alone otherwise) carries it to the change row.
pub(crate) const REASON: &str = "_ChangeReason";
/// The [`REASON`] of a delete made because the entity expired.
pub(crate) const EXPIRED: &str = "expired";
/// The partition of the directory.
pub(crate) const DIRECTORY: &str = "~tk|changes";
/// The start of a directory row that lists a partition with changes.
pub(crate) const LISTED_PREFIX: &str = "p|";
/// The start of a directory row that holds a consumer's checkpoint.
pub(crate) const CHECKPOINT_PREFIX: &str = "c|";
/// The start of a directory row that registers a consumer, whose
/// checkpoints hold back trimming.
pub(crate) const REGISTERED_PREFIX: &str = "r|";
/// On a consumer's registration row, the handle that reads it alone (a
/// consumer without leases): a handle made later takes it over, and the
/// one it took it from reads no more.
pub(crate) const READER: &str = "_ConsumerReader";
/// The last change number trimmed from a partition, on its directory row.
pub(crate) const TRIMMED: &str = "_ChangeTrimmed";
/// The last change number up to which every change row of a partition is
/// deleted, on its directory row: below [`TRIMMED`] while a trim is under
/// way, or after one stopped half way (the next deletes the rest).
pub(crate) const CLEARED: &str = "_ChangeCleared";
/// On a partition's directory row, when a writer last announced it: the
/// time (on the writer's clock) before that writer sends changes for up
/// to [`ANNOUNCE_EVERY`].
pub(crate) const ANNOUNCED: &str = "_ChangeAnnounced";
/// How long a writer sends changes to a partition after announcing it,
/// before it announces it again.
pub(crate) const ANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// How long after an announcement a change it covers may still commit,
/// clocks that differ between machines included: the writer's
/// [`ANNOUNCE_EVERY`], a transaction's longest send with its retries
/// (four attempts of 30 s and their back-offs, by the REST backend's
/// defaults), and a minute for clocks. A consumer reads a partition again
/// until a read of it began this long after its last announcement.
pub(crate) const QUIET_AFTER: std::time::Duration = std::time::Duration::from_secs(5 * 60);
/// The start of a directory row that leases a partition to one instance
/// of a consumer: it names the instance, whose lease lasts as long as the
/// instance's own row (under [`INSTANCE_PREFIX`]) says it is alive.
pub(crate) const LEASE_PREFIX: &str = "l|";
/// The start of a directory row that keeps one instance of a consumer
/// alive until its [`LEASE_UNTIL`]: renewed by the instance, one row for
/// all the partitions it holds.
pub(crate) const INSTANCE_PREFIX: &str = "i|";
/// The instance holding a lease.
pub(crate) const LEASE_OWNER: &str = "_LeaseOwner";
/// Until when it holds it.
pub(crate) const LEASE_UNTIL: &str = "_LeaseUntil";

/// The RowKey of change `seq`.
pub(crate) fn change_key(seq: u64) -> String {
    let mut key = String::with_capacity(CHANGE_PREFIX.len() + 16);
    key.push_str(CHANGE_PREFIX);
    crate::hex::push_hex16(&mut key, seq);
    key
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
pub(crate) fn is_change_row(row: RowView<'_>) -> bool {
    (row.row_key == HEAD_KEY && row.properties.contains(SEQ))
        || (row.row_key.starts_with(CHANGE_PREFIX) && row.properties.contains(OP))
}

/// The names of the properties a change row adds to those written.
pub(crate) fn is_change_property(name: &str) -> bool {
    matches!(name, OP | ROW | FULL | TAG | PREVIOUS_FULL | REASON)
        || name.starts_with(PREVIOUS_PREFIX)
}

/// A partition's head as read: the newest change's number, and the ETag
/// that guards its move.
#[derive(Clone)]
pub(crate) struct Head {
    pub(crate) seq: u64,
    pub(crate) etag: ETag,
}

/// Reads the head of partition `pk`; `None` when it has no change yet.
pub(crate) async fn read_head(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
) -> Result<Option<Head>> {
    let options = GetOptions::default().select([SEQ]);
    let row = match backend.get_entity(table, pk, HEAD_KEY, &options).await {
        Ok(row) => row,
        Err(Error::EntityNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let seq = row
        .properties
        .get(SEQ)
        .and_then(|v| v.as_i64())
        .and_then(|seq| u64::try_from(seq).ok())
        .ok_or_else(|| Error::Decode {
            message: format!(
                "the change feed's head of partition {pk:?} in table `{table}` holds no change number"
            ),
        })?;
    let etag = row.etag.unwrap_or_else(|| ETag::new(""));
    Ok(Some(Head { seq, etag }))
}

/// Lists partition `pk` in the directory, where consumers find it, and
/// announces it as of `at` (the writer's time, read before this call):
/// done before changes are sent, so that no change is ever in a partition
/// the directory does not list, and none commits later than
/// [`QUIET_AFTER`] after the announcement a consumer sees. (A partition
/// announced whose transaction then fails has no new changes: harmless.)
pub(crate) async fn announce(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
    at: crate::datetime::DateTime,
) -> Result<()> {
    let row = Entity::new(DIRECTORY, listed_key(pk)).with(ANNOUNCED, at);
    let upsert = crate::backend::EntityWrite::Upsert(&row, UpdateMode::Merge);
    crate::exec::write_one(backend, table, upsert)
        .await
        .map(drop)
}

/// The head read before a transaction that records changes in `pk`, and
/// whether the partition was announced as of `at` (always when it has no
/// head yet: that lists it).
pub(crate) async fn head_before_changes(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
    at: crate::datetime::DateTime,
) -> Result<(Option<Head>, bool)> {
    let head = read_head(backend, table, pk).await?;
    if head.is_none() {
        announce(backend, table, pk, at).await?;
    }
    let announced = head.is_none();
    Ok((head, announced))
}

/// The change row of change `seq` of partition `pk`: the write `op` of
/// the entity `row_key`, without its properties.
pub(crate) fn bare_change_row(pk: &str, seq: u64, op: &str, row_key: &str) -> Entity {
    let mut row = Entity::new(pk, change_key(seq));
    row.properties.insert(OP, op);
    row.properties.insert(ROW, row_key);
    row
}

/// The move of partition `pk`'s head to `seq`, guarded by the ETag of the
/// head read (an insert, when it had none).
pub(crate) fn head_move(pk: &str, seq: u64, head: Option<&Head>) -> BatchOperation {
    let row = Entity::new(pk, HEAD_KEY).with(SEQ, seq as i64);
    match head {
        None => BatchOperation::Insert(row),
        Some(head) => BatchOperation::Update {
            entity: row,
            mode: UpdateMode::Replace,
            if_match: IfMatch::ETag(head.etag.clone()),
        },
    }
}

/// The count of change-feed transactions this process committed, by
/// backend and table: what [`Changes::commits_here`] watches. (One per
/// table a process writes with a feed: kept for the process's life.)
///
/// [`Changes::commits_here`]: crate::changes::Changes::commits_here
static COMMITS: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<String, Arc<tokio::sync::watch::Sender<u64>>>>,
> = std::sync::LazyLock::new(Default::default);

/// The counter of the commits of `table` on `backend` in this process.
pub(crate) fn commits(
    backend: &Arc<dyn TableBackend>,
    table: &str,
) -> Arc<tokio::sync::watch::Sender<u64>> {
    let at = Arc::as_ptr(backend).cast::<()>() as usize;
    let key = format!("{at:x}\u{0}{table}");
    let mut commits = COMMITS.lock();
    Arc::clone(
        commits
            .entry(key)
            .or_insert_with(|| Arc::new(tokio::sync::watch::channel(0).0)),
    )
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
