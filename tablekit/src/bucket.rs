//! Time-bucketed tables: one table per hour, day or month, dropped whole.
//!
//! Deleting a day of rows one by one costs a request per hundred rows at
//! best; deleting the day's table costs one. A kind whose rows expire
//! together (login attempts, audit events, metrics) declares a period, and
//! [`Buckets`] writes each row to its period's table, creates tables on
//! first use, reads a time range across them in order, and drops the tables
//! of the past:
//!
//! ```
//! use tablekit::bucket::Buckets;
//! use tablekit::{DateTime, Table, TableEntity};
//!
//! #[derive(TableEntity, Debug, Clone, PartialEq)]
//! #[tablekit(table = "Logins", buckets = "day")]
//! struct Login {
//!     #[tablekit(partition_key)]
//!     user: String,
//!     #[tablekit(row_key)]
//!     id: u32,
//!     #[tablekit(bucket)]
//!     at: DateTime,
//!     ok: bool,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
//! let logins = Buckets::new(Table::<Login>::new(tablekit_mem::MemBackend::new()))?;
//! let day = |d: u32| DateTime::parse(&format!("2026-11-{d:02}T08:00:00Z")).unwrap();
//! for (id, d) in [(1, 21), (2, 22), (3, 23)] {
//!     // Written to Logins20261121, Logins20261122, Logins20261123:
//!     // each table is created by the first write of its day.
//!     logins.insert(&Login { user: "ada".into(), id, at: day(d), ok: true }).await?;
//! }
//! let names: Vec<String> = logins.tables().await?.into_iter().map(|t| t.name).collect();
//! assert_eq!(names, ["Logins20261121", "Logins20261122", "Logins20261123"]);
//!
//! // A time range reads the tables of its periods, oldest first.
//! let recent = logins.query(day(22)..).collect().await?;
//! assert_eq!(recent.iter().map(|l| l.id).collect::<Vec<_>>(), [2, 3]);
//!
//! // Everything before the 23rd goes, one request per table.
//! assert_eq!(logins.drop_before(day(23)).await?.len(), 2);
//! assert_eq!(logins.query(..).collect().await?.len(), 1);
//! # Ok(()) }
//! ```
//!
//! # Which table
//! A row's period comes from its `#[tablekit(bucket)]` field (a
//! [`DateTime`]), or, without one, from the time it is written (the
//! table's [clock](crate::Table::with_clock)). The table is named by the
//! table's name and the period's start: `Logins2026112318` for an hour,
//! `Logins20261123` for a day, `Logins202611` for a month, all in UTC.
//!
//! Each period has a name of its own, and periods only move forward, so a
//! dropped table's name is never written again while the store is still
//! removing it (about 40 seconds on the service, during which the name is
//! refused). A write into a period that this `Buckets` has dropped is
//! refused for good with [`Error::PeriodDropped`], rather than bringing the
//! table back.
//!
//! # Reads
//! [`Buckets::query`] lists the tables once (by name prefix), then reads
//! the tables whose periods meet the range, oldest first: rows come in
//! period order, and in key order within a period. Rows are kept to the
//! range by their `bucket` property; a `bucket` field stored as a key is
//! not filtered (narrow with [`BucketQuery::each`]), and rows bucketed by
//! write time are filtered by their `Timestamp`, the store's time of the
//! write (a row written within a clock skew of a period's end may sit in
//! the neighbouring period's table).
//!
//! For a point read, an update or a delete, take the period's table with
//! [`Buckets::table_at`] or [`Buckets::table_of`]: it is a plain
//! [`Table`], with every operation.

use std::collections::HashSet;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use crate::backend::ListTablesOptions;
use crate::datetime::DateTime;
use crate::entity::ETag;
use crate::error::{Error, InvalidInput, Result};
use crate::filter::{Filter, prop};
use crate::schema::{DescriptorPart, TableEntity};
use crate::table::{BulkFailure, BulkReport, Loaded, Table, TableQuery};

