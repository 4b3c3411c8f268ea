//! Every way of writing records its changes, with its index rows and moves.

use super::*;

/// Every typed write path records one change, in commit order, with the
/// value it wrote; a refused write records none.
pub async fn changes_follow_every_write(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chg").await;
    let t: Table<Order> = Table::from_arc(Arc::clone(&backend), &name);
    write_every_way(&t).await;
    refused_writes_record_nothing(&t).await;
    check_changes_of_every_write(&t).await;
}

/// Writes orders of `ann` by every typed write path, one after another.
pub(super) async fn write_every_way(t: &Table<Order>) {
    t.insert(&order("ann", 1, 10)).await.expect("insert");
    let mut loaded = t.get("ann", 1u32).await.expect("get").expect("stored");
    loaded.total = 11;
    t.replace(&mut loaded).await.expect("replace");
    loaded.note = Some("gift".into());
    t.merge(&mut loaded).await.expect("merge");
    t.upsert(&order("ann", 1, 12)).await.expect("upsert");
    t.upsert_merge(&order("ann", 1, 13))
        .await
        .expect("upsert_merge");
    t.replace_unconditionally(&order("ann", 1, 14))
        .await
        .expect("replace_unconditionally");
    t.merge_unconditionally(&order("ann", 1, 15))
        .await
        .expect("merge_unconditionally");
    t.update("ann", 1u32, |o| o.total = 16)
        .await
        .expect("update");
    let loaded = t.get("ann", 1u32).await.expect("get").expect("stored");
    t.delete(&loaded).await.expect("delete");
    t.insert(&order("ann", 2, 20)).await.expect("insert");
    t.delete_unconditionally("ann", 2u32)
        .await
        .expect("delete_unconditionally");
    let mut batch = t.batch();
    batch.insert(&order("ann", 3, 30)).expect("batch insert");
    batch.insert(&order("ann", 4, 40)).expect("batch insert");
    batch.submit().await.expect("batch");
    let report = t
        .bulk()
        .insert(&[order("ann", 5, 50), order("ann", 6, 60)])
        .await;
    assert!(report.failures.is_empty(), "bulk: {:?}", report.failures);
    bulk_conflicts_fail_alone(t).await;
}

/// A bulk insert meeting an entity that exists fails that item alone: the
/// others are written with their changes, and the one refused records none.
pub(super) async fn bulk_conflicts_fail_alone(t: &Table<Order>) {
    let items: Vec<Order> = (0..60).map(|id| order("bulk", id, i64::from(id))).collect();
    t.insert(&items[7]).await.expect("insert");
    let report = t.bulk().insert(&items).await;
    let failed: Vec<usize> = report.failures.iter().map(|f| f.index).collect();
    assert_eq!(failed, [7], "only the item stored already fails");
    assert!(matches!(
        *report.failures[0].error,
        Error::EntityAlreadyExists { .. }
    ));
    let seen = changes(t, "bulk").await;
    assert_eq!(seen.len(), 60, "one change per entity written");
    assert!(seen.iter().all(|c| c.op == ChangeOp::Insert));
    assert_numbered(&seen, "a bulk insert");
    let mut totals: Vec<i64> = seen
        .iter()
        .map(|c| c.value.as_ref().expect("the value").total)
        .collect();
    totals.sort_unstable();
    assert_eq!(totals, (0..60).collect::<Vec<i64>>());
    t.delete_unconditionally("bulk", 7u32)
        .await
        .expect("delete");
}

/// A refused insert, then a replace over a stale version: only the update
/// between them commits.
pub(super) async fn refused_writes_record_nothing(t: &Table<Order>) {
    let taken = t.insert(&order("ann", 3, 31)).await;
    assert!(
        matches!(taken, Err(Error::EntityAlreadyExists { .. })),
        "{taken:?}"
    );
    let mut stale = t.get("ann", 3u32).await.expect("get").expect("stored");
    t.update("ann", 3u32, |o| o.total = 32)
        .await
        .expect("update");
    stale.total = 33;
    let refused = t.replace(&mut stale).await;
    assert!(
        matches!(refused, Err(Error::PreconditionFailed { .. })),
        "{refused:?}"
    );
}

