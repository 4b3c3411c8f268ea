//! Secondary indexes in the entity's partition: every typed write keeps the
//! index rows in step, in one transaction, whatever fails on the way.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::TryStreamExt;

use super::fresh_table;
use tablekit::Error;
use tablekit::IfMatch;
use tablekit::TableBackendExt;
use tablekit::backend::{Query, TableBackend};
use tablekit::filter::Filter;
use tablekit::layer::{Fault, FaultInjection, Injection};
use tablekit::table::{Loaded, Table};
use tablekit::{Entity, TableEntity};

/// An employee with a unique index by email, a compound non-unique index
/// by name whose rows copy only the email, and an index entity per team.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "EMP")]
#[tablekit(index(name = "email", tag = "email"))]
#[tablekit(index(name = "name", copy(email)))]
#[tablekit(index(name = "team", list))]
pub struct Staff {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique in the department.
    #[tablekit(unique = "email")]
    pub email: String,
    /// The last name, first in the name index.
    #[tablekit(index = "name")]
    pub last_name: String,
    /// The first name, second in the name index.
    #[tablekit(index = "name")]
    pub first_name: String,
    /// Not indexed; `None` keeps the stored value on a merge.
    pub phone: Option<String>,
    /// Not indexed.
    pub salary: u32,
    /// Hours on two days, one property each.
    #[tablekit(series)]
    pub hours: [u8; 2],
    /// The team, listed in one index entity per team.
    #[tablekit(index = "team")]
    pub team: String,
}

/// [`Staff`] without the index entity per team: every index row lives in
/// the entity's partition beside it, the shape whose deletes through a
/// [`Loaded`] are sent without planning. The model runs over both.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "EMP")]
#[tablekit(index(name = "email", tag = "email"))]
#[tablekit(index(name = "name", copy(email)))]
pub struct PlainStaff {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique in the department.
    #[tablekit(unique = "email")]
    pub email: String,
    /// The last name, first in the name index.
    #[tablekit(index = "name")]
    pub last_name: String,
    /// The first name, second in the name index.
    #[tablekit(index = "name")]
    pub first_name: String,
    /// Not indexed; `None` keeps the stored value on a merge.
    pub phone: Option<String>,
    /// Not indexed.
    pub salary: u32,
    /// Hours on two days, one property each.
    #[tablekit(series)]
    pub hours: [u8; 2],
    /// The team, not indexed here.
    pub team: String,
}

/// An entity type the index model runs over: [`Staff`] and [`PlainStaff`],
/// whose values the model keeps as [`Staff`].
pub trait ModelStaff:
    TableEntity<
        PartitionKey = <Staff as TableEntity>::PartitionKey,
        RowKey = <Staff as TableEntity>::RowKey,
    > + Clone
    + PartialEq
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The value holding `staff`'s fields.
    fn from_staff(staff: Staff) -> Self;
    /// The fields as a [`Staff`].
    fn to_staff(&self) -> Staff;
    /// The `hours` element `i`.
    fn hours_at(i: usize) -> tablekit::schema::Element<u8>;
    /// The entity holding `email` in partition `pk`, read through the email
    /// index.
    fn by_email(
        table: &Table<Self>,
        pk: &str,
        email: &str,
    ) -> impl std::future::Future<Output = tablekit::Result<Option<Self>>> + Send;
}

impl ModelStaff for Staff {
    fn from_staff(staff: Staff) -> Staff {
        staff
    }
    fn to_staff(&self) -> Staff {
        self.clone()
    }
    fn hours_at(i: usize) -> tablekit::schema::Element<u8> {
        Staff::columns().hours.at(i)
    }
    async fn by_email(
        table: &Table<Staff>,
        pk: &str,
        email: &str,
    ) -> tablekit::Result<Option<Staff>> {
        table.index(Staff::indexes().email).get(pk, email).await
    }
}

impl ModelStaff for PlainStaff {
    fn from_staff(s: Staff) -> PlainStaff {
        PlainStaff {
            department: s.department,
            id: s.id,
            email: s.email,
            last_name: s.last_name,
            first_name: s.first_name,
            phone: s.phone,
            salary: s.salary,
            hours: s.hours,
            team: s.team,
        }
    }
    fn to_staff(&self) -> Staff {
        let s = self.clone();
        Staff {
            department: s.department,
            id: s.id,
            email: s.email,
            last_name: s.last_name,
            first_name: s.first_name,
            phone: s.phone,
            salary: s.salary,
            hours: s.hours,
            team: s.team,
        }
    }
    fn hours_at(i: usize) -> tablekit::schema::Element<u8> {
        PlainStaff::columns().hours.at(i)
    }
    async fn by_email(
        table: &Table<PlainStaff>,
        pk: &str,
        email: &str,
    ) -> tablekit::Result<Option<PlainStaff>> {
        table
            .index(PlainStaff::indexes().email)
            .get(pk, email)
            .await
    }
}

/// A projection of [`Staff`] that the name index's rows serve alone.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit( projection_of = Staff)]
pub struct StaffEmail {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// The email.
    pub email: String,
}

fn staff(department: &str, id: u32, email: &str, last: &str, first: &str) -> Staff {
    Staff {
        department: department.into(),
        id,
        email: email.into(),
        last_name: last.into(),
        first_name: first.into(),
        phone: Some(format!("555-{id:04}")),
        salary: 1000 + id,
        hours: [8, 8],
        team: "red".into(),
    }
}

/// What is wrong with the index rows of `T` in partition `pk`: every entity
/// must have exactly its index rows, holding exactly their copies, and no
/// index row may name anything else. Empty when all is in step.
pub async fn index_problems<T: TableEntity>(
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
) -> Vec<String> {
    let rows = backend
        .query_all(table, Query::new().filter(Filter::partition_key().eq(pk)))
        .await
        .expect("read the partition");
    tablekit::index::problems::<T>(&rows)
}

fn strip(mut row: Entity) -> Entity {
    row.etag = None;
    row.timestamp = None;
    row
}

/// `Staff`'s index rows in partition `Sales` of `name` are in step.
async fn assert_staff_indexes_clean(backend: &dyn TableBackend, name: &str) {
    assert_eq!(
        index_problems::<Staff>(backend, name, "Sales").await,
        Vec::<String>::new()
    );
}

/// A unique violation (an insert, a replace and an upsert of a taken
/// email) names the index, the value and its holder, and writes nothing.
async fn unique_violations_write_nothing(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Staff>,
) {
    let before: Vec<Entity> = backend
        .query_all(name, Query::new())
        .await
        .expect("rows")
        .into_iter()
        .map(strip)
        .collect();
    let clash = table
        .insert(&staff("Sales", 225, "smith@contoso.com", "Other", "Bob"))
        .await;
    match clash {
        Err(Error::UniqueViolation {
            index,
            value,
            held_by,
            ..
        }) => {
            assert_eq!(
                (index, value.as_str(), held_by.as_str()),
                ("email", "smith@contoso.com", "EMP_0000000224")
            );
        }
        other => panic!("expected a unique violation, got {other:?}"),
    }
    let mut clash = table
        .get("Sales", 223u32)
        .await
        .expect("get")
        .expect("found");
    clash.email = "smith@contoso.com".into();
    assert!(matches!(
        table.replace(&mut clash).await,
        Err(Error::UniqueViolation { .. })
    ));
    assert!(matches!(
        table
            .upsert(&staff("Sales", 223, "smith@contoso.com", "J", "J"))
            .await,
        Err(Error::UniqueViolation { .. })
    ));
    let after: Vec<Entity> = backend
        .query_all(name, Query::new())
        .await
        .expect("rows")
        .into_iter()
        .map(strip)
        .collect();
    assert_eq!(before, after, "a refused write leaves every row as it was");
}

