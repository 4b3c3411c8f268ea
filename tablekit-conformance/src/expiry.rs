//! Rows that expire, on every backend, on a clock moved by hand: an entity
//! is seen by every typed read up to the tick before its expiry time and
//! by none from that instant on (get, exists, queries, pages, counts,
//! projections, partitions of several kinds, update); its keys are free
//! for an insert then, which writes a new entity; untyped access shows the
//! row as stored, and `schema::expired` tells.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;

use tablekit::backend::{GetOptions, Query, TableBackend};
use tablekit::clock::ManualClock;
use tablekit::table::Table;
use tablekit::{DateTime, EntityKinds, Error, TableBackendExt, TableEntity, UnknownKind, schema};

use super::fresh_table;

/// A sign-in session, which expires.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Sessions", kind = "SES")]
struct Session {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    token: String,
    #[tablekit(expires)]
    expires_at: Option<DateTime>,
}

/// The session's token alone: a projection.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Session)]
struct SessionToken {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    token: String,
}

/// A note beside the sessions, which never expires.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Sessions", kind = "NOTE")]
struct Note {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    text: String,
}

#[derive(EntityKinds, Debug, Clone, PartialEq)]
enum UserRow {
    Session(Session),
    Note(Note),
}

fn session(id: u32, expires_at: Option<DateTime>) -> Session {
    Session {
        user: "ada".into(),
        id,
        token: format!("token-{id}"),
        expires_at,
    }
}

/// The ids of the sessions a typed query of `t` reads.
async fn listed(t: &Table<Session>) -> Vec<u32> {
    let all = t.query().partition("ada").collect().await.expect("a query");
    all.iter().map(|s| s.id).collect()
}

/// Every typed read passes an entity by from its expiry time on, and not
/// a tick before; its keys are then free for a new entity.
pub async fn expired_rows_are_passed_by_every_read(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "expiry").await;
    // Whole seconds: every store compares them exactly.
    let start =
        DateTime::from_unix_nanos(DateTime::now().unix_nanos() / 1_000_000_000 * 1_000_000_000)
            .expect("a time");
    let clock = ManualClock::at(start);
    let t: Table<Session> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    let at = |minutes: u64| start.saturating_add(Duration::from_secs(minutes * 60));
    t.insert(&session(1, Some(at(10)))).await.expect("insert");
    t.insert(&session(2, Some(at(20)))).await.expect("insert");
    t.insert(&session(3, None)).await.expect("insert");
    t.of::<Note>()
        .insert(&Note {
            user: "ada".into(),
            id: 1,
            text: "kept".into(),
        })
        .await
        .expect("insert a note");
    assert_eq!(listed(&t).await, [1, 2, 3]);

    // The tick before its expiry time, the first session is there.
    clock.set(DateTime::from_ticks(at(10).ticks() - 1).expect("a time"));
    assert!(t.get("ada", 1u32).await.expect("get").is_some());
    assert!(t.exists("ada", 1u32).await.expect("exists"));
    assert_eq!(listed(&t).await, [1, 2, 3]);

    // From that instant on, no typed read sees it.
    clock.set(at(10));
    every_read_passes_by(&t, &name, at(10)).await;

    // Its keys are free: an insert writes a new entity in its place.
    let fresh = session(1, Some(at(60)));
    t.insert(&fresh)
        .await
        .expect("an insert over an expired entity");
    assert_eq!(
        *t.get("ada", 1u32).await.expect("get").expect("stored"),
        fresh
    );
    let taken = t.insert(&session(2, None)).await;
    assert!(
        matches!(taken, Err(Error::EntityAlreadyExists { .. })),
        "{taken:?}"
    );

    // Long after: what has no expiry time is there still.
    clock.set(at(24 * 60));
    assert_eq!(listed(&t).await, [3]);

    // A transaction's insert and the bulk writer's take expired keys too;
    // a live entity's they do not.
    let mut tx = t.transaction();
    tx.insert(&session(1, None)).expect("insert");
    tx.submit()
        .await
        .expect("a transaction over an expired entity");
    let report = t.bulk().insert(&[session(2, None), session(3, None)]).await;
    assert_eq!(report.written, 1, "{report:?}");
    assert_eq!(report.failures.len(), 1, "{report:?}");
    assert_eq!(report.failures[0].index, 1, "the live one is refused");
    assert_eq!(listed(&t).await, [1, 2, 3]);
    let mut tx = t.transaction();
    tx.insert(&session(3, None)).expect("insert");
    assert!(tx.submit().await.is_err(), "a live entity holds its keys");
    // A put after a commit would write it without its expiry index row.
    let mut tx = t.transaction();
    let refused = tx.then_put_value(&t, &session(4, None)).map(drop);
    assert!(
        matches!(refused, Err(Error::NotSupported { .. })),
        "{refused:?}"
    );
    backend.delete_table(&name).await.expect("drop");
}