/// The changes `write_every_way` and `refused_writes_record_nothing` left.
pub(super) async fn check_changes_of_every_write(t: &Table<Order>) {
    let seen = changes(t, "ann").await;
    use ChangeOp::*;
    assert_eq!(
        ops(&seen),
        [
            Insert,
            Replace,
            Merge,
            Upsert,
            UpsertMerge,
            Replace,
            Merge,
            Replace,
            Delete,
            Insert,
            Delete,
            Insert,
            Insert,
            Insert,
            Insert,
            Replace
        ],
        "the changes of every write, in order"
    );
    assert_numbered(&seen, "every write");
    let totals: Vec<Option<i64>> = seen
        .iter()
        .map(|c| c.value.as_ref().map(|o| o.total))
        .collect();
    assert_eq!(
        totals,
        [
            Some(10),
            Some(11),
            None,
            Some(12),
            None,
            Some(14),
            None,
            Some(16),
            None,
            Some(20),
            None,
            Some(30),
            Some(40),
            Some(50),
            Some(60),
            Some(32)
        ],
        "the values written, where a change wrote a whole value"
    );
    assert!(seen.iter().all(|c| c.decode_error.is_none()));
    assert_eq!(
        seen[2].properties.get("note").and_then(|v| v.as_str()),
        Some("gift")
    );
    let rows: Vec<&str> = seen.iter().map(|c| c.row_key.as_str()).collect();
    assert_eq!(
        rows[..2],
        [rows[0], rows[0]],
        "one entity's changes name its RowKey"
    );
    assert_ne!(rows[9], rows[0]);

    // A later read starts after the number it is given.
    let rest = t.changes().read("ann", 14, 100).await.expect("read");
    assert_eq!(ops(&rest), [Insert, Replace]);
    assert_eq!(t.changes().newest("ann").await.expect("newest"), 16);
    assert_eq!(t.changes().newest("nobody").await.expect("newest"), 0);

    moves_record_both_halves(t).await;
}

/// A move records an insert at its new keys and a delete at its old ones,
/// each in its own partition's feed; one in its partition records both
/// there.
pub(super) async fn moves_record_both_halves(t: &Table<Order>) {
    use ChangeOp::*;
    let loaded = t.get("ann", 3u32).await.expect("get").expect("stored");
    let old_rk = tablekit::schema::row_key_of(&*loaded).expect("row key");
    t.move_to(&loaded, &order("bob", 3, 32))
        .await
        .expect("move");
    let ann = changes(t, "ann").await;
    assert_eq!(ann.len(), 17, "the old partition: one change more");
    assert_numbered(&ann, "a move's old half");
    assert_eq!((ann[16].op, ann[16].row_key.as_str()), (Delete, &*old_rk));
    let bob = changes(t, "bob").await;
    assert_eq!(ops(&bob), [Insert]);
    assert_eq!(bob[0].value.as_ref().map(|o| o.total), Some(32));
    let loaded = t.get("bob", 3u32).await.expect("get").expect("stored");
    t.move_to(&loaded, &order("bob", 4, 33))
        .await
        .expect("move in the partition");
    let bob = changes(t, "bob").await;
    assert_eq!(ops(&bob), [Insert, Insert, Delete]);
    assert_numbered(&bob, "a move in one partition");
    assert_eq!(
        bob[1].value.as_ref().map(|o| (o.id, o.total)),
        Some((4, 33))
    );
    assert_eq!(bob[2].row_key, bob[0].row_key);
}

/// A kind with indexes records its changes beside its index rows, and the
/// rows of the feed never read as entities or index rows.
pub async fn changes_ride_with_index_rows(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "chgidx").await;
    let t: Table<Customer> = Table::from_arc(Arc::clone(&backend), &name);
    let ann = |email: &str| Customer {
        region: "north".into(),
        id: 1,
        email: email.into(),
    };
    t.insert(&ann("ann@example.com")).await.expect("insert");
    let mut loaded = t.get("north", 1u32).await.expect("get").expect("stored");
    loaded.email = "ann@example.org".into();
    t.replace(&mut loaded).await.expect("replace");
    let bob = Customer {
        region: "north".into(),
        id: 2,
        email: "ann@example.org".into(),
    };
    let taken = t.insert(&bob).await;
    assert!(
        matches!(taken, Err(Error::UniqueViolation { .. })),
        "{taken:?}"
    );
    let seen = changes(&t, "north").await;
    assert_eq!(ops(&seen), [ChangeOp::Insert, ChangeOp::Replace]);
    assert_eq!(
        seen[1].value.as_ref().map(|c| c.email.as_str()),
        Some("ann@example.org")
    );
    assert_numbered(&seen, "indexed writes");
    let audit = t.verify_indexes("north").await.expect("verify");
    assert!(audit.is_clean(), "index rows out of step: {audit:?}");
    let all = t.query().partition("north").collect().await.expect("query");
    assert_eq!(all.len(), 1, "the feed's rows are not read as entities");
    t.delete(&loaded).await.expect("delete");
    assert_eq!(changes(&t, "north").await.len(), 3);
}
