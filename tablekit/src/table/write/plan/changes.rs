//! The change feed's rows in a planned transaction: the change row of each
//! typed write of a kind that records its changes, and the move of the
//! partition's head that numbers them (the rows are described in
//! `pending/changes.rs`). The head is guarded by its ETag, so two
//! transactions of one partition never take the same numbers, and a
//! change is numbered only if it commits.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Planned, Role};
use crate::backend::{BatchOperation, TableBackend};
use crate::entity::{ETag, Entity};
use crate::error::{Error, Result};
use crate::ext::TableBackendExt;
use crate::pending::changes::{
    FULL, Head, OP, PREVIOUS_FULL, PREVIOUS_PREFIX, ROW, TAG, bare_change_row, change_key,
    head_before_changes, head_move,
};

/// The change a write records: what it did, and the row it wrote (for a
/// delete, the keys alone).
pub(in crate::table) struct ChangeOf<'a> {
    /// `insert`, `replace`, `merge`, `upsert`, `upsert_merge` or `delete`.
    pub(in crate::table) op: &'static str,
    pub(in crate::table) row: &'a Entity,
}

/// Adds to `planned` the change row of each write of `changes` (numbered
/// after the head, or after `floor` if that is higher), and the head's
/// move, guarded by the ETag read. Returns the last change's number.
pub(super) fn plan(
    pk: &str,
    head: Option<&Head>,
    floor: u64,
    changes: &[(usize, ChangeOf<'_>)],
    tag: &str,
    planned: &mut Planned,
) -> u64 {
    let mut seq = head.map_or(0, |h| h.seq).max(floor);
    for (w, change) in changes {
        seq += 1;
        planned.write = *w;
        let previous = planned
            .previous
            .iter()
            .find_map(|(at, row)| (at == w).then_some(row));
        let mut row = change_row(pk, seq, change, previous);
        row.properties.insert(TAG, tag);
        planned.push(BatchOperation::Insert(row), Role::Change);
    }
    planned.push(head_move(pk, seq, head), Role::ChangeHead);
    seq
}

/// The row of change `seq`: the operation, the entity's RowKey, the
/// properties written and the `previous` row's (each under
/// [`PREVIOUS_PREFIX`]), when they fit in one row beside them: else
/// without the previous row's, else without the properties written.
fn change_row(pk: &str, seq: u64, change: &ChangeOf<'_>, previous: Option<&Entity>) -> Entity {
    let mut row = Entity::new(pk, change_key(seq));
    if change.op != "delete" {
        row.properties = change.row.properties.clone();
    }
    row.properties.insert(OP, change.op);
    row.properties.insert(ROW, change.row.row_key.as_str());
    if let Some(previous) = previous {
        let mut with = row.clone();
        for (name, value) in previous.properties.iter() {
            with.properties
                .insert(format!("{PREVIOUS_PREFIX}{name}"), value.clone());
        }
        if fits(&with) {
            return with;
        }
        row.properties.insert(PREVIOUS_FULL, false);
    }
    if !fits(&row) {
        // Too large (or too many properties) beside the change's own: the
        // change is recorded without the value.
        let mut bare = bare_change_row(pk, seq, change.op, &change.row.row_key);
        bare.properties.insert(FULL, false);
        if previous.is_some() {
            bare.properties.insert(PREVIOUS_FULL, false);
        }
        return bare;
    }
    row
}

/// Whether `row` fits in one row: the entity's own properties passed the
/// store's rules already, so the count and the size are all that is left.
fn fits(row: &Entity) -> bool {
    use crate::validate::{entity_size, property_count, property_size};
    let (pk, rk) = (&row.partition_key, &row.row_key);
    let size = row
        .properties
        .iter()
        .map(|(name, value)| property_size(name, value.as_value_ref()))
        .sum();
    property_count(pk, rk, row.properties.len()).is_ok() && entity_size(pk, rk, size).is_ok()
}

/// The heads this process moved last, by backend, table and partition: a
/// write whose partition's head is here plans over it without reading it.
/// The ETag keeps that safe: a head another writer moved since fails the
/// transaction at the head, which drops it from here and reads it again.
/// (Kept small: cleared when it holds too many.)
static HEADS: std::sync::LazyLock<parking_lot::Mutex<HashMap<String, KeptHead>>> =
    std::sync::LazyLock::new(Default::default);

/// A head in [`HEADS`]: its change number and ETag, and a weak handle on
/// the backend whose address its key holds. The handle keeps that address
/// from being given to another backend while the entry is kept, so that a
/// backend made after this one was dropped never finds this one's heads.
struct KeptHead {
    _backend: std::sync::Weak<dyn TableBackend>,
    seq: u64,
    etag: ETag,
}

/// At most this many heads are kept in [`HEADS`].
const KEPT_HEADS: usize = 65_536;

/// Keeps the head `seq`, `etag` of `backend` under `key` in [`HEADS`].
fn keep_head(key: String, backend: &Arc<dyn TableBackend>, seq: u64, etag: ETag) {
    let mut heads = HEADS.lock();
    if heads.len() >= KEPT_HEADS {
        heads.clear();
    }
    let kept = KeptHead {
        _backend: Arc::downgrade(backend),
        seq,
        etag,
    };
    heads.insert(key, kept);
}

/// The key of a partition's head in [`HEADS`].
fn head_key(backend: &Arc<dyn TableBackend>, table: &str, pk: &str) -> String {
    let at = Arc::as_ptr(backend).cast::<()>() as usize;
    format!("{at:x}\u{0}{table}\u{0}{pk}")
}

/// How often a transaction goes round again after losing the race for the
/// head to another writer of the partition before it gives up: a partition
/// whose writers record changes takes one transaction at a time.
const HEAD_RACES: u32 = 64;

/// The changes of one transaction's writes, and what its attempts learned.
pub(super) struct Feed<'a> {
    changes: Vec<(usize, ChangeOf<'a>)>,
    /// The highest change number found taken: the next are numbered after.
    floor: u64,
    races: u32,
    /// The number of the last change the latest plan made.
    last: u64,
    /// The transaction's tag, on its change rows.
    tag: String,
}

impl<'a> Feed<'a> {
    /// The changes `writes` record (none, for most transactions).
    pub(super) fn of(writes: &'a [&'a (dyn super::Pending + 'a)]) -> Feed<'a> {
        let changes: Vec<(usize, ChangeOf<'a>)> = writes
            .iter()
            .enumerate()
            .filter_map(|(w, write)| Some((w, write.change()?)))
            .collect();
        let tag = if changes.is_empty() {
            String::new()
        } else {
            format!("{:016x}", fastrand::u64(..))
        };
        Feed {
            changes,
            floor: 0,
            races: 0,
            last: 0,
            tag,
        }
    }

    /// How many operations the feed adds to the transaction.
    pub(super) fn room(&self) -> usize {
        match self.changes.len() {
            0 => 0,
            n => n + 1,
        }
    }

    /// The partition's head, read before each attempt, when the
    /// transaction records changes (its first change lists the partition).
    pub(super) async fn head(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        pk: &str,
    ) -> Result<Option<Head>> {
        if self.changes.is_empty() {
            return Ok(None);
        }
        let key = head_key(backend, table, pk);
        if let Some(kept) = HEADS.lock().get(&key) {
            let (seq, etag) = (kept.seq, kept.etag.clone());
            return Ok(Some(Head { seq, etag }));
        }
        head_before_changes(backend.as_ref(), table, pk).await
    }

    /// Keeps the head the transaction committed (its ETag among `etags`,
    /// the operations' in order), for the partition's next write.
    pub(super) fn committed(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        pk: &str,
        etags: &[Option<ETag>],
        owners: &[(usize, Role)],
    ) {
        if self.changes.is_empty() {
            return;
        }
        let at = owners
            .iter()
            .position(|(_, role)| matches!(role, Role::ChangeHead));
        let etag = at.and_then(|at| etags.get(at).cloned().flatten());
        let key = head_key(backend, table, pk);
        match etag.filter(|etag| !etag.as_str().is_empty()) {
            Some(etag) => keep_head(key, backend, self.last, etag),
            None => {
                HEADS.lock().remove(&key);
            }
        }
    }

    /// Adds the change rows and the head's move to `planned`.
    pub(super) fn plan(&mut self, pk: &str, head: Option<&Head>, planned: &mut Planned) {
        if !self.changes.is_empty() {
            self.last = plan(pk, head, self.floor, &self.changes, &self.tag, planned);
        }
    }

    /// After an answer that leaves the latest attempt's fate open (lost,
    /// a failure that may have come after it applied, or a refusal of a
    /// resend of it): whether it committed, read from its first change
    /// row, which holds the transaction's tag. Without it, an attempt
    /// that committed would be planned again, and its changes recorded
    /// twice.
    pub(super) async fn committed_already(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        pk: &str,
    ) -> Result<bool> {
        let count = self.changes.len() as u64;
        if count == 0 || self.last < count {
            return Ok(false);
        }
        let first = change_key(self.last + 1 - count);
        let row = backend.try_get_entity(table, pk, &first).await?;
        let ours = row.is_some_and(|row| {
            row.properties.get(TAG).and_then(|tag| tag.as_str()) == Some(self.tag.as_str())
        });
        if ours {
            HEADS.lock().remove(&head_key(backend, table, pk));
        }
        Ok(ours)
    }

    /// After another writer moved the head first (or took change number
    /// `taken`): waits a moment, growing with each lost race, before the
    /// transaction reads the head again; a [`Transient`](Error::Transient)
    /// error once the partition has stayed busy too long.
    pub(super) async fn lost(
        &mut self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        pk: &str,
        taken: Option<u64>,
    ) -> Result<()> {
        HEADS.lock().remove(&head_key(backend, table, pk));
        self.floor = self.floor.max(taken.unwrap_or(0));
        self.races += 1;
        if self.races > HEAD_RACES {
            return Err(Error::Transient {
                message: format!(
                    "the change feed of partition {pk:?} in table `{table}` stayed busy: \
                     {HEAD_RACES} other transactions took its next number first"
                ),
            });
        }
        let most = 1u64 << self.races.min(6);
        tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(0..most))).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BatchOperation, GetOptions, ListTablesOptions, Query, QueryPage};
    use crate::backend::{TablePage, UpdateMode};
    use crate::entity::{Entity, IfMatch};

    /// A backend of no store, for its address alone.
    #[derive(Debug)]
    struct NoStore;

    fn none<T>() -> Result<T> {
        Err(Error::NotSupported {
            operation: "a test",
        })
    }

    #[async_trait::async_trait]
    impl TableBackend for NoStore {
        async fn create_table(&self, _: &str) -> Result<()> {
            none()
        }
        async fn delete_table(&self, _: &str) -> Result<()> {
            none()
        }
        async fn list_tables(&self, _: &ListTablesOptions) -> Result<TablePage> {
            none()
        }
        async fn get_entity(&self, _: &str, _: &str, _: &str, _: &GetOptions) -> Result<Entity> {
            none()
        }
        async fn query_entities(&self, _: &str, _: &Query) -> Result<QueryPage> {
            none()
        }
        async fn insert_entity(&self, _: &str, _: &Entity) -> Result<ETag> {
            none()
        }
        async fn update_entity(
            &self,
            _: &str,
            _: &Entity,
            _: UpdateMode,
            _: &IfMatch,
        ) -> Result<ETag> {
            none()
        }
        async fn upsert_entity(&self, _: &str, _: &Entity, _: UpdateMode) -> Result<ETag> {
            none()
        }
        async fn delete_entity(&self, _: &str, _: &str, _: &str, _: &IfMatch) -> Result<()> {
            none()
        }
        async fn submit_transaction(
            &self,
            _: &str,
            _: &[BatchOperation],
        ) -> Result<Vec<Option<ETag>>> {
            none()
        }
    }

    /// A backend made after another was dropped never takes its address
    /// while a head of it is kept, so it never finds that backend's heads.
    #[test]
    fn a_kept_head_keeps_its_backends_address_its_own() {
        let make = || -> Arc<dyn TableBackend> { Arc::new(NoStore) };
        let first = make();
        let key = head_key(&first, "T", "kept-address");
        keep_head(key.clone(), &first, 7, ETag::new("W/\"x\""));
        let address = Arc::as_ptr(&first).cast::<()>() as usize;
        drop(first);
        let later: Vec<_> = (0..64).map(|_| make()).collect();
        for backend in &later {
            assert_ne!(Arc::as_ptr(backend).cast::<()>() as usize, address);
            assert_ne!(head_key(backend, "T", "kept-address"), key);
        }
        HEADS.lock().remove(&key);
    }
}
