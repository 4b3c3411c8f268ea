//! [`Table::update`]: read, change, write back under the ETag read, again
//! when another writer got there first, with back-off; and settling a write
//! whose response was lost.
//!
//! **Lost responses.** A conditional write whose answer never came may have
//! been applied or not, and reading the row back is not enough to tell when
//! other writers are busy on it: our write may have landed and been
//! overwritten since, or another writer's identical change may have landed
//! instead of ours. So `update`, inserts and writes through a [`Loaded`]
//! record themselves in a short history kept in the row's
//! [`WRITES_PROPERTY`] (unless the table was made
//! [`without_write_history`](Table::without_write_history)): a random tag for the write,
//! then the tags of the writes before it, newest first. The version a write
//! is based on is named by the first tag of its history (or, for a row that
//! has none, by a hash of its ETag). Reading the row back, the write landed
//! exactly when its tag stands right before its base's tag; the base's tag
//! first means nothing of this kind was written since. When the base's tag
//! is gone (the row was replaced by another kind of write, deleted, or more
//! than [`WRITES_KEPT`] writes came since), the outcome stays unknown and is
//! returned as [`Error::OutcomeUnknown`].
//!
//! An insert's history is its tag alone: read back, the row is ours when it
//! holds the tag, another writer's when it holds another history.
//!
//! Requests: one read and one write per attempt; a lost response costs one
//! more read.

use std::future::Future;
use std::time::{Duration, Instant};

use super::{Loaded, Table, rows::RowWrite};
use crate::backend::UpdateMode;
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::{Error, Result};
use crate::schema::{self, KeyArg, TableEntity};
use crate::value::Value;

pub use crate::props::WRITES_PROPERTY;

/// How many writes a row's history remembers: enough for every writer of a
/// busy row to write about twice between a lost write and its read-back.
/// (Tags are 8 characters: the history costs at most 576.)
pub const WRITES_KEPT: usize = 64;

/// The width of the tags tablekit writes.
const TAG_LEN: usize = 8;

/// 48 bits as an 8-character tag.
fn tag_text(bits: u64) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bits.to_be_bytes()[2..])
}

/// How [`Table::update`] retries: how many attempts, for how long, and the
/// back-off between them (exponential, with full jitter).
///
/// ```
/// use std::time::Duration;
/// use tablekit::UpdateOptions;
/// let patient = UpdateOptions::default().attempts(100).deadline(Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateOptions {
    attempts: u32,
    deadline: Option<Duration>,
    base_delay: Duration,
    max_delay: Duration,
}

impl Default for UpdateOptions {
    /// 64 attempts, no deadline, back-off from 5 ms up to 1 s: 32 writers
    /// updating one row at once all get through.
    fn default() -> UpdateOptions {
        UpdateOptions {
            attempts: 64,
            deadline: None,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1),
        }
    }
}

impl UpdateOptions {
    /// At most `n` attempts (read, change, write), at least 1.
    pub fn attempts(mut self, n: u32) -> UpdateOptions {
        self.attempts = n.max(1);
        self
    }

    /// Gives up once `limit` has passed since the update started; no
    /// attempt starts after it.
    pub fn deadline(mut self, limit: Duration) -> UpdateOptions {
        self.deadline = Some(limit);
        self
    }

    /// The back-off: before attempt `n + 1`, a random wait of up to
    /// `base · 2ⁿ⁻¹`, at most `max`.
    pub fn backoff(mut self, base: Duration, max: Duration) -> UpdateOptions {
        self.base_delay = base;
        self.max_delay = max.max(base);
        self
    }

    /// The wait before attempt `attempt + 1` (`attempt` ≥ 1).
    fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self
            .base_delay
            .saturating_mul(1 << attempt.saturating_sub(1).min(20))
            .min(self.max_delay);
        ceiling.mul_f64(fastrand::f64())
    }
}

/// What a lost write turned out to be.
enum Settled {
    /// It landed; the row as read back (which may be a later version).
    Applied(Entity),
    /// It did not land.
    NotApplied,
    /// The store cannot tell.
    Unknown,
}

