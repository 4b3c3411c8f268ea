//! Changing an entity: older names and missing fields, typed upgrades
//! along a chain of versions, and older programs that must not overwrite
//! newer rows, on every store.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::backend::TableBackend;
use tablekit::table::{Loaded, Table};
use tablekit::{Entity, Error, TableEntity};

use super::fresh_table;

/// Version 1 of a catalog item: a price in whole units, a `Colour`.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "CITEM", version = 1)]
#[tablekit(index(name = "code", tag = "code"))]
pub struct CatalogItemV1 {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The item.
    #[tablekit(row_key)]
    pub sku: String,
    /// Unique in the shop.
    #[tablekit(unique = "code")]
    pub code: String,
    /// Whole units.
    pub price: u32,
    /// Its colour.
    #[tablekit(rename = "Colour")]
    pub colour: String,
}

/// Version 2: the price in cents, `Colour` renamed `Color`, a new field.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Conformance",
    kind = "CITEM",
    version = 2,
    upgrade_from = CatalogItemV1
)]
#[tablekit(index(name = "code", tag = "code"))]
pub struct CatalogItem {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The item.
    #[tablekit(row_key)]
    pub sku: String,
    /// Unique in the shop.
    #[tablekit(unique = "code")]
    pub code: String,
    /// Cents.
    pub price_cents: u64,
    /// Its color (stored as `Colour` before).
    #[tablekit(rename = "Color", alias = "Colour")]
    pub color: String,
    /// Added in version 2.
    #[tablekit(default)]
    pub stock: u32,
}

impl From<CatalogItemV1> for CatalogItem {
    fn from(v1: CatalogItemV1) -> CatalogItem {
        CatalogItem {
            shop: v1.shop,
            sku: v1.sku,
            code: v1.code,
            price_cents: u64::from(v1.price) * 100,
            color: v1.colour,
            stock: 0,
        }
    }
}

/// Rows version 1 wrote read through version 2 on every typed path (get,
/// query, index), say which version they were stored as, and are written
/// back as version 2 with their index rows in step; an older program's
/// update or replace of a version-2 row is refused, nothing written.
pub async fn older_versions_read_through_upgrades(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "versions").await;
    let old: Table<CatalogItemV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<CatalogItem> = Table::from_arc(Arc::clone(&backend), &name);
    for (sku, price) in [("a", 1u32), ("b", 2), ("c", 3)] {
        old.insert(&CatalogItemV1 {
            shop: "main".into(),
            sku: sku.into(),
            code: format!("c-{sku}"),
            price,
            colour: "red".into(),
        })
        .await
        .expect("insert version 1");
    }
    let read: Vec<Loaded<CatalogItem>> = new
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    let prices: Vec<u64> = read.iter().map(|i| i.price_cents).collect();
    assert_eq!(prices, [100, 200, 300]);
    assert!(
        read.iter()
            .all(|i| i.color == "red" && Loaded::version(i) == Some(1))
    );
    let by_code = new
        .index(CatalogItem::indexes().code)
        .get("main", "c-b")
        .await
        .expect("index get")
        .expect("there");
    assert_eq!(by_code.price_cents, 200);
    // Written back as version 2, under the new names.
    let mut a = new.get("main", "a").await.expect("get").expect("there");
    a.stock = 5;
    new.replace(&mut a).await.expect("replace");
    assert_eq!(Loaded::version(&a), Some(2));
    let stored: Entity = backend
        .get_entity(&name, "main", "CITEM_a", &Default::default())
        .await
        .expect("stored");
    assert_eq!(
        stored.properties.get("_Version"),
        Some(&tablekit::Value::Int32(2))
    );
    assert!(stored.properties.contains("Color") && !stored.properties.contains("Colour"));
    assert!(new.verify_indexes("main").await.expect("verify").is_clean());
    // The older program meets a version-2 row: refused, nothing written.
    let refused = old
        .update("main", "a", |item| item.price = 9)
        .await
        .expect_err("an older update");
    assert!(
        matches!(
            refused,
            Error::NewerVersion {
                stored: 2,
                writing: 1,
                ..
            }
        ),
        "{refused}"
    );
    let mut stale = Loaded::new(
        CatalogItemV1 {
            shop: "main".into(),
            sku: "a".into(),
            code: "c-a".into(),
            price: 9,
            colour: "blue".into(),
        },
        tablekit::table::Loaded::etag(&a).clone(),
        None,
    );
    assert!(matches!(
        old.replace(&mut stale).await,
        Err(Error::NewerVersion { .. })
    ));
    let kept = new.get("main", "a").await.expect("get").expect("there");
    assert_eq!((kept.price_cents, kept.stock), (100, 5), "nothing dropped");
    backend.delete_table(&name).await.expect("delete table");
}

