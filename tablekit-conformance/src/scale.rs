//! Patterns for volume: sharded partitions read back merged.

use std::sync::Arc;

use futures::TryStreamExt as _;

use super::unique_table;
use tablekit::TableBackendExt;
use tablekit::backend::{ContinuationToken, Query, TableBackend};
use tablekit::table::{Cursor, RowErrors, SkippedRows, Table};
use tablekit::{Entity, TableEntity};

/// A page hit, spread over 8 shards of its page's partition.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "HIT", shards = 8)]
pub struct Hit {
    /// The page: the logical partition.
    #[tablekit(partition_key)]
    pub page: String,
    /// The hit's number.
    #[tablekit(row_key)]
    pub seq: u32,
    /// Who hit it.
    pub user: String,
}

fn hit(page: &str, seq: u32) -> Hit {
    Hit {
        page: page.into(),
        seq,
        user: format!("user {}", seq % 7),
    }
}

/// Pages of a sharded partition (of 240 hits on `home`): a continuation
/// token resumes every shard through its text, a token of another partition
/// is refused, and cursors page it too; every page set covers it once, in
/// order.
async fn sharded_pages_cover_the_partition(hits: &Table<Hit>) {
    // Pages: one continuation token resumes every shard, through its text.
    for size in [1u32, 7, 100, 1000] {
        let mut seen = Vec::new();
        let mut token: Option<ContinuationToken> = None;
        loop {
            let mut query = hits.query().partition("home").page_size(size);
            if let Some(token) = token.take() {
                query = query.resume(token.to_string().parse().expect("a token"));
            }
            let (items, next) = query.page().await.expect("a page");
            assert!(items.len() <= size as usize);
            seen.extend(items.iter().map(|h| h.seq));
            match next {
                Some(next) => {
                    assert_eq!(items.len(), size as usize, "only the last page is short");
                    token = Some(next);
                }
                None => break,
            }
        }
        assert!(seen.iter().copied().eq(0..240), "pages of {size}");
    }
    // A token of another partition is refused.
    let (_, other) = hits
        .query()
        .partition("home page")
        .page_size(5)
        .page()
        .await
        .expect("page");
    let refused = hits
        .query()
        .partition("home")
        .resume(other.expect("more"))
        .page()
        .await;
    assert!(
        matches!(
            refused,
            Err(tablekit::Error::Invalid(
                tablekit::InvalidInput::ContinuationToken { .. }
            ))
        ),
        "{refused:?}"
    );

    // Cursors, for pages of N items.
    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    loop {
        let query = hits.query().partition("home");
        let query = match cursor.take() {
            Some(c) => query.after(c.to_string().parse().expect("a cursor")),
            None => query,
        };
        let page = query.page_of(33).await.expect("a page");
        seen.extend(page.items.iter().map(|h| h.seq));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(seen.iter().copied().eq(0..240), "cursor pages");
}

/// Rows of a sharded kind spread over their shards by RowKey; point reads,
/// bulk writes, merged queries, pages with one token, cursors and counts
/// all see one logical partition in RowKey order.
pub async fn sharded_partitions_spread_and_merge(backend: Arc<dyn TableBackend>) {
    let name = unique_table("shards");
    let hits: Table<Hit> = Table::from_arc(Arc::clone(&backend), &name);
    hits.create_if_missing().await.expect("create table");
    // The bulk writer spreads one partition's rows over its 8 shards: one
    // transaction per shard.
    let a: Vec<Hit> = (0..240).map(|seq| hit("home", seq)).collect();
    let report = hits.bulk().insert(&a).await;
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.batches, 8, "one transaction per shard");
    for seq in 0..30 {
        hits.insert(&hit("home page", seq)).await.expect("insert");
    }

    stored_by_shard(&*backend, &name).await;

    // A point read computes its shard.
    let one = hits
        .get("home", 117u32)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(*one, hit("home", 117));
    assert!(hits.exists("home page", 3u32).await.expect("exists"));
    assert!(hits.get("home page", 30u32).await.expect("get").is_none());

    // The logical partition, merged in RowKey order.
    let all = hits
        .query()
        .partition("home")
        .collect()
        .await
        .expect("query");
    assert!(all.iter().map(|h| h.seq).eq(0..240), "merged in key order");
    let range = hits.query().partition("home").rows(50..60).collect().await;
    assert!(range.expect("range").iter().map(|h| h.seq).eq(50..60));
    let filtered = hits
        .query()
        .partition("home")
        .filter(Hit::columns().user.eq("user 3"))
        .limit(5)
        .collect()
        .await
        .expect("filtered");
    assert!(filtered.iter().map(|h| h.seq).eq([3, 10, 17, 24, 31]));
    assert_eq!(
        hits.query().partition("home").count().await.expect("count"),
        240
    );
    assert_eq!(
        hits.query()
            .partition("home page")
            .count()
            .await
            .expect("count"),
        30
    );
    assert_eq!(hits.query().count().await.expect("count all"), 270);

    sharded_pages_cover_the_partition(&hits).await;

    // Deletes find their shard.
    hits.delete(&one).await.expect("delete");
    assert!(hits.get("home", 117u32).await.expect("get").is_none());

    // A row in the wrong shard is never read as the type: it is a row error.
    let row_key = tablekit::schema::row_key_of(&hit("home", 500)).expect("row key");
    let wrong = (tablekit::shard::shard_of(&row_key, 8) + 1) % 8;
    let stray = Entity::new(format!("home|{wrong:02}"), row_key)
        .with("_Kind", "HIT")
        .with("_Version", 1)
        .with("user", "stray");
    backend
        .insert_entity(&name, &stray)
        .await
        .expect("raw insert");
    let skipped = SkippedRows::default();
    let read = hits
        .query()
        .partition("home")
        .on_row_error(RowErrors::Skip(skipped.clone()))
        .collect()
        .await
        .expect("query");
    assert_eq!(read.len(), 239);
    assert_eq!(skipped.count(), 1, "the stray row is refused, not misread");
    backend.delete_table(&name).await.expect("delete table");
}

