//! The upkeep counts what it did also in a round where part of it failed:
//! a fence row that cannot be deleted leaves the others deleted and counted.

use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::upkeep::Upkeep;
use tablekit::{Entity, Table, TableBackendExt, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Fenced", kind = "F")]
struct Item {
    #[tablekit(partition_key)]
    group: String,
    #[tablekit(row_key)]
    id: u32,
}

#[tokio::test]
async fn a_failed_fence_delete_keeps_the_count_of_the_others() {
    let faulty = FaultInjection::new(MemBackend::new());
    let handle = faulty.handle();
    let table: Table<Item> = Table::new(faulty);
    table.create_if_missing().await.unwrap();
    // Five fence rows, as moves and remote index steps leave them.
    for n in 0..5 {
        let fence = Entity::new("g", format!("{}r{n}", tablekit::outbox::FENCE_PREFIX))
            .with("_Fence", 1i64);
        table
            .backend()
            .insert_entity("Fenced", &fence)
            .await
            .unwrap();
    }
    let upkeep = Upkeep::new().watch(&table);
    // The second delete fails.
    handle.inject(
        Injection::on(Operation::DeleteEntity)
            .skip(1)
            .times(1)
            .fault(Fault::Transient),
    );
    let round = upkeep.run_round_now().await;
    assert_eq!(round.fences_removed, 4, "{round:?}");
    assert_eq!(round.failures.len(), 1, "{round:?}");
    let round = upkeep.run_round_now().await;
    assert_eq!(round.fences_removed, 1, "{round:?}");
    assert!(round.failures.is_empty(), "{round:?}");
    assert_eq!(upkeep.stats().fences_removed, 5);
    let left = table
        .backend()
        .query_all("Fenced", tablekit::Query::new())
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}
