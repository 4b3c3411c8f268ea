//! Pending multi-row work: what a write that spans partitions or tables
//! leaves to finish after its transaction, kept in the table itself.
//!
//! A write records the *steps* still to apply in an outbox record, a row of
//! its own partition, in the same transaction as its own rows; each step
//! is fenced, so applying it twice or out of order changes nothing (see
//! [`outbox`](crate::outbox) for the protocol). This module holds the
//! records, steps and fences, applying them, and sweeping the records a
//! writer that stopped left behind: the typed client's writes, the indexes
//! kept elsewhere, moves and the upkeep all use it. The outbox pattern
//! adds a queue that announces the pending work to a worker, through
//! [`Announce`].

use std::any::Any;

use futures::future::BoxFuture;
use serde_json::{Value as Json, json};

use crate::error::Result;

mod apply;
pub(crate) mod changes;
mod finish;
pub(crate) mod lists;
mod record;
mod sweep;

pub use apply::{Applied, apply_step, finish_entity, finish_record};
pub(crate) use record::is_bookkeeping;
pub use record::{
    Bookkeeping, FENCE_PREFIX, OUTBOX_PREFIX, Record, SEQ_PROPERTY, Step, StepOp, bookkeeping_of,
    is_bookkeeping_row, is_fence_row, is_outbox_row, pending_records,
};
pub use sweep::{SweepReport, pending_count, remove_fences_before, remove_fences_counting, sweep};

#[cfg(feature = "conformance")]
pub(crate) use finish::detached_in_flight;
pub(crate) use finish::{detached, finish_after_commit, finish_detached};
pub(crate) use record::{
    EXPIRY_PREFIX, MOVE, RESERVED_PREFIX, THEN, read_fence, record_row, records_prefix,
    row_key_prefix, seq_of,
};

/// What a notice names: the entity whose outbox records are to finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The entity's table.
    pub table: String,
    /// Its PartitionKey.
    pub partition_key: String,
    /// Its RowKey.
    pub row_key: String,
}

impl Notice {
    pub(crate) fn to_text(&self, error: Option<&str>) -> String {
        let mut json = json!({
            "table": self.table,
            "pk": self.partition_key,
            "rk": self.row_key,
        });
        if let Some(error) = error {
            json["error"] = Json::String(error.to_owned());
        }
        json.to_string()
    }

    /// The notice a message's text holds, and the error it last failed
    /// with, if any.
    pub(crate) fn from_text(text: &str) -> Option<(Notice, Option<String>)> {
        let json: Json = serde_json::from_str(text).ok()?;
        let field = |name: &str| json.get(name)?.as_str().map(str::to_owned);
        let notice = Notice {
            table: field("table")?,
            partition_key: field("pk")?,
            row_key: field("rk")?,
        };
        Some((notice, field("error")))
    }
}

/// Where a writer announces the pending work it is about to finish itself,
/// so that another process finishes it if the writer stops first (the
/// outbox's queue, [`Outbox`](crate::outbox::Outbox)). A table holds one as
/// a trait object: the typed client knows no queue.
pub(crate) trait Announce: Any + Send + Sync + std::fmt::Debug {
    /// Announces `notice`'s pending work; returns what withdraws it.
    fn announce<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Announced>>;
    /// Withdraws an announcement whose work the writer finished.
    fn withdraw<'a>(&'a self, announced: &'a Announced) -> BoxFuture<'a, Result<()>>;
}

/// An announcement made, as [`Announce::withdraw`] takes it back.
pub(crate) struct Announced {
    pub(crate) id: String,
    pub(crate) receipt: String,
}
