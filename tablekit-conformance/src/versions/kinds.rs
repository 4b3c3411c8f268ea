//! Migrations of wide entities and through projections, and kinds renamed since they were written.

use super::*;

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
        let result = crate::drop_after_polls(3 + attempt * 2, migration.run()).await;
        if let Some(c) = seen.lock().expect("lock").take() {
            last = Some(c);
        }
        match result {
            None => {
                interruptions += 1;
                crate::settle().await;
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
pub(super) struct RenamedPair;

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
pub(super) async fn old_rows_read_on_every_path(new: &Table<Widget>) -> Loaded<Widget> {
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
