//! The outbox record of rows a transaction puts into other tables once it
//! commits.

use super::{Learned, Pending, Planned, Role, State};
use crate::backend::BatchOperation;
use crate::datetime::DateTime;
use crate::entity::Entity;
use crate::error::Result;
use crate::pending;

/// The outbox record of the rows a transaction puts elsewhere once it
/// commits ([`Transaction::then_put`](super::Transaction::then_put)): one
/// step per row, numbered by the time it is planned (the writer's clock),
/// so that of two puts of one row the later one stays, and a step applied
/// again changes nothing.
pub(in crate::table) struct ThenRecord {
    /// The transaction's table.
    pub(in crate::table) table: String,
    /// The transaction's partition, and the placeholder key `check_writes`
    /// sees.
    pub(in crate::table) keys: (String, String),
    /// The RowKey the record is filed under: the transaction's own, made
    /// up for it.
    pub(in crate::table) owner: String,
    /// Each row, with its table.
    pub(in crate::table) rows: Vec<(String, Entity)>,
}

impl ThenRecord {
    pub(in crate::table) fn new(
        table: &str,
        partition_key: &str,
        rows: Vec<(String, Entity)>,
    ) -> ThenRecord {
        let owner = format!("then|{:032x}", fastrand::u128(..));
        ThenRecord {
            table: table.to_owned(),
            keys: (partition_key.to_owned(), pending::records_prefix(&owner)),
            owner,
            rows,
        }
    }
}

impl Pending for ThenRecord {
    fn keys(&self) -> (&str, &str) {
        (&self.keys.0, &self.keys.1)
    }
    fn spans(&self) -> Option<(&str, &str)> {
        Some((&self.keys.0, &self.owner))
    }
    fn plan(&self, _: State<'_>, _: &Learned, at: DateTime, out: &mut Planned) -> Result<bool> {
        let steps: Vec<pending::Step> = self
            .rows
            .iter()
            .map(|(table, row)| pending::Step {
                table: table.clone(),
                partition_key: row.partition_key.clone(),
                fence: row.row_key.clone(),
                seq: at.ticks(),
                ops: vec![pending::StepOp::Put(row.clone())],
            })
            .collect();
        let row = pending::record_row(
            &self.table,
            &self.keys.0,
            &self.owner,
            1,
            at,
            pending::THEN,
            &steps,
        );
        out.push(BatchOperation::Insert(row), Role::Other);
        Ok(false)
    }
}