/// Rows are stored under `{page}
/// {shard}`, the shard computed from the RowKey
/// alone, and 240 rows of one page reach every shard.
async fn stored_by_shard(backend: &dyn TableBackend, name: &str) {
    // Stored: `{page}|{shard}`, the shard computed from the RowKey alone.
    let raw: Vec<Entity> = backend
        .query_stream(name, Query::new())
        .try_collect()
        .await
        .expect("raw rows");
    assert_eq!(raw.len(), 270);
    let mut shards = std::collections::BTreeSet::new();
    for row in &raw {
        let shard = tablekit::shard::shard_of(&row.row_key, 8);
        let (page, suffix) = row.partition_key.rsplit_once('|').expect("a shard suffix");
        assert_eq!(suffix, format!("{shard:02}"), "{row:?}");
        if page == "home" {
            shards.insert(shard);
        }
    }
    assert_eq!(shards.len(), 8, "240 rows reach every shard");
}

/// An event, kept in one table per hour by its time.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "EVT", buckets = "hour")]
pub struct Event {
    /// Where it happened.
    #[tablekit(partition_key)]
    pub source: String,
    /// Its number.
    #[tablekit(row_key)]
    pub id: u32,
    /// When: picks the table.
    #[tablekit(bucket)]
    pub at: tablekit::DateTime,
}

/// An event's keys alone: a projection, kept in its entity's periods.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Event)]
pub struct EventKey {
    /// Where it happened.
    #[tablekit(partition_key)]
    pub source: String,
    /// Its number.
    #[tablekit(row_key)]
    pub id: u32,
}

/// A projection of an entity kept in one table: no periods.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = crate::CatalogItem)]
pub struct CatalogKey {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The item.
    #[tablekit(row_key)]
    pub sku: String,
}

/// A line of an audit trail, kept in one table per day by the time of its
/// write.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", buckets = "day")]
pub struct AuditLine {
    /// Who acted.
    #[tablekit(partition_key)]
    pub actor: String,
    /// Its number.
    #[tablekit(row_key)]
    pub id: u32,
}

