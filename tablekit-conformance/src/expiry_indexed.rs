//! Rows that expire in a kind with indexes and a change feed, on every
//! backend, on a clock moved by hand: index lookups (unique, plain, copied,
//! listed) pass an expired entity by from its instant on; an expired
//! holder frees its unique value and its keys for a single write, an
//! update and a transaction; the sweep deletes each entity with its index
//! rows (and an entity with offloaded values with its blobs); and the
//! change feed records each of those deletes as an expiry.

use std::sync::Arc;

use futures::TryStreamExt;

use tablekit::backend::{Query, TableBackend};
use tablekit::blob::{BlobStore, ListBlobsOptions};
use tablekit::changes::{Change, ChangeOp};
use tablekit::table::Table;
use tablekit::{DateTime, Error, TableBackendExt, TableEntity};

use super::expiry::{whole_clock, yielding};
use super::fresh_table;

/// A sign-in token: unique by value, found by device (its index rows copy
/// the value), listed by owner, expiring, with a change feed.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Tokens", kind = "TOK", changes)]
#[tablekit(index(name = "value", tag = "value"))]
#[tablekit(index(name = "device", copy(value)))]
#[tablekit(index(name = "owner", list))]
struct Token {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "value")]
    value: String,
    #[tablekit(index = "device")]
    device: String,
    #[tablekit(index = "owner")]
    owner: String,
    #[tablekit(expires)]
    expires_at: Option<DateTime>,
}

fn token(id: u32, value: &str, expires_at: Option<DateTime>) -> Token {
    Token {
        user: "ada".into(),
        id,
        value: value.into(),
        device: "phone".into(),
        owner: "it".into(),
        expires_at,
    }
}

/// The ids each lookup finds: by value (each of `values`), by device (a
/// stream and a page), and by owner.
async fn found(t: &Table<Token>, values: &[&str]) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
    let indexes = Token::indexes();
    let mut by_value = Vec::new();
    for value in values {
        let unique = t.index(indexes.value);
        let got = unique.get("ada", *value).await.expect("a lookup");
        let loaded = unique.get_loaded("ada", *value).await.expect("a lookup");
        assert_eq!(
            got.as_ref().map(|t| t.id),
            loaded.as_ref().map(|t| t.id),
            "get and get_loaded agree on {value}"
        );
        by_value.extend(got.map(|t| t.id));
    }
    let ids = |all: Vec<Token>| all.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let devices = t.index(indexes.device);
    let by_device: Vec<Token> = devices
        .find("ada", "phone")
        .try_collect()
        .await
        .expect("a lookup");
    let page = devices
        .find_page("ada", "phone", 100, None)
        .await
        .expect("a page");
    let owned: Vec<Token> = t
        .index(indexes.owner)
        .find("ada", "it")
        .try_collect()
        .await
        .expect("a lookup");
    (by_value, ids(by_device), ids(page.items), ids(owned))
}

/// The changes recorded in partition `ada`, as (op, id, expired).
async fn changes(t: &Table<Token>) -> Vec<(ChangeOp, String, bool)> {
    let all: Vec<Change<Token>> = t.changes().read("ada", 0, 1000).await.expect("changes");
    all.into_iter()
        .map(|c| (c.op, c.row_key, c.expired))
        .collect()
}

/// The stored RowKey of token `id`.
fn key(id: u32) -> String {
    let (_, rk) = tablekit::schema::encode_keys::<Token>(&"ada", &id).expect("keys");
    rk
}