/// The bucket part of an entity's descriptor (`#[tablekit(buckets = "…")]`):
/// the period of its tables and where a value's time comes from.
#[derive(Debug, Clone, Copy)]
pub struct BucketPart {
    /// How long one table's period lasts.
    pub period: Period,
    /// The property of the `bucket` field, when it is a property.
    pub property: Option<&'static str>,
    /// Whether the `bucket` field is a key field.
    pub in_key: bool,
}

impl DescriptorPart for BucketPart {}

impl BucketPart {
    /// The bucket part of `T` (or of the entity `T` projects).
    pub fn of<T: TableEntity>() -> Option<&'static BucketPart> {
        T::DESCRIPTOR.part_or_base::<BucketPart>()
    }
}

/// A type kept in one table per period: `#[derive(TableEntity)]`
/// implements it for a kind with `buckets`, and for every projection (of
/// an entity without buckets, [`Buckets::new`] refuses it).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not kept in one table per period",
    label = "`Buckets` needs a kind declared with `buckets`",
    note = "declare the period on the kind: `#[tablekit(buckets = \"hour\" | \"day\" | \"month\")]`"
)]
pub trait Bucketed: TableEntity {
    /// The time that picks this value's period: its `#[tablekit(bucket)]`
    /// field; `None` for the time of the write.
    fn bucket_time(&self) -> Option<DateTime> {
        None
    }
}

/// How long one table's period lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    /// One table per hour: `Name2026112318`.
    Hour,
    /// One table per day: `Name20261123`.
    Day,
    /// One table per month: `Name202611`.
    Month,
}

impl Period {
    /// The digits of a table name's period.
    fn stamp_len(self) -> usize {
        match self {
            Period::Hour => 10,
            Period::Day => 8,
            Period::Month => 6,
        }
    }

    /// The start of the period that holds `t`.
    ///
    /// ```
    /// use tablekit::{DateTime, bucket::Period};
    /// let t = DateTime::parse("2026-11-23T18:45:10Z").unwrap();
    /// assert_eq!(Period::Day.start_of(t).to_string(), "2026-11-23T00:00:00Z");
    /// assert_eq!(Period::Month.start_of(t).to_string(), "2026-11-01T00:00:00Z");
    /// ```
    pub fn start_of(self, t: DateTime) -> DateTime {
        let t = time::OffsetDateTime::from(t);
        let date = match self {
            Period::Month => t.date().replace_day(1).unwrap_or(t.date()),
            Period::Hour | Period::Day => t.date(),
        };
        let hour = if self == Period::Hour { t.hour() } else { 0 };
        let start = date
            .with_hms(hour, 0, 0)
            .unwrap_or(date.midnight())
            .assume_utc();
        DateTime::try_from(start).unwrap_or(DateTime::MIN)
    }

    /// The start of the period after the one that starts at `start`
    /// ([`DateTime::MAX`] after the last).
    pub fn next(self, start: DateTime) -> DateTime {
        let t = time::OffsetDateTime::from(self.start_of(start));
        let next = match self {
            Period::Hour => t.checked_add(time::Duration::HOUR),
            Period::Day => t.checked_add(time::Duration::DAY),
            Period::Month => {
                let (year, month) = match t.month() {
                    time::Month::December => (t.year() + 1, time::Month::January),
                    m => (t.year(), m.next()),
                };
                time::Date::from_calendar_date(year, month, 1)
                    .ok()
                    .map(|d| d.midnight().assume_utc())
            }
        };
        next.and_then(|n| DateTime::try_from(n).ok())
            .unwrap_or(DateTime::MAX)
    }

    /// The digits that name the period holding `t`: `2026112318`,
    /// `20261123` or `202611`.
    pub fn stamp(self, t: DateTime) -> String {
        let t = time::OffsetDateTime::from(t);
        let (y, m, d, h) = (t.year(), u8::from(t.month()), t.day(), t.hour());
        match self {
            Period::Hour => format!("{y:04}{m:02}{d:02}{h:02}"),
            Period::Day => format!("{y:04}{m:02}{d:02}"),
            Period::Month => format!("{y:04}{m:02}"),
        }
    }