/// A migration rewrites the rows of older versions as the current one,
/// index rows in step: a dry run counts them and writes nothing, a second
/// run finds nothing to do, and one partition can go alone.
pub async fn migrations_rewrite_older_rows(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "migrate").await;
    let old: Table<CatalogItemV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<CatalogItem> = Table::from_arc(Arc::clone(&backend), &name);
    let shops = ["north", "south", "west"];
    for (i, shop) in shops.iter().cycle().take(12).enumerate() {
        old.insert(&CatalogItemV1 {
            shop: (*shop).into(),
            sku: format!("s{i:02}"),
            code: format!("c{i:02}"),
            price: u32::try_from(i).unwrap_or(0),
            colour: "red".into(),
        })
        .await
        .expect("insert version 1");
    }
    // Another client's column on every entity row: the migration keeps it.
    let entity_rows = || async {
        use tablekit::TableBackendExt;
        let rows = backend
            .query_all(&name, tablekit::backend::Query::new())
            .await
            .expect("raw query");
        rows.into_iter()
            .filter(|row| {
                row.properties.contains(tablekit::schema::KIND_PROPERTY)
                    && !row.properties.contains(tablekit::index::INDEX_PROPERTY)
            })
            .collect::<Vec<_>>()
    };
    let before = entity_rows().await;
    assert_eq!(before.len(), 12);
    for row in &before {
        let column = Entity::new(row.partition_key.clone(), row.row_key.clone())
            .with("Supplier", row.row_key.clone());
        backend
            .upsert_entity(&name, &column, tablekit::backend::UpdateMode::Merge)
            .await
            .expect("raw merge");
    }
    let counted = new.migrate().dry_run().run().await.expect("dry run");
    assert_eq!(counted.scanned, 12);
    assert_eq!(counted.by_version.get(&1), Some(&12));
    assert_eq!(counted.upgraded, 12);
    let still: Loaded<CatalogItem> = new.get("north", "s00").await.expect("get").expect("there");
    assert_eq!(Loaded::version(&still), Some(1), "a dry run writes nothing");

    let one = new
        .migrate()
        .partition("west")
        .run()
        .await
        .expect("one partition");
    assert_eq!((one.scanned, one.upgraded, one.failed), (4, 4, 0));
    let mut seen = 0;
    let all = new
        .migrate()
        .on_progress(|report| seen = report.scanned)
        .run()
        .await
        .expect("migrate");
    assert_eq!((all.upgraded, all.already_current, all.failed), (8, 4, 0));
    assert_eq!(seen, 12, "progress after every row");
    let again = new.migrate().run().await.expect("again");
    assert_eq!(
        (again.upgraded, again.already_current),
        (0, 12),
        "nothing left to do"
    );
    assert_eq!(again.by_version.get(&2), Some(&12));
    for shop in shops {
        assert!(new.verify_indexes(shop).await.expect("verify").is_clean());
    }
    let moved = new.get("south", "s01").await.expect("get").expect("there");
    assert_eq!((moved.price_cents, moved.color.as_str()), (100, "red"));
    let after = entity_rows().await;
    assert_eq!(after.len(), 12);
    for row in after {
        assert_eq!(
            row.properties.get("Supplier"),
            Some(&tablekit::Value::String(row.row_key.clone())),
            "a migration keeps the columns the type does not know"
        );
    }
    backend.delete_table(&name).await.expect("delete table");
}

/// What [`migration_model_runs`] saw, summed over its runs.
#[derive(Debug, Clone, Default)]
pub struct MigrationOutcomes {
    /// Runs made.
    pub runs: usize,
    /// Rows written, of either version.
    pub rows: usize,
    /// Migrations dropped mid-way (at a random poll).
    pub dropped: usize,
    /// Migrations stopped by an injected fault (a page that could not be read).
    pub stopped: usize,
    /// Migrations started again from a checkpoint.
    pub resumed: usize,
    /// Rows rewritten, as the reports count them.
    pub upgraded: usize,
    /// Rows read again because another writer changed them.
    pub retried: usize,
    /// Rows a run could not rewrite (a fault), left for the next run.
    pub failed: usize,
    /// Rows changed by another writer while a migration ran.
    pub changed_meanwhile: usize,
}

impl MigrationOutcomes {
    /// Adds another set of runs' outcomes.
    fn add(&mut self, other: MigrationOutcomes) {
        self.runs += other.runs;
        self.rows += other.rows;
        self.dropped += other.dropped;
        self.stopped += other.stopped;
        self.resumed += other.resumed;
        self.upgraded += other.upgraded;
        self.retried += other.retried;
        self.failed += other.failed;
        self.changed_meanwhile += other.changed_meanwhile;
    }
}

/// The partitions of run `run` of [`migration_model_runs`]: `m{run}-…`.
fn this_run(run: usize) -> tablekit::filter::Filter {
    use tablekit::filter::Filter;
    Filter::partition_key().ge(format!("m{run}-")) & Filter::partition_key().lt(format!("m{run}."))
}

