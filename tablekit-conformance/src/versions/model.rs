//! A model run of migrations: random rows of an older version, changed while the migration runs.

use super::*;

/// The partitions of run `run` of [`migration_model_runs`]: `m{run}-…`.
pub(super) fn this_run(run: usize) -> tablekit::filter::Filter {
    use tablekit::filter::Filter;
    Filter::partition_key().ge(format!("m{run}-")) & Filter::partition_key().lt(format!("m{run}."))
}

/// Up to 40 rows over `shops`, most written as version 1 by the old
/// program and a fifth as version 2 by the new: the model, as version 2.
pub(super) async fn write_model_rows<P: VersionPair>(
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
pub(super) async fn change_a_row<P: VersionPair>(
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
pub(super) async fn migrated_as_modelled<P: VersionPair>(
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
pub(super) trait VersionPair {
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
pub(super) struct IndexedPair;

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
pub(super) struct PlainPair;

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

pub(super) async fn model_runs<P: VersionPair>(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    seed: u64,
) -> MigrationOutcomes
where
    P::Old: TableEntity<PartitionKey = String, RowKey = String>,
    P::New: TableEntity<PartitionKey = String, RowKey = String>,
{
    use tablekit::layer::FaultInjection;
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
            migration_faults(&faults, &mut rng);
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
            let result = crate::drop_after_polls(polls, migration.run()).await;
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
                    crate::settle().await;
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

/// An attempt's faults: every call yields once, and one time in three a
/// transient failure, a lost answer or a failure after the store applied the
/// write hits a tenth of the calls.
fn migration_faults(faults: &tablekit::layer::FaultHandle, rng: &mut fastrand::Rng) {
    use tablekit::layer::{Fault, Injection};
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
}