/// Index lookups pass an expired entity by at its instant; its unique value
/// and its keys are free for an insert, an update and a transaction, which
/// delete it first (recorded as an expiry); a live holder still refuses.
pub async fn expired_holders_free_their_index_values(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "expidx").await;
    let (clock, at) = whole_clock();
    let t: Table<Token> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    t.insert(&token(1, "v1", Some(at(10))))
        .await
        .expect("insert");
    t.insert(&token(2, "v2", Some(at(20))))
        .await
        .expect("insert");
    t.insert(&token(3, "v3", None)).await.expect("insert");
    let values = ["v1", "v2", "v3"];
    let all = (vec![1, 2, 3], vec![1, 2, 3], vec![1, 2, 3], vec![1, 2, 3]);
    assert_eq!(found(&t, &values).await, all);

    // The tick before, every lookup finds it; at the instant, none does.
    clock.set(DateTime::from_ticks(at(10).ticks() - 1).expect("a time"));
    assert_eq!(found(&t, &values).await, all);
    clock.set(at(10));
    // What the upkeep has to do: two entities expire, one is due.
    let work = tablekit::upkeep::pending_work(&*backend, &name, at(10))
        .await
        .expect("the pending work");
    assert_eq!(
        (work.outbox_records, work.expiring, work.expired),
        (0, 2, 1),
        "{work:?}"
    );
    let live = (vec![2, 3], vec![2, 3], vec![2, 3], vec![2, 3]);
    assert_eq!(found(&t, &values).await, live);
    assert!(
        t.verify_indexes("ada").await.expect("an audit").is_clean(),
        "the expired entity keeps its index rows until it is deleted"
    );

    // Its unique value is free: an insert takes it, the expired holder
    // deleted first, as an expiry.
    t.insert(&token(4, "v1", None))
        .await
        .expect("an insert of a value an expired entity held");
    assert!(
        backend
            .try_get_entity(&name, "ada", &key(1))
            .await
            .expect("a read")
            .is_none()
    );
    // A live holder still refuses.
    let taken = t.insert(&token(5, "v3", None)).await;
    assert!(
        matches!(taken, Err(Error::UniqueViolation { .. })),
        "{taken:?}"
    );

    // At 20, the second expires: an update takes its value.
    clock.set(at(20));
    t.update("ada", 3u32, |tok: &mut Token| tok.value = "v2".into())
        .await
        .expect("an update to a value an expired entity held");
    // Its keys are free too, in a transaction.
    t.insert(&token(6, "v6", Some(at(30))))
        .await
        .expect("insert");
    clock.set(at(30));
    let mut tx = t.transaction();
    tx.insert(&token(6, "v7", None)).expect("insert");
    // (Another owner: two writes of one transaction cannot both change
    // one index entity.)
    let seven = Token {
        owner: "ops".into(),
        ..token(7, "v6", None)
    };
    tx.insert(&seven).expect("insert");
    tx.submit()
        .await
        .expect("a transaction over an expired entity's keys and value");
    let ids: Vec<u32> = t
        .query()
        .partition("ada")
        .collect()
        .await
        .expect("a query")
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, [3, 4, 6, 7]);
    assert_eq!(
        found(&t, &["v1", "v2", "v3", "v6", "v7"]).await.0,
        [4, 3, 7, 6]
    );
    assert!(t.verify_indexes("ada").await.expect("an audit").is_clean());

    expiries_are_recorded(&t).await;
    backend.delete_table(&name).await.expect("drop");
}

/// The feed of [`expired_holders_free_their_index_values`]: each expired
/// entity's delete, marked so, before the write that took its place.
async fn expiries_are_recorded(t: &Table<Token>) {
    let feed = changes(t).await;
    let expired: Vec<&(ChangeOp, String, bool)> = feed.iter().filter(|c| c.2).collect();
    assert_eq!(
        expired,
        [
            &(ChangeOp::Delete, key(1), true),
            &(ChangeOp::Delete, key(2), true),
            &(ChangeOp::Delete, key(6), true),
        ],
        "{feed:?}"
    );
    let six: Vec<&(ChangeOp, String, bool)> = feed.iter().filter(|c| c.1 == key(6)).collect();
    assert_eq!(
        six,
        [
            &(ChangeOp::Insert, key(6), false),
            &(ChangeOp::Delete, key(6), true),
            &(ChangeOp::Insert, key(6), false),
        ]
    );
}