/// Up to 40 rows over `shops`, most written as version 1 by the old
/// program and a fifth as version 2 by the new: the model, as version 2.
async fn write_model_rows<P: VersionPair>(
    (old, new): (&Table<P::Old>, &Table<P::New>),
    shops: &[String],
    rng: &mut fastrand::Rng,
) -> std::collections::BTreeMap<(String, String), P::New>
where
    P::Old: TableEntity<PartitionKey = String, RowKey = String>,
    P::New: TableEntity<PartitionKey = String, RowKey = String>,
{
    let mut model = std::collections::BTreeMap::new();
    for i in 0..rng.usize(1..=40) {
        let shop = shops[rng.usize(..shops.len())].clone();
        let v1 = P::old(&shop, format!("s{i:02}"), i, rng);
        let v2 = P::New::from(v1.clone());
        if rng.u8(..5) == 0 {
            new.insert(&v2).await.expect("insert version 2");
        } else {
            old.insert(&v1).await.expect("insert version 1");
        }
        model.insert(P::keys(&v2), v2);
    }
    model
}

/// Another writer changes a random row of `model` between attempts of a
/// migration, through whichever version its program has (the old program
/// rewrites its own version-1 rows), and the model follows.
async fn change_a_row<P: VersionPair>(
    (old, new): (&Table<P::Old>, &Table<P::New>),
    model: &mut std::collections::BTreeMap<(String, String), P::New>,
    rng: &mut fastrand::Rng,
) where
    P::Old: TableEntity<PartitionKey = String, RowKey = String>,
    P::New: TableEntity<PartitionKey = String, RowKey = String>,
{
    let (key, expected) = {
        let keys: Vec<_> = model.keys().cloned().collect();
        let key = keys[rng.usize(..keys.len())].clone();
        let expected = model[&key].clone();
        (key, expected)
    };
    let mut loaded = new
        .get(key.0.clone(), key.1.clone())
        .await
        .expect("get")
        .expect("there");
    if P::OLD_WRITERS && Loaded::version(&loaded).is_some_and(|v| v < 2) && rng.bool() {
        // The old program rewrites its own row, as version 1.
        let mut v1 = Loaded::new(
            P::rewrite(&expected, rng),
            Loaded::etag(&loaded).clone(),
            None,
        );
        match old.replace(&mut v1).await {
            Ok(_) => {
                model.insert(key, P::New::from((*v1).clone()));
            }
            // Over a network a request of the migration just
            // dropped can still land: this row's upgrade came
            // in between, and the older program's write is
            // refused. The row holds the upgrade of `expected`.
            Err(Error::NewerVersion { .. } | Error::PreconditionFailed { .. }) => {
                upgraded_meanwhile(new, &key, &expected).await;
            }
            Err(e) => panic!("old program's replace: {e:?}"),
        }
    } else {
        P::change(&mut loaded, rng);
        match new.replace(&mut loaded).await {
            Ok(_) => {
                model.insert(key, (*loaded).clone());
            }
            // As above: the late upgrade changed the row's ETag.
            Err(Error::PreconditionFailed { .. }) => {
                upgraded_meanwhile(new, &key, &expected).await;
            }
            Err(e) => panic!("new program's replace: {e:?}"),
        }
    }
}

/// After run `run` of a migration model run, and one clean run more (rows
/// a fault kept from their rewrite are picked up by a run again): each
/// shop's rows are the model's, every one at version 2 under the current
/// kind, with its index rows in step.
async fn migrated_as_modelled<P: VersionPair>(
    new: &Table<P::New>,
    shops: &[String],
    model: &std::collections::BTreeMap<(String, String), P::New>,
    run: usize,
) where
    P::New: TableEntity<PartitionKey = String, RowKey = String>,
{
    let again = new
        .migrate()
        .unpaced()
        .scope(move |q| q.filter(this_run(run)))
        .run()
        .await
        .expect("a clean run");
    assert_eq!(again.failed, 0, "run {run}: {again:?}");
    for shop in shops {
        let rows: Vec<Loaded<P::New>> = new
            .query()
            .partition(shop.clone())
            .stream()
            .try_collect()
            .await
            .expect("read back");
        let expected: Vec<&P::New> = model
            .iter()
            .filter(|((s, _), _)| s == shop)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            rows.len(),
            expected.len(),
            "run {run}: rows lost or added in {shop}"
        );
        for (row, want) in rows.iter().zip(expected) {
            assert_eq!(
                Loaded::version(row),
                Some(2),
                "run {run}: {:?} left at an older version",
                P::keys(row)
            );
            assert_eq!(
                Loaded::previous_kind(row),
                None,
                "run {run}: {:?} left under a previous kind",
                P::keys(row)
            );
            assert_eq!(&**row, want, "run {run}");
        }
        if P::INDEXED {
            assert!(
                new.verify_indexes(shop.clone())
                    .await
                    .expect("verify")
                    .is_clean(),
                "run {run}: index rows of {shop}"
            );
        }
    }
}

