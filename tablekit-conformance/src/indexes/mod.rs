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

mod model;
pub use model::*;
mod kinds;
pub use kinds::*;
mod lookups;
pub use lookups::*;

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