/// The rows of `name` by what they are: (tokens, their index rows, expiry
/// index rows), the change feed's rows left out.
async fn rows_by_role(backend: &dyn TableBackend, name: &str) -> (Vec<u32>, usize, usize) {
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    let mut tokens = Vec::new();
    let (mut index, mut expiry) = (0, 0);
    for row in &rows {
        if row
            .partition_key
            .starts_with(tablekit::schema::EXPIRY_PARTITIONS)
        {
            expiry += 1;
        } else if row.row_key.starts_with("~tk|") || row.partition_key.starts_with("~tk|") {
            // The change feed's rows and directory.
        } else if let Some(id) = row.row_key.strip_prefix("TOK_") {
            tokens.push(id.parse().expect("an id"));
        } else {
            index += 1;
        }
    }
    tokens.sort_unstable();
    (tokens, index, expiry)
}

/// The sweep deletes each due entity with its index rows (three per token:
/// value, device, and its place in the owner's list), records each delete
/// as an expiry, and leaves the live ones and their rows; dropped after
/// each poll, it leaves every index in step, and the next sweep finishes.
pub async fn sweeps_take_index_rows_and_record_expiries(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "expsweep").await;
    let (clock, at) = whole_clock();
    let t: Table<Token> = yielding(&backend, &name, &clock);
    let mut dropped = 0;
    let mut expiries = 0;
    for k in 1.. {
        assert!(k < 5_000, "the sweep never finished");
        for id in 1..=3 {
            let value = format!("v{id}");
            t.upsert(&token(id, &value, Some(at(u64::from(id)))))
                .await
                .expect("upsert");
        }
        t.upsert(&token(9, "v9", None)).await.expect("upsert");
        clock.set(at(10));
        let run = super::cancel::drop_after_polls(k, t.sweep_expired(100)).await;
        let audit = t.verify_indexes("ada").await.expect("an audit");
        assert!(audit.is_clean(), "k={k}: {audit:?}");
        let (tokens, _, expiry) = rows_by_role(&**t.backend(), &name).await;
        assert!(tokens.contains(&9), "k={k}: a live entity was deleted");
        assert!(
            expiry >= tokens.len() - 1,
            "k={k}: {expiry} expiry rows for {tokens:?}"
        );
        let finished = match run {
            Some(done) => {
                assert_eq!(done.expect("a sweep").deleted, 3, "k={k}");
                true
            }
            None => {
                dropped += 1;
                t.sweep_expired(100).await.expect("a sweep");
                false
            }
        };
        // Exactly the live token, its three index rows (the owner's list
        // is one index entity), and no expiry row.
        let (tokens, index, expiry) = rows_by_role(&**t.backend(), &name).await;
        assert_eq!((tokens, index, expiry), (vec![9], 3, 0), "k={k}");
        // Each delete is in the feed once, as an expiry.
        let feed = changes(&t).await;
        let deletes: Vec<_> = feed.iter().filter(|c| c.0 == ChangeOp::Delete).collect();
        assert!(deletes.iter().all(|c| c.2), "k={k}: {deletes:?}");
        expiries += 3;
        assert_eq!(deletes.len(), expiries, "k={k}: {feed:?}");
        if finished {
            break;
        }
    }
    assert!(dropped >= 4, "dropped {dropped} times");
    backend.delete_table(&name).await.expect("drop");
}

