//! Outbox records and steps: what they hold and how they are stored.

use serde_json::Value as Json;

use crate::backend::{Query, TableBackend, TableBackendExt};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity};
use crate::error::{Error, Result};
use crate::filter::{Filter, RowView};
use crate::value::Value;

/// The RowKeys of outbox records start with this, then the RowKey of the
/// entity that wrote them, `|`, and the write's sequence number.
pub const OUTBOX_PREFIX: &str = "~tk|outbox|";
/// The start of every RowKey tablekit keeps for its own rows.
pub(crate) const RESERVED_PREFIX: &str = "~tk|";
/// The RowKey of a fence row is this and the RowKey it fences.
pub const FENCE_PREFIX: &str = "~tk|fence|";
/// The property holding an entity's sequence number: one higher on every
/// write whose steps go through the outbox, and carried by every step.
pub const SEQ_PROPERTY: &str = "_Seq";
/// Marks an outbox record; its value says what the record is for.
pub(super) const OUTBOX_PROPERTY: &str = "_Outbox";
/// Marks a fence row; its value is the sequence number of the newest step
/// applied to the row it fences.
const FENCE_PROPERTY: &str = "_Fence";
/// What a move's record is for (its `what`).
pub(crate) const MOVE: &str = "move";
/// What a record of a transaction's puts elsewhere is written for.
pub(crate) const THEN: &str = "then";
/// The time a record was written, for the sweeper.
const AT_PROPERTY: &str = "_At";
/// The table the record's entity is in.
const TABLE_PROPERTY: &str = "_Table";
/// The steps, as JSON text split over `_Steps0`, `_Steps1`, …
const STEPS_PROPERTY: &str = "_Steps";
/// The most UTF-16 code units of one string property.
const CHUNK: usize = crate::validate::limits::MAX_STRING_UTF16;

/// One operation of a step.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOp {
    /// Insert the row, or replace it whole (its keys name it).
    Put(Entity),
    /// Insert the row; the step fails if a row with its keys exists (it is
    /// another entity's: nothing is overwritten).
    Insert(Entity),
    /// Delete the row with this RowKey, if it exists.
    Delete(String),
    /// Delete the row with this RowKey if it is still the version `etag`
    /// names (a row already gone is left out); a row changed since fails the
    /// step with [`PreconditionFailed`](crate::Error::PreconditionFailed),
    /// nothing written. A move gives up its old row this way.
    DeleteIf {
        /// The row's RowKey.
        row_key: String,
        /// The version to delete.
        etag: crate::entity::ETag,
    },
    /// Add `member` to the index entity `row_key` (created if missing),
    /// marked with the index name `marker` when given.
    ListAdd {
        /// The index entity's RowKey.
        row_key: String,
        /// The RowKey to list.
        member: String,
        /// The index name written into the row, if the kind writes it.
        marker: Option<String>,
    },
    /// Remove `member` from the index entity `row_key` (deleted when it
    /// lists nothing more).
    ListRemove {
        /// The index entity's RowKey.
        row_key: String,
        /// The RowKey to remove.
        member: String,
        /// The index name written into the row, if the kind writes it.
        marker: Option<String>,
    },
    /// Record in the partition's change feed the write `op` (`delete`, as
    /// a move gives up its old row) of the entity `row_key`, in the step's
    /// own transaction, numbered after the partition's newest change. Left
    /// out when the step finds the entity's row gone already (the change
    /// that removed it was recorded by its own write).
    Change {
        /// The entity's RowKey.
        row_key: String,
        /// The write, as a change row names it.
        op: String,
    },
}

impl StepOp {
    /// [`ListAdd`](StepOp::ListAdd) when `add`, else
    /// [`ListRemove`](StepOp::ListRemove).
    pub(crate) fn list(
        add: bool,
        row_key: String,
        member: String,
        marker: Option<String>,
    ) -> StepOp {
        if add {
            StepOp::ListAdd {
                row_key,
                member,
                marker,
            }
        } else {
            StepOp::ListRemove {
                row_key,
                member,
                marker,
            }
        }
    }

    /// The change of an index entity this operation makes, read back as
    /// [`list`](StepOp::list) takes it: whether it adds, the entity's RowKey,
    /// the member and the marker. `None` for the other operations.
    pub(crate) fn as_list(&self) -> Option<(bool, &str, &str, Option<&str>)> {
        match self {
            StepOp::ListAdd {
                row_key,
                member,
                marker,
            } => Some((true, row_key, member, marker.as_deref())),
            StepOp::ListRemove {
                row_key,
                member,
                marker,
            } => Some((false, row_key, member, marker.as_deref())),
            _ => None,
        }
    }
}