/// Reads through the non-unique `name` index: by value, by prefix, by
/// range, in value order, and a projection served from its rows.
async fn non_unique_reads(table: &Table<Staff>) {
    let indexes = Staff::indexes();
    let by_name = table.index(indexes.name);
    let joneses: Vec<u32> = by_name
        .prefix("Sales", "Jones")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("prefix");
    assert_eq!(joneses, [223, 226]);
    let jim: Vec<u32> = by_name
        .find("Sales", ("Jones", "Jim"))
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(jim, [223]);
    let range: Vec<u32> = by_name
        .range("Sales", ("Jones", "A"), ("Jones", "Zz"))
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("range");
    assert_eq!(range, [223, 226]);
    // The index rows copy the email only: a projection on it is served from them.
    let emails: Vec<String> = by_name
        .project::<StaffEmail>()
        .prefix("Sales", "Smith")
        .map_ok(|s| s.email)
        .try_collect()
        .await
        .expect("projection");
    assert_eq!(emails, ["ann.smith@contoso.com"]);
}

/// A projection of an indexed entity reads; a write through it (a
/// replace, a move, a transaction, the bulk writer) could not move the
/// index rows, so it is refused before anything is sent.
async fn projections_of_indexed_entities_refuse_writes(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Staff>,
) {
    let by_email = table.index(Staff::indexes().email);
    let cards: Table<StaffEmail> = table.of();
    let card = StaffEmail {
        department: "Sales".into(),
        id: 223,
        email: "sneaky@contoso.com".into(),
    };
    let refused = cards
        .replace_unconditionally(&card)
        .await
        .expect_err("refused");
    assert!(matches!(refused, Error::NotSupported { .. }));
    // The refusal names its real reason, not the backend.
    let reason = refused.to_string();
    assert!(
        reason.contains("projection") && !reason.contains("backend"),
        "{reason}"
    );
    let as_card = cards
        .get("Sales", 223u32)
        .await
        .expect("get")
        .expect("there");
    let moved = StaffEmail {
        department: "Ops".into(),
        ..(*as_card).clone()
    };
    let refused = cards.move_to(&as_card, &moved).await.expect_err("refused");
    assert!(refused.to_string().contains("projection"), "{refused}");
    assert!(table.get("Sales", 223u32).await.expect("get").is_some());
    assert!(matches!(
        cards.transaction().upsert(&card),
        Err(Error::NotSupported { .. })
    ));
    assert!(
        !cards
            .bulk()
            .upsert(std::slice::from_ref(&card))
            .await
            .is_complete()
    );
    assert!(
        by_email
            .get("Sales", "sneaky@contoso.com")
            .await
            .expect("get")
            .is_none()
    );
    assert_staff_indexes_clean(backend, name).await;
}

/// Merge, upsert, upsert_merge and the unconditional writes keep the
/// index rows in step, and an index copy holds the merged entity.
async fn merges_and_upserts_keep_index_rows(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Staff>,
) {
    let by_email = table.index(Staff::indexes().email);
    let mut merged = staff("Sales", 224, "ann.smith@contoso.com", "Smith", "Anne");
    merged.phone = None;
    table.merge_unconditionally(&merged).await.expect("merge");
    let stored = table
        .get("Sales", 224u32)
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        stored.phone.as_deref(),
        Some("555-0224"),
        "a merge keeps what it does not send"
    );
    assert_staff_indexes_clean(backend, name).await;
    let via_index = by_email
        .get("Sales", "ann.smith@contoso.com")
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        via_index,
        Loaded::into_inner(stored),
        "the index copy holds the merged entity"
    );
    table
        .upsert(&staff("Sales", 226, "new@contoso.com", "Jones", "Zoe"))
        .await
        .expect("upsert new");
    table
        .upsert_merge(&staff("Sales", 226, "zoe@contoso.com", "Jones", "Zoe"))
        .await
        .expect("upsert_merge");
    table
        .replace_unconditionally(&staff("Sales", 223, "jim@contoso.com", "Jones", "Jim"))
        .await
        .expect("replace");
    assert_staff_indexes_clean(backend, name).await;
}

/// A merge through a `Loaded` that moves no index value merges the index
/// rows too, without reading; one whose index row went missing (removed by
/// hand) reads and writes it again.
async fn merges_in_place_keep_index_rows(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Staff>,
) {
    let by_email = table.index(Staff::indexes().email);
    let mut zoe = table
        .get("Sales", 226u32)
        .await
        .expect("get")
        .expect("found");
    zoe.salary = 4242;
    zoe.phone = None;
    table.merge(&mut zoe).await.expect("merge in place");
    assert_staff_indexes_clean(backend, name).await;
    backend
        .delete_entity(
            name,
            "Sales",
            "email_zoe@contoso.com",
            &tablekit::IfMatch::Any,
        )
        .await
        .expect("remove an index row by hand");
    zoe.salary = 4343;
    table
        .merge(&mut zoe)
        .await
        .expect("merge over a missing index row");
    assert_staff_indexes_clean(backend, name).await;
    assert_eq!(
        by_email
            .get("Sales", "zoe@contoso.com")
            .await
            .expect("get")
            .map(|s| s.salary),
        Some(4343)
    );
}

/// Reads through the unique `email` index find the entity (in its
/// partition only), and a replace through a value read there that changes
/// the email moves its index row, in one transaction.
async fn unique_reads_and_moves(backend: &dyn TableBackend, name: &str, table: &Table<Staff>) {
    let by_email = table.index(Staff::indexes().email);
    let found = by_email
        .get("Sales", "jonesj@contoso.com")
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        found,
        staff("Sales", 223, "jonesj@contoso.com", "Jones", "Jim")
    );
    assert!(
        by_email
            .get("Sales", "nobody@contoso.com")
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        by_email
            .get("Marketing", "jonesj@contoso.com")
            .await
            .expect("get")
            .is_none()
    );
    let mut loaded = by_email
        .get_loaded("Sales", "jonesj@contoso.com")
        .await
        .expect("get")
        .expect("found");

    // A replace that changes the email moves its index row, in one transaction.
    loaded.email = "jim.jones@contoso.com".into();
    loaded.last_name = "Jonas".into();
    table.replace(&mut loaded).await.expect("replace");
    assert_staff_indexes_clean(backend, name).await;
    assert!(
        by_email
            .get("Sales", "jonesj@contoso.com")
            .await
            .expect("get")
            .is_none()
    );
    assert_eq!(
        by_email
            .get("Sales", "jim.jones@contoso.com")
            .await
            .expect("get")
            .map(|s| s.id),
        Some(223)
    );
}