/// An insert that deletes an expired holder of its unique value first,
/// dropped after each of its polls (in a partition of its own each time):
/// the index rows stay in step, the value has at most one live holder,
/// and the insert made again (or the one that landed) ends with the new
/// entity holding it, the expired one deleted once, as an expiry.
pub async fn inserts_freeing_expired_holders_are_safe_to_drop(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "expfree").await;
    let (clock, at) = whole_clock();
    let t: Table<Token> = yielding(&backend, &name, &clock);
    let in_partition = |user: &str, id: u32, expires_at| Token {
        user: user.to_owned(),
        ..token(id, "v", expires_at)
    };
    let mut dropped = 0;
    for k in 1.. {
        assert!(k < 2_000, "the insert never finished");
        let pk = format!("k{k}");
        t.insert(&in_partition(&pk, 1, Some(at(k))))
            .await
            .expect("the holder");
        clock.set(at(k));
        let run =
            super::cancel::drop_after_polls(k as usize, t.insert(&in_partition(&pk, 2, None)))
                .await;
        let audit = t.verify_indexes(pk.as_str()).await.expect("an audit");
        assert!(audit.is_clean(), "k={k}: {audit:?}");
        let finished = run.is_some();
        match run {
            Some(done) => done.map(drop).expect("the insert"),
            None => {
                dropped += 1;
                match t.insert(&in_partition(&pk, 2, None)).await {
                    Ok(_) | Err(Error::EntityAlreadyExists { .. }) => {}
                    Err(e) => panic!("k={k}: the insert made again: {e}"),
                }
            }
        }
        let holder = t.index(Token::indexes().value).get(pk.as_str(), "v").await;
        assert_eq!(holder.expect("a lookup").map(|t| t.id), Some(2), "k={k}");
        assert!(
            t.verify_indexes(pk.as_str())
                .await
                .expect("an audit")
                .is_clean()
        );
        let feed: Vec<Change<Token>> = t.changes().read(&pk, 0, 100).await.expect("changes");
        let expiries = feed.iter().filter(|c| c.expired).count();
        assert_eq!(
            expiries, 1,
            "k={k}: the holder deleted once, as an expiry: {feed:?}"
        );
        assert_eq!(
            feed.last().map(|c| c.op),
            Some(ChangeOp::Insert),
            "k={k}: {feed:?}"
        );
        if finished {
            break;
        }
    }
    assert!(dropped >= 4, "dropped {dropped} times");
    backend.delete_table(&name).await.expect("drop");
}

/// A cached report, its body in the blob store, expiring.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Reports", kind = "REP", time_to_live = "1h")]
struct Report {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(blob)]
    body: Vec<u8>,
}

/// The blobs of `container`.
async fn blobs_in(blobs: &dyn BlobStore, container: &str) -> usize {
    let options = ListBlobsOptions::default();
    let list = blobs.list_blobs(container, &options).await;
    list.expect("a list").blobs.len()
}

/// An entity with offloaded values expires like any other: it is passed by
/// at its instant, an insert takes its keys, and the sweep deletes it with
/// its blobs.
pub async fn expired_entities_take_their_blobs(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn BlobStore>,
) {
    let name = fresh_table(&*backend, "expblob").await;
    let container = name.to_ascii_lowercase();
    blobs
        .create_container(&container)
        .await
        .expect("a container");
    let (clock, at) = whole_clock();
    let t: Table<Report> = Table::from_arc(Arc::clone(&backend), &name)
        .with_blob_store(Arc::clone(&blobs), &container)
        .with_clock(Arc::new(clock.clone()));
    let report = |id: u32, byte: u8| Report {
        user: "ada".into(),
        id,
        body: vec![byte; 1000],
    };
    t.insert(&report(1, 1)).await.expect("insert");
    clock.set(at(30));
    t.insert(&report(2, 2)).await.expect("insert");
    assert_eq!(blobs_in(&*blobs, &container).await, 2);

    clock.set(at(60));
    assert!(t.get("ada", 1u32).await.expect("get").is_none());
    let read = t.query().partition("ada").collect().await.expect("a query");
    let read: Vec<&Report> = read.iter().map(|r| &**r).collect();
    assert_eq!(read, [&report(2, 2)]);
    // An insert takes the expired entity's keys; its blob goes with it.
    t.insert(&report(1, 3))
        .await
        .expect("an insert over an expired entity");
    assert_eq!(
        *t.get("ada", 1u32).await.expect("get").expect("stored"),
        report(1, 3)
    );
    assert_eq!(blobs_in(&*blobs, &container).await, 2);

    // The sweep deletes the second, then the first, each with its blob.
    clock.set(at(90));
    assert_eq!(t.sweep_expired(100).await.expect("a sweep").deleted, 1);
    assert_eq!(blobs_in(&*blobs, &container).await, 1);
    clock.set(at(120));
    assert_eq!(t.sweep_expired(100).await.expect("a sweep").deleted, 1);
    assert_eq!(
        blobs_in(&*blobs, &container).await,
        0,
        "no blob outlives its entity"
    );
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    assert!(rows.is_empty(), "{rows:?}");
    backend.delete_table(&name).await.expect("drop");
}

