//! A session store whose sessions expire 30 minutes after their last use:
//! `#[tablekit(time_to_live = "30m")]` on the type, and nothing else to
//! remember.
//!
//! - Every write stamps its time; from 30 minutes after it, no typed read
//!   sees the session (`get`, queries, counts), with no filter to add.
//! - Touching a session (any write) keeps it alive for 30 minutes more.
//! - The upkeep deletes what has expired, reading only the rows that are
//!   due (each write put its session in an index by hour of expiry first).
//!
//! The table's clock is moved by hand, so the story takes no 30 minutes.
//! Runs on the in-memory backend by default; with
//! `TABLEKIT_CONNECTION_STRING` set (`UseLocalStorage=./data`, or for
//! Azurite `UseDevelopmentStorage=true`), the same code runs there, in a
//! fresh table that it deletes at the end.

use std::sync::Arc;
use std::time::Duration;

use tablekit::clock::ManualClock;
use tablekit::upkeep::Upkeep;
use tablekit::{Table, TableBackendExt, TableEntity};

/// A signed-in session: gone 30 minutes after its last write.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Sessions", kind = "SES", time_to_live = "30m")]
struct Session {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: String,
    device: String,
    requests: u32,
}

fn session(user: &str, id: &str, device: &str) -> Session {
    Session {
        user: user.into(),
        id: id.into(),
        device: device.into(),
        requests: 0,
    }
}

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tablekit_examples::Store {
        backend,
        table: name,
        remote,
        ..
    } = tablekit_examples::store("Sessions")?;
    let clock = ManualClock::new();
    let sessions: Table<Session> =
        Table::from_arc(Arc::clone(&backend), &name).with_clock(Arc::new(clock.clone()));
    sessions.create_if_missing().await?;

    sessions
        .insert(&session("ada", "laptop-1", "laptop"))
        .await?;
    sessions.insert(&session("ada", "phone-1", "phone")).await?;
    sessions
        .insert(&session("grace", "tablet-1", "tablet"))
        .await?;

    // Ada keeps using her laptop: each request is a write, which keeps the
    // session alive for 30 minutes from then.
    clock.advance(20 * MINUTE);
    sessions
        .update("ada", "laptop-1", |s: &mut Session| s.requests += 1)
        .await?;

    // 30 minutes after the start, the other two have expired: no read sees
    // them, though their rows are still stored.
    clock.advance(10 * MINUTE);
    let ada = sessions.query().partition("ada").collect().await?;
    println!(
        "after 30 minutes, ada's sessions: {:?}",
        ada.iter().map(|s| s.id.as_str()).collect::<Vec<_>>()
    );
    assert_eq!(ada.len(), 1);
    assert!(sessions.get("grace", "tablet-1").await?.is_none());
    let stored = backend.query_all(&name, Default::default()).await?;
    let stored = stored
        .iter()
        .filter(|r| r.row_key.starts_with("SES_"))
        .count();
    println!("rows stored: {stored} sessions (expired ones included)");
    assert_eq!(stored, 3);

    // A new sign-in on the phone takes the expired session's keys.
    sessions.insert(&session("ada", "phone-1", "phone")).await?;

    // The upkeep deletes what has expired (it runs every 30 s when spawned;
    // one round here).
    let upkeep = Upkeep::new()
        .clock(Arc::new(clock.clone()))
        .watch(&sessions);
    let round = upkeep.run_round_now().await;
    println!("upkeep: {} expired sessions deleted", round.expired_deleted);
    assert_eq!(round.expired_deleted, 1);

    // An hour later, nothing is left.
    clock.advance(60 * MINUTE);
    let round = upkeep.run_round_now().await;
    println!("an hour later: {} more deleted", round.expired_deleted);
    let left = backend.query_all(&name, Default::default()).await?;
    assert!(left.is_empty(), "{left:?}");
    println!("rows stored: {}", left.len());

    if remote {
        backend.delete_table(&name).await?;
    }
    Ok(())
}
