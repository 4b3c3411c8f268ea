//! Property names are stored once per store, each row naming its
//! properties by number: rows read back with their own names, past the
//! store's table of names too, and a damaged name is `Damaged`, never a
//! property under another name. A store of another format (one made before
//! names were stored once, say) is refused as such, never misread.

use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use tablekit::{Entity, Error, GetOptions, Query, StorageFailure, TableBackend, TableBackendExt};
use tablekit_local::{FILE_NAME, LocalStorage};

/// More names than the store gives numbers to (16,384): the later ones are
/// kept in the rows that use them.
const ROWS: usize = 80;
const PER_ROW: usize = 240;

/// Row `n`: names of its own, and two every row shares.
fn row(n: usize) -> Entity {
    let mut entity = Entity::new("p", format!("r{n:03}"))
        .with("Shared", n as i64)
        .with("Also", format!("row {n}"));
    for i in 0..PER_ROW {
        entity = entity.with(format!("N{n}x{i}"), format!("{n}/{i}"));
    }
    entity
}

fn same_properties(got: &Entity, expected: &Entity) -> bool {
    let sorted = |e: &Entity| {
        let mut props: Vec<_> = e
            .properties
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        props.sort_by(|a, b| a.0.cmp(&b.0));
        props
    };
    sorted(got) == sorted(expected)
}

#[tokio::test(flavor = "current_thread")]
async fn names_past_the_store_s_table_of_names_read_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("Wide").await.unwrap();
        for n in 0..ROWS {
            store.insert_entity("Wide", &row(n)).await.unwrap();
        }
        // A merge reads the stored row's names in the writer's transaction.
        let merged = Entity::new("p", "r000").with("N79x0", "merged");
        store
            .upsert_entity("Wide", &merged, tablekit::UpdateMode::Merge)
            .await
            .unwrap();
        let got = store
            .get_entity("Wide", "p", "r000", &GetOptions::default())
            .await
            .unwrap();
        let mut expected = row(0);
        expected.properties.insert("N79x0", "merged");
        assert!(same_properties(&got, &expected), "{got:?}");
    }
    // Read by a new process's worth of state: nothing cached.
    let store = LocalStorage::open(dir.path()).unwrap();
    let rows = store.query_all("Wide", Query::new()).await.unwrap();
    assert_eq!(rows.len(), ROWS);
    for (n, got) in rows.iter().enumerate() {
        let mut expected = row(n);
        if n == 0 {
            expected.properties.insert("N79x0", "merged");
        }
        assert!(same_properties(got, &expected), "row {n}: {got:?}");
    }
    // Passed to a typed reader (`read_rows`), each row holds the same.
    let mut passed = 0;
    let mut read = |row: tablekit::RowRef<'_>| {
        let got = Entity {
            properties: row.properties.clone(),
            ..Entity::new(row.partition_key, row.row_key)
        };
        assert!(
            same_properties(&got, &rows[passed]),
            "row {passed}: {got:?}"
        );
        passed += 1;
        Ok(())
    };
    let next = store.read_rows("Wide", &Query::new(), &mut read).await;
    assert!(matches!(next, Ok(None)), "{next:?}");
    assert_eq!(passed, ROWS);
    // A selection of names with numbers and without.
    let select = Query::new().select(["Shared", "N79x239"]);
    let rows = store.query_all("Wide", select).await.unwrap();
    assert!(rows[79].properties.get("N79x239").is_some());
    assert_eq!(rows[79].properties.len(), 2);
    assert_eq!(rows[0].properties.len(), 1);
    let report = store.check().await.unwrap();
    assert!(report.is_clean(), "{report}: {:?}", report.damaged);
    // The later names are in their rows: the table of names stopped.
    drop(store);
    assert_eq!(names(dir.path()).len(), 16_384);
}

