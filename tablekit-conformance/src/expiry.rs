//! Rows that expire, on every backend, on a clock moved by hand: an entity
//! is seen by every typed read up to the tick before its expiry time and
//! by none from that instant on (get, exists, queries, pages, counts,
//! projections, partitions of several kinds, update); its keys are free
//! for an insert then, which writes a new entity; untyped access shows the
//! row as stored, and `schema::expired` tells.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;

use tablekit::backend::{GetOptions, TableBackend};
use tablekit::clock::ManualClock;
use tablekit::table::Table;
use tablekit::{DateTime, EntityKinds, Error, TableEntity, UnknownKind, schema};

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