/// Each typed read at the first session's expiry time, which the second
/// has not reached: the first is passed by, the second seen.
async fn every_read_passes_by(t: &Table<Session>, name: &str, now: DateTime) {
    assert!(t.get("ada", 1u32).await.expect("get").is_none());
    assert!(!t.exists("ada", 1u32).await.expect("exists"));
    assert!(t.exists("ada", 2u32).await.expect("exists"));
    assert_eq!(listed(t).await, [2, 3]);
    let counted = t.query().partition("ada").count().await.expect("a count");
    assert_eq!(counted, 2);
    let (page, _) = t
        .query()
        .partition("ada")
        .page_size(1)
        .page()
        .await
        .expect("a page");
    assert_eq!(page.iter().map(|s| s.id).collect::<Vec<_>>(), [2]);
    let tokens = t
        .query()
        .partition("ada")
        .project::<SessionToken>()
        .collect()
        .await
        .expect("a projection");
    assert_eq!(tokens.iter().map(|s| s.id).collect::<Vec<_>>(), [2, 3]);
    let rows: Vec<_> = t
        .of::<UserRow>()
        .read_partition("ada", UnknownKind::Fail)
        .try_collect()
        .await
        .expect("the partition");
    let kinds: Vec<_> = rows
        .iter()
        .map(|row| match &**row {
            UserRow::Session(s) => format!("session {}", s.id),
            UserRow::Note(n) => format!("note {}", n.id),
        })
        .collect();
    assert_eq!(kinds, ["note 1", "session 2", "session 3"]);
    let refused = t
        .update("ada", 1u32, |s: &mut Session| s.token.push('!'))
        .await;
    assert!(
        matches!(refused, Err(Error::EntityNotFound { .. })),
        "{refused:?}"
    );

    // Untyped access shows the row as stored; `schema::expired` tells.
    let rk = schema::row_key_of(&session(1, None)).expect("a key");
    let raw = t
        .backend()
        .get_entity(name, "ada", &rk, &GetOptions::default())
        .await
        .expect("the row as stored");
    assert!(schema::expired::<Session, _>(&raw.properties, now));
}

/// A clock at a whole second, and the time `minutes` after it.
pub(crate) fn whole_clock() -> (ManualClock, impl Fn(u64) -> DateTime) {
    let start =
        DateTime::from_unix_nanos(DateTime::now().unix_nanos() / 1_000_000_000 * 1_000_000_000)
            .expect("a time");
    let at = move |minutes: u64| start.saturating_add(Duration::from_secs(minutes * 60));
    (ManualClock::at(start), at)
}

/// A table `name` of `backend` on `clock`, whose every request yields once
/// (so that a future dropped after each poll stops at each request).
pub(crate) fn yielding<T>(
    backend: &Arc<dyn TableBackend>,
    name: &str,
    clock: &ManualClock,
) -> Table<T> {
    let layer = tablekit::layer::FaultInjection::new(Arc::clone(backend));
    layer.handle().set_yields(true);
    Table::from_arc(Arc::new(layer), name).with_clock(Arc::new(clock.clone()))
}

/// The rows of the expiry index, and the sessions, as stored.
async fn stored(backend: &dyn TableBackend, name: &str) -> (usize, Vec<u32>) {
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    let index = rows
        .iter()
        .filter(|r| r.partition_key.starts_with(schema::EXPIRY_PARTITIONS))
        .count();
    let mut sessions: Vec<u32> = rows
        .iter()
        .filter(|r| r.row_key.starts_with("SES_"))
        .filter_map(|r| r.row_key.trim_start_matches("SES_").parse().ok())
        .collect();
    sessions.sort_unstable();
    (index, sessions)
}