/// Unique and non-unique indexes through every write path: rows in step,
/// reads by value, prefix and range, projections from the index rows, and
/// the unique violation that writes nothing.
pub async fn indexes_follow_every_write(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idx").await;
    let table: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    let check = || async { index_problems::<Staff>(&*backend, &name, "Sales").await };

    table
        .insert(&staff("Sales", 223, "jonesj@contoso.com", "Jones", "Jim"))
        .await
        .expect("insert");
    table
        .insert(&staff("Sales", 224, "smith@contoso.com", "Smith", "Ann"))
        .await
        .expect("insert");
    assert_eq!(check().await, Vec::<String>::new());
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    let keys: Vec<&str> = rows.iter().map(|r| r.row_key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "EMP.name_Jones|Jim|EMP_0000000223",
            "EMP.name_Smith|Ann|EMP_0000000224",
            "EMP.team_red",
            "EMP_0000000223",
            "EMP_0000000224",
            "email_jonesj@contoso.com",
            "email_smith@contoso.com",
        ],
        "index rows sit beside the entity under readable keys"
    );

    // The type's own queries never see index rows.
    let all: Vec<Staff> = table
        .query()
        .partition("Sales")
        .stream()
        .map_ok(Loaded::into_inner)
        .try_collect()
        .await
        .expect("query");
    assert_eq!(all.iter().map(|s| s.id).collect::<Vec<_>>(), [223, 224]);

    // Reads through the unique index, and a replace that moves its row.
    unique_reads_and_moves(backend.as_ref(), &name, &table).await;

    // A unique violation names the index and the value, and writes nothing.
    unique_violations_write_nothing(backend.as_ref(), &name, &table).await;

    // Merge, upsert, upsert_merge and the unconditional writes.
    merges_and_upserts_keep_index_rows(backend.as_ref(), &name, &table).await;

    // A merge through a Loaded that moves no index value merges the index
    // rows too, without reading; one whose index row went missing (removed
    // by hand) reads and writes it again.
    merges_in_place_keep_index_rows(backend.as_ref(), &name, &table).await;

    // update() reads once and moves what changed.
    table
        .update("Sales", 226u32, |s| s.first_name = "Zoey".into())
        .await
        .expect("update");
    assert_eq!(check().await, Vec::<String>::new());

    // Non-unique reads: by value, by prefix, by range, in value order.
    non_unique_reads(&table).await;

    // A projection of an indexed entity reads; a write through it is refused.
    projections_of_indexed_entities_refuse_writes(backend.as_ref(), &name, &table).await;

    // Deletes take the index rows along.
    let loaded = table
        .get("Sales", 224u32)
        .await
        .expect("get")
        .expect("found");
    table.delete(&loaded).await.expect("delete");
    table
        .delete_unconditionally("Sales", 226u32)
        .await
        .expect("delete");
    assert_eq!(check().await, Vec::<String>::new());
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    assert_eq!(
        rows.len(),
        4,
        "one entity, its two index rows and its team's index entity remain"
    );

    // The bulk writer keeps them too.
    let many: Vec<Staff> = (1..=5)
        .map(|i| staff("Sales", i, &format!("e{i}@x"), "Bulk", &format!("N{i}")))
        .collect();
    let report = table.bulk().upsert(&many).await;
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(check().await, Vec::<String>::new());
    let report = table.bulk().delete(&many[..2]).await;
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(check().await, Vec::<String>::new());
    backend.delete_table(&name).await.expect("drop");
}

/// Deletes through a [`Loaded`] of an entity whose index rows all live
/// beside it: the row and its index rows go together; an index row already
/// gone by hand does not block the delete; a stale version or a missing
/// entity is refused in the caller's terms, with nothing deleted; a lost
/// answer is settled by reading back.
pub async fn deletes_take_their_index_rows(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxdel").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let handle = layer.handle();
    let table: Table<PlainStaff> = Table::from_arc(Arc::new(layer), &name);
    let check = || async { index_problems::<PlainStaff>(&*backend, &name, "Sales").await };
    let count = || async {
        backend
            .query_all(&name, Query::new())
            .await
            .expect("rows")
            .len()
    };
    for id in 1..=4 {
        let value = PlainStaff::from_staff(staff("Sales", id, &format!("e{id}@x"), "Jones", "Jim"));
        table.insert(&value).await.expect("insert");
    }
    assert_eq!(count().await, 12, "four entities, two index rows each");
    let get = |id: u32| {
        let table = table.clone();
        async move { table.get("Sales", id).await.expect("get").expect("found") }
    };

    // The plain case.
    table.delete(&get(1).await).await.expect("delete");
    assert_eq!((check().await, count().await), (Vec::<String>::new(), 9));

    // An index row removed by hand: the delete still goes through, and
    // leaves nothing behind.
    let loaded = get(2).await;
    backend
        .delete_entity(&name, "Sales", "email_e2@x", &IfMatch::Any)
        .await
        .expect("remove an index row by hand");
    table
        .delete(&loaded)
        .await
        .expect("delete over a missing index row");
    assert_eq!((check().await, count().await), (Vec::<String>::new(), 6));

    // A stale version: refused, in the caller's terms, nothing deleted.
    let stale = get(3).await;
    table
        .replace_unconditionally(&Loaded::into_inner(get(3).await))
        .await
        .expect("another write");
    match table.delete(&stale).await {
        Err(Error::PreconditionFailed {
            partition_key,
            row_key,
            ..
        }) => assert_eq!(
            (partition_key.as_str(), row_key.as_str()),
            ("Sales", "EMP_0000000003")
        ),
        other => panic!("a stale delete: {other:?}"),
    }
    assert_eq!((check().await, count().await), (Vec::<String>::new(), 6));

    // Deleted already: not found.
    let loaded = get(3).await;
    table.delete(&loaded).await.expect("delete");
    assert!(
        matches!(
            table.delete(&loaded).await,
            Err(Error::EntityNotFound { .. })
        ),
        "a second delete finds nothing"
    );
    assert_eq!((check().await, count().await), (Vec::<String>::new(), 3));

    // A lost answer: the delete landed, and reading back says so.
    let loaded = get(4).await;
    handle.inject(
        Injection::on(tablekit::layer::Operation::SubmitTransaction).fault(Fault::LostResponse),
    );
    table.delete(&loaded).await.expect("a lost answer, settled");
    handle.clear();
    assert_eq!((check().await, count().await), (Vec::<String>::new(), 0));
    backend.delete_table(&name).await.expect("drop");
}

/// A unique index row left behind by another writer (naming an entity that
/// does not hold its value) does not block the value forever: the next
/// write that wants it takes it over.
pub async fn stale_unique_rows_are_taken_over(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxstale").await;
    let table: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    let stray = Entity::new("Sales", "email_a@x")
        .with("_Index", "email")
        .with("_Row", "EMP_0000000009");
    backend
        .insert_entity(&name, &stray)
        .await
        .expect("stray row");
    table
        .insert(&staff("Sales", 1, "a@x", "A", "A"))
        .await
        .expect("insert takes the stray row over");
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );
    backend.delete_table(&name).await.expect("drop");
}

/// One step of the model-based test.
#[derive(Debug, Clone, Copy)]
enum Step {
    Insert,
    Replace,
    Merge,
    Upsert,
    UpsertMerge,
    ReplaceAny,
    MergeAny,
    Update,
    Delete,
    DeleteAny,
    Bulk,
    MergeElement,
    Batch,
}

const STEPS: [Step; 13] = [
    Step::Insert,
    Step::Replace,
    Step::Merge,
    Step::Upsert,
    Step::UpsertMerge,
    Step::ReplaceAny,
    Step::MergeAny,
    Step::Update,
    Step::Delete,
    Step::DeleteAny,
    Step::Bulk,
    Step::MergeElement,
    Step::Batch,
];