/// A fresh name for a set of bucketed tables: it must end with a letter.
fn bucket_prefix(tag: &str) -> String {
    format!("{}x", unique_table(tag))
}

fn at(text: &str) -> tablekit::DateTime {
    tablekit::DateTime::parse(text).expect("a time")
}

/// Through the bucket `prefix` of `Event`s: a projection reads its
/// entity's periods, as its entity does; a kind without periods is refused,
/// and nothing is created.
async fn projections_and_plain_kinds_of_buckets(backend: &Arc<dyn TableBackend>, prefix: &str) {
    use tablekit::bucket::{Buckets, Period};
    // A projection reads its entity's periods, as its entity does.
    let keys = Buckets::new(Table::<EventKey>::from_arc(Arc::clone(backend), prefix))
        .expect("a projection's buckets");
    assert_eq!(keys.period(), Period::Hour);
    let keys: Vec<u32> = keys
        .query(..)
        .collect()
        .await
        .expect("the projection's rows")
        .iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(keys, [1, 3, 4, 2, 5]);
    // One of an entity without periods is refused, nothing created.
    let plain = Buckets::new(Table::<CatalogKey>::from_arc(Arc::clone(backend), prefix));
    assert!(
        matches!(plain, Err(tablekit::Error::NotSupported { .. })),
        "{plain:?}"
    );
}

/// A kind bucketed by the time of the write: the table's clock picks the
/// period, and each period's table is dropped through a typed table.
async fn buckets_follow_the_clock(backend: &Arc<dyn TableBackend>) {
    use tablekit::bucket::Buckets;
    let clock = Arc::new(tablekit::clock::ManualClock::at(at("2026-11-23T23:00:00Z")));
    let prefix = bucket_prefix("aud");
    let audit = Buckets::new(
        Table::<AuditLine>::from_arc(Arc::clone(backend), &prefix).with_clock(clock.clone()),
    )
    .expect("a bucket prefix");
    let line = |id| AuditLine {
        actor: "ada".into(),
        id,
    };
    audit.insert(&line(1)).await.expect("insert");
    clock.advance(std::time::Duration::from_secs(3600));
    audit.upsert(&line(2)).await.expect("upsert");
    let names: Vec<String> = audit
        .tables()
        .await
        .expect("tables")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        names,
        [format!("{prefix}20261123"), format!("{prefix}20261124")]
    );
    let lines = audit.query(..).collect().await.expect("all");
    assert_eq!(lines.iter().map(|l| l.id).collect::<Vec<_>>(), [1, 2]);
    for name in names {
        // A table named at run time, deleted through the typed table.
        let table = Table::<AuditLine>::from_arc(Arc::clone(backend), &name);
        assert!(table.delete_table().await.expect("delete"));
    }
}

