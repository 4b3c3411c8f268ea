//! Typed queries on the disk store (`collect()` and `stream()`) read each
//! row where the store decodes it (`read_rows`), without an entity in
//! between, and so do typed point reads (`get`, through `read_row`). They must read exactly what the entities give: the values, ETags, Timestamps, versions and the
//! properties a type has no field for, at every limit and page size, with
//! keys the store keeps encoded. A reader's error ends its page, a reader's
//! panic is its own and leaves the store working, and a damaged row is
//! `Damaged` on this path too.

use std::path::Path;

use futures::TryStreamExt;
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use tablekit::TableBackendExt;
use tablekit::table::{RowErrors, SkippedRows};
use tablekit::{
    Entity, Error, Loaded, Query, RowRef, StorageFailure, Table, TableBackend, TableEntity,
    UpdateMode,
};
use tablekit_local::{FILE_NAME, LocalStorage};

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    age: i32,
}

/// The same rows read with fewer fields: `age`, and whatever else a row
/// holds, are the value's unknown properties.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP")]
struct EmployeeName {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

/// Departments whose keys the store keeps encoded (U+E000 and past
/// U+FFFF), and a plain one.
const DEPARTMENTS: [&str; 3] = ["Dept\u{E000}\u{FFFD}", "Dept\u{1F600}", "Sales"];

fn employee(department: &str, id: u32) -> Employee {
    Employee {
        department: department.into(),
        id,
        name: format!("emp {id} \u{E001}"),
        age: 20 + (id % 50) as i32,
    }
}

/// A store of employees: some written alone, some in transactions (rows
/// of one ETag), one merged with a property no type has, one whose `age`
/// is text (it does not read as an `Employee`).
async fn filled(dir: &Path) -> LocalStorage {
    let store = LocalStorage::open(dir).unwrap();
    let staff = Table::<Employee>::new(store.clone());
    staff.create_if_missing().await.unwrap();
    for department in DEPARTMENTS {
        for id in 0..5 {
            staff.insert(&employee(department, id)).await.unwrap();
        }
        let batch: Vec<_> = (5..60).map(|id| employee(department, id)).collect();
        for chunk in batch.chunks(20) {
            let mut transaction = staff.batch();
            for row in chunk {
                transaction.insert(row).unwrap();
            }
            transaction.submit().await.unwrap();
        }
    }
    let row_key = |id: u32| {
        tablekit::schema::to_entity(&employee("Sales", id))
            .unwrap()
            .row_key
    };
    let extra = Entity::new("Sales", row_key(7)).with("Extra", "kept");
    store
        .upsert_entity("Staff", &extra, UpdateMode::Merge)
        .await
        .unwrap();
    let unreadable = Entity::new("Sales", row_key(9)).with("age", "forty");
    store
        .upsert_entity("Staff", &unreadable, UpdateMode::Merge)
        .await
        .unwrap();
    store
}

/// What a value read says of its row, for comparing two reads.
fn described<T: std::fmt::Debug>(rows: &[Loaded<T>]) -> Vec<String> {
    rows.iter()
        .map(|row| {
            format!(
                "{:?} {:?} {:?} {:?} {:?}",
                &**row,
                Loaded::etag(row),
                Loaded::timestamp(row),
                Loaded::version(row),
                Loaded::unknown_properties(row),
            )
        })
        .collect()
}

/// The store, passing no rows by reference: every read goes through its
/// entities. With `claims_rows`, it says it passes rows by reference
/// (`reads_rows`) while it passes none: a read that would take them gets
/// the contract's `NotSupported`.
#[derive(Debug)]
struct EntitiesOnly(LocalStorage, bool);

#[async_trait::async_trait]
impl TableBackend for EntitiesOnly {
    async fn create_table(&self, table: &str) -> tablekit::Result<()> {
        self.0.create_table(table).await
    }
    async fn delete_table(&self, table: &str) -> tablekit::Result<()> {
        self.0.delete_table(table).await
    }
    async fn list_tables(
        &self,
        options: &tablekit::ListTablesOptions,
    ) -> tablekit::Result<tablekit::TablePage> {
        self.0.list_tables(options).await
    }
    async fn get_entity(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        options: &tablekit::GetOptions,
    ) -> tablekit::Result<Entity> {
        self.0
            .get_entity(table, partition_key, row_key, options)
            .await
    }
    async fn query_entities(
        &self,
        table: &str,
        query: &Query,
    ) -> tablekit::Result<tablekit::QueryPage> {
        self.0.query_entities(table, query).await
    }
    fn store_info(&self) -> tablekit::telemetry::StoreInfo {
        self.0.store_info()
    }
    fn reads_rows(&self, query: &Query) -> bool {
        self.1 && self.0.reads_rows(query)
    }
    async fn write_entity(
        &self,
        table: &str,
        write: tablekit::EntityWrite<'_>,
    ) -> tablekit::Result<Option<tablekit::ETag>> {
        self.0.write_entity(table, write).await
    }
    async fn submit_transaction(
        &self,
        table: &str,
        operations: &[tablekit::BatchOperation],
    ) -> tablekit::Result<Vec<Option<tablekit::ETag>>> {
        self.0.submit_transaction(table, operations).await
    }
}

/// Whether `result` is the contract's refusal of `read_row` (what a read by
/// reference gets from [`EntitiesOnly`] claiming rows).
fn refuses_read_row<T>(result: &tablekit::Result<T>) -> bool {
    matches!(
        result,
        Err(Error::NotSupported {
            operation: "read_row"
        })
    )
}

/// Compares `collect()` and `stream()` (borrowed rows) with `stream()` on
/// [`EntitiesOnly`] (entities); `sales` is how many of the Sales rows read
/// as `T`.
async fn compare<T>(store: &LocalStorage, sales: usize)
where
    T: TableEntity + std::fmt::Debug + Send + 'static,
    for<'a> &'a str: tablekit::schema::KeyArg<T::PartitionKey>,
{
    let table = Table::<T>::new(store.clone());
    let reference = Table::<T>::new(EntitiesOnly(store.clone(), false));
    for department in DEPARTMENTS {
        for page_size in [1, 3, 40, 1000] {
            for limit in [None, Some(0), Some(1), Some(3), Some(21), Some(10_000)] {
                let query = |table: &Table<T>| {
                    let skipped = RowErrors::Skip(SkippedRows::default());
                    let query = table
                        .query()
                        .partition(department)
                        .page_size(page_size)
                        .on_row_error(skipped);
                    match limit {
                        Some(n) => query.limit(n),
                        None => query,
                    }
                };
                let collected = query(&table).collect().await.unwrap();
                let streamed: Vec<_> = query(&table).stream().try_collect().await.unwrap();
                let expected: Vec<_> = query(&reference).stream().try_collect().await.unwrap();
                let context = format!("{department:?}, page size {page_size}, limit {limit:?}");
                assert_eq!(described(&collected), described(&expected), "{context}");
                assert_eq!(described(&streamed), described(&expected), "{context}");
                // One page, and the token after it.
                let (page, next) = query(&table).page().await.unwrap();
                let (expected, expected_next) = query(&reference).page().await.unwrap();
                assert_eq!(described(&page), described(&expected), "{context}");
                assert_eq!(
                    next.map(|t| t.to_string()),
                    expected_next.map(|t| t.to_string()),
                    "{context}"
                );
                let all = if department == "Sales" { sales } else { 60 };
                let expected = limit.map_or(all, |n| n.min(all));
                assert_eq!(collected.len(), expected, "{department:?} {limit:?}");
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn typed_reads_of_borrowed_rows_are_what_the_entities_give() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(dir.path()).await;
    let query = Query::new().filter(tablekit::filter::prop("PartitionKey").eq("Sales"));
    assert!(
        store.reads_rows(&query),
        "the store passes a key range's rows by reference"
    );
    compare::<Employee>(&store, 59).await;
    compare::<EmployeeName>(&store, 60).await;

    // The unknown properties are the row's, on the borrowed path too.
    let names = Table::<EmployeeName>::new(store.clone());
    let read = names.query().partition("Sales").collect().await.unwrap();
    let seven = read.iter().find(|e| e.id == 7).unwrap();
    let unknown = Loaded::unknown_properties(seven);
    assert_eq!(unknown.get("Extra"), Some(&tablekit::Value::from("kept")));
    assert_eq!(unknown.get("age"), Some(&tablekit::Value::Int32(27)));

    // The row that does not read as an `Employee` fails the query by default.
    let staff = Table::<Employee>::new(store.clone());
    let failed = staff.query().partition("Sales").collect().await;
    assert!(matches!(failed, Err(Error::Schema(_))), "{failed:?}");
    let skipped = SkippedRows::default();
    let read = staff
        .query()
        .partition("Sales")
        .on_row_error(RowErrors::Skip(skipped.clone()))
        .collect()
        .await
        .unwrap();
    assert_eq!((read.len(), skipped.count()), (59, 1));
}

/// `get` by reference (`read_row`) and from the entity (`get_entity`)
/// reads the same, a row that does not read as the type fails alike, and a
/// missing row is `None` either way.
#[tokio::test(flavor = "current_thread")]
async fn typed_point_reads_of_borrowed_rows_are_what_the_entities_give() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(dir.path()).await;
    let (staff, names) = (
        Table::<Employee>::new(store.clone()),
        Table::<EmployeeName>::new(store.clone()),
    );
    let (staff_reference, names_reference) = (
        Table::<Employee>::new(EntitiesOnly(store.clone(), false)),
        Table::<EmployeeName>::new(EntitiesOnly(store.clone(), false)),
    );
    let mut unreadable = 0;
    for department in DEPARTMENTS.into_iter().chain(["Nowhere"]) {
        for id in [0, 4, 5, 7, 9, 30, 59, 60, 1000] {
            let context = format!("{department:?} {id}");
            match (
                staff.get(department, id).await,
                staff_reference.get(department, id).await,
            ) {
                (Ok(got), Ok(expected)) => {
                    let expected_found = expected.is_some() == (department != "Nowhere" && id < 60);
                    assert!(expected_found, "{context}");
                    assert_eq!(
                        described(got.as_slice()),
                        described(expected.as_slice()),
                        "{context}"
                    );
                }
                (Err(Error::Schema(got)), Err(Error::Schema(expected))) => {
                    assert_eq!(got.to_string(), expected.to_string(), "{context}");
                    unreadable += 1;
                }
                (got, expected) => panic!("{context}: {got:?} against {expected:?}"),
            }
            let got = names.get(department, id).await.unwrap();
            let expected = names_reference.get(department, id).await.unwrap();
            assert_eq!(
                described(got.as_slice()),
                described(expected.as_slice()),
                "{context}"
            );
        }
    }
    assert_eq!(unreadable, 1, "the row whose age is text");
    // `get` reads by reference where the store says it passes rows so.
    let claiming = Table::<Employee>::new(EntitiesOnly(store.clone(), true));
    let refused = claiming.get("Sales", 4).await;
    assert!(refuses_read_row(&refused), "{refused:?}");
    // The unknown properties are the row's, read by key too.
    let seven = names.get("Sales", 7).await.unwrap().unwrap();
    let unknown = Loaded::unknown_properties(&seven);
    assert_eq!(unknown.get("Extra"), Some(&tablekit::Value::from("kept")));
}

/// A second kind beside `Employee` in the same partitions.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "MGR")]
struct Manager {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    reports: i64,
}

/// The kinds of a department's partition.
#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]
enum Staffer {
    Employee(Employee),
    Manager(Manager),
}

/// A partition of several kinds (`read_partition`) reads by reference
/// what it reads from the entities: the same values, ETags, Timestamps
/// and versions, bookkeeping rows left out, a row of no kind failing or
/// left out alike.
#[tokio::test(flavor = "current_thread")]
async fn partitions_of_several_kinds_read_by_reference_what_the_entities_give() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(dir.path()).await;
    let managers = Table::<Manager>::new(store.clone());
    for department in DEPARTMENTS {
        for id in [3, 61] {
            let reports = i64::from(id % 5);
            let manager = Manager {
                department: department.into(),
                id,
                reports,
            };
            managers.insert(&manager).await.unwrap();
        }
    }
    // A row of no kind the enum knows in one department, and bookkeeping
    // (an index row's shape, under a kind's prefix) in each.
    store
        .insert_entity(
            "Staff",
            &Entity::new("Dept\u{1F600}", "ZZZ_1").with("_Kind", "ZZZ"),
        )
        .await
        .unwrap();
    for department in DEPARTMENTS {
        let index_row = Entity::new(department, "EMP_~index")
            .with("_Row", "EMP_1")
            .with("_Index", "name");
        store.insert_entity("Staff", &index_row).await.unwrap();
    }
    let kinds = Table::<Employee>::new(store.clone()).of::<Staffer>();
    let reference = Table::<Employee>::new(EntitiesOnly(store.clone(), false)).of::<Staffer>();
    for department in DEPARTMENTS {
        for unknown in [tablekit::UnknownKind::Skip, tablekit::UnknownKind::Fail] {
            let read: Result<Vec<_>, _> = kinds
                .read_partition(department, unknown)
                .try_collect()
                .await;
            let expected: Result<Vec<_>, _> = reference
                .read_partition(department, unknown)
                .try_collect()
                .await;
            let context = format!("{department:?} {unknown:?}");
            match (read, expected) {
                (Ok(read), Ok(expected)) => {
                    assert_eq!(described(&read), described(&expected), "{context}");
                    let managers = read
                        .iter()
                        .filter(|row| matches!(&***row, Staffer::Manager(_)))
                        .count();
                    assert_eq!(managers, 2, "{context}");
                }
                (Err(read), Err(expected)) => {
                    assert_eq!(read.to_string(), expected.to_string(), "{context}")
                }
                (read, expected) => panic!("{context}: {read:?} against {expected:?}"),
            }
        }
    }
}

/// A row whose keys are any text.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Notes")]
struct Note {
    #[tablekit(partition_key)]
    topic: String,
    #[tablekit(row_key)]
    key: String,
    text: String,
}

#[tokio::test(flavor = "current_thread")]
async fn keys_the_store_keeps_encoded_are_passed_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::open(dir.path()).unwrap();
    let notes = Table::<Note>::new(store.clone());
    notes.create_if_missing().await.unwrap();
    let keys = [
        "a",
        "b\u{E000}",
        "c\u{EFFF}d",
        "d\u{F8FF}",
        "e\u{FFFF}",
        "f\u{10000}",
        "g\u{1F600}h",
    ];
    let mut written = Vec::new();
    for topic in ["plain", "t\u{E000}"] {
        for key in keys {
            let note = Note {
                topic: topic.into(),
                key: key.into(),
                text: format!("{topic}/{key}"),
            };
            notes.insert(&note).await.unwrap();
            written.push(note);
        }
    }
    for topic in ["plain", "t\u{E000}"] {
        let collected = notes.query().partition(topic).collect().await.unwrap();
        let reference = Table::<Note>::new(EntitiesOnly(store.clone(), false));
        let streamed: Vec<_> = reference
            .query()
            .partition(topic)
            .stream()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(described(&collected), described(&streamed));
        let mut expected: Vec<_> = written
            .iter()
            .filter(|n| n.topic == topic)
            .cloned()
            .collect();
        expected.sort_by(|a, b| tablekit::keyorder::cmp_utf16(&a.key, &b.key));
        let read: Vec<Note> = collected.into_iter().map(Loaded::into_inner).collect();
        assert_eq!(read, expected, "{topic:?}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_reader_s_error_ends_its_page_and_its_panic_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled(dir.path()).await;
    let query = Query::new().filter(tablekit::filter::prop("PartitionKey").eq("Sales"));

    let mut passed = Vec::new();
    let mut read = |row: RowRef<'_>| {
        passed.push(row.row_key.to_owned());
        if passed.len() == 2 {
            return Err(Error::Decode {
                message: "the reader's own".into(),
            });
        }
        Ok(())
    };
    let ended = store.read_rows("Staff", &query, &mut read).await;
    assert!(
        matches!(&ended, Err(Error::Decode { message }) if message == "the reader's own"),
        "{ended:?}"
    );
    assert_eq!(passed.len(), 2);

    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures::executor::block_on(store.read_rows("Staff", &query, &mut |_: RowRef<'_>| {
            panic!("the reader's panic")
        }))
    }));
    let payload = panicked.expect_err("the reader's panic reaches its caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the reader's panic"));
    // The store took it for no damage of its own: it reads and writes on.
    let page = store.query_entities("Staff", &query).await.unwrap();
    assert_eq!(page.entities.len(), 60);
    store
        .insert_entity("Staff", &Entity::new("Sales", "after"))
        .await
        .unwrap();

    // So with a row read by key: the reader's error, as it is; its panic,
    // its own; no row, `false` and nothing passed.
    let mut read = |_: RowRef<'_>| -> tablekit::Result<()> {
        Err(Error::Decode {
            message: "the reader's own".into(),
        })
    };
    let key = tablekit::schema::to_entity(&employee("Sales", 3))
        .unwrap()
        .row_key;
    let ended = store.read_row("Staff", "Sales", &key, &mut read).await;
    assert!(
        matches!(&ended, Err(Error::Decode { message }) if message == "the reader's own"),
        "{ended:?}"
    );
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures::executor::block_on(store.read_row("Staff", "Sales", &key, &mut |_| {
            panic!("the reader's panic")
        }))
    }));
    let payload = panicked.expect_err("the reader's panic reaches its caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the reader's panic"));
    let mut passed = 0;
    let found = store
        .read_row("Staff", "Sales", "no such row", &mut |_| {
            passed += 1;
            Ok(())
        })
        .await;
    assert!(matches!(found, Ok(false)), "{found:?}");
    assert_eq!(passed, 0);
    let mut read_back = None;
    let found = store
        .read_row("Staff", "Sales", &key, &mut |row: RowRef<'_>| {
            read_back = Some((row.row_key.to_owned(), row.properties.get("name").cloned()));
            Ok(())
        })
        .await;
    assert!(matches!(found, Ok(true)), "{found:?}");
    assert_eq!(
        read_back,
        Some((key, Some(tablekit::Value::from("emp 3 \u{E001}"))))
    );

    // A query the store does not pass by reference (a projection) is
    // refused as such.
    let projected = query.clone().select(["name"]);
    assert!(!store.reads_rows(&projected));
    let refused = store
        .read_rows("Staff", &projected, &mut |_: RowRef<'_>| Ok(()))
        .await;
    assert!(
        matches!(refused, Err(Error::NotSupported { .. })),
        "{refused:?}"
    );

    // A filter of properties is evaluated on each row before it is passed:
    // the rows passed are those a query returns, page by page.
    let filtered = Query::new().filter(tablekit::filter::prop("age").gt(30));
    assert!(store.reads_rows(&filtered));
    let mut expected = Vec::new();
    let mut page_query = filtered.clone();
    loop {
        let page = store.query_entities("Staff", &page_query).await.unwrap();
        expected.extend(page.entities.into_iter().map(|e| e.row_key));
        match page.continuation {
            Some(next) => page_query.continuation = Some(next),
            None => break,
        }
    }
    assert!(!expected.is_empty());
    let mut passed = Vec::new();
    let mut page_query = filtered;
    loop {
        let next = store
            .read_rows("Staff", &page_query, &mut |row: RowRef<'_>| {
                passed.push(row.row_key.to_owned());
                Ok(())
            })
            .await
            .unwrap();
        match next {
            Some(next) => page_query.continuation = Some(next),
            None => break,
        }
    }
    assert_eq!(passed, expected);
}