/// Random runs of migrations dropped at a random poll or stopped by a
/// fault and resumed from their last checkpoint, with faults in the store
/// and another writer changing rows between attempts. After each run every
/// row is of the current version with the value the model expects (an
/// upgrade of the last value written), no row is lost or added, the index
/// rows are in step, and the resumed runs together read at most one page
/// again per interruption (finished pages are never read again). `runs`
/// runs migrate a type with a unique index; a quarter as many more, a type
/// with none, whose rows a migration writes straight; and a quarter as many
/// more, a renamed kind whose rows a migration moves with their index rows.
pub async fn migration_model_runs(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    seed: u64,
) -> MigrationOutcomes {
    // `runs` on a type with an index (planned transactions), and a quarter
    // as many more on one without (rows alone, written straight).
    let mut out = model_runs::<IndexedPair>(Arc::clone(&backend), runs, seed).await;
    let plain =
        model_runs::<PlainPair>(Arc::clone(&backend), (runs / 4).max(1), seed ^ 0x5EED).await;
    out.add(plain);
    let renamed = model_runs::<RenamedPair>(backend, (runs / 4).max(1), seed ^ 0x4E4D).await;
    out.add(renamed);
    out
}

/// A pair of versions of one kind for [`migration_model_runs`]: keyed by a
/// shop and a SKU, the newer one the older upgraded.
trait VersionPair {
    type Old: TableEntity + Clone;
    type New: TableEntity + Clone + PartialEq + std::fmt::Debug + From<Self::Old>;
    /// A version-1 value.
    fn old(shop: &str, sku: String, i: usize, rng: &mut fastrand::Rng) -> Self::Old;
    /// The older program's rewrite of a row it reads as `current`.
    fn rewrite(current: &Self::New, rng: &mut fastrand::Rng) -> Self::Old;
    /// The newer program's change.
    fn change(value: &mut Self::New, rng: &mut fastrand::Rng);
    /// The keys of a value.
    fn keys(value: &Self::New) -> (String, String);
    /// Whether the index rows must be checked.
    const INDEXED: bool;
    /// Whether the older program may write while the migration runs (not
    /// during a kind rename: it writes under the old kind's RowKey).
    const OLD_WRITERS: bool = true;
    /// Whether the kind was renamed: a migration then reads a moved row
    /// again under the new name, so a run may read each row twice.
    const RENAMED: bool = false;
}

/// [`CatalogItemV1`] to [`CatalogItem`]: a unique index kept in step.
struct IndexedPair;

impl VersionPair for IndexedPair {
    type Old = CatalogItemV1;
    type New = CatalogItem;
    fn old(shop: &str, sku: String, i: usize, rng: &mut fastrand::Rng) -> CatalogItemV1 {
        CatalogItemV1 {
            shop: shop.into(),
            sku,
            code: format!("c{i:02}"),
            price: rng.u32(..1000),
            colour: ["red", "green", "blue"][rng.usize(..3)].into(),
        }
    }
    fn rewrite(current: &CatalogItem, rng: &mut fastrand::Rng) -> CatalogItemV1 {
        CatalogItemV1 {
            shop: current.shop.clone(),
            sku: current.sku.clone(),
            code: current.code.clone(),
            price: rng.u32(..1000),
            colour: current.color.clone(),
        }
    }
    fn change(value: &mut CatalogItem, rng: &mut fastrand::Rng) {
        value.stock = rng.u32(..50);
    }
    fn keys(value: &CatalogItem) -> (String, String) {
        (value.shop.clone(), value.sku.clone())
    }
    const INDEXED: bool = true;
}

/// Version 1 of a gadget: no index, so a migration writes its rows alone.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "GADGET", version = 1)]
pub struct GadgetV1 {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The gadget.
    #[tablekit(row_key)]
    pub sku: String,
    /// Whole units.
    pub price: u32,
}

/// Version 2 of the gadget: the price in cents, a new field.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "GADGET", version = 2, upgrade_from = GadgetV1)]
pub struct Gadget {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The gadget.
    #[tablekit(row_key)]
    pub sku: String,
    /// Cents.
    pub price_cents: u64,
    /// Added in version 2.
    #[tablekit(default)]
    pub stock: u32,
}

impl From<GadgetV1> for Gadget {
    fn from(v1: GadgetV1) -> Gadget {
        Gadget {
            shop: v1.shop,
            sku: v1.sku,
            price_cents: u64::from(v1.price) * 100,
            stock: 0,
        }
    }
}

/// [`GadgetV1`] to [`Gadget`].
struct PlainPair;

