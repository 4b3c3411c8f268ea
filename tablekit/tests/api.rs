//! Conveniences a new user reaches for: tables named at run time, `exists`,
//! `count`, unconditional writes in a batch.

use tablekit::TableBackendExt;
use tablekit::{Error, Table, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Audit", kind = "EV")]
struct Event {
    #[tablekit(partition_key)]
    day: String,
    #[tablekit(row_key)]
    seq: u32,
    what: String,
}

fn event(day: &str, seq: u32) -> Event {
    Event {
        day: day.into(),
        seq,
        what: format!("event {seq}"),
    }
}

#[tokio::test]
async fn tables_named_at_run_time_are_created_and_dropped() {
    let audit: Table<Event> = Table::new(MemBackend::new());
    let monday = audit.named("Audit20261123");
    let tuesday = audit.named("Audit20261124");
    for table in [&monday, &tuesday] {
        assert!(table.create_if_missing().await.unwrap());
    }
    monday.insert(&event("d", 1)).await.unwrap();
    assert!(monday.exists("d", 1).await.unwrap());
    assert!(!tuesday.exists("d", 1).await.unwrap(), "another table");
    assert!(monday.delete_table().await.unwrap());
    assert!(!monday.delete_table().await.unwrap(), "already gone");
    assert!(matches!(
        monday.get("d", 1).await,
        Err(Error::TableNotFound { .. } | Error::TableBeingDeleted { .. })
    ));
    assert_eq!(tuesday.name(), "Audit20261124");
}

#[tokio::test]
async fn exists_and_count_read_keys_only() {
    let audit: Table<Event> = Table::new(MemBackend::new());
    audit.create_if_missing().await.unwrap();
    let events: Vec<_> = (0..2500)
        .map(|i| event(if i % 2 == 0 { "a" } else { "b" }, i))
        .collect();
    assert!(audit.bulk().insert(&events).await.is_complete());
    assert!(audit.exists("a", 0).await.unwrap());
    assert!(!audit.exists("a", 1).await.unwrap());
    assert_eq!(audit.query().count().await.unwrap(), 2500);
    assert_eq!(audit.query().partition("a").count().await.unwrap(), 1250);
    assert_eq!(
        audit
            .query()
            .partition("b")
            .rows(1..=99)
            .count()
            .await
            .unwrap(),
        50
    );
    assert_eq!(audit.query().limit(10).count().await.unwrap(), 10);
    // Rows of another kind in the same partition are not counted.
    audit
        .backend()
        .insert_entity("Audit", &tablekit::Entity::new("a", "OTHER_1"))
        .await
        .unwrap();
    assert_eq!(audit.query().partition("a").count().await.unwrap(), 1250);
}

#[tokio::test]
async fn batches_replace_and_merge_whatever_the_version() {
    let audit: Table<Event> = Table::new(MemBackend::new());
    audit.create_if_missing().await.unwrap();
    audit.insert(&event("d", 1)).await.unwrap();
    audit.insert(&event("d", 2)).await.unwrap();
    let mut batch = audit.batch();
    let mut one = event("d", 1);
    one.what = "replaced".into();
    let mut two = event("d", 2);
    two.what = "merged".into();
    batch.replace_unconditionally(&one).unwrap();
    batch.merge_unconditionally(&two).unwrap();
    assert_eq!(batch.submit().await.unwrap().len(), 2);
    assert_eq!(audit.get("d", 1).await.unwrap().unwrap().what, "replaced");
    assert_eq!(audit.get("d", 2).await.unwrap().unwrap().what, "merged");
    // Unconditional, but not an insert: a missing entity fails the batch.
    let mut batch = audit.batch();
    batch.replace_unconditionally(&event("d", 3)).unwrap();
    let missing = batch.submit().await;
    assert!(
        matches!(&missing, Err(Error::BatchFailed { index: 0, source }) if matches!(**source, Error::EntityNotFound { .. })),
        "{missing:?}"
    );
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Sessions", kind = "SES")]
struct Session {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(row_key)]
    device: String,
}

/// Keys take borrowed text wherever they take a `String`, alone or in a
/// tuple, and references to owned keys.
#[tokio::test]
async fn keys_take_borrowed_text() {
    let sessions: Table<Session> = Table::new(MemBackend::new());
    sessions.create_if_missing().await.unwrap();
    let s = Session {
        tenant: "acme corp".into(),
        user: "alice".into(),
        id: 1,
        device: "phone 2".into(),
    };
    sessions.insert(&s).await.unwrap();
    let read = sessions
        .get(("acme corp", "alice"), (1u32, "phone 2"))
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(*read, s);
    let owned = ("acme corp".to_string(), "alice".to_string());
    assert!(sessions.exists(&owned, (1u32, "phone 2")).await.unwrap());
    assert!(
        sessions
            .exists(owned.clone(), (1u32, "phone 2".to_string()))
            .await
            .unwrap()
    );
    assert!(
        !sessions
            .exists(("acme", "alice"), (1u32, "phone 2"))
            .await
            .unwrap()
    );
    let mixed = sessions
        .query()
        .partition(("acme corp", "alice".to_string()))
        .collect()
        .await
        .unwrap();
    assert_eq!(mixed.len(), 1);
    // Prefixes too: one leading component, borrowed, stays inside it.
    sessions
        .insert(&Session {
            tenant: "acme corporation".into(),
            ..s.clone()
        })
        .await
        .unwrap();
    let tenant = sessions
        .query()
        .partition_prefix(("acme corp",))
        .collect()
        .await
        .unwrap();
    assert_eq!(tenant.len(), 1, "not `acme corporation`");
    // A single leading component needs no 1-tuple.
    for tenant in [
        sessions.query().partition_prefix("acme corp"),
        sessions.query().partition_prefix(&"acme corp".to_string()),
        sessions.query().partition_prefix("acme corp".to_string()),
    ] {
        assert_eq!(tenant.collect().await.unwrap().len(), 1);
    }
    let devices = sessions
        .query()
        .partition(("acme corp", "alice"))
        .row_prefix((1u32,))
        .collect()
        .await
        .unwrap();
    assert_eq!(devices.len(), 1);
    let devices = sessions
        .query()
        .partition(("acme corp", "alice"))
        .row_prefix(1u32)
        .collect()
        .await
        .unwrap();
    assert_eq!(devices.len(), 1);
}

/// An entity and a projection declared as a subset of it.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "People", kind = "EMP", version = 2, rename_all = "PascalCase")]
struct Person {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(rename = "FullName")]
    name: String,
    salary: i64,
    notes: Option<String>,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Person)]