/// Random sequences of every write path over a few ids and emails, with
/// transient failures and lost responses injected at random steps. After
/// each sequence, every entity has exactly its index rows, no index row
/// points at nothing, no two entities share an email, and each entity is
/// the one the writes that succeeded (or were settled) leave.
pub async fn index_model_runs(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> ModelOutcomes {
    index_model_runs_of::<Staff>(backend, runs, steps, seed).await
}

/// A random staff member `id` of department `pk`, for the model run.
fn random_staff(rng: &mut fastrand::Rng, pk: &str, id: u32) -> Staff {
    let emails = ["a@x", "b@x", "c@x", "d@x"];
    Staff {
        department: pk.to_owned(),
        id,
        email: emails[rng.usize(0..emails.len())].into(),
        last_name: ["Jones", "Smith"][rng.usize(0..2)].into(),
        first_name: ["Ann", "Bob"][rng.usize(0..2)].into(),
        phone: rng.bool().then(|| format!("p{}", rng.u8(..))),
        salary: rng.u32(..1000),
        hours: [rng.u8(..24), rng.u8(..24)],
        team: ["red", "blue"][rng.usize(0..2)].into(),
    }
}

/// Applies one step of the model run, writing `value` (as an `M`) through
/// `table` (under faults) and reading through `plain`; a batch's other
/// entity is read back into `model`.
async fn apply_model_step<M: ModelStaff>(
    step: Step,
    (table, plain): (&Table<M>, &Table<M>),
    pk: &str,
    value: &Staff,
    model: &mut BTreeMap<u32, Staff>,
    rng: &mut fastrand::Rng,
) -> Result<(), Error> {
    let id = value.id;
    let typed = M::from_staff(value.clone());
    match step {
        Step::Insert => table.insert(&typed).await.map(drop),
        Step::Upsert => table.upsert(&typed).await.map(drop),
        Step::UpsertMerge => table.upsert_merge(&typed).await.map(drop),
        Step::ReplaceAny => table.replace_unconditionally(&typed).await.map(drop),
        Step::MergeAny => table.merge_unconditionally(&typed).await.map(drop),
        Step::DeleteAny => table.delete_unconditionally(pk, id).await,
        Step::Replace | Step::Merge | Step::Delete => {
            match plain.get(pk, id).await.expect("read") {
                None => Ok(()),
                Some(mut loaded) => {
                    let stored = loaded.to_staff();
                    *loaded = M::from_staff(Staff {
                        department: stored.department,
                        id: stored.id,
                        ..value.clone()
                    });
                    match step {
                        Step::Replace => table.replace(&mut loaded).await.map(drop),
                        Step::Merge => table.merge(&mut loaded).await.map(drop),
                        _ => table.delete(&loaded).await,
                    }
                }
            }
        }
        Step::Update => {
            let v = value.clone();
            table
                .update(pk, id, move |s| {
                    let mut staff = s.to_staff();
                    staff.email = v.email.clone();
                    staff.last_name = v.last_name.clone();
                    staff.salary = v.salary;
                    *s = M::from_staff(staff);
                })
                .await
                .map(drop)
        }
        Step::MergeElement => {
            let element = M::hours_at(rng.usize(0..2));
            table
                .merge_element(pk, id, &element, &value.hours[0], &IfMatch::Any)
                .await
                .map(drop)
        }
        Step::Batch => {
            // This write and the delete of another entity, together.
            let mut batch = table.batch();
            batch.upsert(&typed).expect("add");
            let other = rng.u32(1..=3);
            if other != id && model.contains_key(&other) {
                batch.delete_unconditionally(pk, other).expect("add");
            }
            let result = batch.submit().await.map(drop);
            // The other entity follows the store too.
            if other != id {
                match plain.get(pk, other).await.expect("read back") {
                    Some(stored) => model.insert(other, Loaded::into_inner(stored).to_staff()),
                    None => model.remove(&other),
                };
            }
            result.map_err(|e| match e {
                Error::BatchFailed { source, .. } => *source,
                e => e,
            })
        }
        Step::Bulk => {
            let report = if rng.bool() {
                table.bulk().upsert(std::slice::from_ref(&typed)).await
            } else {
                table.bulk().delete(std::slice::from_ref(&typed)).await
            };
            match report.failures.first() {
                None => Ok(()),
                // Kept as it is when the model can use it; any
                // other failure makes the model read the row back.
                Some(f) => Err(match &*f.error {
                    Error::UniqueViolation {
                        table,
                        partition_key,
                        index,
                        value,
                        held_by,
                    } => Error::UniqueViolation {
                        table: table.clone(),
                        partition_key: partition_key.clone(),
                        index,
                        value: value.clone(),
                        held_by: held_by.clone(),
                    },
                    other => Error::Transient {
                        message: other.to_string(),
                    },
                }),
            }
        }
    }
}

/// [`index_model_runs`] over entities of type `M`.
pub async fn index_model_runs_of<M: ModelStaff>(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> ModelOutcomes {
    let mut outcomes = ModelOutcomes::default();
    let name = fresh_table(&*backend, "idxmodel").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let handle = layer.handle();
    handle.seed(seed);
    let table: Table<M> = Table::from_arc(Arc::new(layer), &name);
    let plain: Table<M> = Table::from_arc(Arc::clone(&backend), &name);
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..runs {
        let pk = format!("run{run}");
        let mut model: BTreeMap<u32, Staff> = BTreeMap::new();
        for _ in 0..steps {
            handle.clear();
            if rng.f64() < 0.5 {
                let fault = if rng.bool() {
                    Fault::Transient
                } else {
                    Fault::LostResponse
                };
                handle.inject(Injection::any().skip(rng.usize(0..4)).fault(fault));
            }
            let id = rng.u32(1..=3);
            let value = random_staff(&mut rng, &pk, id);
            let step = STEPS[rng.usize(0..STEPS.len())];
            let result =
                apply_model_step(step, (&table, &plain), &pk, &value, &mut model, &mut rng).await;
            handle.clear();
            match &result {
                Ok(()) => outcomes.applied += 1,
                Err(Error::UniqueViolation { .. }) => outcomes.unique_violations += 1,
                Err(e) if e.is_outcome_unknown() || e.is_transient() => outcomes.faulted += 1,
                Err(_) => outcomes.refused += 1,
            }
            // The model follows the store: a write that failed for certain
            // changed nothing, any other outcome is read back.
            let certain_refusal = matches!(
                &result,
                Err(Error::UniqueViolation { .. }
                    | Error::EntityAlreadyExists { .. }
                    | Error::EntityNotFound { .. }
                    | Error::PreconditionFailed { .. })
            );
            if let Err(Error::UniqueViolation {
                held_by,
                value: email,
                ..
            }) = &result
            {
                let holder = model.values().find(|s| s.email == *email).map(|s| s.id);
                assert!(
                    holder.is_some(),
                    "run {run}: {email} refused, but no entity holds it ({held_by})"
                );
            }
            if !certain_refusal {
                let stored = plain
                    .get(pk.as_str(), id)
                    .await
                    .expect("read back")
                    .map(|stored| Loaded::into_inner(stored).to_staff());
                // A write that succeeded left exactly what it wrote.
                let written = match step {
                    Step::Insert | Step::Upsert | Step::ReplaceAny => Some(Some(&value)),
                    Step::Replace if model.contains_key(&id) => Some(Some(&value)),
                    Step::Delete | Step::DeleteAny => Some(None),
                    _ => None,
                };
                if let (Ok(()), Some(written)) = (&result, written) {
                    assert_eq!(stored.as_ref(), written, "run {run}: {step:?} succeeded");
                }
                match stored {
                    Some(stored) => model.insert(id, stored),
                    None => model.remove(&id),
                };
            }
            let problems = index_problems::<M>(&*backend, &name, &pk).await;
            assert!(
                problems.is_empty(),
                "run {run}, after {step:?} ({result:?}): {problems:?}"
            );
        }
        let stored: BTreeMap<u32, Staff> = plain
            .query()
            .partition(pk.as_str())
            .stream()
            .map_ok(|s| {
                let s = Loaded::into_inner(s).to_staff();
                (s.id, s)
            })
            .try_collect()
            .await
            .expect("read the partition");
        assert_eq!(stored, model, "run {run}");
        let mut emails: Vec<&str> = stored.values().map(|s| s.email.as_str()).collect();
        emails.sort_unstable();
        emails.dedup();
        assert_eq!(emails.len(), stored.len(), "run {run}: an email held twice");
        for s in stored.values() {
            let found = M::by_email(&plain, pk.as_str(), s.email.as_str())
                .await
                .expect("lookup")
                .map(|found| found.to_staff());
            assert_eq!(found.as_ref(), Some(s), "run {run}: lookup by email");
        }
    }
    backend.delete_table(&name).await.expect("drop");
    outcomes.calls = handle_calls(&handle);
    outcomes
}

/// How many table requests the fault layer saw.
pub(crate) fn handle_calls(handle: &tablekit::layer::FaultHandle) -> usize {
    use tablekit::layer::Operation::*;
    [
        GetEntity,
        QueryEntities,
        InsertEntity,
        UpdateEntity,
        UpsertEntity,
        DeleteEntity,
        SubmitTransaction,
    ]
    .into_iter()
    .map(|op| handle.calls(op))
    .sum()
}

/// How the steps of [`index_model_runs`] ended.
#[derive(Debug, Default, Clone, Copy)]
pub struct ModelOutcomes {
    /// Steps that succeeded.
    pub applied: usize,
    /// Steps refused as breaking a unique index.
    pub unique_violations: usize,
    /// Steps that failed with an injected fault the write could not settle.
    pub faulted: usize,
    /// Steps refused for another reason (conflict, missing entity, ETag).
    pub refused: usize,
    /// Calls the typed client made through the fault layer.
    pub calls: usize,
}

impl ModelOutcomes {
    /// Asserts that the runs went through every kind of outcome.
    #[track_caller]
    pub fn assert_varied(&self) {
        assert!(
            self.applied > 0 && self.unique_violations > 0 && self.faulted > 0 && self.refused > 0,
            "the runs did not reach every outcome: {self:?}"
        );
    }
}

/// [`index_model_runs`] with a few runs, for the conformance list, over
/// both entity types.
pub async fn indexes_stay_in_step_under_faults(backend: Arc<dyn TableBackend>) {
    index_model_runs(Arc::clone(&backend), 20, 8, 0x1D3)
        .await
        .assert_varied();
    index_model_runs_of::<PlainStaff>(backend, 20, 8, 0x1D4)
        .await
        .assert_varied();
}

/// A wide entity with a unique index: its rows point at it.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "YEAR", wide)]
pub struct Tagged {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The year.
    #[tablekit(row_key)]
    pub year: u16,
    /// One count per day: more than a row holds.
    #[tablekit(series)]
    pub daily: Vec<u32>,
    /// Unique in the site.
    #[tablekit(unique = "code")]
    pub code: String,
}

/// An entity with an offloaded body and a unique index whose rows copy it
/// (a reference to the blob).
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "FILED")]
pub struct Filed {
    /// The folder.
    #[tablekit(partition_key)]
    pub folder: String,
    /// The id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique in the folder.
    #[tablekit(unique = "title")]
    pub title: String,
    /// In the blob store when too large for a row.
    #[tablekit(offload)]
    pub body: String,
}