/// Rows of one partition to change together, once, fenced by the sequence
/// number of the write that asked for them.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The table.
    pub table: String,
    /// The partition every operation is in.
    pub partition_key: String,
    /// The RowKey whose fence guards the step: the row the step is about.
    pub fence: String,
    /// The sequence number of the write that made the step.
    pub seq: i64,
    /// What to change, in one transaction.
    pub ops: Vec<StepOp>,
}

impl Step {
    /// Appends the step as JSON text. Entities are written straight from
    /// their properties by the wire writer: no JSON tree is built.
    fn write_json(&self, out: &mut String) {
        let text = |value: &str| Json::from(value).to_string();
        out.push_str(&format!(
            "{{\"table\":{},\"pk\":{},\"fence\":{},\"seq\":{},\"ops\":[",
            text(&self.table),
            text(&self.partition_key),
            text(&self.fence),
            self.seq
        ));
        for (i, op) in self.ops.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if let Some((add, row_key, member, marker)) = op.as_list() {
                let name = if add { "list_add" } else { "list_remove" };
                let marker = marker.map_or_else(|| "null".to_owned(), text);
                out.push_str(&format!(
                    "{{\"{name}\":{{\"rk\":{},\"member\":{},\"marker\":{marker}}}}}",
                    text(row_key),
                    text(member)
                ));
                continue;
            }
            match op {
                StepOp::Put(entity) | StepOp::Insert(entity) => {
                    let name = if matches!(op, StepOp::Put(_)) {
                        "put"
                    } else {
                        "insert"
                    };
                    out.push_str(&format!(
                        "{{\"{name}\":{}}}",
                        crate::json::to_string(entity)
                    ));
                }
                StepOp::Delete(row_key) => {
                    out.push_str(&format!("{{\"delete\":{}}}", text(row_key)));
                }
                StepOp::DeleteIf { row_key, etag } => {
                    out.push_str(&format!(
                        "{{\"delete_if\":{{\"rk\":{},\"etag\":{}}}}}",
                        text(row_key),
                        text(etag.as_str())
                    ));
                }
                StepOp::Change { row_key, op } => {
                    out.push_str(&format!(
                        "{{\"change\":{{\"rk\":{},\"op\":{}}}}}",
                        text(row_key),
                        text(op)
                    ));
                }
                // Written above.
                StepOp::ListAdd { .. } | StepOp::ListRemove { .. } => {}
            }
        }
        out.push_str("]}");
    }

    fn from_json(json: &Json) -> Option<Step> {
        let text = |name: &str| json.get(name)?.as_str().map(str::to_owned);
        let ops = json
            .get("ops")?
            .as_array()?
            .iter()
            .map(|op| {
                if let Some(entity) = op.get("put") {
                    crate::json::row_from_json(entity).ok().map(StepOp::Put)
                } else if let Some(entity) = op.get("insert") {
                    crate::json::row_from_json(entity).ok().map(StepOp::Insert)
                } else if let Some(list) = op.get("list_add").or_else(|| op.get("list_remove")) {
                    let row_key = list.get("rk")?.as_str()?.to_owned();
                    let member = list.get("member")?.as_str()?.to_owned();
                    let marker = list.get("marker")?.as_str().map(str::to_owned);
                    let add = op.get("list_add").is_some();
                    Some(StepOp::list(add, row_key, member, marker))
                } else if let Some(change) = op.get("change") {
                    Some(StepOp::Change {
                        row_key: change.get("rk")?.as_str()?.to_owned(),
                        op: change.get("op")?.as_str()?.to_owned(),
                    })
                } else if let Some(delete) = op.get("delete_if") {
                    Some(StepOp::DeleteIf {
                        row_key: delete.get("rk")?.as_str()?.to_owned(),
                        etag: ETag::new(delete.get("etag")?.as_str()?),
                    })
                } else {
                    op.get("delete")?
                        .as_str()
                        .map(|rk| StepOp::Delete(rk.to_owned()))
                }
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Step {
            table: text("table")?,
            partition_key: text("pk")?,
            fence: text("fence")?,
            seq: json.get("seq")?.as_i64()?,
            ops,
        })
    }
}

