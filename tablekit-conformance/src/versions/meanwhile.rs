//! Renamed wide kinds, and migrations that meet writes made while they run.

use super::*;

/// A wide meter stored under the kind's old name `WGAUGE`.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "WGAUGE", wide)]
pub struct GaugeOld {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The gauge.
    #[tablekit(row_key)]
    pub id: u32,
    /// One reading per property.
    #[tablekit(series)]
    pub readings: Vec<u32>,
}

/// The same wide meter, its kind renamed `GAUGE`.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "GAUGE", previous_kinds = ["WGAUGE"], wide)]
pub struct Gauge {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The gauge.
    #[tablekit(row_key)]
    pub id: u32,
    /// One reading per property.
    #[tablekit(series)]
    pub readings: Vec<u32>,
}

/// A renamed wide kind: an entity stored as several rows under the old
/// name is read whole, and a write or a migration moves all its rows to
/// the new name in one transaction; nothing is left under the old name.
pub async fn renamed_wide_kinds_move_whole(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "renamedwide").await;
    let old: Table<GaugeOld> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<Gauge> = Table::from_arc(Arc::clone(&backend), &name);
    let mut expected = Vec::new();
    for id in 0..4u32 {
        let count = if id % 2 == 0 { 10 } else { 400 };
        let value = GaugeOld {
            site: "east".into(),
            id,
            readings: (0..count).map(|r| r * 3 + id).collect(),
        };
        old.insert(&value).await.expect("insert under the old kind");
        expected.push(Gauge {
            site: value.site,
            id,
            readings: value.readings,
        });
    }
    let rows_under = |prefix: &'static str| {
        let rows = row_keys_under(&*backend, &name, "east", prefix);
        async move { rows.await.len() }
    };
    let before = rows_under("WGAUGE_").await;
    assert!(before > 4, "entities of two parts: {before} rows");
    let read: Vec<Loaded<Gauge>> = new
        .query()
        .partition("east")
        .stream()
        .try_collect()
        .await
        .expect("query");
    assert_eq!(
        read.iter().map(|g| (**g).clone()).collect::<Vec<_>>(),
        expected
    );
    // A write through the value read moves every part.
    let mut one = new.get("east", 1u32).await.expect("get").expect("there");
    assert_eq!(Loaded::previous_kind(&one), Some("WGAUGE"));
    one.readings.push(9);
    new.replace(&mut one)
        .await
        .expect("replace moves the parts");
    expected[1].readings.push(9);
    let report = new.migrate().run().await.expect("migrate");
    assert_eq!((report.failed, report.previous_kind), (0, 3), "{report:?}");
    assert_eq!(
        rows_under("WGAUGE_").await,
        0,
        "nothing left under the old name"
    );
    let read: Vec<Loaded<Gauge>> = new
        .query()
        .partition("east")
        .stream()
        .try_collect()
        .await
        .expect("query");
    assert!(read.iter().all(|g| Loaded::previous_kind(g).is_none()));
    assert_eq!(
        read.iter().map(|g| (**g).clone()).collect::<Vec<_>>(),
        expected
    );
    backend.delete_table(&name).await.expect("delete table");
}

/// The stored RowKeys of partition `pk` of `table` that start with
/// `prefix`, sorted.
pub(crate) async fn row_keys_under(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
    prefix: &str,
) -> Vec<String> {
    use tablekit::TableBackendExt;
    use tablekit::filter::Filter;
    let query = tablekit::backend::Query::new().filter(
        Filter::partition_key().eq(pk)
            & Filter::row_key().ge(prefix)
            & Filter::row_key().lt(format!("{prefix}\u{7f}")),
    );
    let rows = backend.query_all(table, query).await.expect("raw query");
    let mut keys: Vec<String> = rows.into_iter().map(|row| row.row_key).collect();
    keys.sort();
    keys
}

/// A write between migration attempts was refused because a request of the
/// dropped migration landed after it was read: the row must then be the
/// upgrade of what was stored (`expected`), at version 2, or the refusal
/// was wrong.
pub(super) async fn upgraded_meanwhile<N>(new: &Table<N>, key: &(String, String), expected: &N)
where
    N: TableEntity<PartitionKey = String, RowKey = String> + PartialEq + std::fmt::Debug,
{
    let now = new
        .get(key.0.clone(), key.1.clone())
        .await
        .expect("get")
        .expect("there");
    assert_eq!(Loaded::version(&now), Some(2), "refused, but not upgraded");
    assert_eq!(
        &*now, expected,
        "refused, but not the upgrade of the stored row"
    );
}