    /// The start of the period that `stamp` names; `None` if it names none.
    pub fn parse_stamp(self, stamp: &str) -> Option<DateTime> {
        if stamp.len() != self.stamp_len() || !stamp.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let num = |range: std::ops::Range<usize>| stamp[range].parse::<u32>().ok();
        let year = i32::try_from(num(0..4)?).ok()?;
        let month = time::Month::try_from(u8::try_from(num(4..6)?).ok()?).ok()?;
        let day = if self == Period::Month { 1 } else { num(6..8)? };
        let hour = if self == Period::Hour { num(8..10)? } else { 0 };
        let date = time::Date::from_calendar_date(year, month, u8::try_from(day).ok()?).ok()?;
        let start = date
            .with_hms(u8::try_from(hour).ok()?, 0, 0)
            .ok()?
            .assume_utc();
        let start = DateTime::try_from(start).ok()?;
        // A stamp names its period one way only.
        (self.stamp(start) == stamp).then_some(start)
    }
}

/// One table of a [`Buckets`]: its name and its period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketTable {
    /// The table's name.
    pub name: String,
    /// The start of its period.
    pub start: DateTime,
    /// The start of the next period.
    pub end: DateTime,
}

/// The tables of one time-bucketed kind (`#[tablekit(buckets = "…")]`).
/// See the [module documentation](self).
pub struct Buckets<T> {
    table: Table<T>,
    period: Period,
    /// Tables known to exist: writes to them skip the create.
    created: Arc<Mutex<HashSet<String>>>,
    /// Periods that end at or before this were dropped here.
    dropped_before: Arc<Mutex<Option<DateTime>>>,
}

impl<T> Clone for Buckets<T> {
    fn clone(&self) -> Self {
        Buckets {
            table: self.table.clone(),
            period: self.period,
            created: Arc::clone(&self.created),
            dropped_before: Arc::clone(&self.dropped_before),
        }
    }
}

impl<T> std::fmt::Debug for Buckets<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buckets")
            .field("prefix", &self.table.name())
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

impl<T: Bucketed> Buckets<T> {
    /// The bucketed tables named after `table`'s name (`T::DESCRIPTOR.table` for
    /// [`Table::new`], or one chosen with [`Table::named`]), on its backend,
    /// with its blob store, outbox and clock.
    ///
    /// Errors: [`InvalidInput::TableName`] when the name is no prefix a
    /// period's digits can follow: letters and digits, starting and ending
    /// with a letter, leaving room for the digits in 63 characters.
    pub fn new(table: Table<T>) -> Result<Buckets<T>> {
        let Some(part) = BucketPart::of::<T>() else {
            // A projection of an entity without `buckets`.
            return Err(Error::NotSupported {
                operation: "`Buckets` of a type whose entity declares no `buckets`",
            });
        };
        let period = part.period;
        let prefix = table.name();
        let bytes = prefix.as_bytes();
        let fits = !bytes.is_empty()
            && bytes[0].is_ascii_alphabetic()
            && bytes[bytes.len() - 1].is_ascii_alphabetic()
            && bytes.iter().all(u8::is_ascii_alphanumeric)
            && prefix.len() + period.stamp_len() <= 63;
        if !fits {
            return Err(InvalidInput::TableName {
                name: prefix.to_owned(),
                reason: "a bucketed table's name is a prefix of letters and digits, starting and ending with a letter, with room for the period's digits in 63 characters",
            }
            .into());
        }
        Ok(Buckets {
            table,
            period,
            created: Arc::default(),
            dropped_before: Arc::default(),
        })
    }

    /// The period of each table.
    pub fn period(&self) -> Period {
        self.period
    }

    /// The name of the table that holds the period of `t`.
    pub fn table_name(&self, t: DateTime) -> String {
        format!("{}{}", self.table.name(), self.period.stamp(t))
    }

    /// The table of the period that holds `t` (it may not exist yet).
    pub fn table_at(&self, t: DateTime) -> Table<T> {
        self.table.named(&self.table_name(t))
    }

    /// The table `value` is written to: its `bucket` field's period, or the
    /// period of now on the table's clock.
    pub fn table_of(&self, value: &T) -> Table<T> {
        self.table_at(self.time_of(value))
    }

    fn time_of(&self, value: &T) -> DateTime {
        value
            .bucket_time()
            .unwrap_or_else(|| self.table.clock().now())
    }

