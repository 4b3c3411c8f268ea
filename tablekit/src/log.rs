//! Logs in blobs: typed records, buffered and written as JSON lines to blobs
//! named by time.
//!
//! Log lines do not belong in a table. Keyed by time they make one hot
//! partition; keyed by source, reading a time range scans every partition.
//! A [`LogWriter`] buffers records (any `serde::Serialize` type) and writes
//! each batch as one blob of JSON lines, named by the minute of its first
//! record:
//!
//! ```text
//! {prefix}/2026/11/22/1800/000001.log
//! {prefix}/2026/11/22/1800/000002.log
//! {prefix}/2026/11/22/1801/000001.log
//! ```
//!
//! A [`LogReader`] lists the blobs of a time range (one listing per day) and
//! reads their records back in order.
//!
//! ```
//! use std::sync::Arc;
//! use tablekit::log::{LogReader, LogWriter};
//!
//! #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
//! struct Request { path: String, status: u16 }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
//! let store = Arc::new(tablekit_mem::MemBlobStore::new());
//! let log = LogWriter::<Request>::new(store.clone(), "logs", "web");
//! log.append(&Request { path: "/".into(), status: 200 }).await?;
//! log.append(&Request { path: "/x".into(), status: 404 }).await?;
//! log.flush().await?; // both records are in the store now
//!
//! let reader = LogReader::<Request>::new(store, "logs", "web");
//! let read = reader.read(..).await?;
//! assert_eq!(read.len(), 2);
//! assert_eq!(read[1].status, 404);
//! # Ok(()) }
//! ```
//!
//! # What is promised
//! - **Flush by size or age.** An append flushes once the buffer holds
//!   [`LogConfig::max_bytes`], or its oldest record is [`LogConfig::max_age`]
//!   old; [`LogWriter::run_flusher`] flushes by age when no appends come.
//!   A record never shares a blob with a record of another minute.
//! - **Nothing acknowledged is lost.** Once [`flush`](LogWriter::flush)
//!   returns `Ok`, every record appended before it is in a blob. A flush
//!   that fails keeps the records and writes them with the next one;
//!   [`shutdown`](LogWriter::shutdown) flushes what is left.
//! - **Nothing is written twice.** A blob is created only where none exists
//!   (`If-None-Match: *`). When a write's answer is lost, the next flush
//!   reads the blob back: if it holds the records, they are done; if the
//!   name was taken by another writer, the next number is used. A lost
//!   write that lands only after that read (it was still on its way) is
//!   found when the next write meets its name taken, and its records are
//!   done then. Several writers may share a prefix.
//! - **Order.** Blobs sort by time and number; a reader yields records in
//!   that order, and in the order they were appended within a writer.
//!
//! An append that must first flush an older minute's records, and cannot,
//! returns the error and does not take the new record: `Ok` from
//! [`append`](LogWriter::append) always means the record was taken.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Duration;

use crate::blob::{BlobStore, BlobStoreExt, ListBlobsOptions, PutCondition};
use crate::clock::{Clock, SystemClock};
use crate::datetime::DateTime;
use crate::error::{Error, Result};

/// When a [`LogWriter`] flushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogConfig {
    /// Flush once the buffered lines reach this many bytes (default 4 MiB).
    pub max_bytes: usize,
    /// Flush once the oldest buffered record is this old (default 60 s).
    pub max_age: Duration,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            max_bytes: 4 << 20,
            max_age: Duration::from_secs(60),
        }
    }
}

impl LogConfig {
    /// Flush at `bytes` buffered.
    pub fn max_bytes(mut self, bytes: usize) -> LogConfig {
        self.max_bytes = bytes.max(1);
        self
    }

    /// Flush when the oldest record is `age` old.
    pub fn max_age(mut self, age: Duration) -> LogConfig {
        self.max_age = age;
        self
    }
}

/// The folder of a minute: `{prefix}/YYYY/MM/DD/HHMM`.
fn folder(prefix: &str, minute: DateTime) -> String {
    let t = time::OffsetDateTime::from(minute);
    format!(
        "{prefix}/{:04}/{:02}/{:02}/{:02}{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute()
    )
}