/// An outbox record as stored: the steps a write left to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The table of the entity that wrote it.
    pub table: String,
    /// Its partition (the entity's).
    pub partition_key: String,
    /// Its RowKey.
    pub row_key: String,
    /// Its ETag, which guards its delete.
    pub etag: ETag,
    /// The sequence number of the write that made it.
    pub seq: i64,
    /// When the write committed.
    pub at: DateTime,
    /// What it was written for.
    pub what: String,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// The RowKey prefix of the records of the entity `row_key`.
pub(crate) fn records_prefix(row_key: &str) -> String {
    format!("{OUTBOX_PREFIX}{row_key}|")
}

/// The RowKey of the entity whose record has the RowKey `record_key`.
pub(crate) fn record_owner(record_key: &str) -> Option<&str> {
    let rest = record_key.strip_prefix(OUTBOX_PREFIX)?;
    rest.rsplit_once('|').map(|(owner, _)| owner)
}

/// The outbox record row of the write `seq` of entity `(pk, row_key)`.
pub(crate) fn record_row(
    table: &str,
    partition_key: &str,
    row_key: &str,
    seq: i64,
    at: DateTime,
    what: &str,
    steps: &[Step],
) -> Entity {
    let mut text = String::from("[");
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        step.write_json(&mut text);
    }
    text.push(']');
    let mut row = Entity::new(
        partition_key,
        format!("{}{seq:020}", records_prefix(row_key)),
    )
    .with(OUTBOX_PROPERTY, what)
    .with(TABLE_PROPERTY, table)
    .with(AT_PROPERTY, at);
    for (i, chunk) in chunks(&text).enumerate() {
        row.insert(format!("{STEPS_PROPERTY}{i}"), chunk);
    }
    row
}

/// `text` in pieces of at most [`CHUNK`] UTF-16 code units, cut between
/// characters.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut units = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                units += c.len_utf16();
                units > CHUNK
            })
            .map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

fn undecodable(row: &Entity, why: &str) -> Error {
    Error::Decode {
        message: format!(
            "row ({:?}, {:?}) is not an outbox record: {why}",
            row.partition_key, row.row_key
        ),
    }
}

impl Record {
    /// Reads a stored record row.
    pub fn from_row(row: &Entity) -> Result<Record> {
        let text_of = |name: &str| match row.properties.get(name) {
            Some(Value::String(text)) => Some(text.clone()),
            _ => None,
        };
        let what = text_of(OUTBOX_PROPERTY).ok_or_else(|| undecodable(row, "no marker"))?;
        let table = text_of(TABLE_PROPERTY).ok_or_else(|| undecodable(row, "no table"))?;
        let at = match row.properties.get(AT_PROPERTY) {
            Some(Value::DateTime(at)) => *at,
            _ => return Err(undecodable(row, "no time")),
        };
        let mut text = String::new();
        for i in 0.. {
            match text_of(&format!("{STEPS_PROPERTY}{i}")) {
                Some(chunk) => text.push_str(&chunk),
                None => break,
            }
        }
        let json: Json =
            serde_json::from_str(&text).map_err(|_| undecodable(row, "steps are not JSON"))?;
        let steps = json
            .as_array()
            .and_then(|steps| {
                steps
                    .iter()
                    .map(Step::from_json)
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| undecodable(row, "unreadable steps"))?;
        let seq = row
            .row_key
            .rsplit('|')
            .next()
            .and_then(|digits| digits.parse().ok())
            .ok_or_else(|| undecodable(row, "no sequence number"))?;
        Ok(Record {
            table,
            partition_key: row.partition_key.clone(),
            row_key: row.row_key.clone(),
            etag: row.etag.clone().unwrap_or_else(|| ETag::new("")),
            seq,
            at,
            what,
            steps,
        })
    }
}

/// Whether `row` is an outbox record.
pub fn is_outbox_row(row: &Entity) -> bool {
    is_outbox_row_view(row.into())
}

/// [`is_outbox_row`] of a row however it is read.
fn is_outbox_row_view(row: RowView<'_>) -> bool {
    row.row_key.starts_with(OUTBOX_PREFIX) && row.properties.contains(OUTBOX_PROPERTY)
}

/// Whether `row` is a fence row.
pub fn is_fence_row(row: &Entity) -> bool {
    is_fence_row_view(row.into())
}

/// [`is_fence_row`] of a row however it is read.
fn is_fence_row_view(row: RowView<'_>) -> bool {
    row.row_key.starts_with(FENCE_PREFIX) && row.properties.contains(FENCE_PROPERTY)
}

/// The RowKey of a row of the expiry index (of entities by the time they
/// expire) starts with this.
pub(crate) const EXPIRY_PREFIX: &str = "~tk|expiry|";

/// Whether `row` is tablekit's bookkeeping rather than an entity: an index
/// row, an index entity, an outbox record, a fence row, a row of the
/// change feed, or of the expiry index.
pub fn is_bookkeeping_row(row: &Entity) -> bool {
    is_bookkeeping(row.into())
}

/// [`is_bookkeeping_row`] of a row however it is read (an entity, or a row
/// passed by reference).
pub(crate) fn is_bookkeeping(row: RowView<'_>) -> bool {
    super::lists::is_index_row_view(row)
        || is_outbox_row_view(row)
        || is_fence_row_view(row)
        || super::changes::is_change_row(row)
        || row.row_key.starts_with(EXPIRY_PREFIX)
}

/// What one of tablekit's own rows is, for a reader that shows raw rows
/// (a browser of a store, an export): see [`bookkeeping_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Bookkeeping {
    /// An index row: an entity's value, pointing at its row.
    IndexRow,
    /// An index entity: the RowKeys of the entities holding one value.
    IndexEntity,
    /// An outbox record: steps of a write across partitions, not yet done.
    OutboxRecord,
    /// A fence: the last step applied to a row, so a step never applies twice.
    Fence,
    /// A change of a change feed.
    Change,
    /// A partition's change-feed head: its newest change's number.
    ChangeHead,
    /// A row of the change feeds' directory: a partition with changes, a
    /// consumer, its checkpoint in a partition, or its lease.
    ChangeDirectory,
    /// A row of an expiry index: an entity that expires, by its time.
    ExpiryIndex,
}