/// Rows another writer brings to the current version while a migration
/// runs (an update that moves a renamed kind's row to its own RowKey) are
/// current, never failures; and a dry run's checkpoint resumes dry runs
/// alone, since a real run that went on after it would leave the rows it
/// counted behind.
pub async fn migrations_count_rows_made_current_meanwhile(backend: Arc<dyn TableBackend>) {
    let (name, new) = three_old_widgets(&backend, "migmean").await;

    // A dry run's checkpoint is said to be one, and a real run refuses it.
    let mut dry = None;
    let counted = new
        .migrate()
        .dry_run()
        .scope(|q| q.partition("main").page_size(1))
        .on_checkpoint(|c| {
            dry.get_or_insert_with(|| c.clone());
        })
        .run()
        .await
        .expect("dry run");
    assert_eq!(counted.upgraded, 3);
    let dry = dry.expect("a checkpoint");
    assert!(dry.job().dry_run);
    let refused = new
        .migrate()
        .scope(|q| q.partition("main").page_size(1))
        .resume(dry.clone())
        .run()
        .await
        .expect_err("a dry run's checkpoint");
    assert!(
        matches!(
            &refused,
            Error::Invalid(tablekit::InvalidInput::CheckpointMismatch { .. })
        ),
        "{refused:?}"
    );
    let resumed_dry = new
        .migrate()
        .dry_run()
        .scope(|q| q.partition("main").page_size(1))
        .resume(dry)
        .run()
        .await
        .expect("a dry run resumes a dry run's checkpoint");
    assert_eq!(resumed_dry.upgraded, 3);
    assert_eq!(
        row_keys_under(&*backend, &name, "main", "WDG_").await.len(),
        3,
        "dry runs write nothing"
    );

    // Another writer updates every row (moving each to the kind's own
    // RowKey) at each point of a migration in turn: after its k-th call to
    // the store, for every k.
    for k in 1.. {
        if !migration_meets_an_update_after_call(&backend, k).await {
            break;
        }
    }
}

/// A new table holding widgets `a`, `b` and `c` under the old kind, at
/// version 1: its name, and the table read as the current type.
pub(super) async fn three_old_widgets(
    backend: &Arc<dyn TableBackend>,
    prefix: &str,
) -> (String, Table<Widget>) {
    let name = fresh_table(&**backend, prefix).await;
    let old: Table<WidgetV1> = Table::from_arc(Arc::clone(backend), &name);
    for (i, sku) in ["a", "b", "c"].into_iter().enumerate() {
        old.insert(&WidgetV1 {
            shop: "main".into(),
            sku: sku.into(),
            code: format!("c-{sku}"),
            colour: "red".into(),
            shelf: "top".into(),
            price: i as u32 + 1,
        })
        .await
        .expect("insert under the old kind");
    }
    (name.clone(), Table::from_arc(Arc::clone(backend), &name))
}

/// Writes three widgets under the old kind to a new table, runs a migration
/// until its `k`-th call to the store, updates every widget through the
/// current type, and lets the migration finish: it reports no failure,
/// and every row ends current, updated, under the kind's own RowKey, its
/// index rows in step. `false` once the migration ends before its `k`-th
/// call.
pub(super) async fn migration_meets_an_update_after_call(
    backend: &Arc<dyn TableBackend>,
    k: usize,
) -> bool {
    use tablekit::layer::{FaultInjection, Operation};
    let (name, new) = three_old_widgets(backend, "migrace").await;
    let skus = ["a", "b", "c"];
    let layer = FaultInjection::new(Arc::clone(backend));
    let handle = layer.handle();
    handle.set_yields(true);
    let migrating: Table<Widget> = Table::from_arc(Arc::new(layer), &name);
    let calls = || {
        [
            Operation::GetEntity,
            Operation::QueryEntities,
            Operation::SubmitTransaction,
            Operation::InsertEntity,
            Operation::UpdateEntity,
            Operation::UpsertEntity,
            Operation::DeleteEntity,
        ]
        .into_iter()
        .map(|op| handle.calls(op))
        .sum::<usize>()
    };
    let migration = migrating.migrate().unpaced().parallelism(1).run();
    let mut migration = std::pin::pin!(migration);
    while calls() < k {
        if let std::task::Poll::Ready(done) = futures::poll!(migration.as_mut()) {
            done.expect("migrate");
            backend.delete_table(&name).await.expect("delete table");
            return false;
        }
    }
    for sku in skus {
        new.update("main", sku, |w| w.stock = 9)
            .await
            .expect("update");
    }
    let report = migration.await.expect("migrate");
    assert_eq!(report.failed, 0, "after call {k}: {report:?}");
    assert!(
        row_keys_under(&**backend, &name, "main", "WDG_")
            .await
            .is_empty(),
        "after call {k}"
    );
    let all: Vec<Loaded<Widget>> = new
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    assert_eq!(all.len(), 3, "after call {k}");
    assert!(
        all.iter()
            .all(|w| Loaded::version(w) == Some(2) && w.stock == 9),
        "after call {k}"
    );
    assert!(
        new.verify_indexes("main").await.expect("verify").is_clean(),
        "after call {k}"
    );
    backend.delete_table(&name).await.expect("delete table");
    true
}