    /// Refuses a write into a period this `Buckets` dropped.
    fn check_not_dropped(&self, t: DateTime, table: &Table<T>) -> Result<()> {
        let dropped = *self
            .dropped_before
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match dropped {
            Some(before) if self.period.next(self.period.start_of(t)) <= before => {
                Err(Error::PeriodDropped {
                    table: table.name().to_owned(),
                })
            }
            _ => Ok(()),
        }
    }

    fn known(&self, name: &str) -> bool {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    fn remember(&self, name: &str) {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned());
    }

    /// Runs `write` on the table of `t`, creating the table when the store
    /// says it does not exist, and once more after that.
    async fn write_at<R, F, Fut>(&self, t: DateTime, write: F) -> Result<R>
    where
        F: Fn(Table<T>) -> Fut,
        Fut: std::future::Future<Output = Result<R>>,
    {
        let table = self.table_at(t);
        self.check_not_dropped(t, &table)?;
        match write(table.clone()).await {
            Err(Error::TableNotFound { .. }) => {
                table.create_if_missing().await?;
                self.remember(table.name());
                write(table).await
            }
            Ok(r) => {
                self.remember(table.name());
                Ok(r)
            }
            Err(e) => Err(e),
        }
    }

    /// The table of `value`'s period, made if it is missing (once per
    /// period for this `Buckets`): for a write that reaches the table by
    /// another way, such as [`Transaction::then_put_value`](crate::Transaction::then_put_value).
    ///
    /// # Errors
    /// [`PeriodDropped`](Error::PeriodDropped) for a period this `Buckets`
    /// dropped; the store's errors making the table.
    pub async fn prepare(&self, value: &T) -> Result<Table<T>> {
        let t = self.time_of(value);
        let table = self.table_at(t);
        self.check_not_dropped(t, &table)?;
        if !self.known(table.name()) {
            table.create_if_missing().await?;
            self.remember(table.name());
        }
        Ok(table)
    }

    /// Inserts `value` into its period's table, creating the table on first
    /// use. See [`Table::insert`].
    pub async fn insert(&self, value: &T) -> Result<ETag> {
        self.write_at(self.time_of(value), |table| async move {
            table.insert(value).await
        })
        .await
    }

    /// Inserts or replaces `value` in its period's table, creating the table
    /// on first use. See [`Table::upsert`].
    pub async fn upsert(&self, value: &T) -> Result<ETag> {
        self.write_at(self.time_of(value), |table| async move {
            table.upsert(value).await
        })
        .await
    }