struct PersonName {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

#[tokio::test]
async fn projections_declared_as_subsets_read_the_entity_names() {
    let people: Table<Person> = Table::new(MemBackend::new());
    people.create_if_missing().await.unwrap();
    people
        .insert(&Person {
            department: "Sales".into(),
            id: 7,
            name: "Ada".into(),
            salary: 100,
            notes: None,
        })
        .await
        .unwrap();
    // The projection takes table, kind, version and names from the entity.
    assert_eq!(<PersonName as TableEntity>::DESCRIPTOR.table, "People");
    assert_eq!(<PersonName as TableEntity>::DESCRIPTOR.kind, Some("EMP"));
    assert_eq!(PersonName::columns().name.name(), "FullName");
    let names = people
        .query()
        .partition("Sales")
        .project::<PersonName>()
        .collect()
        .await
        .unwrap();
    assert_eq!(names.len(), 1);
    assert_eq!(names[0].name, "Ada");
    let query = people.query().project::<PersonName>().to_query();
    let select = query.select.unwrap();
    assert!(select.contains(&"FullName".to_string()) && !select.contains(&"Salary".to_string()));
    // Read on its own, through the entity's keys and kind.
    let by_name: Table<PersonName> = people.of();
    let ada = by_name.get("Sales", 7).await.unwrap().unwrap();
    assert_eq!(ada.name, "Ada");
}