impl VersionPair for PlainPair {
    type Old = GadgetV1;
    type New = Gadget;
    fn old(shop: &str, sku: String, _: usize, rng: &mut fastrand::Rng) -> GadgetV1 {
        GadgetV1 {
            shop: shop.into(),
            sku,
            price: rng.u32(..1000),
        }
    }
    fn rewrite(current: &Gadget, rng: &mut fastrand::Rng) -> GadgetV1 {
        GadgetV1 {
            shop: current.shop.clone(),
            sku: current.sku.clone(),
            price: rng.u32(..1000),
        }
    }
    fn change(value: &mut Gadget, rng: &mut fastrand::Rng) {
        value.stock = rng.u32(..50);
    }
    fn keys(value: &Gadget) -> (String, String) {
        (value.shop.clone(), value.sku.clone())
    }
    const INDEXED: bool = false;
}

async fn model_runs<P: VersionPair>(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    seed: u64,
) -> MigrationOutcomes
where
    P::Old: TableEntity<PartitionKey = String, RowKey = String>,
    P::New: TableEntity<PartitionKey = String, RowKey = String>,
{
    use tablekit::layer::{Fault, FaultInjection, Injection};
    use tablekit::table::MigrationCheckpoint;

    let name = fresh_table(&*backend, "migmodel").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    let faulty: Arc<dyn TableBackend> = Arc::new(layer);
    let old: Table<P::Old> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<P::New> = Table::from_arc(Arc::clone(&backend), &name);
    let migrating: Table<P::New> = Table::from_arc(Arc::clone(&faulty), &name);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = MigrationOutcomes::default();
    for run in 0..runs {
        out.runs += 1;
        faults.seed(rng.u64(..));
        let shops: Vec<String> = (0..rng.usize(1..=4))
            .map(|p| format!("m{run}-{p}"))
            .collect();
        let mut model = write_model_rows::<P>((&old, &new), &shops, &mut rng).await;
        out.rows += model.len();
        let page = rng.u32(1..=9);
        let mut last: Option<MigrationCheckpoint> = None;
        let mut interruptions = 0;
        let mut scanned = 0;
        for attempt in 0.. {
            assert!(attempt < 200, "run {run}: the migration never finished");
            // Another writer, between attempts: a row changed through
            // whichever version its program has.
            if rng.bool() {
                change_a_row::<P>((&old, &new), &mut model, &mut rng).await;
                out.changed_meanwhile += 1;
            }
            faults.clear();
            // Every call yields once, so that a migration can be dropped
            // between any two of its calls, on any store.
            faults.set_yields(true);
            if rng.u8(..3) == 0 {
                let fault = [
                    Fault::Transient,
                    Fault::LostResponse,
                    Fault::FailsAfterApply,
                ][rng.usize(..3)];
                faults.inject(
                    Injection::any()
                        .probability(0.1)
                        .fault(fault)
                        .times(usize::MAX),
                );
            }
            let seen = std::sync::Mutex::new(None::<MigrationCheckpoint>);
            let mut migration = migrating
                .migrate()
                .unpaced()
                .parallelism(rng.usize(1..=3))
                .scope(move |q| q.page_size(page).filter(this_run(run)))
                .on_checkpoint(|c| *seen.lock().expect("lock") = Some(c.clone()));
            if let Some(checkpoint) = last.clone() {
                migration = migration.resume(checkpoint);
                out.resumed += 1;
            }
            let polls = if rng.bool() {
                rng.usize(1..60)
            } else {
                usize::MAX
            };
            let result = super::drop_after_polls(polls, migration.run()).await;
            if let Some(c) = seen.lock().expect("lock").take() {
                last = Some(c);
            }
            match result {
                None => {
                    out.dropped += 1;
                    interruptions += 1;
                    // A store that goes on with a dropped write (the local
                    // store's writer thread) lands it now, before the other
                    // writers: what a request still on its way over a
                    // network does is handled below, when it comes late.
                    super::cancel::settle().await;
                }
                Some(Err(_)) => {
                    out.stopped += 1;
                    interruptions += 1;
                }
                Some(Ok(report)) => {
                    scanned = report.scanned;
                    out.upgraded += report.upgraded;
                    out.retried += report.retried;
                    out.failed += report.failed;
                    break;
                }
            }
        }
        faults.clear();
        // A renamed kind's moved rows are met again under the new name.
        let reads = if P::RENAMED { 2 } else { 1 };
        let bound = reads * model.len() + interruptions * page as usize;
        assert!(
            scanned <= bound,
            "run {run}: resumed runs read {scanned} rows, more than {} rows and one page per interruption ({bound})",
            model.len()
        );
        // Rows a fault kept from their rewrite are picked up by a run again.
        migrated_as_modelled::<P>(&new, &shops, &model, run).await;
    }
    backend.delete_table(&name).await.expect("delete table");
    out
}

/// Version 1 of a wide meter: readings enough to need two rows.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "WMIG", version = 1, wide)]
pub struct MeterV1 {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The meter.
    #[tablekit(row_key)]
    pub id: u32,
    /// One reading per property.
    #[tablekit(series)]
    pub readings: Vec<u32>,
}