/// The sweep deletes what is due and nothing else: every write put an
/// index row first; an entity written again with a later time, or in
/// place of an expired one, stays; a limit leaves the rest for the next
/// sweep; the upkeep sweeps too; no index row outlives its entity.
pub async fn expired_rows_are_swept_by_their_index(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "sweep").await;
    let (clock, at) = whole_clock();
    let t: Table<Session> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    // Every third never expires; the others over three hours.
    let expiry = |id: u32| (!id.is_multiple_of(3)).then(|| at(u64::from(id) * 9));
    for id in 1..=20 {
        t.insert(&session(id, expiry(id))).await.expect("insert");
    }
    let (index, sessions) = stored(&*backend, &name).await;
    assert_eq!(
        (index, sessions.len()),
        (14, 20),
        "an index row per expiring entity"
    );

    // Session 1 is given a later time; 2 is replaced, once expired, by a
    // new one (its transaction and bulk paths index too).
    let mut one = t.get("ada", 1u32).await.expect("get").expect("stored");
    one.expires_at = Some(at(1000));
    t.replace(&mut one).await.expect("replace");
    clock.set(at(18));
    assert!(t.get("ada", 2u32).await.expect("get").is_none());
    let mut tx = t.transaction();
    tx.upsert(&session(2, Some(at(1001)))).expect("upsert");
    tx.submit().await.expect("a transaction");
    assert!(
        t.bulk()
            .upsert(&[session(21, Some(at(1002)))])
            .await
            .is_complete()
    );

    // Nothing is due before its time; at 60 min, ids 4, 5, 7 and 8 (1 and
    // 2 moved on), two at a time.
    clock.set(DateTime::from_ticks(at(36).ticks() - 1).expect("a time"));
    let swept = t.sweep_expired(100).await.expect("a sweep");
    assert_eq!(swept.deleted, 0, "{swept:?}");
    clock.set(at(72));
    let first = t.sweep_expired(2).await.expect("a sweep");
    assert!(first.more, "{first:?}");
    let rest = t.sweep_expired(100).await.expect("a sweep");
    assert_eq!(first.deleted + rest.deleted, 4, "{first:?} {rest:?}");
    assert!(!rest.more);
    let (_, sessions) = stored(&*backend, &name).await;
    assert!(
        !sessions.iter().any(|id| [4, 5, 7, 8].contains(id)),
        "{sessions:?}"
    );
    assert!(
        sessions.contains(&1) && sessions.contains(&2),
        "{sessions:?}"
    );

    // A session moved to another partition keeps an index row at its keys.
    let ten = t.get("ada", 10u32).await.expect("get").expect("stored");
    let mut moved = (*ten).clone();
    moved.user = "bob".into();
    t.move_to(&ten, &moved).await.expect("a move");
    assert!(t.get("bob", 10u32).await.expect("get").is_some());

    // The upkeep sweeps the rest when due.
    clock.set(at(2000));
    let upkeep = tablekit::upkeep::Upkeep::new()
        .clock(Arc::new(clock.clone()))
        .watch(&t);
    let round = upkeep.run_round_now().await;
    assert!(round.failures.is_empty(), "{round:?}");
    let (index, sessions) = stored(&*backend, &name).await;
    assert_eq!(sessions, [3, 6, 9, 12, 15, 18], "what never expires stays");
    assert_eq!(index, 0, "no index row outlives its entity");
    assert_eq!(round.expired_deleted, 20 + 1 - 6 - 4, "{round:?}");
    backend.delete_table(&name).await.expect("drop");
}

