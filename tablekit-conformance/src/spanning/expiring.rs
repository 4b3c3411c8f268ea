//! Entities that expire, with indexes kept in another partition and in
//! another table: a lookup passes an expired entity by at its instant, and
//! the sweep's delete takes its rows elsewhere with it, through the outbox,
//! as any delete does.

use super::remote::{read_all, remote_rows_in_step};
use super::*;
use tablekit::DateTime;
use tablekit::clock::ManualClock;

/// A visitor's pass, found by email in another partition, by city in
/// another table, and listed by tier; it expires.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "PASS")]
#[tablekit(index(name = "email", partition = "email"))]
#[tablekit(index(name = "city", table = "ConformanceCities"))]
#[tablekit(index(name = "tier", partition = "tier", list))]
pub struct Pass {
    /// The team.
    #[tablekit(partition_key)]
    pub team: String,
    /// The pass id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Indexed in partition `email_{team}`.
    #[tablekit(index = "email")]
    pub email: String,
    /// Indexed in table `ConformanceCities`.
    #[tablekit(index = "city")]
    pub city: String,
    /// Listed in one index entity per tier.
    #[tablekit(index = "tier")]
    pub tier: String,
    /// When the pass expires (never, without one).
    #[tablekit(expires)]
    pub until: Option<DateTime>,
}

/// The ids each lookup finds: by `email`, by city `Oslo`, by tier `gold`.
async fn found(t: &Table<Pass>, team: &str, email: &str) -> [Vec<u32>; 3] {
    let indexes = Pass::indexes();
    let ids = |all: Vec<Pass>| {
        let mut ids: Vec<u32> = all.into_iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids
    };
    [
        ids(read_all(t.remote_index(indexes.email).find(team, email)).await),
        ids(read_all(t.remote_index(indexes.city).find(team, "Oslo")).await),
        ids(read_all(t.remote_index(indexes.tier).find(team, "gold")).await),
    ]
}

/// Lookups through indexes kept elsewhere pass an expired entity by from
/// its instant on; the sweep deletes it with its rows there, leaving every
/// index in step and no notice behind.
pub async fn expired_entities_leave_no_rows_elsewhere(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "exprem").await;
    cities_table(backend.as_ref()).await;
    let queue = unique_queue();
    queues.create_queue(&queue).await.expect("create queue");
    let start =
        DateTime::from_unix_nanos(DateTime::now().unix_nanos() / 1_000_000_000 * 1_000_000_000)
            .expect("a time");
    let at = |minutes: u64| start.saturating_add(Duration::from_secs(minutes * 60));
    let clock = ManualClock::at(start);
    let t: Table<Pass> = Table::from_arc(Arc::clone(&backend), &name)
        .with_outbox(Outbox::new(Arc::clone(&queues), queue.clone()))
        .with_clock(Arc::new(clock.clone()));
    let team: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    let pass = |id: u32, until: Option<DateTime>| Pass {
        team: team.clone(),
        id,
        email: format!("p{id}@x"),
        city: "Oslo".into(),
        tier: "gold".into(),
        until,
    };
    t.insert(&pass(1, Some(at(10)))).await.expect("insert");
    t.insert(&pass(2, Some(at(20)))).await.expect("insert");
    t.insert(&pass(3, None)).await.expect("insert");
    let all = vec![1, 2, 3];
    assert_eq!(found(&t, &team, "p1@x").await, [vec![1], all.clone(), all]);

    clock.set(DateTime::from_ticks(at(10).ticks() - 1).expect("a time"));
    assert_eq!(found(&t, &team, "p1@x").await[0], [1]);
    clock.set(at(10));
    let live = vec![2, 3];
    assert_eq!(found(&t, &team, "p1@x").await, [vec![], live.clone(), live]);
    let pks = std::slice::from_ref(&team);
    remote_rows_in_step::<Pass>(backend.as_ref(), &name, pks)
        .await
        .expect("an expired entity keeps its rows until it is deleted");

    let swept = t.sweep_expired(100).await.expect("a sweep");
    assert_eq!(swept.deleted, 1, "{swept:?}");
    remote_rows_in_step::<Pass>(backend.as_ref(), &name, pks)
        .await
        .expect("the sweep took its rows elsewhere");
    clock.set(at(20));
    assert_eq!(t.sweep_expired(100).await.expect("a sweep").deleted, 1);
    remote_rows_in_step::<Pass>(backend.as_ref(), &name, pks)
        .await
        .expect("index rows in step");
    assert_eq!(found(&t, &team, "p2@x").await, [vec![], vec![3], vec![3]]);
    assert!(
        queues
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "every notice withdrawn"
    );
}