/// Whether `error` refuses a write for what the row holds (a 409 to an
/// insert, a 412 to a guarded update), alone or as a transaction's.
fn is_refusal(error: &Error) -> bool {
    match error {
        Error::EntityAlreadyExists { .. } | Error::PreconditionFailed { .. } => true,
        Error::BatchFailed { source, .. } => is_refusal(source),
        _ => false,
    }
}

/// The history text of a row, if it has one.
pub(super) fn writes_of(entity: &Entity) -> Option<&str> {
    match entity.properties.get(WRITES_PROPERTY) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    }
}

/// Whether the history of `stored` holds `tag`.
pub(super) fn history_has(stored: &Entity, tag: &str) -> bool {
    tags(writes_of(stored)).contains(&tag)
}

/// A history's tags, newest first.
fn tags(writes: Option<&str>) -> Vec<&str> {
    writes.map_or_else(Vec::new, |text| {
        text.split(' ').filter(|t| !t.is_empty()).collect()
    })
}

/// A row's write history: its tags, newest first.
fn history(entity: &Entity) -> Vec<&str> {
    tags(writes_of(entity))
}

/// The tag that names a version as a base: the newest tag of its history,
/// or for a row without history a hash of its ETag.
fn base_of(writes: Option<&str>, etag: &ETag) -> String {
    let newest = writes.and_then(|text| text.split(' ').find(|t| !t.is_empty()));
    match newest {
        Some(tag) => (*tag).to_owned(),
        None => {
            // FNV-1a, written out: the tag must be the same in every process
            // and release, which std's hasher does not promise.
            let hash = etag
                .as_str()
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
            tag_text(hash)
        }
    }
}

/// The history a write tagged `tag` records on top of the version whose
/// history is `writes` and whose base tag is `base`.
fn history_after(tag: &str, base: &str, writes: Option<&str>) -> String {
    // The common case, a history as tablekit writes it, is cut by
    // arithmetic: its older tags follow the first, each 9 bytes on.
    if let Some(text) = writes
        && let Some(count) = tablekit_tags(text)
    {
        // Room for WRITES_KEPT - 2 older tags after `tag` and `base`.
        let kept = (count - 1).min(WRITES_KEPT - 2);
        let older = if kept == 0 {
            ""
        } else {
            &text[TAG_LEN + 1..(TAG_LEN + 1) * (kept + 1) - 1]
        };
        return joined(tag, base, older);
    }
    // Tags one space apart, of other widths: cut as text.
    if let Some(text) = writes
        && !text.is_empty()
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.contains("  ")
    {
        let older = text.split_once(' ').map_or("", |(_, older)| older);
        // Room for WRITES_KEPT - 2 older tags after `tag` and `base`.
        let end = older
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b' ')
            .nth(WRITES_KEPT - 3)
            .map_or(older.len(), |(at, _)| at);
        return joined(tag, base, &older[..end]);
    }
    let older = writes
        .into_iter()
        .flat_map(|text| text.split(' ').filter(|t| !t.is_empty()))
        .skip(1);
    let mut history =
        String::with_capacity(writes.map_or(0, str::len) + tag.len() + base.len() + 2);
    for (i, t) in [tag, base]
        .into_iter()
        .chain(older)
        .take(WRITES_KEPT)
        .enumerate()
    {
        if i > 0 {
            history.push(' ');
        }
        history.push_str(t);
    }
    history
}

/// How many 8-byte units `text` holds when it has the shape of a history
/// as tablekit writes it: a space after every eighth byte, none at the end.
/// `None` for any other text. (A unit is a tag unless the text was written
/// by another hand with spaces inside units; cutting it by units then keeps
/// a few more tags, all in order, which is as good.)
fn tablekit_tags(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if !(bytes.len() + 1).is_multiple_of(TAG_LEN + 1) {
        return None;
    }
    let count = (bytes.len() + 1) / (TAG_LEN + 1);
    // Only the separators are looked at: a whole scan of the text costs
    // more than the rest of the cut.
    let separators = bytes
        .chunks_exact(TAG_LEN + 1)
        .all(|unit| unit[TAG_LEN] == b' ');
    (separators && bytes[..TAG_LEN].iter().all(|&b| b != b' ')).then_some(count)
}