/// Version 2 of the wide meter: a unit added.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Conformance",
    kind = "WMIG",
    version = 2,
    wide,
    upgrade_from = MeterV1
)]
pub struct Meter {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The meter.
    #[tablekit(row_key)]
    pub id: u32,
    /// One reading per property.
    #[tablekit(series)]
    pub readings: Vec<u32>,
    /// Added in version 2.
    #[tablekit(default)]
    pub unit: String,
}

impl From<MeterV1> for Meter {
    fn from(v1: MeterV1) -> Meter {
        Meter {
            site: v1.site,
            id: v1.id,
            readings: v1.readings,
            unit: "kWh".into(),
        }
    }
}

/// A migration of a wide type, dropped at many points and resumed from its
/// last checkpoint each time: it ends with every entity at the current
/// version, and the runs together read each entity once, plus at most the
/// one in flight at each interruption. A finished checkpoint resumes to
/// nothing; one of another migration is refused.
pub async fn wide_migrations_resume_after_each_entity(backend: Arc<dyn TableBackend>) {
    use tablekit::layer::FaultInjection;
    use tablekit::table::MigrationCheckpoint;

    let name = fresh_table(&*backend, "widemig").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let faults = layer.handle();
    // Every call yields once, so that the migration can be dropped between
    // any two of its calls, on any store.
    faults.set_yields(true);
    let faulty: Arc<dyn TableBackend> = Arc::new(layer);
    let old: Table<MeterV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<Meter> = Table::from_arc(Arc::clone(&backend), &name);
    let migrating: Table<Meter> = Table::from_arc(faulty, &name);
    let mut expected = Vec::new();
    for site in ["east", "north", "west"] {
        for id in 0..4u32 {
            let count = if id % 2 == 0 { 10 } else { 400 };
            let v1 = MeterV1 {
                site: site.into(),
                id,
                readings: (0..count).map(|r| r * 7 + id).collect(),
            };
            old.insert(&v1).await.expect("insert version 1");
            expected.push(Meter::from(v1));
        }
    }
    let total = expected.len();
    let mut last: Option<MigrationCheckpoint> = None;
    let mut interruptions = 0;
    let mut report = None;
    for attempt in 0..200usize {
        let seen = std::sync::Mutex::new(None::<MigrationCheckpoint>);
        let mut migration = migrating
            .migrate()
            .unpaced()
            .on_checkpoint(|c| *seen.lock().expect("lock") = Some(c.clone()));
        if let Some(checkpoint) = last.clone() {
            migration = migration.resume(checkpoint);
        }
        // Dropped after a few polls each time, later and later.
        let result = super::drop_after_polls(3 + attempt * 2, migration.run()).await;
        if let Some(c) = seen.lock().expect("lock").take() {
            last = Some(c);
        }
        match result {
            None => {
                interruptions += 1;
                super::cancel::settle().await;
            }
            Some(result) => {
                report = Some(result.expect("migrate"));
                break;
            }
        }
    }
    let report = report.expect("the migration finished");
    assert!(interruptions > 0, "the migration was never dropped");
    assert!(
        report.scanned <= total + interruptions,
        "resumed runs read {} entities: more than {total} and one per interruption ({interruptions})",
        report.scanned
    );
    assert_eq!(report.failed, 0, "{report:?}");
    let rows: Vec<Loaded<Meter>> = new.query().stream().try_collect().await.expect("read");
    assert_eq!(rows.len(), total);
    for (row, want) in rows.iter().zip(&expected) {
        assert_eq!(Loaded::version(row), Some(2), "{} {}", row.site, row.id);
        assert_eq!(&**row, want);
    }
    // A finished checkpoint resumes to nothing.
    let finished = last.expect("a checkpoint");
    assert!(finished.is_finished());
    let again = new
        .migrate()
        .resume(finished.clone())
        .run()
        .await
        .expect("resume finished");
    assert_eq!(again, finished.report);
    // One of another migration is refused, nothing written.
    let other = new.migrate().partition("east").resume(finished).run().await;
    assert!(
        matches!(
            other,
            Err(Error::Invalid(tablekit::InvalidInput::CheckpointMismatch {
                field: "scope",
                ..
            }))
        ),
        "{other:?}"
    );
    backend.delete_table(&name).await.expect("delete table");
}

/// A migration through a projection is refused, nothing written: its rows
/// are its entity's, and rewriting them would drop the fields it leaves
/// out. A dry run through one counts.
pub async fn migrations_through_projections_are_refused(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "migproj").await;
    let old: Table<GadgetV1> = Table::from_arc(Arc::clone(&backend), &name);
    old.insert(&GadgetV1 {
        shop: "north".into(),
        sku: "g1".into(),
        price: 3,
    })
    .await
    .expect("insert version 1");
    let keys: Table<GadgetKey> = Table::from_arc(Arc::clone(&backend), &name);
    let refused = keys.migrate().run().await;
    assert!(
        matches!(refused, Err(Error::NotSupported { .. })),
        "{refused:?}"
    );
    let counted = keys.migrate().dry_run().run().await.expect("dry run");
    assert_eq!(counted.by_version.get(&1), Some(&1));
    let stored: Loaded<Gadget> = Table::from_arc(Arc::clone(&backend), &name)
        .get("north", "g1")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(Loaded::version(&stored), Some(1), "nothing written");
    assert_eq!(stored.price_cents, 300);
    backend.delete_table(&name).await.expect("delete table");
}