/// Wide entities and entities with offloaded values keep their index rows
/// in step too, and are read back whole through them.
pub async fn indexes_of_wide_and_offloaded_entities(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn tablekit::BlobStore>,
) {
    let name = fresh_table(&*backend, "idxlarge").await;
    let wide: Table<Tagged> = Table::from_arc(Arc::clone(&backend), &name);
    let year = |code: &str, seed: u32| Tagged {
        site: "s".into(),
        year: 2026,
        daily: (0..400).map(|d| d * 2 + seed).collect(),
        code: code.into(),
    };
    wide.insert(&year("alpha", 1)).await.expect("insert wide");
    assert_eq!(
        index_problems::<Tagged>(&*backend, &name, "s").await,
        Vec::<String>::new()
    );
    let by_code = wide.index(Tagged::indexes().code);
    assert_eq!(
        by_code.get("s", "alpha").await.expect("get"),
        Some(year("alpha", 1))
    );
    let mut loaded = wide.get("s", 2026u16).await.expect("get").expect("found");
    *loaded = year("beta", 2);
    wide.replace(&mut loaded).await.expect("replace wide");
    assert_eq!(
        index_problems::<Tagged>(&*backend, &name, "s").await,
        Vec::<String>::new()
    );
    assert_eq!(by_code.get("s", "alpha").await.expect("get"), None);
    assert_eq!(
        by_code.get("s", "beta").await.expect("get"),
        Some(year("beta", 2))
    );
    wide.merge_unconditionally(&year("gamma", 3))
        .await
        .expect("merge wide");
    assert_eq!(
        index_problems::<Tagged>(&*backend, &name, "s").await,
        Vec::<String>::new()
    );
    wide.delete_unconditionally("s", 2026u16)
        .await
        .expect("delete wide");
    let left = backend.query_all(&name, Query::new()).await.expect("rows");
    assert!(
        left.is_empty(),
        "no part and no index row is left: {left:?}"
    );

    let container = super::unique_table("c").to_ascii_lowercase();
    blobs.create_container(&container).await.expect("container");
    let filed: Table<Filed> = Table::from_arc(Arc::clone(&backend), &name)
        .with_blob_store(Arc::clone(&blobs), &container);
    let doc = |title: &str, size: usize| Filed {
        folder: "f".into(),
        id: 1,
        title: title.into(),
        body: "b".repeat(size),
    };
    filed
        .insert(&doc("plan", 100_000))
        .await
        .expect("insert offloaded");
    assert_eq!(
        index_problems::<Filed>(&*backend, &name, "f").await,
        Vec::<String>::new()
    );
    let by_title = filed.index(Filed::indexes().title);
    assert_eq!(
        by_title.get("f", "plan").await.expect("get"),
        Some(doc("plan", 100_000))
    );
    filed
        .upsert(&doc("report", 120_000))
        .await
        .expect("upsert offloaded");
    assert_eq!(
        index_problems::<Filed>(&*backend, &name, "f").await,
        Vec::<String>::new()
    );
    assert_eq!(
        by_title.get("f", "report").await.expect("get"),
        Some(doc("report", 120_000))
    );
    assert_eq!(by_title.get("f", "plan").await.expect("get"), None);
    assert!(
        filed
            .orphan_blobs(std::time::Duration::ZERO)
            .await
            .expect("orphans")
            .is_empty(),
        "the replaced body's blob is gone, the new one referenced"
    );
    filed
        .delete_unconditionally("f", 1u32)
        .await
        .expect("delete");
    assert!(
        backend
            .query_all(&name, Query::new())
            .await
            .expect("rows")
            .is_empty()
    );
    blobs
        .delete_container(&container)
        .await
        .expect("drop container");
    backend.delete_table(&name).await.expect("drop");
}

/// A department whose manager's details are copied into its employees.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "DEPT")]
pub struct Dept {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// Always 0: one row per department.
    #[tablekit(row_key)]
    pub row: u8,
    /// The manager's name.
    pub manager: String,
}

/// An employee holding a copy of their manager's name.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "MEMBER")]
pub struct Member {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique in the department.
    #[tablekit(unique = "email")]
    pub email: String,
    /// The copy of the department's manager.
    pub manager: String,
}

/// The entities of a department, read by kind.
#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]

enum DeptRows {
    Dept(Dept),
    Member(Member),
}

/// Submits `tx`, whose third write holds a stale ETag: the transaction
/// fails at that write, and nothing of it lands (the department keeps
/// `Ann`, member 1 its email, the index rows their places).
async fn refused_at_its_stale_write(
    tx: tablekit::table::Transaction,
    backend: &dyn TableBackend,
    name: &str,
    members: &Table<Member>,
    depts: &Table<Dept>,
) {
    match tx.submit().await {
        Err(Error::BatchFailed { index: 2, source }) => {
            assert!(
                matches!(*source, Error::PreconditionFailed { ref row_key, .. } if row_key == "MEMBER_0000000002"),
                "{source:?}"
            );
        }
        other => panic!("expected the third write to fail, got {other:?}"),
    }
    assert_eq!(
        depts
            .get("Sales", 0u8)
            .await
            .expect("get")
            .expect("found")
            .manager,
        "Ann"
    );
    assert_eq!(
        members
            .get("Sales", 1u32)
            .await
            .expect("get")
            .expect("found")
            .email,
        "a@x"
    );
    assert_eq!(
        index_problems::<Member>(backend, name, "Sales").await,
        Vec::<String>::new()
    );
}