/// A year of readings, too wide for one row, that expires with a unique
/// code.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Readings", kind = "YR", wide)]
#[tablekit(index(name = "code", tag = "code"))]
struct Readings {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    year: u16,
    #[tablekit(series)]
    daily: Vec<u32>,
    #[tablekit(unique = "code")]
    code: String,
    #[tablekit(expires)]
    until: Option<DateTime>,
}

/// The stored rows of the readings (their parts), index rows and expiry
/// index rows left out.
async fn parts(backend: &dyn TableBackend, name: &str) -> usize {
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    let parts = rows.iter().filter(|r| r.row_key.starts_with("YR_"));
    parts.count()
}

/// A wide entity expires whole: passed by at its instant by get, exists,
/// queries and counts; its keys and its unique code taken by an insert,
/// which deletes every part first; the sweep deletes every part.
pub async fn wide_entities_expire_whole(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "expwide").await;
    let (clock, at) = whole_clock();
    let t: Table<Readings> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    let readings = |year: u16, days: u32, until: u64| Readings {
        site: "s".into(),
        year,
        daily: (0..days).map(|d| d * 3 + u32::from(year)).collect(),
        code: format!("c{year}"),
        until: Some(at(until)),
    };
    t.insert(&readings(2024, 700, 10)).await.expect("insert");
    t.insert(&readings(2025, 10, 20)).await.expect("insert");
    let wide = parts(&*backend, &name).await;
    assert!(wide >= 4, "the first spans several rows: {wide}");

    clock.set(at(10));
    assert!(t.get("s", 2024u16).await.expect("get").is_none());
    assert!(!t.exists("s", 2024u16).await.expect("exists"));
    let years: Vec<u16> = (t.query().partition("s").collect().await.expect("a query"))
        .iter()
        .map(|r| r.year)
        .collect();
    assert_eq!(years, [2025]);
    assert_eq!(t.query().partition("s").count().await.expect("a count"), 1);
    let code = t.index(Readings::indexes().code);
    assert!(code.get("s", "c2024").await.expect("a lookup").is_none());

    // Its keys, then its code: each insert deletes every part first.
    t.insert(&readings(2024, 5, 100))
        .await
        .expect("an insert over an expired wide entity");
    assert_eq!(parts(&*backend, &name).await, 2, "one row each now");
    clock.set(at(20));
    let taker = Readings {
        code: "c2025".into(),
        ..readings(2026, 600, 30)
    };
    t.insert(&taker)
        .await
        .expect("an insert of an expired entity's code");
    assert!(t.get("s", 2025u16).await.expect("get").is_none());
    assert_eq!(
        code.get("s", "c2025")
            .await
            .expect("a lookup")
            .map(|r| r.year),
        Some(2026)
    );

    // The sweep deletes every part.
    clock.set(at(100));
    assert_eq!(t.sweep_expired(100).await.expect("a sweep").deleted, 2);
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    assert!(rows.is_empty(), "{rows:?}");
    assert!(t.verify_indexes("s").await.expect("an audit").is_clean());
    backend.delete_table(&name).await.expect("drop");
}