/// A store with a time to live of its own (Cosmos DB for Table's, set on
/// its container) deletes rows behind the library's back, by its own clock
/// and in any order: an entity, its expiry index row, or both. The sweep
/// does not fight it: it does not fail, writes nothing back, deletes no
/// live entity, and drops each index row whose entity the store took; an
/// entity whose index row the store took first is still hidden from every
/// read, and its keys still take a new entity.
pub async fn a_stores_own_time_to_live_does_not_fight_the_sweep(backend: Arc<dyn TableBackend>) {
    use tablekit::IfMatch;
    let name = fresh_table(&*backend, "storettl").await;
    let (clock, at) = whole_clock();
    let t: Table<Session> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    // 1 to 9 expire at 10 minutes, 10 to 12 at 100.
    for id in 1..=12 {
        let expires = if id <= 9 { at(10) } else { at(100) };
        t.insert(&session(id, Some(expires))).await.expect("insert");
    }
    // Each session's row and its index row, by id.
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    let id_of = |rk: &str| -> u32 { rk.trim_start_matches("SES_").parse().expect("an id") };
    let entity = |id: u32| {
        rows.iter()
            .find(|r| r.row_key.starts_with("SES_") && id_of(&r.row_key) == id)
            .expect("the entity")
    };
    let index = |id: u32| {
        rows.iter()
            .find(|r| {
                matches!(r.get(schema::EXPIRY_RK), Some(tablekit::Value::String(rk))
                    if *rk == entity(id).row_key)
            })
            .expect("its index row")
    };
    // The store's own deletes: 1-3 lose their entity, 4-6 their index row,
    // 7 and 8 both, 9 neither; and 10 (live by the type's clock) its index
    // row, as a store whose clock runs ahead would.
    let mut taken = Vec::new();
    for id in [1, 2, 3, 7, 8] {
        taken.push(entity(id));
    }
    for id in [4, 5, 6, 7, 8, 10] {
        taken.push(index(id));
    }
    for row in taken {
        let deleted = backend.delete_entity(&name, &row.partition_key, &row.row_key, &IfMatch::Any);
        deleted.await.expect("the store's own delete");
    }

    clock.set(at(20));
    let swept = t
        .sweep_expired(100)
        .await
        .expect("a sweep beside the store's");
    assert_eq!(
        (swept.deleted, swept.passed, swept.more),
        (1, 3, false),
        "9 deleted; the index rows of 1-3 dropped: {swept:?}"
    );
    let (index_rows, sessions) = stored(&*backend, &name).await;
    assert_eq!(
        sessions,
        [4, 5, 6, 10, 11, 12],
        "nothing written back, no live one gone"
    );
    assert_eq!(index_rows, 2, "the index rows of 11 and 12 alone are left");
    for id in [4, 5, 6] {
        assert!(
            t.get("ada", id).await.expect("get").is_none(),
            "{id} stays hidden"
        );
    }
    assert!(
        t.get("ada", 10u32).await.expect("get").is_some(),
        "10 is live"
    );
    let again = t.sweep_expired(100).await.expect("a second sweep");
    assert_eq!((again.deleted, again.passed), (0, 0), "{again:?}");

    // An expired entity the sweep cannot see still gives its keys up.
    t.insert(&session(4, Some(at(200)))).await.expect("a new 4");
    let (index_rows, sessions) = stored(&*backend, &name).await;
    assert_eq!(sessions, [4, 5, 6, 10, 11, 12]);
    assert_eq!(index_rows, 3, "the new 4 has its index row");
    clock.set(at(150));
    assert_eq!(listed(&t).await, [4], "only the new 4 is live");
    backend.delete_table(&name).await.expect("drop");
}

/// A sweep dropped after each of its polls leaves every expiring entity
/// with its index row, deletes no live one, and the next sweep finishes.
pub async fn sweeps_are_safe_to_drop(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "sweepdrop").await;
    let (clock, at) = whole_clock();
    let t: Table<Session> = yielding(&backend, &name, &clock);
    let mut dropped = 0;
    for k in 1.. {
        assert!(k < 2_000, "the sweep never finished");
        for id in 1..=4 {
            t.upsert(&session(id, Some(at(u64::from(id)))))
                .await
                .expect("upsert");
        }
        t.upsert(&session(9, Some(at(900)))).await.expect("upsert");
        clock.set(at(10));
        let run = super::cancel::drop_after_polls(k, t.sweep_expired(100)).await;
        let (index, sessions) = stored(&**t.backend(), &name).await;
        // Each entity still stored has its index row (and the live one).
        assert!(
            index >= sessions.len(),
            "k={k}: {index} rows for {sessions:?}"
        );
        assert!(sessions.contains(&9), "k={k}: a live entity was deleted");
        match run {
            Some(done) => {
                assert_eq!(done.expect("a sweep").deleted, 4);
                break;
            }
            None => dropped += 1,
        }
        // The next sweep finishes what the dropped one left.
        t.sweep_expired(100).await.expect("a sweep");
        let (index, sessions) = stored(&**t.backend(), &name).await;
        assert_eq!((index, sessions), (1, vec![9]), "k={k}");
    }
    assert!(dropped >= 4, "dropped {dropped} times");
    backend.delete_table(&name).await.expect("drop");
}