/// The engine's table of names by number, read directly.
fn names(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let db = redb::Database::open(dir.join(FILE_NAME)).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(NAMES).unwrap();
    table
        .iter()
        .unwrap()
        .map(|item| {
            let (id, name) = item.unwrap();
            (id.value(), name.value().to_vec())
        })
        .collect()
}

const NAMES: TableDefinition<'static, u64, &[u8]> = TableDefinition::new("property_names");

#[tokio::test(flavor = "current_thread")]
async fn a_damaged_name_is_damage_never_another_name() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("Tee").await.unwrap();
        let entity = Entity::new("p", "r").with("Alpha", 1).with("Beta", 2);
        store.insert_entity("Tee", &entity).await.unwrap();
    }
    // The stored names of the two numbers swapped.
    let stored = names(dir.path());
    assert_eq!(stored.len(), 2);
    {
        let db = redb::Database::open(dir.path().join(FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(NAMES).unwrap();
            table.insert(stored[0].0, stored[1].1.as_slice()).unwrap();
            table.insert(stored[1].0, stored[0].1.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = LocalStorage::open(dir.path()).unwrap();
    let damaged = |result: Result<Entity, Error>| match result {
        Err(Error::Storage {
            failure: StorageFailure::Damaged,
            message,
            ..
        }) => message,
        other => panic!("not damage: {other:?}"),
    };
    let message = damaged(
        store
            .get_entity("Tee", "p", "r", &GetOptions::default())
            .await,
    );
    assert!(message.contains("(\"p\", \"r\")"), "{message}");
    let queried = store
        .query_all("Tee", Query::new())
        .await
        .map(|mut rows| rows.remove(0));
    damaged(queried);
    let report = store.check().await.unwrap();
    let places: Vec<_> = report.damaged.iter().map(|d| d.place.as_str()).collect();
    assert!(places.contains(&"the property name of id 0"), "{places:?}");
    assert!(
        places.contains(&"table `Tee`, row (\"p\", \"r\")"),
        "{places:?}"
    );
}

/// The store in `dir`, opened read-only or for writing.
fn open_as(dir: &std::path::Path, read_only: bool) -> tablekit_core::Result<LocalStorage> {
    if read_only {
        LocalStorage::open_read_only(dir)
    } else {
        LocalStorage::open(dir)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_of_another_format_is_refused_as_such() {
    const META: TableDefinition<'static, &str, i64> = TableDefinition::new("meta");
    let dir = tempfile::tempdir().unwrap();
    drop(LocalStorage::open(dir.path()).unwrap());
    for format in [Some(1), Some(3), None] {
        {
            let db = redb::Database::open(dir.path().join(FILE_NAME)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(META).unwrap();
                match format {
                    Some(format) => meta.insert("format", format).map(drop),
                    None => meta.remove("format").map(drop),
                }
                .unwrap();
            }
            txn.commit().unwrap();
        }
        for read_only in [false, true] {
            match open_as(dir.path(), read_only) {
                Err(Error::Storage {
                    failure: StorageFailure::Format,
                    message,
                    ..
                }) => {
                    let made = format.map_or("older than 2".to_owned(), |f| format!("format {f}"));
                    assert!(message.contains(&made), "{message}");
                    assert!(message.contains("reads format 2"), "{message}");
                }
                other => panic!("{format:?}, read-only {read_only}: {other:?}"),
            }
        }
    }
}

/// An engine whose settings are missing, empty, or hold keys no store
/// writes, and no format number (a crash that tore the file can leave the
/// engine to recover to pages that were never one state) is refused as
/// damage, writable and read-only: never as a store of an older format.
#[tokio::test(flavor = "current_thread")]
async fn settings_no_store_wrote_are_damage_not_an_old_format() {
    const META: TableDefinition<'static, &str, i64> = TableDefinition::new("meta");
    for damage in ["missing", "empty", "strange"] {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = LocalStorage::open(dir.path()).unwrap();
            store.create_table("Tee").await.unwrap();
        }
        {
            let db = redb::Database::open(dir.path().join(FILE_NAME)).unwrap();
            let txn = db.begin_write().unwrap();
            assert!(
                txn.delete_table(META).unwrap(),
                "the store had its settings"
            );
            match damage {
                "empty" => drop(txn.open_table(META).unwrap()),
                "strange" => {
                    let mut meta = txn.open_table(META).unwrap();
                    meta.insert("journal", 0).unwrap();
                    meta.insert("\u{1}\u{7f}x", 9).unwrap();
                }
                _ => {}
            }
            txn.commit().unwrap();
        }
        let before = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
        for read_only in [true, false] {
            match open_as(dir.path(), read_only) {
                Err(Error::Storage {
                    failure: StorageFailure::Damaged,
                    message,
                    ..
                }) => assert!(!message.contains("format"), "{damage}: {message}"),
                other => panic!("{damage}, read-only {read_only}: {other:?}"),
            }
            // (The engine's own open for writing may touch its header.)
            let now = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
            assert!(
                !read_only || now == before,
                "a read-only open changed the file"
            );
        }
    }
}

/// A table of names damaged to hold a number the store never gives (past
/// its last, say the largest there is): a write of a new name is refused
/// as damage, never given a number counted on from it, which could wrap
/// round to one in use; the rows stored read as they were.
#[tokio::test(flavor = "current_thread")]
async fn a_number_the_store_never_gives_refuses_new_names() {
    let dir = tempfile::tempdir().unwrap();
    let entity = Entity::new("p", "r").with("Alpha", 1).with("Beta", 2);
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("Tee").await.unwrap();
        store.insert_entity("Tee", &entity).await.unwrap();
    }
    {
        let db = redb::Database::open(dir.path().join(FILE_NAME)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(NAMES)
            .unwrap()
            .insert(u64::MAX, b"junk".as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let store = LocalStorage::open(dir.path()).unwrap();
    let new_name = Entity::new("p", "s").with("Gamma", 3);
    match store.insert_entity("Tee", &new_name).await {
        Err(Error::Storage {
            failure: StorageFailure::Damaged,
            ..
        }) => {}
        other => panic!("not damage: {other:?}"),
    }
    // Names with numbers already are still written and read.
    let known = Entity::new("p", "t").with("Beta", 4);
    store.insert_entity("Tee", &known).await.unwrap();
    for expected in [&entity, &known] {
        let got = store
            .get_entity("Tee", "p", &expected.row_key, &GetOptions::default())
            .await
            .unwrap();
        assert!(same_properties(&got, expected), "{got:?}");
    }
    let report = store.check().await.unwrap();
    let places: Vec<_> = report.damaged.iter().map(|d| d.place.as_str()).collect();
    assert_eq!(places, ["the property name of id 18446744073709551615"]);
}

/// The rows of one transaction share the names they give: each row reads
/// back with its own names and values, after a reopen too.
#[tokio::test(flavor = "current_thread")]
async fn a_transaction_s_rows_share_the_names_they_give() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Entity> = (0..20)
        .map(|n| {
            Entity::new("p", format!("r{n:02}"))
                .with("Both", n as i64)
                .with(format!("Own{n}"), format!("own {n}"))
                .with("Also", format!("also {n}"))
        })
        .collect();
    {
        let store = LocalStorage::open(dir.path()).unwrap();
        store.create_table("Tee").await.unwrap();
        let ops: Vec<_> = rows
            .iter()
            .cloned()
            .map(tablekit::BatchOperation::Insert)
            .collect();
        store.submit_transaction("Tee", &ops).await.unwrap();
    }
    let store = LocalStorage::open(dir.path()).unwrap();
    let read = store.query_all("Tee", Query::new()).await.unwrap();
    assert_eq!(read.len(), rows.len());
    for (got, expected) in read.iter().zip(&rows) {
        assert!(same_properties(got, expected), "{got:?}");
    }
    drop(store);
    // Two names for 20 rows, and each row's own.
    assert_eq!(names(dir.path()).len(), 22);
}