/// The start of the minute that holds `t`.
fn minute_of(t: DateTime) -> DateTime {
    const TICKS_PER_MINUTE: i64 = 60 * 10_000_000;
    DateTime::from_ticks(t.ticks() - t.ticks().rem_euclid(TICKS_PER_MINUTE)).unwrap_or(t)
}

/// A log blob's minute and number, from its name under `prefix`.
fn parse_name(prefix: &str, name: &str) -> Option<(DateTime, u32)> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('/')?;
    let (path, file) = rest.rsplit_once('/')?;
    let seq = file.strip_suffix(".log")?;
    if seq.len() != 6 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let parts: Vec<&str> = path.split('/').collect();
    let [y, m, d, hm] = parts.as_slice() else {
        return None;
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(y, 4) && digits(m, 2) && digits(d, 2) && digits(hm, 4)) {
        return None;
    }
    let text = format!("{y}-{m}-{d}T{}:{}:00Z", &hm[..2], &hm[2..]);
    let minute = DateTime::parse(&text).ok()?;
    // One spelling per minute.
    (folder(prefix, minute) == format!("{prefix}/{path}")).then_some((minute, seq.parse().ok()?))
}

struct Buffer {
    lines: Vec<u8>,
    records: usize,
    /// The minute of the first buffered record.
    minute: Option<DateTime>,
    /// When the first buffered record came, on the writer's clock.
    since: Option<DateTime>,
    /// The folder numbers were last taken in, and the next number to try.
    folder: String,
    seq: u32,
    /// A blob whose write's answer was lost: its name and how many of the
    /// buffer's bytes it was sent with.
    unsettled: Option<(String, usize)>,
    /// An unsettled write that was not found when it was settled: it may
    /// still land (a request on its way, a store's writer that has not run
    /// it yet). If its name turns out taken, it is compared with the
    /// buffer's bytes it was sent with, not the later write's.
    late: Option<(String, usize)>,
}

/// Buffers typed records and writes them to blobs of JSON lines. See the
/// [module documentation](self).
pub struct LogWriter<R> {
    store: Arc<dyn BlobStore>,
    container: String,
    prefix: String,
    config: LogConfig,
    clock: Arc<dyn Clock>,
    buffer: Arc<tokio::sync::Mutex<Buffer>>,
    _record: PhantomData<fn(&R)>,
}

impl<R> Clone for LogWriter<R> {
    fn clone(&self) -> Self {
        LogWriter {
            store: Arc::clone(&self.store),
            container: self.container.clone(),
            prefix: self.prefix.clone(),
            config: self.config,
            clock: Arc::clone(&self.clock),
            buffer: Arc::clone(&self.buffer),
            _record: PhantomData,
        }
    }
}

impl<R> std::fmt::Debug for LogWriter<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("container", &self.container)
            .field("prefix", &self.prefix)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How many taken names a flush steps over before it gives up.
const MAX_TAKEN: u32 = 1000;

impl<R: serde::Serialize> LogWriter<R> {
    /// A writer of blobs named `{prefix}/YYYY/MM/DD/HHMM/NNNNNN.log` in
    /// `container` (created when first needed), with the default
    /// [`LogConfig`] and the system clock. Clones share one buffer.
    pub fn new(store: Arc<dyn BlobStore>, container: &str, prefix: &str) -> LogWriter<R> {
        LogWriter {
            store,
            container: container.to_owned(),
            prefix: prefix.trim_end_matches('/').to_owned(),
            config: LogConfig::default(),
            clock: Arc::new(SystemClock),
            buffer: Arc::new(tokio::sync::Mutex::new(Buffer {
                lines: Vec::new(),
                records: 0,
                minute: None,
                since: None,
                folder: String::new(),
                seq: 1,
                late: None,
                unsettled: None,
            })),
            _record: PhantomData,
        }
    }

    /// Flushes as `config` says.
    pub fn with_config(mut self, config: LogConfig) -> LogWriter<R> {
        self.config = config;
        self
    }