impl Bookkeeping {
    /// What the row is, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Bookkeeping::IndexRow => "index row",
            Bookkeeping::IndexEntity => "index entity",
            Bookkeeping::OutboxRecord => "outbox record",
            Bookkeeping::Fence => "fence",
            Bookkeeping::Change => "change-feed change",
            Bookkeeping::ChangeHead => "change-feed head",
            Bookkeeping::ChangeDirectory => "change-feed directory",
            Bookkeeping::ExpiryIndex => "expiry index row",
        }
    }
}

/// What `row` is, if it is one of tablekit's own rows rather than an
/// entity ([`is_bookkeeping_row`], and the rows of the change feeds'
/// directory).
pub fn bookkeeping_of(row: &Entity) -> Option<Bookkeeping> {
    use super::changes::{CHANGE_PREFIX, DIRECTORY, HEAD_KEY};
    Some(if super::lists::is_index_row(row) {
        match row.properties.contains(super::lists::ROW_PROPERTY) {
            true => Bookkeeping::IndexRow,
            false => Bookkeeping::IndexEntity,
        }
    } else if is_outbox_row(row) {
        Bookkeeping::OutboxRecord
    } else if is_fence_row(row) {
        Bookkeeping::Fence
    } else if super::changes::is_change_row(row.into()) && row.row_key == HEAD_KEY {
        Bookkeeping::ChangeHead
    } else if super::changes::is_change_row(row.into()) && row.row_key.starts_with(CHANGE_PREFIX) {
        Bookkeeping::Change
    } else if row.row_key.starts_with(EXPIRY_PREFIX) {
        Bookkeeping::ExpiryIndex
    } else if row.partition_key == DIRECTORY {
        Bookkeeping::ChangeDirectory
    } else {
        return None;
    })
}

/// The RowKey of the fence of `row_key`.
pub(crate) fn fence_key(row_key: &str) -> String {
    format!("{FENCE_PREFIX}{row_key}")
}

/// The fence row of `row_key` in partition `partition_key`, at `seq`.
pub(crate) fn fence_row(partition_key: &str, row_key: &str, seq: i64) -> Entity {
    Entity::new(partition_key, fence_key(row_key)).with(FENCE_PROPERTY, seq)
}

/// The sequence number the fence of `row_key` in `(table, partition_key)`
/// holds: 0 when there is none.
pub(crate) async fn read_fence(
    backend: &dyn TableBackend,
    table: &str,
    partition_key: &str,
    row_key: &str,
) -> Result<i64> {
    let row = backend
        .try_get_entity(table, partition_key, &fence_key(row_key))
        .await?;
    Ok(row.as_ref().map_or(0, fence_seq))
}