/// A shopping cart that expires 30 minutes after its last write.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Carts", kind = "CART", time_to_live = "30m")]
struct Cart {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    items: u32,
}

/// The same carts, read by a program whose carts live two hours.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Carts", kind = "CART", time_to_live = "2h")]
struct LongCart {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    items: u32,
}

fn cart(id: u32, items: u32) -> Cart {
    Cart {
        user: "ada".into(),
        id,
        items,
    }
}

/// The ids of the carts a typed query of `t` reads.
async fn carts<T: TableEntity<PartitionKey = String>>(t: &Table<T>, id: fn(&T) -> u32) -> Vec<u32> {
    let all = t.query().partition("ada").collect().await.expect("a query");
    all.iter().map(|c| id(c)).collect()
}

/// A time to live counts from each write (insert, update, upsert, bulk
/// and transaction writes), to the tick; a longer one read by another
/// program applies at once, and its sweep moves the index rows on rather
/// than deleting early.
pub async fn time_to_live_counts_from_each_write(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "ttl").await;
    let (clock, at) = whole_clock();
    let t: Table<Cart> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    t.insert(&cart(1, 1)).await.expect("insert");
    let mut tx = t.transaction();
    tx.insert(&cart(2, 1)).expect("insert");
    tx.submit().await.expect("a transaction");
    t.insert(&cart(3, 1)).await.expect("insert");
    clock.set(at(5));
    assert!(t.bulk().upsert(&[cart(4, 1)]).await.is_complete());
    clock.set(at(20));
    t.update("ada", 3u32, |c: &mut Cart| c.items += 1)
        .await
        .expect("update");

    let tick_before = |minutes| DateTime::from_ticks(at(minutes).ticks() - 1).expect("a time");
    clock.set(tick_before(30));
    assert_eq!(carts(&t, |c| c.id).await, [1, 2, 3, 4]);
    clock.set(at(30));
    assert_eq!(carts(&t, |c| c.id).await, [3, 4]);
    assert!(t.get("ada", 1u32).await.expect("get").is_none());
    clock.set(at(35));
    assert_eq!(carts(&t, |c| c.id).await, [3]);
    clock.set(tick_before(50));
    assert!(t.get("ada", 3u32).await.expect("get").is_some());
    clock.set(at(50));
    assert!(t.get("ada", 3u32).await.expect("get").is_none());

    // Read with a two-hour time to live, every cart is there still; its
    // sweep deletes none, and indexes each at its new time (five rows: the
    // third cart has one for its insert and one for its update).
    let long: Table<LongCart> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    assert_eq!(carts(&long, |c| c.id).await, [1, 2, 3, 4]);
    let swept = long.sweep_expired(100).await.expect("a sweep");
    assert_eq!((swept.deleted, swept.passed), (0, 5), "{swept:?}");
    clock.set(DateTime::from_ticks(at(125).ticks() - 1).expect("a time"));
    assert_eq!(carts(&long, |c| c.id).await, [3, 4]);
    clock.set(at(125));
    assert_eq!(carts(&long, |c| c.id).await, [3]);
    let swept = long.sweep_expired(100).await.expect("a sweep");
    assert_eq!(swept.deleted, 3, "{swept:?}");
    // The thirty-minute program sweeps the last, and no index row is left.
    clock.set(at(500));
    let swept = t.sweep_expired(100).await.expect("a sweep");
    assert_eq!(swept.deleted, 1, "{swept:?}");
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    assert!(rows.is_empty(), "{rows:?}");
    backend.delete_table(&name).await.expect("drop");
}

/// A bag of version 1: it never expires.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Carts", kind = "BAG")]
struct BagV1 {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    items: u32,
}

/// Version 2 gives bags a time to live of 30 minutes.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Carts",
    kind = "BAG",
    version = 2,
    min_version = 1,
    time_to_live = "30m"
)]
struct BagV2 {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    items: u32,
}