    /// Takes the time from `clock` (which minute a record falls in, and how
    /// old the buffer is).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> LogWriter<R> {
        self.clock = clock;
        self
    }

    /// Buffers `record`, first flushing the records of an earlier minute,
    /// and flushes when the buffer is full or old. `Ok` means the record is
    /// taken: buffered, or written. It is in the store once a flush returns
    /// `Ok`. A flush by size or age that fails here is logged and left to
    /// the next flush, which writes everything buffered.
    ///
    /// Errors (the record is not taken): [`Error::LogRecord`] when it does
    /// not serialize; the store's error when the records of an earlier
    /// minute could not be flushed first.
    pub async fn append(&self, record: &R) -> Result<()> {
        let mut line = serde_json::to_vec(record).map_err(|e| Error::LogRecord {
            location: "a record being appended".into(),
            reason: e.to_string(),
        })?;
        line.push(b'\n');
        let now = self.clock.now();
        let minute = minute_of(now);
        let mut buffer = self.buffer.lock().await;
        if buffer.minute.is_some_and(|m| m != minute) {
            self.flush_buffer(&mut buffer).await?;
        }
        buffer.minute.get_or_insert(minute);
        buffer.since.get_or_insert(now);
        buffer.lines.extend_from_slice(&line);
        buffer.records += 1;
        if self.is_due(&buffer, now)
            && let Err(e) = self.flush_buffer(&mut buffer).await
        {
            tracing::warn!(error = %e, "tablekit::log: a flush failed; the records stay buffered");
        }
        Ok(())
    }

    fn is_due(&self, buffer: &Buffer, now: DateTime) -> bool {
        buffer.lines.len() >= self.config.max_bytes
            || buffer
                .since
                .and_then(|since| now.duration_since(since))
                .is_some_and(|age| age >= self.config.max_age)
    }

    /// Writes every buffered record. When it returns `Ok`, every record
    /// appended before the call is in the store.
    pub async fn flush(&self) -> Result<()> {
        let mut buffer = self.buffer.lock().await;
        self.flush_buffer(&mut buffer).await
    }

    /// Flushes, for a writer about to stop.
    pub async fn shutdown(self) -> Result<()> {
        self.flush().await
    }

    /// Records buffered and not yet written.
    pub async fn pending(&self) -> usize {
        self.buffer.lock().await.records
    }

    /// Flushes whenever the oldest buffered record reaches
    /// [`LogConfig::max_age`], until `shutdown` completes; then flushes what
    /// is left. A failed flush is retried at the next check. Spawn it beside
    /// the writers: `tokio::spawn(log.clone().run_flusher(signal))`.
    pub async fn run_flusher(self, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        let check = (self.config.max_age / 4).max(Duration::from_millis(10));
        loop {
            match futures::future::select(shutdown.as_mut(), self.clock.sleep(check)).await {
                futures::future::Either::Left(((), _)) => return self.flush().await,
                futures::future::Either::Right(((), _)) => {}
            }
            let mut buffer = self.buffer.lock().await;
            if self.is_due(&buffer, self.clock.now())
                && let Err(e) = self.flush_buffer(&mut buffer).await
            {
                tracing::warn!(error = %e, "tablekit::log: a flush by age failed; retrying");
            }
        }
    }

    /// Settles a write whose answer was lost: drops the records it wrote,
    /// if it wrote them. Errors leave it unsettled.
    async fn settle(&self, buffer: &mut Buffer) -> Result<()> {
        let Some((name, len)) = buffer.unsettled.clone() else {
            return Ok(());
        };
        match self.store.get_blob(&self.container, &name).await {
            Ok(blob) => {
                if buffer.lines.get(..len) == Some(&blob.data[..]) {
                    // It was written: those records are done.
                    buffer.lines.drain(..len);
                    buffer.records -= count_lines(&blob.data);
                    if buffer.lines.is_empty() {
                        buffer.minute = None;
                        buffer.since = None;
                    }
                }
                // Written by us, or taken by another writer: not this number again.
                buffer.seq += 1;
            }
            Err(Error::BlobNotFound { .. } | Error::ContainerNotFound { .. }) => {
                buffer.late = Some((name, len));
            }
            Err(e) => return Err(e),
        }
        buffer.unsettled = None;
        Ok(())
    }

    /// The first number not taken in `folder`.
    async fn first_free(&self, folder: &str) -> Result<u32> {
        let mut options = ListBlobsOptions::prefix(format!("{folder}/"));
        let mut last = 0;
        loop {
            let page = match self.store.list_blobs(&self.container, &options).await {
                Err(Error::ContainerNotFound { .. }) => return Ok(1),
                page => page?,
            };
            for blob in &page.blobs {
                if let Some((_, seq)) = parse_name(&self.prefix, &blob.name) {
                    last = last.max(seq);
                }
            }
            match page.next_marker {
                Some(marker) => options.marker = Some(marker),
                None => return Ok(last + 1),
            }
        }
    }

    async fn flush_buffer(&self, buffer: &mut Buffer) -> Result<()> {
        self.settle(buffer).await?;
        let Some(minute) = buffer.minute.filter(|_| !buffer.lines.is_empty()) else {
            return Ok(());
        };
        let folder = folder(&self.prefix, minute);
        if buffer.folder != folder {
            buffer.seq = self.first_free(&folder).await?;
            buffer.folder = folder;
        }
        let mut created_container = false;
        for _ in 0..MAX_TAKEN {
            let name = format!("{}/{:06}.log", buffer.folder, buffer.seq);
            let data = buffer.lines.clone();
            let len = data.len();
            // Marked unsettled while it is under way: a flush dropped before
            // its answer (a caller that gave up, a timeout) leaves the mark,
            // and the next flush settles the write by reading it back, even
            // after more records were appended.
            buffer.unsettled = Some((name.clone(), len));
            let put = self
                .store
                .put_blob(&self.container, &name, data, &PutCondition::IfNotExists)
                .await;
            if !put.as_ref().is_err_and(Error::is_outcome_unknown) {
                buffer.unsettled = None;
            }
            match put {
                Ok(_) => {
                    // The name is ours now: a late write to it cannot land.
                    buffer.late = None;
                    buffer.lines.clear();
                    buffer.records = 0;
                    buffer.minute = None;
                    buffer.since = None;
                    buffer.seq += 1;
                    return Ok(());
                }
                Err(Error::ContainerNotFound { .. }) if !created_container => {
                    created_container = true;
                    self.store
                        .create_container_if_not_exists(&self.container)
                        .await?;
                }
                // Taken: by this writer's lost write, or by another writer.
                Err(Error::BlobAlreadyExists { .. }) => {
                    // The write whose answer was lost, if it is this name's
                    // (a late write to another name is kept for that name).
                    let len = match buffer.late.take() {
                        Some((late, sent)) if late == name => sent,
                        other => {
                            buffer.late = other;
                            len
                        }
                    };
                    buffer.unsettled = Some((name, len));
                    self.settle(buffer).await?;
                    if buffer.lines.is_empty() {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::LogRecord {
            location: buffer.folder.clone(),
            reason: format!("{MAX_TAKEN} blob names in a row were taken by other writers"),
        })
    }
}

fn count_lines(data: &[u8]) -> usize {
    data.iter().filter(|&&b| b == b'\n').count()
}

/// One blob of a log: its name, minute and number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlob {
    /// The blob's name.
    pub name: String,
    /// The minute of its records.
    pub minute: DateTime,
    /// Its number within the minute.
    pub seq: u32,
}

/// Reads the records a [`LogWriter`] wrote. See the
/// [module documentation](self).
pub struct LogReader<R> {
    store: Arc<dyn BlobStore>,
    container: String,
    prefix: String,
    _record: PhantomData<fn() -> R>,
}

impl<R> std::fmt::Debug for LogReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("container", &self.container)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl<R: serde::de::DeserializeOwned> LogReader<R> {
    /// A reader of the log `prefix` in `container`.
    pub fn new(store: Arc<dyn BlobStore>, container: &str, prefix: &str) -> LogReader<R> {
        LogReader {
            store,
            container: container.to_owned(),
            prefix: prefix.trim_end_matches('/').to_owned(),
            _record: PhantomData,
        }
    }

    /// The blobs whose minute lies in `range` (a minute is in when its
    /// start is: records are placed by the minute they were appended in),
    /// in time and number order. One listing per day of the range, or one
    /// of the whole log when the range is open.
    pub async fn blobs(&self, range: impl RangeBounds<DateTime>) -> Result<Vec<LogBlob>> {
        let start = match range.start_bound() {
            Bound::Included(t) | Bound::Excluded(t) => Some(minute_of(*t)),
            Bound::Unbounded => None,
        };
        let end = range.end_bound().cloned();
        let prefixes: Vec<String> = match (start, end) {
            (Some(start), Bound::Included(end) | Bound::Excluded(end)) => {
                let mut days = Vec::new();
                let mut day = crate::bucket::Period::Day.start_of(start);
                while day <= end {
                    let folder = folder(&self.prefix, day);
                    // `{prefix}/YYYY/MM/DD/`: the folder less its `HHMM`.
                    days.push(format!("{}/", &folder[..folder.len() - 5]));
                    day = crate::bucket::Period::Day.next(day);
                    if day == DateTime::MAX {
                        break;
                    }
                }
                days
            }
            _ => vec![format!("{}/", self.prefix)],
        };
        let mut blobs = Vec::new();
        for prefix in prefixes {
            let mut options = ListBlobsOptions::prefix(prefix);
            loop {
                let page = match self.store.list_blobs(&self.container, &options).await {
                    Err(Error::ContainerNotFound { .. }) => return Ok(Vec::new()),
                    page => page?,
                };
                for blob in page.blobs {
                    let Some((minute, seq)) = parse_name(&self.prefix, &blob.name) else {
                        continue;
                    };
                    let after_start = start.is_none_or(|s| minute >= s);
                    let before_end = match end {
                        Bound::Included(e) => minute <= e,
                        Bound::Excluded(e) => minute < e,
                        Bound::Unbounded => true,
                    };
                    if after_start && before_end {
                        blobs.push(LogBlob {
                            name: blob.name,
                            minute,
                            seq,
                        });
                    }
                }
                match page.next_marker {
                    Some(marker) => options.marker = Some(marker),
                    None => break,
                }
            }
        }
        blobs.sort_by_key(|b| (b.minute, b.seq));
        Ok(blobs)
    }

    /// The records of one blob, in the order they were appended.
    ///
    /// Errors: [`Error::LogRecord`] naming the blob and line of a record
    /// that does not read as `R`.
    pub async fn read_blob(&self, name: &str) -> Result<Vec<R>> {
        let blob = self.store.get_blob(&self.container, name).await?;
        blob.data
            .split(|&b| b == b'\n')
            .enumerate()
            .filter(|(_, line)| !line.is_empty())
            .map(|(i, line)| {
                serde_json::from_slice(line).map_err(|e| Error::LogRecord {
                    location: format!("{name}, line {}", i + 1),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// The records of the blobs of `range`, in order (see
    /// [`blobs`](LogReader::blobs)).
    pub async fn read(&self, range: impl RangeBounds<DateTime>) -> Result<Vec<R>> {
        let mut records = Vec::new();
        for blob in self.blobs(range).await? {
            records.extend(self.read_blob(&blob.name).await?);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_minute_and_number() {
        let t = DateTime::parse("2026-11-22T18:05:59.5Z").unwrap();
        let minute = minute_of(t);
        assert_eq!(minute, DateTime::parse("2026-11-22T18:05:00Z").unwrap());
        let name = format!("{}/000042.log", folder("app/web", minute));
        assert_eq!(name, "app/web/2026/11/22/1805/000042.log");
        assert_eq!(parse_name("app/web", &name), Some((minute, 42)));
        for bad in [
            "app/web/2026/11/22/1805/42.log",
            "app/web/2026/11/22/1805/000042.txt",
            "app/web/2026/11/22/2505/000042.log",
            "app/web/2026/13/22/1805/000042.log",
            "app/web/2026/11/22/000042.log",
            "app/webx/2026/11/22/1805/000042.log",
            "other/2026/11/22/1805/000042.log",
        ] {
            assert_eq!(parse_name("app/web", bad), None, "{bad}");
        }
    }
}