/// The sequence number an entity's row holds (0 without one).
pub(crate) fn seq_of(row: &Entity) -> i64 {
    match row.properties.get(SEQ_PROPERTY) {
        Some(Value::Int64(seq)) => *seq,
        Some(Value::Int32(seq)) => i64::from(*seq),
        _ => 0,
    }
}

/// The sequence number a fence row holds.
pub(crate) fn fence_seq(row: &Entity) -> i64 {
    match row.properties.get(FENCE_PROPERTY) {
        Some(Value::Int64(seq)) => *seq,
        Some(Value::Int32(seq)) => i64::from(*seq),
        _ => 0,
    }
}

/// RowKeys starting with `prefix`.
pub(crate) fn row_key_prefix(prefix: &str) -> Filter {
    let from = Filter::row_key().ge(prefix);
    match crate::keyorder::prefix_end(prefix) {
        Some(end) => from.and(Filter::row_key().lt(end)),
        None => from,
    }
}

/// The outbox records of the entity `(partition_key, row_key)` in `table`,
/// oldest first.
pub async fn pending_records(
    backend: &dyn TableBackend,
    table: &str,
    partition_key: &str,
    row_key: &str,
) -> Result<Vec<Record>> {
    let filter = Filter::partition_key()
        .eq(partition_key)
        .and(row_key_prefix(&records_prefix(row_key)));
    let rows = backend
        .query_all(table, Query::new().filter(filter))
        .await?;
    rows.iter()
        .filter(|row| is_outbox_row(row))
        .map(Record::from_row)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_split_long_steps() {
        let big = "𝄞".repeat(20_000) + &"x".repeat(30_000);
        let steps = vec![
            Step {
                table: "Index".into(),
                partition_key: "email_Sales".into(),
                fence: "a@x|EMP_1".into(),
                seq: 7,
                ops: vec![StepOp::Put(
                    Entity::new("email_Sales", "a@x|EMP_1")
                        .with("big", big.as_str())
                        .with("n", 3i64)
                        .with("when", DateTime::parse("2026-11-24T01:00:00Z").unwrap()),
                )],
            },
            Step {
                table: "Index".into(),
                partition_key: "email_Sales".into(),
                fence: "b@x|EMP_1".into(),
                seq: 7,
                ops: vec![
                    StepOp::Delete("b@x|EMP_1".into()),
                    StepOp::DeleteIf {
                        row_key: "EMP_2".into(),
                        etag: ETag::new("W/\"datetime'2026-11-24T01%3A02%3A03Z'\""),
                    },
                    StepOp::Insert(Entity::new("email_Sales", "c").with("k", "v")),
                    StepOp::ListAdd {
                        row_key: "t_red".into(),
                        member: "EMP_1".into(),
                        marker: Some("team".into()),
                    },
                    StepOp::ListRemove {
                        row_key: "t_blue".into(),
                        member: "EMP_1".into(),
                        marker: None,
                    },
                    StepOp::Change {
                        row_key: "EMP_\"1".into(),
                        op: "delete".into(),
                    },
                ],
            },
        ];
        let at = DateTime::parse("2026-11-24T01:02:03Z").unwrap();
        let mut row = record_row("Staff", "Sales", "EMP_1", 7, at, "index", &steps);
        assert_eq!(row.row_key, "~tk|outbox|EMP_1|00000000000000000007");
        assert!(row.properties.contains("_Steps1"), "long steps are split");
        for (name, value) in row.properties.iter() {
            if let Value::String(text) = value {
                let units: usize = text.chars().map(char::len_utf16).sum();
                assert!(units <= CHUNK, "{name} holds {units} units");
            }
        }
        assert!(is_outbox_row(&row) && is_bookkeeping_row(&row));
        row.etag = Some(ETag::new("W/\"x\""));
        let record = Record::from_row(&row).unwrap();
        assert_eq!(record.steps, steps);
        assert_eq!((record.at, record.table.as_str()), (at, "Staff"));
        assert_eq!(record.seq, 7);
        let fence = fence_row("p", "r", 9);
        assert!(is_fence_row(&fence) && is_bookkeeping_row(&fence));
        assert_eq!(fence_seq(&fence), 9);
        assert!(!is_bookkeeping_row(&Entity::new("p", "~tk|outbox|x")));
    }
}
