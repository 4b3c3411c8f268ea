//! The change feed's rows in a planned transaction: the change row of each
//! typed write of a kind that records its changes (the rows are described
//! in `pending/changes.rs`). The partition's [lane](super::lane) numbers
//! them and moves the head, guarded by its ETag, so two transactions of one
//! partition never take the same numbers, and a change is numbered only if
//! it commits.

use std::sync::Arc;

use super::lane::Entry;
use crate::backend::{BatchOperation, TableBackend, TableBackendExt};
use crate::entity::Entity;
use crate::error::Result;
use crate::pending::changes::{
    FULL, OP, PREVIOUS_FULL, PREVIOUS_PREFIX, REASON, ROW, TAG, bare_change_row, change_key,
};

/// The change a write records: what it did, and the row it wrote (for a
/// delete, the keys alone).
pub(in crate::table) struct ChangeOf<'a> {
    /// `insert`, `replace`, `merge`, `upsert`, `upsert_merge` or `delete`.
    pub(in crate::table) op: &'static str,
    pub(in crate::table) row: &'a Entity,
}

/// The row of change `seq`: the operation, the entity's RowKey, the
/// properties written and the `previous` row's (each under
/// [`PREVIOUS_PREFIX`]), when they fit in one row beside them: else
/// without the previous row's, else without the properties written.
fn change_row(pk: &str, seq: u64, change: &ChangeOf<'_>, previous: Option<&Entity>) -> Entity {
    let mut row = Entity::new(pk, change_key(seq));
    if change.op != "delete" {
        row.properties = change.row.properties.clone();
    } else if let Some(reason) = change.row.properties.get(REASON) {
        // A delete's row is its keys, and the reason the library made it.
        row.properties.insert(REASON, reason.clone());
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

/// What the change feed learns from a plan, by write: the stored row a
/// write replaces (for a kind that records previous values), and the
/// operation a write turned out to be where the stored state decided it
/// (an upsert of offloaded values is an insert, or a replace or merge of
/// the version it read).
#[derive(Default)]
pub(in crate::table) struct FeedNotes {
    pub(super) previous: Vec<(usize, Entity)>,
    pub(super) ops: Vec<(usize, &'static str)>,
}

/// The changes of one transaction's writes, and where its attempts put
/// them.
pub(super) struct Feed<'a> {
    changes: Vec<(usize, ChangeOf<'a>)>,
    /// The number of the first change, as last sent (0: none sent).
    pub(super) first: u64,
    /// The transaction's tag, on its change rows.
    tag: String,
}

impl<'a> Feed<'a> {
    /// The changes `writes` record; `None` when none does (most
    /// transactions: a write of a kind without a feed goes no further
    /// into the feed's code).
    pub(super) fn of(writes: &'a [&'a (dyn super::Pending + 'a)]) -> Option<Feed<'a>> {
        let changes: Vec<(usize, ChangeOf<'a>)> = writes
            .iter()
            .enumerate()
            .filter_map(|(w, write)| Some((w, write.change()?)))
            .collect();
        if changes.is_empty() {
            return None;
        }
        Some(Feed {
            changes,
            first: 0,
            tag: {
                let mut tag = String::with_capacity(16);
                crate::hex::push_hex16(&mut tag, fastrand::u64(..));
                tag
            },
        })
    }

    /// How many operations the feed adds to the transaction.
    pub(super) fn room(&self) -> usize {
        self.changes.len() + 1
    }

    /// The transaction to send in the lane: `operations`, and the change
    /// row of each write (not yet numbered), with the value it replaced
    /// when the kind records it, as `notes` say.
    pub(super) fn entry(
        &self,
        pk: &str,
        operations: Vec<BatchOperation>,
        notes: &FeedNotes,
    ) -> Entry {
        let changes = self
            .changes
            .iter()
            .map(|(w, change)| {
                let previous = notes
                    .previous
                    .iter()
                    .find_map(|(at, row)| (at == w).then_some(row));
                let op = notes
                    .ops
                    .iter()
                    .find_map(|(at, op)| (at == w).then_some(*op));
                let change = ChangeOf {
                    op: op.unwrap_or(change.op),
                    row: change.row,
                };
                let mut row = change_row(pk, 0, &change, previous);
                row.properties.insert(TAG, self.tag.as_str());
                (*w, row)
            })
            .collect();
        Entry::new(operations, changes)
    }

    /// After an answer that leaves the latest attempt's fate open (lost,
    /// a failure that may have come after it applied, or a turn that
    /// stopped): whether it committed, read from its first change row,
    /// which holds the transaction's tag. Without it, an attempt that
    /// committed would be planned again, and its changes recorded twice.
    pub(super) async fn committed_already(
        &self,
        backend: &Arc<dyn TableBackend>,
        table: &str,
        pk: &str,
    ) -> Result<bool> {
        if self.first == 0 {
            return Ok(false);
        }
        let row = backend
            .try_get_entity(table, pk, &change_key(self.first))
            .await?;
        Ok(row.is_some_and(|row| {
            row.properties.get(TAG).and_then(|tag| tag.as_str()) == Some(self.tag.as_str())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BatchOperation, GetOptions, ListTablesOptions, Query, QueryPage};
    use crate::backend::{EntityWrite, TablePage};
    use crate::entity::{ETag, Entity};
    use crate::error::Error;

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
        async fn write_entity(&self, _: &str, _: EntityWrite<'_>) -> Result<Option<ETag>> {
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
    /// while a lane of it is kept, so it never finds that backend's lane
    /// (nor the head it keeps).
    #[test]
    fn a_kept_lane_keeps_its_backends_address_its_own() {
        use super::super::lane::{forget_lane, kept_lane_key};
        let make = || -> Arc<dyn TableBackend> { Arc::new(NoStore) };
        let first = make();
        let key = kept_lane_key(&first, "T", "kept-address");
        let address = Arc::as_ptr(&first).cast::<()>() as usize;
        drop(first);
        let later: Vec<_> = (0..64).map(|_| make()).collect();
        for backend in &later {
            assert_ne!(Arc::as_ptr(backend).cast::<()>() as usize, address);
            let at = Arc::as_ptr(backend).cast::<()>() as usize;
            assert_ne!(format!("{at:x}\u{0}T\u{0}kept-address"), key);
        }
        forget_lane(&key);
    }
}