/// A typed batch of members (an insert, an upsert that moves an email, a
/// delete) keeps their index rows in step.
async fn batches_keep_index_rows(backend: &dyn TableBackend, name: &str, members: &Table<Member>) {
    let mut batch = members.batch();
    batch.insert(&sales_member(6, "f@x", "Cy")).expect("add");
    batch.upsert(&sales_member(1, "a4@x", "Cy")).expect("add");
    batch.delete_unconditionally("Sales", 2u32).expect("add");
    batch.submit().await.expect("batch");
    assert_eq!(
        index_problems::<Member>(backend, name, "Sales").await,
        Vec::<String>::new()
    );
    let by_email = members.index(Member::indexes().email);
    assert_eq!(
        by_email
            .get("Sales", "a4@x")
            .await
            .expect("get")
            .map(|m| m.id),
        Some(1)
    );
    assert!(by_email.get("Sales", "b2@x").await.expect("get").is_none());
}

/// Member `id` of Sales.
fn sales_member(id: u32, email: &str, manager: &str) -> Member {
    Member {
        department: "Sales".into(),
        id,
        email: email.into(),
        manager: manager.into(),
    }
}

/// Transactions of indexed members refused whole: a unique violation
/// names the write, and two writes wanting one value are refused before
/// anything is sent; the department keeps its manager `Cy`.
async fn refused_transactions_write_nothing(members: &Table<Member>, depts: &Table<Dept>) {
    let member = sales_member;
    // A unique violation inside a transaction names the write.
    let mut tx = members.transaction();
    tx.upsert(&Dept {
        department: "Sales".into(),
        row: 0,
        manager: "Dee".into(),
    })
    .expect("add");
    tx.insert(&member(3, "b2@x", "Dee")).expect("add");
    match tx.submit().await {
        Err(Error::BatchFailed { index: 1, source }) => {
            assert!(
                matches!(*source, Error::UniqueViolation { index: "email", .. }),
                "{source:?}"
            );
        }
        other => panic!("expected the second write to fail, got {other:?}"),
    }
    assert_eq!(
        depts
            .get("Sales", 0u8)
            .await
            .expect("get")
            .expect("found")
            .manager,
        "Cy"
    );
    // Two writes wanting one value in the same transaction are refused
    // before anything is sent, in the caller's terms.
    let mut tx = members.transaction();
    tx.insert(&member(4, "same@x", "Cy")).expect("add");
    tx.insert(&member(5, "same@x", "Cy")).expect("add");
    assert!(matches!(
        tx.submit().await,
        Err(Error::Invalid(
            tablekit::InvalidInput::BatchDuplicateEntity {
                first: 0,
                index: 1,
                ..
            }
        ))
    ));
}

/// One transaction writes entities of several types, each with its index
/// rows; a failure names the write in the caller's order and applies
/// nothing, so a denormalized copy never disagrees with its source.
pub async fn transactions_span_kinds_and_indexes(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxtx").await;
    let members: Table<Member> = Table::from_arc(Arc::clone(&backend), &name);
    let depts: Table<Dept> = members.of();
    let member = sales_member;
    let mut tx = members.transaction();
    tx.insert(&Dept {
        department: "Sales".into(),
        row: 0,
        manager: "Ann".into(),
    })
    .expect("add");
    tx.insert(&member(1, "a@x", "Ann")).expect("add");
    tx.insert(&member(2, "b@x", "Ann")).expect("add");
    assert_eq!(tx.len(), 3);
    let etags = tx.submit().await.expect("submit");
    assert_eq!(etags.len(), 3);
    assert!(
        etags.iter().all(Option::is_some),
        "one ETag per write: {etags:?}"
    );
    assert_eq!(
        index_problems::<Member>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );
    // A read of every kind in the partition sees the entities, never their
    // index rows (an unknown kind would fail it).
    let kinds: Vec<DeptRows> = members
        .of::<DeptRows>()
        .read_partition("Sales", tablekit::UnknownKind::Fail)
        .map_ok(Loaded::into_inner)
        .try_collect()
        .await
        .expect("read every kind");
    assert_eq!(kinds.len(), 3, "{kinds:?}");

    // The manager changes: the department and every copy, together.
    let mut dept = depts.get("Sales", 0u8).await.expect("get").expect("found");
    let mut one = members
        .get("Sales", 1u32)
        .await
        .expect("get")
        .expect("found");
    let two = members
        .get("Sales", 2u32)
        .await
        .expect("get")
        .expect("found");
    dept.manager = "Bea".into();
    one.manager = "Bea".into();
    one.email = "a2@x".into();
    // Another writer changes employee 2 first: the whole transaction fails
    // at the write of employee 2, and nothing of it lands.
    members
        .update("Sales", 2u32, |m| m.email = "b2@x".into())
        .await
        .expect("update");
    let mut stale_two = two.clone();
    stale_two.manager = "Bea".into();
    let mut tx = members.transaction();
    tx.replace(&dept).expect("add");
    tx.replace(&one).expect("add");
    tx.replace(&stale_two).expect("add");
    refused_at_its_stale_write(tx, backend.as_ref(), &name, &members, &depts).await;

    // With the current version, it lands whole, index rows moved.
    let mut two = members
        .get("Sales", 2u32)
        .await
        .expect("get")
        .expect("found");
    two.manager = "Bea".into();
    let mut tx = members.transaction();
    tx.replace(&dept).expect("add");
    tx.replace(&one).expect("add");
    tx.replace(&two).expect("add");
    let etags = tx.submit().await.expect("submit");
    Loaded::set_etag(&mut dept, etags[0].clone().expect("etag"));
    Loaded::set_etag(&mut one, etags[1].clone().expect("etag"));
    assert!(
        members
            .get("Sales", 1u32)
            .await
            .expect("get")
            .is_some_and(|m| m.manager == "Bea" && m.email == "a2@x")
    );
    assert_eq!(
        index_problems::<Member>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );
    // The ETags returned are the versions written: writing through them works.
    dept.manager = "Cy".into();
    depts
        .replace(&mut dept)
        .await
        .expect("replace with the returned ETag");
    one.email = "a3@x".into();
    members
        .replace(&mut one)
        .await
        .expect("replace with the returned ETag");
    assert_eq!(
        index_problems::<Member>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );

    refused_transactions_write_nothing(&members, &depts).await;

    // A typed batch of one indexed type keeps the index rows too.
    batches_keep_index_rows(backend.as_ref(), &name, &members).await;
    backend.delete_table(&name).await.expect("drop");
}

/// [`Staff`] as written before its indexes were declared.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "EMP")]
pub struct StaffBefore {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// The email.
    pub email: String,
    /// The last name.
    pub last_name: String,
    /// The first name.
    pub first_name: String,
    /// The phone.
    pub phone: Option<String>,
    /// The salary.
    pub salary: u32,
    /// The hours.
    #[tablekit(series)]
    pub hours: [u8; 2],
    /// The team.
    pub team: String,
}