/// Rows go to their period's table, created on first use; a time range
/// reads the tables it meets in order and keeps to the range; dropping
/// takes whole tables and no write brings a dropped period back.
pub async fn bucketed_tables_route_read_and_drop(backend: Arc<dyn TableBackend>) {
    use tablekit::bucket::{Buckets, Period};
    let prefix = bucket_prefix("bkt");
    let events = Buckets::new(Table::<Event>::from_arc(Arc::clone(&backend), &prefix))
        .expect("a bucket prefix");
    assert_eq!(events.period(), Period::Hour);
    let event = |source: &str, id: u32, time: &str| Event {
        source: source.into(),
        id,
        at: at(time),
    };
    // Out of time order, over three hours.
    let written = [
        event("door", 5, "2026-11-23T19:10:00Z"),
        event("door", 1, "2026-11-23T17:59:59.9999999Z"),
        event("gate", 2, "2026-11-23T18:00:00Z"),
        event("door", 3, "2026-11-23T18:30:00Z"),
        event("door", 4, "2026-11-23T18:59:00Z"),
    ];
    for e in &written {
        events.insert(e).await.expect("insert");
    }
    one_table_per_period(&*backend, &events, &prefix).await;

    let ids = |rows: Vec<tablekit::Loaded<Event>>| rows.iter().map(|e| e.id).collect::<Vec<_>>();
    // Period order, then key order in each period.
    let all = events.query(..).collect().await.expect("all");
    assert_eq!(ids(all), [1, 3, 4, 2, 5]);
    // The range keeps to its times, not just to its periods.
    let some = events
        .query(at("2026-11-23T18:00:00Z")..at("2026-11-23T18:59:00Z"))
        .collect()
        .await
        .expect("a range");
    assert_eq!(ids(some), [3, 2]);
    let doors = events
        .query(at("2026-11-23T17:00:00Z")..=at("2026-11-23T19:10:00Z"))
        .each(|q| q.partition("door"))
        .collect()
        .await
        .expect("narrowed");
    assert_eq!(ids(doors), [1, 3, 4, 5]);
    projections_and_plain_kinds_of_buckets(&backend, &prefix).await;
    // A point read through the period's table.
    let got = events
        .table_at(at("2026-11-23T18:30:00Z"))
        .get("door", 3u32)
        .await
        .expect("get");
    assert_eq!(got.as_deref(), Some(&written[3]));

    // Many at once: failures keep the caller's positions.
    let more = vec![
        event("gate", 6, "2026-11-23T20:00:00Z"),
        event("door", 3, "2026-11-23T18:30:00Z"),
        event("gate", 7, "2026-11-23T17:00:00Z"),
    ];
    let report = events.insert_many(&more).await;
    assert_eq!(report.written, 2);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(
        report.failures[0].index, 1,
        "the second item already exists"
    );

    // Drop the periods before 19:00, one request per table.
    let gone = events
        .drop_before(at("2026-11-23T19:00:00Z"))
        .await
        .expect("drop");
    assert_eq!(
        gone,
        [format!("{prefix}2026112317"), format!("{prefix}2026112318")]
    );
    let refused = events
        .insert(&event("door", 9, "2026-11-23T18:45:00Z"))
        .await;
    assert!(
        matches!(&refused, Err(tablekit::Error::PeriodDropped { table }) if table == &format!("{prefix}2026112318")),
        "a dropped period stays dropped: {refused:?}"
    );
    let left = events.query(..).collect().await.expect("after the drop");
    assert_eq!(ids(left), [5, 6]);
    for table in events.tables().await.expect("tables") {
        backend.delete_table(&table.name).await.expect("clean up");
    }
    backend
        .delete_table(&format!("{prefix}Other"))
        .await
        .expect("clean up");

    // Bucketed by the time of the write: the table's clock picks the period.
    buckets_follow_the_clock(&backend).await;
}

/// Each period written has its table, named by the period; a table with the
/// prefix but no period's digits is not one of them.
async fn one_table_per_period(
    backend: &dyn TableBackend,
    events: &tablekit::bucket::Buckets<Event>,
    prefix: &str,
) {
    let tables = events.tables().await.expect("tables");
    let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            format!("{prefix}2026112317"),
            format!("{prefix}2026112318"),
            format!("{prefix}2026112319")
        ]
    );
    assert_eq!(tables[1].start, at("2026-11-23T18:00:00Z"));
    assert_eq!(tables[1].end, at("2026-11-23T19:00:00Z"));
    // A table with the prefix but no period's digits is not one of them.
    backend
        .create_table(&format!("{prefix}Other"))
        .await
        .expect("another table");
    assert_eq!(events.tables().await.expect("tables").len(), 3);
}

/// A log record of the model run.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct LogLine {
    n: u32,
    text: String,
}