#[tokio::test(flavor = "current_thread")]
async fn a_damaged_borrowed_row_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    drop(filled(dir.path()).await);
    // One byte of one stored row changed in the file.
    {
        let engine: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("rows/staff");
        let db = redb::Database::create(dir.path().join(FILE_NAME)).unwrap();
        let (key, mut value) = {
            let txn = db.begin_read().unwrap();
            let rows = txn.open_table(engine).unwrap();
            let (key, value) = rows.iter().unwrap().nth(70).unwrap().unwrap();
            (key.value().to_vec(), value.value().to_vec())
        };
        let last = value.len() - 1;
        value[last] ^= 0x01;
        let txn = db.begin_write().unwrap();
        txn.open_table(engine)
            .unwrap()
            .insert(key.as_slice(), value.as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let store = LocalStorage::open(dir.path()).unwrap();
    let staff = Table::<Employee>::new(store.clone());
    let mut damaged = 0;
    for department in DEPARTMENTS {
        let skipped = RowErrors::Skip(SkippedRows::default());
        let read = staff
            .query()
            .partition(department)
            .on_row_error(skipped)
            .collect()
            .await;
        match read {
            Ok(rows) => assert!(rows.len() >= 59, "{department:?}: {}", rows.len()),
            Err(Error::Storage {
                failure: StorageFailure::Damaged,
                message,
                ..
            }) => {
                assert!(message.contains("Staff"), "{message}");
                damaged += 1;
            }
            Err(other) => panic!("{department:?}: {other:?}"),
        }
    }
    assert_eq!(damaged, 1, "the damaged row's partition, and only it");
    // Read by key, the damaged row is damage too, and only it.
    let mut damaged = 0;
    for department in DEPARTMENTS {
        for id in 0..60 {
            match staff.get(department, id).await {
                Ok(found) => assert!(found.is_some(), "{department:?} {id}"),
                Err(Error::Storage {
                    failure: StorageFailure::Damaged,
                    ..
                }) => damaged += 1,
                Err(Error::Schema(_)) if department == "Sales" && id == 9 => {}
                Err(other) => panic!("{department:?} {id}: {other:?}"),
            }
        }
    }
    assert_eq!(damaged, 1, "the damaged row, read by key");
}

/// A badge, found by its unique email and by its city; neither index
/// copies a field, so a read through one follows it to the entity.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Badges", kind = "BDG")]
#[tablekit(index(name = "email", copy()))]
#[tablekit(index(name = "city", copy()))]
struct Badge {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
    #[tablekit(index = "city")]
    city: String,
    holder: String,
}

/// A badge's holder alone.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Badge)]
struct BadgeHolder {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    id: u32,
    holder: String,
}

/// Reads through an index follow each index row to an entity read by
/// reference (`read_row`), of the type itself or of a projection, and read
/// the same as through entities: found, missing, and an index row whose
/// entity no longer holds its value (left out).
#[tokio::test(flavor = "current_thread")]
async fn index_reads_follow_to_borrowed_rows() {
    use futures::TryStreamExt;
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::open(dir.path()).unwrap();
    let badges = Table::<Badge>::new(store.clone());
    badges.create_if_missing().await.unwrap();
    let badge = |id: u32| Badge {
        site: "North".into(),
        id,
        email: format!("b{id}@example.com"),
        city: ["Oslo", "Bergen", "Tromsø"][id as usize % 3].into(),
        holder: format!("holder {id}"),
    };
    for id in 0..12 {
        badges.insert(&badge(id)).await.unwrap();
    }
    // Badge 4's entity moves to another email behind the index's back: its
    // old index row names an entity that no longer holds the value.
    let row_key = tablekit::schema::to_entity(&badge(4)).unwrap().row_key;
    let moved = Entity::new("North", row_key).with("email", "elsewhere@example.com");
    store
        .upsert_entity("Badges", &moved, UpdateMode::Merge)
        .await
        .unwrap();

    let through_entities = Table::<Badge>::new(EntitiesOnly(store.clone(), false));
    let indexes = Badge::indexes();
    for id in (0..14).chain([4]) {
        let email = format!("b{id}@example.com");
        let got = badges
            .index(indexes.email)
            .get("North", &email)
            .await
            .unwrap();
        let expected = through_entities
            .index(indexes.email)
            .get("North", &email)
            .await
            .unwrap();
        assert_eq!(got, expected, "{email}");
        assert_eq!(got.is_some(), id < 12 && id != 4, "{email}");
        let holder = badges.index(indexes.email).project::<BadgeHolder>();
        let got = holder.get("North", &email).await.unwrap();
        assert_eq!(got.map(|h| h.holder), expected.map(|b| b.holder), "{email}");
    }
    for city in ["Oslo", "Bergen", "Tromsø", "Nowhere"] {
        let got: Vec<Badge> = badges
            .index(indexes.city)
            .find("North", city)
            .try_collect()
            .await
            .unwrap();
        let expected: Vec<Badge> = through_entities
            .index(indexes.city)
            .find("North", city)
            .try_collect()
            .await
            .unwrap();
        assert_eq!(got, expected, "{city}");
        assert_eq!(got.len(), if city == "Nowhere" { 0 } else { 4 }, "{city}");
        // A projection reads the same entities, each as the projection.
        let holders: Vec<BadgeHolder> = badges
            .index(indexes.city)
            .project::<BadgeHolder>()
            .find("North", city)
            .try_collect()
            .await
            .unwrap();
        let holders: Vec<String> = holders.into_iter().map(|h| h.holder).collect();
        let expected: Vec<String> = expected.into_iter().map(|b| b.holder).collect();
        assert_eq!(holders, expected, "{city}");
    }

    // They go through `read_row` where the store says it passes rows so,
    // projections too.
    let claiming = Table::<Badge>::new(EntitiesOnly(store.clone(), true));
    let refused = claiming
        .index(indexes.email)
        .get("North", "b1@example.com")
        .await;
    assert!(refuses_read_row(&refused), "{refused:?}");
    let refused: Result<Vec<Badge>, _> = claiming
        .index(indexes.city)
        .find("North", "Oslo")
        .try_collect()
        .await;
    assert!(refuses_read_row(&refused), "{refused:?}");
    let holder = claiming.index(indexes.email).project::<BadgeHolder>();
    let refused = holder.get("North", "b1@example.com").await;
    assert!(refuses_read_row(&refused), "{refused:?}");
    let refused: Result<Vec<BadgeHolder>, _> = claiming
        .index(indexes.city)
        .project::<BadgeHolder>()
        .find("North", "Oslo")
        .try_collect()
        .await;
    assert!(refuses_read_row(&refused), "{refused:?}");
}