/// Indexes declared on existing data: verify reports what is missing,
/// stale or left over; repair fixes it, idempotently, partition by
/// partition, resumable.
pub async fn index_repair_finds_and_fixes(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxrepair").await;
    let before: Table<StaffBefore> = Table::from_arc(Arc::clone(&backend), &name);
    let table: Table<Staff> = before.of();
    for dept in ["A", "B", "C"] {
        for id in 1..=3 {
            let s = staff(dept, id, &format!("{dept}{id}@x"), "Lee", &format!("N{id}"));
            before
                .insert(&StaffBefore {
                    department: s.department,
                    id: s.id,
                    email: s.email,
                    last_name: s.last_name,
                    first_name: s.first_name,
                    phone: s.phone,
                    salary: s.salary,
                    hours: s.hours,
                    team: s.team,
                })
                .await
                .expect("insert");
        }
    }
    let audit = table.verify_indexes("A").await.expect("verify");
    assert_eq!(
        (audit.missing.len(), audit.stale.len(), audit.orphans.len()),
        (7, 0, 0),
        "{audit:?}"
    );
    let repaired = table.repair_indexes("A").await.expect("repair");
    assert_eq!(repaired.missing.len(), 7);
    assert!(table.verify_indexes("A").await.expect("verify").is_clean());
    assert!(
        table.repair_indexes("A").await.expect("again").is_clean(),
        "a second repair finds nothing"
    );
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "A").await,
        Vec::<String>::new()
    );

    // A stale copy and a row that belongs to no entity.
    let mut stale = backend
        .try_get_entity(&name, "A", "email_A1@x")
        .await
        .expect("get")
        .expect("row");
    stale.properties.insert("salary", 1i64);
    backend
        .update_entity(&name, &stale, tablekit::UpdateMode::Replace, &IfMatch::Any)
        .await
        .expect("spoil");
    let orphan = Entity::new("A", "EMP.name_Nobody|X|EMP_0000000099")
        .with("_Index", "name")
        .with("_Row", "EMP_0000000099");
    backend.insert_entity(&name, &orphan).await.expect("orphan");
    let audit = table.verify_indexes("A").await.expect("verify");
    assert_eq!(
        (audit.missing.len(), audit.stale.len(), audit.orphans.len()),
        (0, 1, 1),
        "{audit:?}"
    );

    // The whole table, one partition per pass, resumed from each pass's token.
    let mut resume: Option<String> = None;
    let mut passes = 0;
    let mut fixed = 0;
    loop {
        let pass = table
            .repair_all_indexes(resume.as_deref(), 1, true)
            .await
            .expect("pass");
        passes += 1;
        fixed += pass.audit.missing.len() + pass.audit.stale.len() + pass.audit.orphans.len();
        match pass.resume {
            Some(next) => resume = Some(next),
            None => break,
        }
        assert!(passes <= 4, "the passes end");
    }
    assert_eq!(
        fixed,
        2 + 7 + 7,
        "A's two problems, and B's and C's missing rows"
    );
    for dept in ["A", "B", "C"] {
        assert_eq!(
            index_problems::<Staff>(&*backend, &name, dept).await,
            Vec::<String>::new(),
            "{dept}"
        );
    }
    let check = table
        .repair_all_indexes(None, usize::MAX, false)
        .await
        .expect("verify all");
    assert!(
        check.audit.is_clean() && check.partitions == 3 && check.resume.is_none(),
        "{check:?}"
    );
    backend.delete_table(&name).await.expect("drop");
}

/// An index entity per value lists the entities that hold it: kept in the
/// same transaction as each entity, guarded by its own ETag and retried when
/// concurrent writers change it; a list that would outgrow a row is refused
/// with nothing written.
pub async fn index_entities_list_entities(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxlist").await;
    let table: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    let member = |id: u32, team: &str| Staff {
        team: team.into(),
        ..staff("Sales", id, &format!("m{id}@x"), "Lee", "Al")
    };
    for (id, team) in [(3, "red"), (1, "red"), (2, "blue"), (4, "red")] {
        table.insert(&member(id, team)).await.expect("insert");
    }
    let row = backend
        .try_get_entity(&name, "Sales", "EMP.team_red")
        .await
        .expect("get")
        .expect("the red team's index entity");
    assert_eq!(
        row.get("_Rows0"),
        Some(&tablekit::Value::String(
            "EMP_0000000001\nEMP_0000000003\nEMP_0000000004\n".into()
        )),
        "one row lists the red team, in RowKey order"
    );
    let teams = table.index(Staff::indexes().team);
    let red: Vec<u32> = teams
        .find("Sales", "red")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(red, [1, 3, 4]);
    let all: Vec<u32> = teams
        .range("Sales", "a", "z")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("range");
    assert_eq!(all, [2, 1, 3, 4], "blue, then red");

    // Moving to another team leaves one list and joins the other.
    let mut three = table.get("Sales", 3u32).await.expect("get").expect("found");
    three.team = "blue".into();
    table.replace(&mut three).await.expect("replace");
    let blue: Vec<u32> = teams
        .find("Sales", "blue")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(blue, [2, 3]);
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );

    // Writers racing on one list: each conflict is read again and retried.
    let writers = (0..2u32).map(|w| {
        let table = table.clone();
        async move {
            for i in 0..10u32 {
                table
                    .insert(&member(100 + w * 100 + i, "green"))
                    .await
                    .expect("racing insert");
            }
        }
    });
    futures::future::join_all(writers).await;
    let green: Vec<u32> = teams
        .find("Sales", "green")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(green.len(), 20, "every racing insert is listed once");
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );

    // A list that would outgrow its row is refused, and nothing is written.
    let mut full = Entity::new("Sales", "EMP.team_huge").with("_Index", "team");
    // 14 properties of 2,133 RowKeys of 15 characters: as full as a list gets.
    for n in 0..14 {
        let chunk: String = (0..2_133)
            .map(|i| format!("EMP_{:010}\n", n * 2_133 + i))
            .collect();
        full.insert(format!("_Rows{n}"), chunk);
    }
    backend
        .insert_entity(&name, &full)
        .await
        .expect("a full list, by hand");
    let refused = table.insert(&member(999_999, "huge")).await;
    assert!(
        matches!(&refused, Err(Error::Invalid(tablekit::InvalidInput::IndexListFull { index: "team", value, .. })) if value == "huge"),
        "{refused:?}"
    );
    assert!(
        table.get("Sales", 999_999u32).await.expect("get").is_none(),
        "nothing written"
    );
    backend.delete_table(&name).await.expect("drop");
}

