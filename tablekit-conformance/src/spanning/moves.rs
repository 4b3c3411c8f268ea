//! Moves of an entity to another partition, alone and while another writer changes it.

use super::*;

/// A move reaches the new partition at once, with its index rows; the old
/// partition keeps nothing; and a move onto keys that are taken is refused.
pub async fn moves_cross_partitions(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "move").await;
    let queue = unique_queue();
    queues.create_queue(&queue).await.expect("create queue");
    let table: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name)
        .with_outbox(Outbox::new(Arc::clone(&queues), queue.clone()));
    let jones = Mover {
        department: "Sales".into(),
        id: 223,
        last_name: "Jones".into(),
        salary: 10,
        badge: "b223".into(),
    };
    table.insert(&jones).await.expect("insert");
    let loaded = table
        .get("Sales", 223u32)
        .await
        .expect("get")
        .expect("there");
    let moved = Mover {
        department: "Ops".into(),
        salary: 11,
        ..jones.clone()
    };
    table.move_to(&loaded, &moved).await.expect("move");
    assert!(table.get("Sales", 223u32).await.expect("get").is_none());
    let arrived = table.get("Ops", 223u32).await.expect("get").expect("moved");
    assert_eq!(*arrived, moved);
    let by_name = table.index(Mover::indexes().name);
    let found: Vec<Mover> = read_all(by_name.find("Ops", "Jones")).await;
    assert_eq!(found, std::slice::from_ref(&moved));
    let all = rows(backend.as_ref(), &name).await;
    assert!(
        !all.iter().any(outbox::is_outbox_row),
        "the record is finished"
    );
    assert!(tablekit::index::audit::<Mover>(&all).is_clean());
    assert!(
        queues
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "the notice is withdrawn"
    );
    // Onto a department where another holds the badge: refused.
    let holder = Mover {
        department: "Dev".into(),
        id: 500,
        ..jones.clone()
    };
    table.insert(&holder).await.expect("insert");
    let to_dev = Mover {
        department: "Dev".into(),
        ..moved.clone()
    };
    assert!(matches!(
        table.move_to(&arrived, &to_dev).await,
        Err(Error::UniqueViolation { index: "badge", .. })
    ));
    let holder = table.get("Dev", 500u32).await.expect("get").expect("there");
    table.delete(&holder).await.expect("delete");
    // Onto taken keys: refused, nothing changed.
    let other = Mover {
        department: "Dev".into(),
        badge: "b999".into(),
        ..jones.clone()
    };
    table.insert(&other).await.expect("insert");
    let back = Mover {
        department: "Dev".into(),
        ..moved.clone()
    };
    assert!(matches!(
        table.move_to(&arrived, &back).await,
        Err(Error::EntityAlreadyExists { .. })
    ));
    assert!(table.get("Ops", 223u32).await.expect("get").is_some());
    // Within a partition, under another id: the same way.
    let renamed = Mover {
        id: 224,
        ..moved.clone()
    };
    table
        .move_to(&arrived, &renamed)
        .await
        .expect("move in place");
    assert!(table.get("Ops", 223u32).await.expect("get").is_none());
    assert!(table.get("Ops", 224u32).await.expect("get").is_some());
}

