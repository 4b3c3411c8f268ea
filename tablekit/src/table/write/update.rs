//! [`Table::update`]: read, change, write back under the ETag read, again
//! when another writer got there first, with back-off ([`UpdateOptions`]).
//!
//! A write whose response was lost is settled by reading the row back: each
//! write records a tag in a short history kept in the row's
//! [`WRITES_PROPERTY`] (at most [`WRITES_KEPT`] tags), and the tag found
//! before its base's tag says it landed. An update is applied exactly once,
//! or its error is [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown)
//! where the store cannot tell.
//!
//! Requests: one read and one write per attempt; a lost response costs one
//! more read.

use std::borrow::Cow;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::row::RowWrite;
use super::settle::Recorded;
use super::{Done, Lowered, Remake};
use crate::backend::UpdateMode;
use crate::entity::{ETag, Entity, IfMatch, Properties};
use crate::error::{Error, Result};
use crate::schema::{self, KeyArg, TableEntity};
use crate::table::{Loaded, Table, load, writes_of};

pub use super::settle::{WRITES_KEPT, WRITES_PROPERTY};

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

    /// How many attempts the update may make.
    pub(super) fn attempts_allowed(&self) -> u32 {
        self.attempts
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
    /// (see the module docs of `table::write::settle`): the change is applied
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
        E: From<Error> + Send,
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

    /// [`update_with`](Table::update_with) for encoded keys: the update is
    /// a write the executor makes again from the row as read.
    async fn update_encoded<E, F, Fut>(
        &self,
        pk: String,
        rk: String,
        options: &UpdateOptions,
        change: F,
    ) -> Result<Loaded<T>, E>
    where
        E: From<Error> + Send,
        F: FnMut(T) -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
    {
        let mut changing = Changing {
            change,
            options,
            failed: None,
            value: None,
            unknown: Properties::default(),
            read: ETag::new(""),
            pk: pk.clone(),
            rk: rk.clone(),
        };
        // Until the first read: the keys alone.
        let write = RowWrite::Update(UpdateMode::Replace, IfMatch::Any);
        let mut lowered = Lowered::new(Entity::new(pk, rk), write);
        let update = super::Write::Update {
            lowered: &mut lowered,
            remake: &mut changing,
        };
        let done = self.enter(update).await.map(super::Written::updated);
        if let Some(failed) = changing.failed.take() {
            return Err(failed);
        }
        let (value, read) = match done? {
            Done::Found(stored) => return Ok(load(*stored)?),
            Done::Stopped => return Err(stopped().into()),
            Done::Written(written) => match changing.value.take() {
                Some(value) => (value, written),
                None => return Err(stopped().into()),
            },
        };
        let Some(written) = read else {
            // Landed, and overwritten since: the version read stands in,
            // so a write through it is refused, as it should be.
            return Ok(at_written_version(Loaded::written(value, changing.read)));
        };
        let mut loaded = Loaded::written(value, written);
        loaded.unknown = changing.unknown;
        loaded.writes = self.record_writes.then(|| lowered.history());
        let new_keys = lowered.new_keys.take().map(Cow::into_owned);
        loaded.index_keys = crate::table::loaded::IndexKeys::known(new_keys);
        Ok(at_written_version(loaded))
    }

    /// The history entry of a write of the row `stored` (none when this
    /// table records no history).
    pub(super) fn recorded_on(&self, stored: &crate::entity::Entity) -> Recorded {
        if !self.record_writes {
            return Recorded::none();
        }
        let etag = stored.etag.clone().unwrap_or_else(|| ETag::new(""));
        Recorded::on(writes_of(stored), &etag)
    }

    /// Waits before attempt number `attempt` of an update that began at
    /// `started`, reported as a retry after `failed`; `false`, without
    /// waiting, when the wait would pass the update's deadline.
    pub(super) async fn wait_to_retry(
        &self,
        options: &UpdateOptions,
        started: Instant,
        attempt: u32,
        failed: Option<&Error>,
    ) -> bool {
        let wait = options.delay(attempt - 1);
        if options
            .deadline
            .is_some_and(|limit| started.elapsed() + wait >= limit)
        {
            return false;
        }
        self.report_retry(failed, attempt - 1, wait);
        tokio::time::sleep(wait).await;
        true
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
    pub(super) fn not_found(&self, pk: &str, rk: &str) -> Error {
        Error::EntityNotFound {
            table: self.name.to_string(),
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }
    }
}

/// The row an update writes: the changed value's, with the properties its
/// type does not know kept as they were read. A change that moved the keys
/// is refused.
async fn changed_row<T: TableEntity>(
    table: &Table<T>,
    value: &T,
    (pk, rk): (&str, &str),
    unknown: &crate::entity::Properties,
) -> Result<crate::entity::Entity, Error> {
    if schema::partition_key_of(value)? != pk || schema::row_key_of(value)? != rk {
        return Err(Error::from(crate::error::InvalidInput::KeyChanged {
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }));
    }
    let mut row = table.row_of(value, false).await?;
    super::unknown::restore(&mut row, unknown);
    Ok(row)
}

/// An update's change as a write the executor makes again from the row as
/// read: it keeps the caller's error when the change fails, and the value
/// of its latest attempt.
struct Changing<'o, T, E, F> {
    change: F,
    options: &'o UpdateOptions,
    failed: Option<E>,
    value: Option<T>,
    /// The properties of the row read that `T` does not know, written back.
    unknown: Properties,
    /// The ETag of the version read.
    read: ETag,
    /// The keys, which the change may not move.
    pk: String,
    rk: String,
}

impl<T, E, F, Fut> Remake<T> for Changing<'_, T, E, F>
where
    T: TableEntity + Send,
    E: Send,
    F: FnMut(T) -> Fut + Send,
    Fut: Future<Output = Result<T, E>> + Send,
{
    fn options(&self) -> &UpdateOptions {
        self.options
    }

    fn lower_over<'s>(
        &'s mut self,
        table: &'s Table<T>,
        stored: Entity,
    ) -> BoxFuture<'s, Result<Option<Lowered<'static>>>> {
        Box::pin(async move {
            let recorded = table.recorded_on(&stored);
            let etag = stored.etag.clone().unwrap_or_else(|| ETag::new(""));
            let mut read: Loaded<T> = load(stored)?;
            let old_keys = read.index_keys().map(|keys| keys.to_vec());
            let unknown = std::mem::take(&mut read.unknown);
            let value = match (self.change)(Loaded::into_inner(read)).await {
                Ok(value) => value,
                Err(e) => {
                    self.failed = Some(e);
                    return Ok(None);
                }
            };
            let (pk, rk) = (self.pk.as_str(), self.rk.as_str());
            let row = changed_row(table, &value, (pk, rk), &unknown).await?;
            let new_keys = super::new_index_keys(&value, &row);
            let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag.clone()));
            self.value = Some(value);
            self.unknown = unknown;
            self.read = etag;
            Ok(Some(Lowered {
                recorded: Some(recorded),
                old_keys: old_keys.map(Cow::Owned),
                new_keys: new_keys.map(Cow::Owned),
                ..Lowered::new(row, write)
            }))
        })
    }
}

/// The error of an update whose change stopped it without an error of its
/// own (which the executor never reports: the caller's error is kept).
fn stopped() -> Error {
    Error::Transient {
        message: "the update's change stopped it".into(),
    }
}

/// `loaded`, as of the schema version this program writes.
fn at_written_version<T: TableEntity>(mut loaded: Loaded<T>) -> Loaded<T> {
    loaded.version = super::written_version::<T>();
    loaded
}