/// Version 3 shortens it to 10 minutes.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Carts",
    kind = "BAG",
    version = 3,
    min_version = 1,
    time_to_live = "10m"
)]
struct BagV3 {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    items: u32,
}

/// Version 4 removes it.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Carts", kind = "BAG", version = 4, min_version = 1)]
struct BagV4 {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    items: u32,
}

/// A time to live added to a type, then shortened, reaches the rows
/// already stored through the migration: it stamps rows that had no
/// write time with the migration's, keeps the others', and indexes each
/// at its new time, so the sweep deletes them then. Removed, it is gone
/// from every read at once, and the migration takes the write times and
/// the index rows away.
pub async fn migrations_bring_a_changed_time_to_live_to_stored_rows(
    backend: Arc<dyn TableBackend>,
) {
    let name = fresh_table(&*backend, "ttlmigrate").await;
    let (clock, at) = whole_clock();
    let on_clock = |t: Table<()>| t.with_clock(Arc::new(clock.clone()));
    let base = on_clock(Table::from_arc(Arc::clone(&backend), &name));
    let v1: Table<BagV1> = base.of();
    for id in [1, 2] {
        v1.insert(&BagV1 {
            user: "ada".into(),
            id,
            items: id,
        })
        .await
        .expect("insert");
    }
    // Added: rows without a write time never expire until migrated.
    clock.set(at(10));
    let v2: Table<BagV2> = base.of();
    assert!(v2.get("ada", 1u32).await.expect("get").is_some());
    let report = v2.migrate().run().await.expect("a migration");
    assert_eq!((report.upgraded, report.failed), (2, 0), "{report:?}");
    // Shortened: seen at once by every read, and deleted at the new time
    // once migrated (the migration keeps each row's write time).
    clock.set(at(15));
    assert!(v2.get("ada", 1u32).await.expect("get").is_some());
    let v3: Table<BagV3> = base.of();
    assert!(v3.get("ada", 1u32).await.expect("get").is_some());
    clock.set(DateTime::from_ticks(at(20).ticks() - 1).expect("a time"));
    assert!(v3.get("ada", 1u32).await.expect("get").is_some());
    let report = v3.migrate().run().await.expect("a migration");
    assert_eq!((report.upgraded, report.failed), (2, 0), "{report:?}");
    clock.set(at(20));
    assert!(v3.get("ada", 1u32).await.expect("get").is_none());
    let swept = v3.sweep_expired(100).await.expect("a sweep");
    assert_eq!(swept.deleted, 2, "{swept:?}");
    // The rows the first migration indexed at 40 minutes go then.
    clock.set(at(40));
    let swept = v3.sweep_expired(100).await.expect("a sweep");
    assert_eq!(
        (swept.deleted, swept.passed, swept.more),
        (0, 2, false),
        "{swept:?}"
    );
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    assert!(rows.is_empty(), "{rows:?}");
    time_to_live_removed(&backend, &name, &base, &clock, &at).await;
    backend.delete_table(&name).await.expect("drop");
}

/// The last step of [`migrations_bring_a_changed_time_to_live_to_stored_rows`]:
/// a bag written with a time to live outlives it once version 4 removes
/// it, and its migration leaves the row without a write time and no index
/// row.
async fn time_to_live_removed(
    backend: &Arc<dyn TableBackend>,
    name: &str,
    base: &Table<()>,
    clock: &ManualClock,
    at: &impl Fn(u64) -> DateTime,
) {
    let v3: Table<BagV3> = base.of();
    let bag = BagV3 {
        user: "ada".into(),
        id: 5,
        items: 5,
    };
    v3.insert(&bag).await.expect("insert");
    clock.set(at(60));
    assert!(v3.get("ada", 5u32).await.expect("get").is_none());
    let v4: Table<BagV4> = base.of();
    assert!(v4.get("ada", 5u32).await.expect("get").is_some());
    let report = v4.migrate().run().await.expect("a migration");
    assert_eq!((report.upgraded, report.failed), (1, 0), "{report:?}");
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    assert_eq!(rows.len(), 1, "no index row is left: {rows:?}");
    assert!(
        rows[0].get(schema::LAST_WRITE_PROPERTY).is_none(),
        "{rows:?}"
    );
    assert!(v4.get("ada", 5u32).await.expect("get").is_some());
}