/// `tag`, `base` and the older tags `older`, one space apart.
fn joined(tag: &str, base: &str, older: &str) -> String {
    let mut history = String::with_capacity(tag.len() + base.len() + older.len() + 2);
    history.push_str(tag);
    history.push(' ');
    history.push_str(base);
    if !older.is_empty() {
        history.push(' ');
        history.push_str(older);
    }
    history
}

/// A new random tag.
fn new_tag() -> String {
    tag_text(fastrand::u64(..))
}

/// A write that records itself in the row's history, so that a lost answer
/// can be settled: its tag, the tag of the version it is based on (empty for
/// an insert), and the history it writes.
pub(super) struct Recorded {
    tag: String,
    base: String,
    history: String,
}

impl Recorded {
    /// A write on top of the version with history `writes` and ETag `etag`.
    pub(super) fn on(writes: Option<&str>, etag: &ETag) -> Recorded {
        let tag = new_tag();
        let base = base_of(writes, etag);
        let history = history_after(&tag, &base, writes);
        Recorded { tag, base, history }
    }

    /// A write that records nothing (a table without write history): no
    /// history to build.
    pub(super) fn none() -> Recorded {
        Recorded {
            tag: String::new(),
            base: String::new(),
            history: String::new(),
        }
    }

    /// An insert: a history of its own tag alone.
    pub(super) fn insert() -> Recorded {
        let tag = new_tag();
        Recorded {
            history: tag.clone(),
            tag,
            base: String::new(),
        }
    }

    /// The history this write leaves in the row.
    #[cfg(test)]
    fn history(&self) -> &str {
        &self.history
    }

    /// The history this write left, taken back out of the row it sent
    /// (where [`add_to`](Recorded::add_to) moved it), or as it was kept
    /// when the row had no room for it.
    pub(super) fn history_in(&mut self, row: &mut Entity) -> String {
        match row.properties.remove(WRITES_PROPERTY) {
            Some(Value::String(text)) => text,
            _ => std::mem::take(&mut self.history),
        }
    }

    /// Moves the history into `row`, unless the row has no room for it (at
    /// the store's property or size limit); `false` then, and a lost answer
    /// stays unknown. Only the room is looked at: the backend's validator
    /// checks the row itself. A write sent again sends the same row, which
    /// holds the history already.
    pub(super) fn add_to<T: TableEntity>(&mut self, row: &mut Entity, enabled: bool) -> bool {
        use crate::validate::limits::{MAX_ENTITY_SIZE, MAX_PROPERTIES};
        if !enabled {
            return false;
        }
        let size = crate::validate::property_size(
            WRITES_PROPERTY,
            crate::value::ValueRef::String(&self.history),
        );
        // A wide entity spreads its properties over parts with room to spare.
        let room = T::DESCRIPTOR.wide()
            || (row.properties.len() < MAX_PROPERTIES
                && row.stored_size() + size <= MAX_ENTITY_SIZE);
        if room {
            let history = std::mem::take(&mut self.history);
            row.properties.insert(WRITES_PROPERTY, history);
        }
        room
    }

    /// Whether this write is in `stored`'s history.
    fn settle(&self, stored: Option<Entity>) -> Settled {
        settled(self.verdict(stored.as_ref()), stored)
    }

    /// [`settle`](Recorded::settle) of a row read by reference: whether
    /// this write landed in it.
    fn landed_in(&self, stored: &Entity) -> bool {
        self.verdict(Some(stored)) == Verdict::Applied
    }

    fn verdict(&self, stored: Option<&Entity>) -> Verdict {
        if !self.base.is_empty() {
            return verdict(stored, &self.base, &self.tag);
        }
        let Some(stored) = stored else {
            return Verdict::NotApplied;
        };
        let tags = history(stored);
        if tags.contains(&self.tag.as_str()) {
            Verdict::Applied
        } else if tags.is_empty() || tags.len() >= WRITES_KEPT {
            Verdict::Unknown
        } else {
            Verdict::NotApplied
        }
    }
}

/// What a row's history says of a write, before the row is handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Applied,
    NotApplied,
    Unknown,
}