    /// Inserts many values with the [bulk writer](Table::bulk), each into
    /// its period's table (created first where needed). The report's
    /// indexes are positions in `items`.
    pub async fn insert_many(&self, items: &[T]) -> BulkReport
    where
        T: Clone,
    {
        let mut groups: std::collections::BTreeMap<String, (DateTime, Vec<usize>)> =
            std::collections::BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            let t = self.time_of(item);
            groups
                .entry(self.table_name(t))
                .or_insert_with(|| (t, Vec::new()))
                .1
                .push(index);
        }
        let mut report = BulkReport::default();
        for (name, (t, indexes)) in groups {
            let table = self.table.named(&name);
            let ready = match self.check_not_dropped(t, &table) {
                Err(e) => Err(e),
                Ok(()) if self.known(&name) => Ok(()),
                Ok(()) => table
                    .create_if_missing()
                    .await
                    .map(|_| self.remember(&name)),
            };
            if let Err(error) = ready {
                let error = Arc::new(error);
                report
                    .failures
                    .extend(indexes.iter().map(|&index| BulkFailure {
                        index,
                        error: Arc::clone(&error),
                    }));
                continue;
            }
            let group: Vec<T> = indexes.iter().map(|&i| items[i].clone()).collect();
            let part = table.bulk().insert(&group).await;
            report.written += part.written;
            report.batches += part.batches;
            report.queries += part.queries;
            report
                .failures
                .extend(part.failures.into_iter().map(|f| BulkFailure {
                    index: indexes[f.index],
                    error: f.error,
                }));
        }
        report.failures.sort_by_key(|f| f.index);
        report
    }

    /// The tables of this kind in the store, oldest period first: the
    /// tables whose names are the prefix and a period's digits. One
    /// request per 1,000 tables of the account that share the prefix.
    pub async fn tables(&self) -> Result<Vec<BucketTable>> {
        let prefix = self.table.name();
        let mut options = ListTablesOptions::default().with_prefix(prefix);
        let mut tables = Vec::new();
        loop {
            let page = self.table.backend().list_tables(&options).await?;
            for name in page.tables {
                let Some(start) = name
                    .get(prefix.len()..)
                    .and_then(|stamp| self.period.parse_stamp(stamp))
                else {
                    continue;
                };
                let end = self.period.next(start);
                tables.push(BucketTable { name, start, end });
            }
            match page.continuation {
                Some(next) => options.continuation = Some(next),
                None => break,
            }
        }
        tables.sort_by_key(|t| t.start);
        Ok(tables)
    }

    /// Deletes every table whose whole period lies before `t`, one request
    /// each, and returns their names. Writes into those periods through
    /// this `Buckets` (and its clones) are refused from now on.
    pub async fn drop_before(&self, t: DateTime) -> Result<Vec<String>> {
        {
            let mut dropped = self
                .dropped_before
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            *dropped = Some(dropped.map_or(t, |before| before.max(t)));
        }
        let mut gone = Vec::new();
        for table in self.tables().await? {
            if table.end > t {
                break;
            }
            if self.table.named(&table.name).delete_table().await? {
                gone.push(table.name.clone());
            }
            self.created
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&table.name);
        }
        Ok(gone)
    }

    /// The rows whose time lies in `range`, read from the tables of the
    /// periods it meets. See [`BucketQuery`].
    pub fn query(&self, range: impl RangeBounds<DateTime>) -> BucketQuery<T> {
        BucketQuery {
            buckets: self.clone(),
            start: range.start_bound().cloned(),
            end: range.end_bound().cloned(),
            each: None,
        }
    }
}

/// How each table's query is narrowed.
type Narrow<T> = Arc<dyn Fn(TableQuery<T>) -> TableQuery<T> + Send + Sync>;

/// A read of a time range across the tables of its periods, oldest period
/// first; built by [`Buckets::query`].
pub struct BucketQuery<T> {
    buckets: Buckets<T>,
    start: Bound<DateTime>,
    end: Bound<DateTime>,
    each: Option<Narrow<T>>,
}

/// How many tables' first pages load at once while earlier tables are read.
const TABLES_AHEAD: usize = 4;

impl<T: Bucketed> BucketQuery<T> {
    /// Narrows the query of every table: a partition, a key range, a filter.
    ///
    /// ```
    /// # use tablekit::{bucket::Buckets, DateTime, TableEntity};
    /// # #[derive(TableEntity)] #[tablekit(table = "Logins", buckets = "day")]
    /// # struct Login { #[tablekit(partition_key)] user: String, #[tablekit(row_key)] id: u32, #[tablekit(bucket)] at: DateTime }
    /// # async fn demo(logins: Buckets<Login>) -> tablekit::Result<()> {
    /// let adas = logins.query(..).each(|q| q.partition("ada")).collect().await?;
    /// # Ok(()) }
    /// ```
    pub fn each(
        mut self,
        narrow: impl Fn(TableQuery<T>) -> TableQuery<T> + Send + Sync + 'static,
    ) -> BucketQuery<T> {
        self.each = Some(Arc::new(narrow));
        self
    }

    /// The condition that keeps rows to the range, where rows carry their time.
    fn time_filter(&self) -> Option<Filter> {
        let part = BucketPart::of::<T>()?;
        let column = match part.property {
            Some(name) => prop(name),
            // Bucketed by the time of the write: the store's Timestamp.
            None if !part.in_key => Filter::timestamp(),
            // A key field: its rows are not filtered here.
            None => return None,
        };
        crate::table::query::range_filter(|| column.clone(), self.start, self.end)
    }

    /// Whether a table's period meets the range.
    fn meets(&self, table: &BucketTable) -> bool {
        let after_start = match self.start {
            Bound::Included(t) | Bound::Excluded(t) => table.end > t,
            Bound::Unbounded => true,
        };
        let before_end = match self.end {
            Bound::Included(t) => table.start <= t,
            Bound::Excluded(t) => table.start < t,
            Bound::Unbounded => true,
        };
        after_start && before_end
    }