/// A gadget's keys alone.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Gadget)]
pub struct GadgetKey {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The gadget.
    #[tablekit(row_key)]
    pub sku: String,
}

/// Version 1 of a widget, under the kind's old name `WDG`: a unique code,
/// an index by colour, and an index entity per shelf.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "WDG", version = 1)]
#[tablekit(index(name = "code", tag = "wcode"))]
#[tablekit(index(name = "colour", tag = "wcolour"))]
#[tablekit(index(name = "shelf", tag = "wshelf", list))]
pub struct WidgetV1 {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The widget.
    #[tablekit(row_key)]
    pub sku: String,
    /// Unique in the shop.
    #[tablekit(unique = "code")]
    pub code: String,
    /// Indexed.
    #[tablekit(index = "colour")]
    pub colour: String,
    /// Listed in one index entity per shelf.
    #[tablekit(index = "shelf")]
    pub shelf: String,
    /// Whole units.
    pub price: u32,
}

/// Version 2 of the widget: the kind renamed `WIDGET` (its rows under `WDG`
/// read, and moved when written or migrated), the price in cents, a new
/// field. The index tags stay those of version 1.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(
    table = "Conformance",
    kind = "WIDGET",
    previous_kinds = ["WDG"],
    version = 2,
    upgrade_from = WidgetV1
)]
#[tablekit(index(name = "code", tag = "wcode"))]
#[tablekit(index(name = "colour", tag = "wcolour"))]
#[tablekit(index(name = "shelf", tag = "wshelf", list))]
pub struct Widget {
    /// The shop.
    #[tablekit(partition_key)]
    pub shop: String,
    /// The widget.
    #[tablekit(row_key)]
    pub sku: String,
    /// Unique in the shop.
    #[tablekit(unique = "code")]
    pub code: String,
    /// Indexed.
    #[tablekit(index = "colour")]
    pub colour: String,
    /// Listed in one index entity per shelf.
    #[tablekit(index = "shelf")]
    pub shelf: String,
    /// Cents.
    pub price_cents: u64,
    /// Added in version 2.
    #[tablekit(default)]
    pub stock: u32,
}

impl From<WidgetV1> for Widget {
    fn from(v1: WidgetV1) -> Widget {
        Widget {
            shop: v1.shop,
            sku: v1.sku,
            code: v1.code,
            colour: v1.colour,
            shelf: v1.shelf,
            price_cents: u64::from(v1.price) * 100,
            stock: 0,
        }
    }
}

/// [`WidgetV1`] to [`Widget`]: a kind rename with an upgrade, three kinds
/// of index rows moved along.
struct RenamedPair;

impl VersionPair for RenamedPair {
    type Old = WidgetV1;
    type New = Widget;
    fn old(shop: &str, sku: String, i: usize, rng: &mut fastrand::Rng) -> WidgetV1 {
        WidgetV1 {
            shop: shop.into(),
            sku,
            code: format!("c{i:02}"),
            colour: ["red", "green", "blue"][rng.usize(..3)].into(),
            shelf: format!("sh{}", rng.u8(..3)),
            price: rng.u32(..1000),
        }
    }
    fn rewrite(current: &Widget, rng: &mut fastrand::Rng) -> WidgetV1 {
        WidgetV1 {
            shop: current.shop.clone(),
            sku: current.sku.clone(),
            code: current.code.clone(),
            colour: current.colour.clone(),
            shelf: current.shelf.clone(),
            price: rng.u32(..1000),
        }
    }
    fn change(value: &mut Widget, rng: &mut fastrand::Rng) {
        value.stock = rng.u32(..50);
        value.colour = ["red", "green", "blue"][rng.usize(..3)].into();
        value.shelf = format!("sh{}", rng.u8(..3));
    }
    fn keys(value: &Widget) -> (String, String) {
        (value.shop.clone(), value.sku.clone())
    }
    const INDEXED: bool = true;
    // The old program writes under the old kind: a rename runs once it is gone.
    const OLD_WRITERS: bool = false;
    const RENAMED: bool = true;
}