/// Runs of appends, flushes and minutes passing, with every blob request
/// failing now and then (before reaching the store, or after it acted with
/// the answer lost). After each flush that returns `Ok`, the store holds
/// exactly the records appended so far, once each and in order; at the end,
/// every record appended is there once.
pub async fn logs_lose_nothing_under_faults(
    _backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn tablekit::BlobStore>,
) {
    use tablekit::layer::FaultInjection;
    use tablekit::log::{LogConfig, LogReader, LogWriter};
    let container = unique_table("logs").to_ascii_lowercase();
    let layer = FaultInjection::new(Arc::clone(&blobs));
    let faults = layer.handle();
    let faulty: Arc<dyn tablekit::BlobStore> = Arc::new(layer);
    let runs = 12;
    let mut flushed = 0;
    let mut failed = 0;
    for run in 0..runs {
        let seed = 0x5EED_0000 + run;
        let mut rng = fastrand::Rng::with_seed(seed);
        let prefix = format!("run{run}/app");
        let clock = Arc::new(tablekit::clock::ManualClock::at(at("2026-11-22T18:00:30Z")));
        let writer = LogWriter::<LogLine>::new(Arc::clone(&faulty), &container, &prefix)
            .with_clock(clock.clone())
            .with_config(
                LogConfig::default()
                    .max_bytes(120)
                    .max_age(std::time::Duration::from_secs(20)),
            );
        let reader = LogReader::<LogLine>::new(Arc::clone(&blobs), &container, &prefix);
        faults.clear();
        faults.seed(seed);
        fail_some_blob_requests(&faults);
        let mut taken: Vec<LogLine> = Vec::new();
        for step in 0..40u32 {
            match rng.u32(0..10) {
                0..=5 => {
                    let line = LogLine {
                        n: step,
                        text: "x".repeat(rng.usize(0..40)),
                    };
                    if writer.append(&line).await.is_ok() {
                        taken.push(line);
                    }
                }
                6..=7 => match writer.flush().await {
                    Ok(()) => {
                        flushed += 1;
                        let stored = reader.read(..).await.expect("read back");
                        assert_eq!(stored, taken, "run {run} step {step}: after a flush");
                    }
                    Err(_) => failed += 1,
                },
                _ => clock.advance(std::time::Duration::from_secs(rng.u64(1..50))),
            }
        }
        faults.clear();
        writer
            .clone()
            .shutdown()
            .await
            .expect("shut down without faults");
        assert_eq!(writer.pending().await, 0);
        let stored = reader.read(..).await.expect("read back");
        assert_eq!(stored, taken, "run {run}: at the end");
        // A range reads the blobs of its minutes only.
        let blobs_all = reader.blobs(..).await.expect("blobs");
        if let Some(first) = blobs_all.first() {
            let one_minute = reader
                .blobs(first.minute..=first.minute)
                .await
                .expect("one minute");
            assert!(one_minute.iter().all(|b| b.minute == first.minute));
            assert_eq!(
                one_minute.len(),
                blobs_all
                    .iter()
                    .filter(|b| b.minute == first.minute)
                    .count()
            );
        }
    }
    assert!(
        flushed > 0 && failed > 0,
        "faults hit some flushes and spared others"
    );
    blobs
        .delete_container(&container)
        .await
        .expect("delete container");
}

/// Fails about one in seven of the blob requests a log makes, transiently or
/// with the answer lost.
fn fail_some_blob_requests(faults: &tablekit::layer::FaultHandle) {
    use tablekit::layer::{Fault, Injection, Operation};
    for operation in [
        Operation::PutBlob,
        Operation::GetBlob,
        Operation::ListBlobs,
        Operation::CreateContainer,
    ] {
        for fault in [Fault::Transient, Fault::LostResponse] {
            faults.inject(
                Injection::on(operation)
                    .fault(fault)
                    .probability(0.15)
                    .times(usize::MAX),
            );
        }
    }
}