/// A move whose entity changes at its old keys while it runs takes its
/// copy back: the caller gets `PreconditionFailed`, the entity stays where
/// it was with the change, and nothing is left at the new keys. A writer
/// that stopped after the copy leaves both copies; a change to the old one
/// then is a conflict the finishing work reports (and keeps both, losing
/// neither) until one copy is deleted.
pub async fn moves_meeting_a_change_lose_nothing(
    backend: Arc<dyn TableBackend>,
    _queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    use futures::FutureExt;
    let name = fresh_table(&*backend, "movechange").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    faults.set_yields(true);
    let table: Table<Mover> = Table::from_arc(Arc::new(layer), &name);
    let plain: Table<Mover> = Table::from_arc(Arc::clone(&backend), &name);
    let jones = Mover {
        department: "Sales".into(),
        id: 7,
        last_name: "Jones".into(),
        salary: 10,
        badge: "b7".into(),
    };
    plain.insert(&jones).await.expect("insert");
    let loaded = plain.get("Sales", 7u32).await.expect("get").expect("there");
    let moved = Mover {
        department: "Ops".into(),
        ..jones.clone()
    };
    // Poll the move by hand; as soon as its first transaction (the copy)
    // is under way, change the entity at its old keys.
    let mut moving = std::pin::pin!(table.move_to(&loaded, &moved));
    let mut changed = false;
    let result = loop {
        if let Some(result) = (&mut moving).now_or_never() {
            break result;
        }
        if !changed && faults.calls(Operation::SubmitTransaction) >= 1 {
            let mut current = plain.get("Sales", 7u32).await.expect("get").expect("there");
            current.salary = 99;
            plain
                .replace(&mut current)
                .await
                .expect("change the old row");
            changed = true;
        }
        tokio::task::yield_now().await;
    };
    assert!(changed, "the move ran a transaction");
    assert!(
        matches!(result, Err(Error::PreconditionFailed { ref partition_key, .. }) if partition_key == "Sales"),
        "{result:?}"
    );
    let stayed = plain
        .get("Sales", 7u32)
        .await
        .expect("get")
        .expect("stayed");
    assert_eq!(stayed.salary, 99, "the change is kept");
    assert!(
        plain.get("Ops", 7u32).await.expect("get").is_none(),
        "the copy is taken back"
    );
    let all = rows(backend.as_ref(), &name).await;
    assert!(!all.iter().any(outbox::is_outbox_row), "no record is left");
    assert!(tablekit::index::audit::<Mover>(&all).is_clean());

    a_stopped_move_meets_a_change(&*backend, (&name, &table, &plain), &faults, &stayed).await;
    backend.delete_table(&name).await.expect("delete table");
}

/// A writer that stops after the copy leaves both copies with the same values;
/// when the old one changes, finishing the move is a conflict and both stay,
/// until one is deleted by hand.
async fn a_stopped_move_meets_a_change(
    backend: &dyn TableBackend,
    (name, table, plain): (&str, &Table<Mover>, &Table<Mover>),
    faults: &tablekit::layer::FaultHandle,
    stayed: &tablekit::Loaded<Mover>,
) {
    // A writer that stops after the copy: both copies, the same values.
    faults.set_yields(false);
    faults.inject(
        Injection::on(Operation::SubmitTransaction)
            .skip(1)
            .times(usize::MAX),
    );
    let moved = Mover {
        department: "Ops".into(),
        ..(**stayed).clone()
    };
    table.move_to(stayed, &moved).await.expect("committed");
    faults.clear();
    let copy = plain.get("Ops", 7u32).await.expect("get").expect("copied");
    let mut old = plain.get("Sales", 7u32).await.expect("get").expect("kept");
    assert_eq!(
        *copy,
        Mover {
            department: "Ops".into(),
            ..(*old).clone()
        }
    );
    // Now the old copy changes: finishing the move is a conflict, and
    // both copies stay.
    old.salary = 100;
    plain.replace(&mut old).await.expect("change the old copy");
    let finished = outbox::finish_entity(backend, name, "Ops", "MOV_0000000007").await;
    assert!(
        matches!(finished, Err(Error::PreconditionFailed { .. })),
        "{finished:?}"
    );
    assert!(plain.get("Sales", 7u32).await.expect("get").is_some());
    assert!(plain.get("Ops", 7u32).await.expect("get").is_some());
    // One copy deleted by hand: the move finishes.
    let old = plain.get("Sales", 7u32).await.expect("get").expect("kept");
    plain.delete(&old).await.expect("delete the old copy");
    outbox::finish_entity(backend, name, "Ops", "MOV_0000000007")
        .await
        .expect("finish");
    let all = rows(backend, name).await;
    assert!(!all.iter().any(outbox::is_outbox_row), "no record is left");
    assert!(tablekit::index::audit::<Mover>(&all).is_clean());
}