    /// The rows, oldest period first and in key order within each period.
    /// The tables are listed first; the first pages of the next few tables
    /// load while earlier ones are read.
    pub fn stream(self) -> BoxStream<'static, Result<Loaded<T>>> {
        let listing = {
            let buckets = self.buckets.clone();
            async move { buckets.tables().await }
        };
        stream::once(listing)
            .map_ok(move |tables| {
                let filter = self.time_filter();
                let queries: Vec<TableQuery<T>> = tables
                    .iter()
                    .filter(|t| self.meets(t))
                    .map(|t| {
                        let mut query = self.buckets.table.named(&t.name).query();
                        if let Some(narrow) = &self.each {
                            query = narrow(query);
                        }
                        match &filter {
                            Some(f) => query.filter(f.clone()),
                            None => query,
                        }
                    })
                    .collect();
                stream::iter(queries)
                    .map(|query| query.stream().into_future())
                    .buffered(TABLES_AHEAD)
                    .flat_map(|(first, rest)| stream::iter(first).chain(rest))
                    // A table dropped since the listing holds no rows any more.
                    .filter(|row| {
                        futures::future::ready(!matches!(
                            row,
                            Err(Error::TableNotFound { .. } | Error::TableBeingDeleted { .. })
                        ))
                    })
            })
            .try_flatten()
            .boxed()
    }

    /// All the rows, as [`stream`](BucketQuery::stream) yields them.
    pub async fn collect(self) -> Result<Vec<Loaded<T>>> {
        self.stream().try_collect().await
    }
}

/// The type of a `#[tablekit(bucket)]` field: a time that picks the
/// entity's period.
#[diagnostic::on_unimplemented(
    message = "a `bucket` field picks the entity's period by its time: `{Self}` is not a time",
    label = "`bucket` needs a `tablekit::DateTime` field",
    note = "mark the `DateTime` field that says when the entity happened with `#[tablekit(bucket)]`, or leave `bucket` out to take the time of the write"
)]
pub trait BucketTime {
    /// The time.
    fn bucket_time(&self) -> crate::datetime::DateTime;
}

impl BucketTime for crate::datetime::DateTime {
    fn bucket_time(&self) -> crate::datetime::DateTime {
        *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime {
        DateTime::parse(text).unwrap()
    }

    #[test]
    fn periods_name_start_and_follow_each_other() {
        let t = at("2026-12-31T23:59:59.9999999Z");
        for (period, stamp, start, next) in [
            (
                Period::Hour,
                "2026123123",
                "2026-12-31T23:00:00Z",
                "2027-01-01T00:00:00Z",
            ),
            (
                Period::Day,
                "20261231",
                "2026-12-31T00:00:00Z",
                "2027-01-01T00:00:00Z",
            ),
            (
                Period::Month,
                "202612",
                "2026-12-01T00:00:00Z",
                "2027-01-01T00:00:00Z",
            ),
        ] {
            assert_eq!(period.stamp(t), stamp);
            assert_eq!(period.start_of(t), at(start));
            assert_eq!(period.parse_stamp(stamp), Some(at(start)));
            assert_eq!(period.next(at(start)), at(next));
            assert_eq!(period.next(t), at(next), "from inside the period");
        }
        assert_eq!(
            Period::Month.next(at("2028-02-10T00:00:00Z")),
            at("2028-03-01T00:00:00Z")
        );
        assert_eq!(
            Period::Day.next(at("2028-02-28T05:00:00Z")),
            at("2028-02-29T00:00:00Z")
        );
        for (period, bad) in [
            (Period::Day, "20261232"),
            (Period::Day, "2026113"),
            (Period::Day, "2026-1-23"),
            (Period::Hour, "2026112324"),
            (Period::Month, "202613"),
            (Period::Month, "202600"),
            (Period::Day, "16001231"),
        ] {
            assert_eq!(period.parse_stamp(bad), None, "{bad}");
        }
        assert_eq!(Period::Hour.next(DateTime::MAX), DateTime::MAX);
    }
}