/// Pages through an index cover every entity once, in index order, and
/// their cursors survive being written out as text; a cursor of another
/// read is refused.
pub async fn index_pages_cover_every_entity_once(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxpage").await;
    let table: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    for id in 1..=7u32 {
        let first = format!("N{}", 8 - id);
        table
            .insert(&staff("Sales", id, &format!("p{id}@x"), "Page", &first))
            .await
            .expect("insert");
    }
    table
        .insert(&staff("Sales", 50, "other@x", "Other", "X"))
        .await
        .expect("insert");
    let by_name = table.index(Staff::indexes().name);
    let mut seen = Vec::new();
    let mut after: Option<tablekit::Cursor> = None;
    let mut pages = 0;
    loop {
        let page = by_name
            .prefix_page("Sales", "Page", 3, after.as_ref())
            .await
            .expect("page");
        pages += 1;
        seen.extend(page.items.iter().map(|s| s.first_name.clone()));
        match page.next {
            // Written out and read back, as a web page would.
            Some(cursor) => after = Some(cursor.to_string().parse().expect("cursor")),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["N1", "N2", "N3", "N4", "N5", "N6", "N7"]);
    let first = by_name
        .prefix_page("Sales", "Page", 2, None)
        .await
        .expect("page");
    let cursor = first.next.expect("more");
    assert!(matches!(
        by_name
            .prefix_page("Sales", "Other", 2, Some(&cursor))
            .await,
        Err(Error::Invalid(tablekit::InvalidInput::Cursor { .. }))
    ));
    let by_email = table.index(Staff::indexes().email);
    let one = by_email
        .find_page("Sales", "p3@x", 10, None)
        .await
        .expect("page");
    assert_eq!((one.items.len(), one.next.is_none()), (1, true));
    let ranged = by_email
        .range_page("Sales", "p1@x", "p4@x", 2, None)
        .await
        .expect("page");
    assert_eq!(
        ranged.items.iter().map(|s| s.id).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(ranged.next.is_some());
    backend.delete_table(&name).await.expect("drop");
}

/// A member whose email is unique whatever its case.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "CLUB")]
#[tablekit(index(name = "email", tag = "email"))]
pub struct ClubMember {
    /// The club.
    #[tablekit(partition_key)]
    pub club: String,
    /// The member's number.
    #[tablekit(row_key)]
    pub id: u32,
    /// Stored as given, unique in lower case.
    #[tablekit(unique = "email")]
    pub email: tablekit::key::CaseInsensitive,
}

/// An index over [`CaseInsensitive`](tablekit::key::CaseInsensitive) text:
/// values differing in case only are one unique value, a lookup finds the
/// entity whatever the case it is given in, and the value reads back as
/// stored.
pub async fn case_insensitive_values_share_one_unique_row(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "caseless").await;
    let members: Table<ClubMember> = Table::from_arc(Arc::clone(&backend), &name);
    let ann = ClubMember {
        club: "Chess".into(),
        id: 1,
        email: "Ann@Example.com".into(),
    };
    members.insert(&ann).await.expect("insert");
    let twin = ClubMember {
        id: 2,
        email: "ann@EXAMPLE.COM".into(),
        ..ann.clone()
    };
    assert!(matches!(
        members.insert(&twin).await,
        Err(Error::UniqueViolation { index: "email", .. })
    ));
    let by_email = members.index(ClubMember::indexes().email);
    for asked in ["ann@example.com", "ANN@EXAMPLE.COM", "Ann@Example.com"] {
        let found = by_email.get("Chess", asked).await.expect("get");
        assert_eq!(found.as_ref(), Some(&ann), "{asked}");
    }
    let stored = members
        .get("Chess", 1u32)
        .await
        .expect("get")
        .expect("there");
    assert_eq!(stored.email.as_str(), "Ann@Example.com", "stored as given");
    // Changed in case only: the same unique value, kept.
    let mut loaded = stored;
    loaded.email = "ANN@example.com".into();
    members.replace(&mut loaded).await.expect("replace");
    assert!(matches!(
        members.insert(&twin).await,
        Err(Error::UniqueViolation { .. })
    ));
    assert!(
        members
            .verify_indexes("Chess")
            .await
            .expect("verify")
            .is_clean()
    );
    folded_values_share_one_unique_row(&*backend, &members).await;
    backend.delete_table(&name).await.expect("delete table");
}

/// Values that differ only in full Unicode case folding (`ß` and `SS`, a
/// final `ς` and `Σ`) are one unique value too; an index row keyed in lower
/// case only (as an earlier build wrote it) is found stale, repaired, and
/// then found by a lookup.
async fn folded_values_share_one_unique_row(
    backend: &dyn TableBackend,
    members: &Table<ClubMember>,
) {
    let fritz = ClubMember {
        club: "Go".into(),
        id: 1,
        email: "Fritz.Straße@Example.com".into(),
    };
    members.insert(&fritz).await.expect("insert");
    let sigma = ClubMember {
        id: 2,
        email: "ΣΑΣ@x".into(),
        ..fritz.clone()
    };
    members.insert(&sigma).await.expect("insert");
    for (id, email) in [(3, "FRITZ.STRASSE@example.com"), (4, "σας@X")] {
        let twin = ClubMember {
            id,
            email: email.into(),
            ..fritz.clone()
        };
        let refused = members.insert(&twin).await;
        assert!(
            matches!(refused, Err(Error::UniqueViolation { index: "email", .. })),
            "{email}: {refused:?}"
        );
    }
    let by_email = members.index(ClubMember::indexes().email);
    for (asked, member) in [
        ("fritz.strasse@example.com", &fritz),
        ("FRITZ.STRAẞE@EXAMPLE.COM", &fritz),
        ("σασ@x", &sigma),
    ] {
        let found = by_email.get("Go", asked).await.expect("get");
        assert_eq!(found.as_ref(), Some(member), "{asked}");
    }
    // The index row as a build that lower-cased wrote it: `straße`.
    let query = Query::new().filter(Filter::partition_key().eq("Go"));
    let rows = backend
        .query_all(members.name(), query)
        .await
        .expect("rows");
    let folded = rows
        .iter()
        .find(|row| row.row_key.contains("fritz.strasse@"))
        .expect("the index row, keyed folded")
        .clone();
    let mut lowered = folded.clone();
    lowered.row_key = folded.row_key.replace("strasse", "straße");
    backend
        .insert_entity(members.name(), &lowered)
        .await
        .expect("write the lower-cased row");
    backend
        .delete_entity(members.name(), "Go", &folded.row_key, &IfMatch::Any)
        .await
        .expect("delete the folded row");
    assert!(
        !members
            .verify_indexes("Go")
            .await
            .expect("verify")
            .is_clean()
    );
    assert!(
        by_email
            .get("Go", "fritz.strasse@example.com")
            .await
            .expect("get")
            .is_none()
    );
    members.repair_indexes("Go").await.expect("repair");
    assert!(
        members
            .verify_indexes("Go")
            .await
            .expect("verify")
            .is_clean()
    );
    let found = by_email
        .get("Go", "Fritz.STRASSE@example.com")
        .await
        .expect("get");
    assert_eq!(found.as_ref(), Some(&fritz));
}

/// A player whose badge, when there is one, is unique, and whose nickname,
/// when there is one, is indexed.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "PLY")]
#[tablekit(index(name = "badge", tag = "badge"))]
#[tablekit(index(name = "nick", tag = "nick"))]
pub struct Player {
    /// The team.
    #[tablekit(partition_key)]
    pub team: String,
    /// The player's number.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique when given; players without one have no row in the index.
    #[tablekit(unique = "badge")]
    pub badge: Option<String>,
    /// Indexed when given.
    #[tablekit(index = "nick")]
    pub nick: Option<String>,
}

/// An index over an optional field, as SQL treats NULL in a unique index:
/// an entity whose value is `None` has no row in it (so any number of them
/// may share "no value"), and gaining or losing the value writes or deletes
/// the row in the same transaction.
pub async fn optional_values_have_rows_only_when_given(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "optional").await;
    let players: Table<Player> = Table::from_arc(Arc::clone(&backend), &name);
    let player = |id: u32, badge: Option<&str>, nick: Option<&str>| Player {
        team: "Reds".into(),
        id,
        badge: badge.map(str::to_owned),
        nick: nick.map(str::to_owned),
    };
    players
        .insert(&player(1, None, None))
        .await
        .expect("insert");
    players
        .insert(&player(2, None, Some("ace")))
        .await
        .expect("a second without a badge");
    players
        .insert(&player(3, Some("b3"), Some("ace")))
        .await
        .expect("insert");
    assert!(matches!(
        players.insert(&player(4, Some("b3"), None)).await,
        Err(Error::UniqueViolation { index: "badge", .. })
    ));
    let badges = players.index(Player::indexes().badge);
    let found = badges.get("Reds", "b3").await.expect("get");
    assert_eq!(found.map(|p| p.id), Some(3));
    let aces: Vec<u32> = players
        .index(Player::indexes().nick)
        .find("Reds", "ace")
        .map_ok(|p| p.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(aces, [2, 3]);
    let rows = |backend: Arc<dyn TableBackend>, name: String| async move {
        backend
            .query_all(&name, Query::new())
            .await
            .expect("rows")
            .into_iter()
            .filter(tablekit::index::is_index_row)
            .count()
    };
    assert_eq!(
        rows(Arc::clone(&backend), name.clone()).await,
        3,
        "b3, ace|2, ace|3"
    );
    // Losing a value deletes its row; gaining one writes it.
    let mut three = players
        .get("Reds", 3u32)
        .await
        .expect("get")
        .expect("there");
    three.badge = None;
    players.replace(&mut three).await.expect("replace");
    assert!(badges.get("Reds", "b3").await.expect("get").is_none());
    players
        .insert(&player(4, Some("b3"), None))
        .await
        .expect("the badge is free");
    let mut one = players
        .get("Reds", 1u32)
        .await
        .expect("get")
        .expect("there");
    one.nick = Some("ace".into());
    players.replace(&mut one).await.expect("replace");
    assert!(
        players
            .verify_indexes("Reds")
            .await
            .expect("verify")
            .is_clean()
    );
    for id in 1..=4u32 {
        let loaded = players.get("Reds", id).await.expect("get").expect("there");
        players.delete(&loaded).await.expect("delete");
    }
    assert_eq!(
        rows(Arc::clone(&backend), name.clone()).await,
        0,
        "no index row left"
    );
    backend.delete_table(&name).await.expect("delete table");
}
