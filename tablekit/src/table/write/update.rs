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

use std::future::Future;
use std::time::{Duration, Instant};

use super::row::RowWrite;
use super::settle::Recorded;
use crate::backend::UpdateMode;
use crate::entity::{ETag, IfMatch};
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
            if attempt > 1
                && !self
                    .wait_to_retry(options, started, attempt, last.as_ref())
                    .await
            {
                break;
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
                return Ok(load(stored)?);
            }
            let mut recorded = self.recorded_on(&stored);
            let etag = stored.etag.clone().unwrap_or_else(|| ETag::new(""));
            let mut read: Loaded<T> = load(stored)?;
            let old_keys = read.index_keys();
            let unknown = std::mem::take(&mut read.unknown);
            let value = change(Loaded::into_inner(read)).await?;
            let mut row = changed_row(&value, &pk, &rk, &unknown)?;
            let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag.clone()));
            let new_keys = super::new_index_keys(&value, &rk);
            let hint = super::row::IndexHint {
                old: old_keys.as_deref(),
                new: new_keys.as_deref(),
            };
            let back = super::Write::Back {
                row: &mut row,
                write,
                recorded: &mut recorded,
                hint,
            };
            let written = self.enter(back).await.map(super::Written::settled);
            match written {
                Ok(Some(written)) => {
                    let mut loaded = Loaded::written(value, written);
                    loaded.unknown = unknown;
                    loaded.writes = self.record_writes.then(|| recorded.history_in(&mut row));
                    loaded.index_keys = crate::table::loaded::IndexKeys::known(new_keys);
                    return Ok(at_written_version(loaded));
                }
                // Landed, and overwritten since: the version read stands
                // in, so a write through it is refused, as it should be.
                Ok(None) => return Ok(at_written_version(Loaded::written(value, etag))),
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

    /// The history entry of a write of the row `stored` (none when this
    /// table records no history).
    fn recorded_on(&self, stored: &crate::entity::Entity) -> Recorded {
        if !self.record_writes {
            return Recorded::none();
        }
        let etag = stored.etag.clone().unwrap_or_else(|| ETag::new(""));
        Recorded::on(writes_of(stored), &etag)
    }

    /// Waits before attempt number `attempt` of an update that began at
    /// `started`, reported as a retry after `failed`; `false`, without
    /// waiting, when the wait would pass the update's deadline.
    async fn wait_to_retry(
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
    fn not_found(&self, pk: &str, rk: &str) -> Error {
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
fn changed_row<T: TableEntity>(
    value: &T,
    pk: &str,
    rk: &str,
    unknown: &crate::entity::Properties,
) -> Result<crate::entity::Entity, Error> {
    if schema::partition_key_of(value)? != pk || schema::row_key_of(value)? != rk {
        return Err(Error::from(crate::error::InvalidInput::KeyChanged {
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }));
    }
    let mut row = schema::to_entity(value)?;
    super::unknown::restore(&mut row, unknown);
    Ok(row)
}

/// `loaded`, as of the schema version this program writes.
fn at_written_version<T: TableEntity>(mut loaded: Loaded<T>) -> Loaded<T> {
    loaded.version = super::written_version::<T>();
    loaded
}