/// The [`Settled`] of `verdict` on the row `stored`.
fn settled(verdict: Verdict, stored: Option<Entity>) -> Settled {
    match (verdict, stored) {
        (Verdict::Applied, Some(stored)) => Settled::Applied(stored),
        (Verdict::NotApplied, _) => Settled::NotApplied,
        (Verdict::Applied | Verdict::Unknown, _) => Settled::Unknown,
    }
}

/// Whether the write tagged `tag`, based on the version tagged `base`, is
/// in `stored`'s history.
#[cfg(test)]
fn settle(stored: Option<Entity>, base: &str, tag: &str) -> Settled {
    settled(verdict(stored.as_ref(), base, tag), stored)
}

/// [`settle`]'s verdict, on a row read by reference.
fn verdict(stored: Option<&Entity>, base: &str, tag: &str) -> Verdict {
    let Some(stored) = stored else {
        return Verdict::Unknown;
    };
    let tags = history(stored);
    match tags.iter().position(|t| *t == base) {
        Some(0) => Verdict::NotApplied,
        Some(at) if tags[at - 1] == tag => Verdict::Applied,
        Some(_) => Verdict::NotApplied,
        None => Verdict::Unknown,
    }
}

impl<T: TableEntity> Table<T> {
    /// Reads the entity, applies `change`, and replaces it under the ETag it
    /// read; when another writer got there first (or a request failed before
    /// it was applied), reads again and re-applies after a back-off, as
    /// [`UpdateOptions::default`] says. Returns the value as written.
    ///
    /// A `change` that alters a key field is refused with
    /// [`InvalidInput::KeyChanged`](crate::InvalidInput::KeyChanged) before
    /// anything is written: moving an entity is a delete and an insert.
    ///
    /// A write whose response was lost is settled by reading the row back
    /// (see the module docs of `table::update`): the change is applied
    /// exactly once, or the error is [`Error::OutcomeUnknown`] where the
    /// store cannot tell. The row keeps a short history of these writes in
    /// [`WRITES_PROPERTY`].
    ///
    /// Properties of the row that the type has no field for are written
    /// back unchanged (see [`Loaded::unknown_properties`]).
    ///
    /// Fails with [`EntityNotFound`](Error::EntityNotFound) if there is no
    /// entity, and with the last [`PreconditionFailed`](Error::PreconditionFailed)
    /// (or transient error) when the attempts or the deadline run out.
    pub fn update<'a>(
        &'a self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
        mut change: impl FnMut(&mut T) + Send + 'a,
    ) -> crate::error::Call<'a, Loaded<T>>
    where
        T: Send,
    {
        let options = UpdateOptions::default();
        let keys = schema::encode_keys::<T>(&pk, &rk);
        Box::pin(async move {
            let (pk, rk) = keys?;
            let change = |mut value| {
                change(&mut value);
                std::future::ready(Ok::<T, Error>(value))
            };
            self.update_keys(pk, rk, &options, change, |e| Some(e))
                .await
        })
    }

    /// [`Table::update`] with the retries of `options` and a `change` that
    /// may wait and may fail: it takes the value read and gives back the value
    /// to write, or the caller's error, which ends the update with nothing
    /// written.
    ///
    /// ```
    /// # use tablekit::{Table, TableEntity, UpdateOptions};
    /// # #[derive(TableEntity, Clone)]
    /// # #[tablekit(table = "Stock")]
    /// # struct Item { #[tablekit(partition_key)] shelf: String, #[tablekit(row_key)] sku: u32, count: u32 }
    /// #[derive(Debug)]
    /// enum TakeError { Empty, Store(tablekit::Error) }
    /// impl From<tablekit::Error> for TakeError {
    ///     fn from(e: tablekit::Error) -> Self { TakeError::Store(e) }
    /// }
    ///
    /// async fn take_one(stock: &Table<Item>) -> Result<u32, TakeError> {
    ///     let item = stock
    ///         .update_with("A1", 42, &UpdateOptions::default().attempts(8), |mut item| async move {
    ///             item.count = item.count.checked_sub(1).ok_or(TakeError::Empty)?;
    ///             Ok::<_, TakeError>(item)
    ///         })
    ///         .await?;
    ///     Ok(item.count)
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # let stock: Table<Item> = Table::new(tablekit_mem::MemBackend::new());
    /// # stock.create_if_missing().await.unwrap();
    /// # stock.insert(&Item { shelf: "A1".into(), sku: 42, count: 1 }).await.unwrap();
    /// assert_eq!(take_one(&stock).await.unwrap(), 0);
    /// assert!(matches!(take_one(&stock).await, Err(TakeError::Empty)));
    /// # }
    /// ```
    pub fn update_with<'a, E, F, Fut>(
        &'a self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
        options: &UpdateOptions,
        change: F,
    ) -> futures::future::BoxFuture<'a, Result<Loaded<T>, E>>
    where
        E: From<Error> + Send + 'a,
        F: FnMut(T) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, E>> + Send + 'a,
        T: Send,
    {
        let options = options.clone();
        let keys = schema::encode_keys::<T>(&pk, &rk);
        Box::pin(async move {
            let (pk, rk) = keys?;
            self.update_keys(pk, rk, &options, change, |_| None).await
        })
    }

    /// [`update_with`](Table::update_with) of the encoded keys, in its span.
    async fn update_keys<E, F, Fut>(
        &self,
        pk: String,
        rk: String,
        options: &UpdateOptions,
        change: F,
        classify: fn(&E) -> Option<&Error>,
    ) -> Result<Loaded<T>, E>
    where
        E: From<Error>,
        F: FnMut(T) -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
    {
        let keys = Some((pk.as_str(), rk.as_str()));
        let call = super::operation(
            &*self.backend,
            "update",
            self.name(),
            T::DESCRIPTOR.kind,
            keys,
        );
        call.run_classified(self.update_encoded(pk, rk, options, change), classify)
            .await
    }

    /// [`update_with`](Table::update_with) for encoded keys.
    async fn update_encoded<E, F, Fut>(
        &self,
        pk: String,
        rk: String,
        options: &UpdateOptions,
        mut change: F,
    ) -> Result<Loaded<T>, E>
    where
        E: From<Error>,
        F: FnMut(T) -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
    {
        let started = Instant::now();
        let mut last: Option<Error> = None;
        // The history entry of an attempt that failed with an error the
        // store may have sent after applying it (a 5xx): the next read
        // tells whether it landed, so that it is never applied twice.
        let mut unsettled: Option<Recorded> = None;
        for attempt in 1..=options.attempts {
            if attempt > 1 {
                let wait = options.delay(attempt - 1);
                if options
                    .deadline
                    .is_some_and(|limit| started.elapsed() + wait >= limit)
                {
                    break;
                }
                self.report_retry(last.as_ref(), attempt - 1, wait);
                tokio::time::sleep(wait).await;
            }
            let stored = match self.read_row(&pk, &rk).await {
                Ok(Some(stored)) => stored,
                Ok(None) => return Err(self.not_found(&pk, &rk).into()),
                Err(e) if e.is_transient() => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            // A newer program's row: an update through this type would drop
            // what it does not know.
            self.refuse_newer(&stored)?;
            if unsettled
                .take()
                .is_some_and(|previous| previous.landed_in(&stored))
            {
                // It landed: the failure came after. Its outbox records, if
                // it wrote any, are still to finish.
                if T::DESCRIPTOR.write_needs().follow_up {
                    self.finish_after_commit(&pk, &rk).await;
                }
                return Ok(super::load(stored)?);
            }
            let mut recorded = if self.record_writes {
                Recorded::on(
                    writes_of(&stored),
                    stored.etag.as_ref().unwrap_or(&ETag::new("")),
                )
            } else {
                Recorded::none()
            };
            let etag = stored.etag.clone().unwrap_or_else(|| ETag::new(""));
            let mut read: Loaded<T> = super::load(stored)?;
            let old_keys = read.index_keys.clone();
            let unknown = std::mem::take(&mut read.unknown);
            let value = change(Loaded::into_inner(read)).await?;
            if schema::partition_key_of(&value)? != pk || schema::row_key_of(&value)? != rk {
                return Err(Error::from(crate::error::InvalidInput::KeyChanged {
                    partition_key: pk,
                    row_key: rk,
                })
                .into());
            }
            let mut row = schema::to_entity(&value)?;
            super::unknown::restore(&mut row, &unknown);
            let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag.clone()));
            let new_keys = super::new_index_keys(&value, &rk);
            let hint = super::rows::IndexHint {
                old: old_keys.as_deref(),
                new: new_keys.as_deref(),
            };
            let written = self
                .write_recorded(&mut row, write, &mut recorded, hint)
                .await;
            match written {
                Ok(Some(written)) => {
                    let mut loaded = Loaded::written(value, written);
                    loaded.unknown = unknown;
                    loaded.writes = self.record_writes.then(|| recorded.history_in(&mut row));
                    loaded.index_keys = new_keys.map(std::sync::Arc::from);
                    loaded.version = super::written_version::<T>();
                    return Ok(loaded);
                }
                // Landed, and overwritten since: the version read stands
                // in, so a write through it is refused, as it should be.
                Ok(None) => {
                    let mut loaded = Loaded::written(value, etag);
                    loaded.version = super::written_version::<T>();
                    return Ok(loaded);
                }
                // A transient failure may come after the store applied the
                // write, and a 412 may answer a resend of this very write
                // (a transport sends a write again after a proxy's 503):
                // the next read settles either by the write's tag.
                Err(e) if e.is_transient() || matches!(e, Error::PreconditionFailed { .. }) => {
                    if self.record_writes {
                        unsettled = Some(recorded);
                    }
                    last = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(last
            .unwrap_or(Error::Transient {
                message: "the update's deadline passed before its first attempt".into(),
            })
            .into())
    }

    /// Reports that an update goes round again after `failed` (a lost
    /// race for the ETag, a throttle, a transient failure).
    fn report_retry(&self, failed: Option<&Error>, attempt: u32, wait: Duration) {
        let reason = match failed {
            Some(Error::PreconditionFailed { .. }) => "etag_conflict",
            Some(Error::Throttled { .. }) => "throttled",
            _ => "transient",
        };
        crate::telemetry::retry(self.backend.store_info().system(), reason, attempt, wait);
    }

    /// Writes `row` recording `recorded` in its history. `Ok(Some(etag))`:
    /// written, `etag` is its version's. `Ok(None)`: written (its answer was
    /// lost), but overwritten since. A lost answer that turns out not applied
    /// is a [`Error::Transient`], for the caller to try again; one the store
    /// cannot settle stays [`Error::OutcomeUnknown`].
    pub(super) async fn write_recorded(
        &self,
        row: &mut Entity,
        write: RowWrite,
        recorded: &mut Recorded,
        hint: super::rows::IndexHint<'_>,
    ) -> Result<Option<ETag>> {
        let settleable = row.properties.contains(WRITES_PROPERTY)
            || recorded.add_to::<T>(row, self.record_writes);
        match self.write_lent(row, write, hint).await {
            Ok(etag) => Ok(Some(etag)),
            Err(e) if e.is_outcome_unknown() && settleable => {
                // Boxed, as a rare path: the write's future stays small.
                let (pk, rk) = (&row.partition_key, &row.row_key);
                Box::pin(self.settle_lost(pk, rk, recorded, e)).await
            }
            Err(e) => Err(e),
        }
    }

    /// [`write_recorded`](Table::write_recorded) of an insert, or of an
    /// update guarded by an ETag, that also settles a refusal: a 409 or a
    /// 412 may answer a resend of this very write, which the store applied
    /// before a proxy's 503 (a transport sends a write again after a 503).
    /// The row read back says, by the write's tag, whether it landed; if
    /// not, the refusal stands.
    pub(super) async fn write_recorded_settled(
        &self,
        row: &mut Entity,
        write: RowWrite,
        recorded: &mut Recorded,
        hint: super::rows::IndexHint<'_>,
    ) -> Result<Option<ETag>> {
        match self.write_recorded(row, write, recorded, hint).await {
            Err(e) if is_refusal(&e) && row.properties.contains(WRITES_PROPERTY) => {
                // Boxed, as a rare path: the write's future stays small.
                let (pk, rk) = (&row.partition_key, &row.row_key);
                match Box::pin(self.settle_write(pk, rk, recorded)).await {
                    Settled::Applied(stored) => {
                        Box::pin(self.landed(pk, rk, recorded, stored)).await
                    }
                    Settled::NotApplied | Settled::Unknown => Err(e),
                }
            }
            written => written,
        }
    }

    /// A write that landed, as `stored` shows: its ETag (`None` if written
    /// and overwritten since), once its follow-up work is started.
    async fn landed(
        &self,
        pk: &str,
        rk: &str,
        recorded: &Recorded,
        stored: Entity,
    ) -> Result<Option<ETag>> {
        // Applied: so were its outbox records, if it wrote any, whose steps
        // are still to do.
        if T::DESCRIPTOR.write_needs().follow_up {
            self.finish_after_commit(pk, rk).await;
        }
        let ours = history(&stored).first() == Some(&recorded.tag.as_str());
        Ok(stored.etag.filter(|_| ours))
    }

    /// Settles a write whose answer `e` was lost: its ETag if it landed
    /// (`None` if written and overwritten since), a transient error if not.
    async fn settle_lost(
        &self,
        pk: &str,
        rk: &str,
        recorded: &Recorded,
        e: Error,
    ) -> Result<Option<ETag>> {
        match self.settle_write(pk, rk, recorded).await {
            Settled::Applied(stored) => {
                crate::telemetry::settled(true);
                self.landed(pk, rk, recorded, stored).await
            }
            Settled::NotApplied => {
                crate::telemetry::settled(false);
                Err(Error::Transient {
                    message: format!("the write was not applied ({e})"),
                })
            }
            Settled::Unknown => Err(e),
        }
    }

    /// Reads the row back after a lost write and says whether it landed. A
    /// read that fails is tried again at once a few times, then with a
    /// back-off: the sooner the row is read, the fewer writes can have pushed
    /// this one out of its history.
    async fn settle_write(&self, pk: &str, rk: &str, recorded: &Recorded) -> Settled {
        for attempt in 0..10u32 {
            match self.read_stored(pk, rk).await {
                Ok(stored) => return recorded.settle(stored),
                Err(e) if e.is_transient() => {
                    if attempt >= 3 {
                        let wait = Duration::from_millis(5 << (attempt - 3).min(6));
                        tokio::time::sleep(wait.mul_f64(fastrand::f64())).await;
                    }
                }
                Err(_) => return Settled::Unknown,
            }
        }
        Settled::Unknown
    }

    fn not_found(&self, pk: &str, rk: &str) -> Error {
        Error::EntityNotFound {
            table: self.name.to_string(),
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(history: Option<&str>, etag: &str) -> Entity {
        let mut e = Entity::new("p", "r");
        e.etag = Some(ETag::new(etag));
        if let Some(h) = history {
            e.insert(WRITES_PROPERTY, h);
        }
        e
    }

    #[test]
    fn histories_name_their_base_and_stay_short() {
        let etag = ETag::new("W/\"a\"");
        let base = base_of(None, &etag);
        assert_eq!(base, base_of(None, &ETag::new("W/\"a\"")), "stable");
        assert_ne!(base, base_of(None, &ETag::new("W/\"b\"")));
        assert_eq!(base.len(), 8);
        let first = Recorded::on(None, &etag);
        assert_eq!(first.history(), format!("{} {base}", first.tag));
        let second = Recorded::on(Some(first.history()), &ETag::new("W/\"c\""));
        assert_eq!(second.base, first.tag, "a row's newest tag names it");
        assert_eq!(
            second.history(),
            format!("{} {} {base}", second.tag, first.tag)
        );
        let long: String = (0..WRITES_KEPT + 10)
            .map(|i| format!("x{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let next = history_after("new", "x0", Some(&long));
        assert_eq!(next.split(' ').count(), WRITES_KEPT);
        assert!(next.starts_with("new x0 x1 "));
        // Text cut and tags counted agree, for every length of history and
        // for histories with stray spaces.
        for n in 0..WRITES_KEPT + 3 {
            let tags: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
            let canonical = tags.join(" ");
            let loose = format!(" {}  ", tags.join("  "));
            for writes in [canonical.as_str(), loose.as_str()] {
                let expected: Vec<&str> = ["new", "b"]
                    .into_iter()
                    .chain(tags.iter().skip(1).map(String::as_str))
                    .take(WRITES_KEPT)
                    .collect();
                assert_eq!(history_after("new", "b", Some(writes)), expected.join(" "));
            }
        }
        assert_eq!(history_after("new", "b", None), "new b");
        // Histories as tablekit writes them (8-character tags) are cut by
        // arithmetic; the cut agrees with the tags counted, at every length.
        for n in 1..WRITES_KEPT + 3 {
            let tags: Vec<String> = (0..n).map(|i| format!("tag{i:05}")).collect();
            let writes = tags.join(" ");
            assert_eq!(tablekit_tags(&writes), Some(n));
            let expected: Vec<&str> = ["newtag00", "basetag0"]
                .into_iter()
                .chain(tags.iter().skip(1).map(String::as_str))
                .take(WRITES_KEPT)
                .collect();
            assert_eq!(
                history_after("newtag00", "basetag0", Some(&writes)),
                expected.join(" ")
            );
        }
        // Not tablekit's form: a space out of place, a wider tag, a stray
        // space, an empty text.
        for text in [
            "abcdefg  abcdefgh",
            "abcdefghi",
            "abcdefgh ",
            " abcdefgh",
            "",
        ] {
            assert_eq!(tablekit_tags(text), None, "{text:?}");
        }
        assert_eq!(tablekit_tags("abcdefgh abcdefgh"), Some(2));
        // Spaces inside the units of another hand's text: cut by units, the
        // tags stay in order and the history stays bounded.
        let loose = "abcdefgh ab efgh1 x bcdefg";
        assert_eq!(tablekit_tags(loose), Some(3));
        let cut = history_after("newtag00", "abcdefgh", Some(loose));
        assert_eq!(cut, "newtag00 abcdefgh ab efgh1 x bcdefg");
        // The newest unit must be one tag: it names the base.
        assert_eq!(tablekit_tags("ab efgh1 abcdefgh"), None);
        let insert = Recorded::insert();
        assert_eq!(insert.history(), insert.tag);
    }

    #[test]
    fn inserts_settle_by_their_tag() {
        let insert = Recorded::insert();
        let mine = row(Some(&format!("later {}", insert.tag)), "e");
        assert!(matches!(insert.settle(Some(mine)), Settled::Applied(_)));
        assert!(matches!(insert.settle(None), Settled::NotApplied));
        assert!(matches!(
            insert.settle(Some(row(Some("other"), "e"))),
            Settled::NotApplied
        ));
        assert!(matches!(
            insert.settle(Some(row(None, "e"))),
            Settled::Unknown
        ));
    }

    #[test]
    fn settling_reads_the_history() {
        // Ours landed and is the newest.
        assert!(matches!(
            settle(Some(row(Some("me b0 b1"), "e")), "b0", "me"),
            Settled::Applied(_)
        ));
        // Ours landed; two writes came after it.
        assert!(matches!(
            settle(Some(row(Some("y x me b0"), "e")), "b0", "me"),
            Settled::Applied(_)
        ));
        // Another writer won our base.
        assert!(matches!(
            settle(Some(row(Some("y x b0"), "e")), "b0", "me"),
            Settled::NotApplied
        ));
        // Nothing of this kind written since our base.
        assert!(matches!(
            settle(Some(row(Some("b0 b1"), "e")), "b0", "me"),
            Settled::NotApplied
        ));
        // The base is gone from the history, or the row is gone.
        assert!(matches!(
            settle(Some(row(Some("y x"), "e")), "b0", "me"),
            Settled::Unknown
        ));
        assert!(matches!(
            settle(Some(row(None, "e")), "b0", "me"),
            Settled::Unknown
        ));
        assert!(matches!(settle(None, "b0", "me"), Settled::Unknown));
    }
}