/// A log flushes by size on append, by age with no appends (its flusher),
/// and on shutdown; blobs are named by minute and number.
pub async fn logs_flush_by_size_age_and_shutdown(
    _backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn tablekit::BlobStore>,
) {
    use tablekit::log::{LogConfig, LogReader, LogWriter};
    let container = unique_table("logs").to_ascii_lowercase();
    let clock = Arc::new(tablekit::clock::ManualClock::at(at("2026-11-22T18:00:05Z")));
    let line = |n: u32| LogLine {
        n,
        text: "0123456789".into(),
    };
    let size = serde_json::to_vec(&line(0)).expect("json").len() + 1;
    let writer = LogWriter::<LogLine>::new(Arc::clone(&blobs), &container, "svc/api/")
        .with_clock(clock.clone())
        .with_config(
            LogConfig::default()
                .max_bytes(2 * size)
                .max_age(std::time::Duration::from_secs(10)),
        );
    let reader = LogReader::<LogLine>::new(Arc::clone(&blobs), &container, "svc/api");
    // By size: the second line fills the buffer.
    writer.append(&line(1)).await.expect("append");
    assert_eq!(writer.pending().await, 1);
    writer.append(&line(2)).await.expect("append");
    assert_eq!(writer.pending().await, 0, "flushed by size");
    // By age, with no appends: the flusher writes it.
    writer.append(&line(3)).await.expect("append");
    let (stop, stopped) = futures::channel::oneshot::channel::<()>();
    let flusher = writer.clone().run_flusher(async move {
        let _ = stopped.await;
    });
    let driver = async {
        clock.advance(std::time::Duration::from_secs(11));
        for _ in 0..2000 {
            if writer.pending().await == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(writer.pending().await, 0, "flushed by age");
        // A new minute: the last record goes in at shutdown.
        clock.advance(std::time::Duration::from_secs(60));
        writer.append(&line(4)).await.expect("append");
        let _ = stop.send(());
    };
    let (flushed, ()) = futures::join!(flusher, driver);
    flushed.expect("the flusher's last flush");
    assert_eq!(writer.pending().await, 0, "flushed at shutdown");
    let names: Vec<String> = reader
        .blobs(..)
        .await
        .expect("blobs")
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert_eq!(
        names,
        [
            "svc/api/2026/11/22/1800/000001.log",
            "svc/api/2026/11/22/1800/000002.log",
            "svc/api/2026/11/22/1801/000001.log",
        ]
    );
    let read = reader.read(..).await.expect("read");
    assert!(read.iter().map(|l| l.n).eq(1..=4));
    let later = reader
        .read(at("2026-11-22T18:01:30Z")..)
        .await
        .expect("a range");
    assert!(later.iter().map(|l| l.n).eq([4]), "the minute of 18:01:30");
    // A line that is not a record is a typed error naming where it is.
    blobs
        .put_blob(
            &container,
            "svc/api/2026/11/22/1802/000001.log",
            b"{\"n\":5,\"text\":\"\"}\nnot json\n".to_vec(),
            &tablekit::blob::PutCondition::None,
        )
        .await
        .expect("put");
    match reader.read(..).await {
        Err(tablekit::Error::LogRecord { location, .. }) => {
            assert_eq!(location, "svc/api/2026/11/22/1802/000001.log, line 2");
        }
        other => panic!("expected a log record error, got {other:?}"),
    }
    blobs
        .delete_container(&container)
        .await
        .expect("delete container");
}

/// A sensor reading, for the key-order promises of ordered reads.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "RDG")]
pub struct Reading {
    /// The sensor: the partition.
    #[tablekit(partition_key)]
    pub sensor: String,
    /// The reading's number.
    #[tablekit(row_key)]
    pub seq: u32,
    /// What it read.
    pub value: i64,
}

/// The keys of `items`, in their order.
fn reading_keys(items: &[Reading]) -> Vec<(String, u32)> {
    items.iter().map(|r| (r.sensor.clone(), r.seq)).collect()
}

/// The values of `loaded`.
fn readings_of(loaded: Vec<tablekit::Loaded<Reading>>) -> Vec<Reading> {
    loaded
        .into_iter()
        .map(tablekit::Loaded::into_inner)
        .collect()
}

/// Pages of 7 over the whole table, each resumed from its token's text,
/// and pages of a range, follow each other in key order: together they are
/// `all` (the range, its part).
async fn pages_resume_in_key_order(readings: &Table<Reading>, all: &[Reading]) {
    let (keys, values) = (reading_keys, readings_of);
    // Pages of 7, each resumed from its token's text.
    let mut paged = Vec::new();
    let mut resume: Option<ContinuationToken> = None;
    let mut pages = 0;
    loop {
        let mut query = readings.query().page_size(7);
        if let Some(token) = resume.take() {
            query = query.resume(token);
        }
        let (items, next) = query.page().await.expect("page");
        assert!(items.len() <= 7, "a page holds at most its size");
        paged.extend(values(items));
        pages += 1;
        assert!(pages < 1000, "paging ends");
        match next {
            Some(token) => resume = Some(token.to_string().parse().expect("token parses")),
            None => break,
        }
    }
    assert_eq!(
        keys(&paged),
        keys(all),
        "pages follow each other in key order"
    );

    // Pages of a range, resumed.
    let mut got = Vec::new();
    let mut resume: Option<ContinuationToken> = None;
    loop {
        let mut query = readings.query().partition("s3").rows(5..).page_size(4);
        if let Some(token) = resume.take() {
            query = query.resume(token);
        }
        let (items, next) = query.page().await.expect("range page");
        got.extend(values(items).into_iter().map(|r| r.seq));
        match next {
            Some(token) => resume = Some(token),
            None => break,
        }
    }
    assert_eq!(got, (5..60).collect::<Vec<_>>());
}

/// Every read that promises key order keeps it, whatever order the store
/// returns rows in (Cosmos DB for Table promises none): streams over
/// partitions, limits, ranges, and pages resumed by their tokens' text.
/// On a store that does not sort, a page refuses a token the store made.
pub async fn ordered_reads_hold_on_every_store(backend: Arc<dyn TableBackend>) {
    let name = unique_table("ordered");
    let readings: Table<Reading> = Table::from_arc(Arc::clone(&backend), &name);
    readings.create_if_missing().await.expect("create table");
    // Written newest partition first and in a scrambled order, so neither
    // write order nor Timestamp order is key order.
    let mut all = Vec::new();
    for sensor in ["s3", "s1", "s2"] {
        let rows: Vec<Reading> = (0..60u32)
            .map(|i| (i * 37) % 60)
            .map(|seq| Reading {
                sensor: sensor.into(),
                seq,
                value: i64::from(seq) * 10,
            })
            .collect();
        let report = readings.bulk().insert(&rows).await;
        assert!(report.is_complete(), "{report:?}");
        all.extend(rows);
    }
    all.sort_by(|a, b| (&a.sensor, a.seq).cmp(&(&b.sensor, b.seq)));
    let (keys, values) = (reading_keys, readings_of);

    // The whole table, one partition, a range, and a limit.
    let streamed = values(readings.query().collect().await.expect("stream"));
    assert_eq!(keys(&streamed), keys(&all), "a stream is in key order");
    let s2 = values(
        readings
            .query()
            .partition("s2")
            .collect()
            .await
            .expect("s2"),
    );
    assert_eq!(keys(&s2), keys(&all[60..120]));
    let range = values(
        readings
            .query()
            .partition("s1")
            .rows(10..20)
            .collect()
            .await
            .expect("range"),
    );
    assert_eq!(keys(&range), keys(&all[10..20]));
    let first = values(readings.query().limit(5).collect().await.expect("limit"));
    assert_eq!(
        keys(&first),
        keys(&all[..5]),
        "a limit keeps the first keys"
    );
    let raw: Vec<Entity> = backend
        .query_stream(&name, Query::new())
        .try_collect()
        .await
        .expect("raw");
    assert!(
        raw.windows(2).all(|w| tablekit::__conformance::cmp_keys(
            (&w[0].partition_key, &w[0].row_key),
            (&w[1].partition_key, &w[1].row_key)
        ) == std::cmp::Ordering::Less),
        "the untyped stream is in key order too"
    );

    pages_resume_in_key_order(&readings, &all).await;

    if backend.query_order() == tablekit::QueryOrder::Unspecified {
        // A token the store made resumes in the store's order: refused.
        let store_page = backend
            .query_entities(&name, &Query::new().top(3))
            .await
            .expect("raw page");
        if let Some(token) = store_page.continuation {
            let refused = readings.query().resume(token).page().await;
            let error = refused.expect_err("a store's token is refused");
            assert!(
                matches!(
                    error.invalid_input(),
                    Some(tablekit::InvalidInput::ContinuationToken { .. })
                ),
                "{error:?}"
            );
        }
    }
    backend.delete_table(&name).await.expect("delete table");
}