/// Rows stored under a previous kind are read on every typed path: a get
/// (which names the kind it found), exists, a query, a RowKey range and an
/// index. Returns the entity `b` as read.
async fn old_rows_read_on_every_path(new: &Table<Widget>) -> Loaded<Widget> {
    let b = new.get("main", "b").await.expect("get").expect("there");
    assert_eq!(
        (b.price_cents, Loaded::previous_kind(&b)),
        (200, Some("WDG"))
    );
    assert_eq!(Loaded::version(&b), Some(1));
    assert!(new.exists("main", "c").await.expect("exists"));
    let all: Vec<Loaded<Widget>> = new
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    assert_eq!(all.len(), 5);
    let range: Vec<String> = new
        .query()
        .partition("main")
        .rows("b".to_string()..="c".to_string())
        .stream()
        .map_ok(|w| w.sku.clone())
        .try_collect()
        .await
        .expect("range");
    assert_eq!(range, ["b", "c"]);
    let by_code = new
        .index(Widget::indexes().code)
        .get("main", "c-d")
        .await
        .expect("index get")
        .expect("there");
    assert_eq!(by_code.sku, "d");
    b
}

/// A renamed kind (`previous_kinds`): its rows under the old name are read
/// by every typed path, refuse an insert of their keys, and move to the
/// kind's own RowKey, with their index rows, in one transaction when a
/// write or a migration rewrites them. Nothing is left under the old name.
pub async fn renamed_kinds_read_and_move(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "renamed").await;
    let old: Table<WidgetV1> = Table::from_arc(Arc::clone(&backend), &name);
    let new: Table<Widget> = Table::from_arc(Arc::clone(&backend), &name);
    for (i, sku) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
        old.insert(&WidgetV1 {
            shop: "main".into(),
            sku: sku.into(),
            code: format!("c-{sku}"),
            colour: ["red", "blue"][i % 2].into(),
            shelf: "top".into(),
            price: i as u32 + 1,
        })
        .await
        .expect("insert under the old kind");
    }
    let stored_under = |prefix: &'static str| row_keys_under(&*backend, &name, "main", prefix);
    // Read on every typed path.
    let b = old_rows_read_on_every_path(&new).await;
    // An insert of keys an old row holds is refused.
    let taken = new
        .insert(&Widget::from(WidgetV1 {
            shop: "main".into(),
            sku: "a".into(),
            code: "c-x".into(),
            colour: "red".into(),
            shelf: "top".into(),
            price: 1,
        }))
        .await
        .expect_err("keys taken under the old kind");
    assert!(
        matches!(taken, Error::EntityAlreadyExists { .. }),
        "{taken}"
    );
    // A replace through the value read moves the row, index rows along.
    let mut b = b;
    b.stock = 7;
    new.replace(&mut b).await.expect("replace moves the row");
    assert_eq!(Loaded::previous_kind(&b), None);
    assert_eq!(
        stored_under("WDG_").await,
        ["WDG_a", "WDG_c", "WDG_d", "WDG_e"]
    );
    assert_eq!(stored_under("WIDGET_").await, ["WIDGET_b"]);
    let b_again = new.get("main", "b").await.expect("get").expect("there");
    assert_eq!((b_again.stock, Loaded::previous_kind(&b_again)), (7, None));
    // An upsert moves it too; a delete by key deletes it where it lies.
    let mut c = Widget::clone(&new.get("main", "c").await.expect("get").expect("there"));
    c.stock = 3;
    new.upsert(&c).await.expect("upsert moves the row");
    new.delete_unconditionally("main", "e")
        .await
        .expect("delete under the old kind");
    assert!(new.get("main", "e").await.expect("get").is_none());
    let verified = new.verify_indexes("main").await.expect("verify");
    assert!(verified.is_clean(), "{verified:?}");
    // A dry run counts, a migration moves the rest.
    let counted = new.migrate().dry_run().run().await.expect("dry run");
    assert_eq!(counted.previous_kind, 2, "{counted:?}");
    let done = new.migrate().run().await.expect("migrate");
    assert_eq!(done.failed, 0, "{done:?}");
    assert!(stored_under("WDG_").await.is_empty());
    assert_eq!(
        stored_under("WIDGET_").await,
        ["WIDGET_a", "WIDGET_b", "WIDGET_c", "WIDGET_d"]
    );
    let all: Vec<Loaded<Widget>> = new
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    assert!(
        all.iter()
            .all(|w| Loaded::version(w) == Some(2) && Loaded::previous_kind(w).is_none())
    );
    let stocks: Vec<(String, u32)> = all.iter().map(|w| (w.sku.clone(), w.stock)).collect();
    assert_eq!(
        stocks,
        [
            ("a".into(), 0),
            ("b".into(), 7),
            ("c".into(), 3),
            ("d".into(), 0)
        ]
    );
    assert!(new.verify_indexes("main").await.expect("verify").is_clean());
    let red: Vec<String> = new
        .index(Widget::indexes().colour)
        .find("main", "red")
        .map_ok(|w| w.sku)
        .try_collect()
        .await
        .expect("colour index");
    assert_eq!(red, ["a", "c"]);
    backend.delete_table(&name).await.expect("delete table");
}

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
async fn upgraded_meanwhile<N>(new: &Table<N>, key: &(String, String), expected: &N)
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
async fn three_old_widgets(
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
async fn migration_meets_an_update_after_call(backend: &Arc<dyn TableBackend>, k: usize) -> bool {
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
