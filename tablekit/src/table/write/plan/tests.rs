//! The planner, with no store: a write and the state it replaces go in,
//! the operations of its transaction come out.

use std::borrow::Cow;
use std::marker::PhantomData;

use super::{Learned, Pending, Planned, Role, State, Typed};
use crate::backend::{BatchOperation, UpdateMode};
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity, IfMatch};
use crate::schema;
use crate::table::Current;
use crate::table::write::RowWrite;

/// A type with a unique index: its rows need an index row beside them.
#[derive(tablekit_derive::TableEntity, Debug, Clone)]
#[tablekit(table = "Users", kind = "User")]
struct User {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(unique = "email")]
    email: String,
}

/// A type that needs nothing beside its row.
#[derive(tablekit_derive::TableEntity, Debug, Clone)]
#[tablekit(table = "Notes")]
struct Note {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    id: String,
    text: String,
}

fn user(email: &str) -> User {
    User {
        tenant: "t".into(),
        id: "1".into(),
        email: email.into(),
    }
}

/// The RowKeys of `value`'s index rows.
fn index_keys(value: &User) -> Vec<String> {
    schema::local_keys(value, &schema::row_key_of(value).unwrap()).unwrap()
}

/// A typed write of `value` as `write` says, over the index rows `known`.
fn typed<'a, T: schema::TableEntity>(
    row: &'a Entity,
    write: RowWrite,
    known: Option<&'a [String]>,
    new_keys: Option<&'a [String]>,
) -> Typed<'a, T> {
    Typed {
        entity: Cow::Borrowed(row),
        write,
        known: known.map(Cow::Borrowed),
        new_keys: new_keys.map(Cow::Borrowed),
        _marker: PhantomData,
    }
}

/// Plans `write` over `state`: its operations and what each is for.
fn plan(write: &dyn Pending, state: State<'_>) -> (Vec<BatchOperation>, Vec<Role>) {
    let mut out = Planned::with_capacity(write.room());
    write
        .plan(state, &Learned::default(), DateTime::MIN, &mut out)
        .expect("planned");
    let roles = out.owners.iter().map(|(w, role)| {
        assert_eq!(*w, 0, "one write");
        *role
    });
    let roles = roles.collect();
    (out.operations, roles)
}

/// Plans `write` over the state it knows without reading.
fn plan_known(write: &dyn Pending) -> (Vec<BatchOperation>, Vec<Role>) {
    let state = write
        .known_state(&Learned::default())
        .expect("known without reading");
    plan(write, state)
}

/// An operation's kind and RowKey, to compare plans by.
fn shape(operation: &BatchOperation) -> (&'static str, String) {
    let (kind, rk) = match operation {
        BatchOperation::Insert(e) => ("insert", &e.row_key),
        BatchOperation::Update {
            entity, if_match, ..
        } => match if_match {
            IfMatch::Any => ("update *", &entity.row_key),
            IfMatch::ETag(_) => ("update guarded", &entity.row_key),
        },
        BatchOperation::Upsert { entity, .. } => ("upsert", &entity.row_key),
        BatchOperation::Delete {
            row_key, if_match, ..
        } => match if_match {
            IfMatch::Any => ("delete *", row_key),
            IfMatch::ETag(_) => ("delete guarded", row_key),
        },
    };
    (kind, rk.clone())
}

fn shapes(operations: &[BatchOperation]) -> Vec<(&'static str, String)> {
    operations.iter().map(shape).collect()
}

#[test]
fn an_insert_plans_its_row_and_index_row_without_reading() {
    let value = user("a@example.com");
    let row = schema::to_entity(&value).unwrap();
    let keys = index_keys(&value);
    let write = typed::<User>(&row, RowWrite::Insert, None, Some(&keys));
    // An insert reads nothing.
    let (operations, roles) = plan_known(&write);
    assert_eq!(
        shapes(&operations),
        [("insert", keys[0].clone()), ("insert", row.row_key.clone())]
    );
    assert!(matches!(roles[..], [Role::CompanionWrite(0), Role::Row]));
    // The index row names its entity; the row is the value's.
    let BatchOperation::Insert(index_row) = &operations[0] else {
        unreachable!()
    };
    assert_eq!(index_row.partition_key, "t");
    assert_eq!(operations[1], BatchOperation::Insert(row.clone()));
}

#[test]
fn a_replace_that_moves_a_unique_value_moves_its_index_row() {
    let (old, new) = (user("a@example.com"), user("b@example.com"));
    let row = schema::to_entity(&new).unwrap();
    let (old_keys, new_keys) = (index_keys(&old), index_keys(&new));
    assert_ne!(old_keys, new_keys);
    let etag = ETag::new("W/\"1\"");
    let write = RowWrite::Update(UpdateMode::Replace, IfMatch::ETag(etag.clone()));
    let write = typed::<User>(&row, write, Some(&old_keys), Some(&new_keys));
    // The caller holds the version it read: nothing is read.
    let (operations, roles) = plan_known(&write);
    assert_eq!(
        shapes(&operations),
        [
            ("delete *", old_keys[0].clone()),
            ("insert", new_keys[0].clone()),
            ("update guarded", row.row_key.clone()),
        ]
    );
    assert!(matches!(
        roles[..],
        [Role::CompanionDelete, Role::CompanionWrite(0), Role::Row]
    ));
    // Guarded by the version read: a writer that raced this one fails the
    // whole transaction.
    let BatchOperation::Update { if_match, .. } = &operations[2] else {
        unreachable!()
    };
    assert_eq!(*if_match, IfMatch::ETag(etag));
}

#[test]
fn an_upsert_over_a_stored_row_is_guarded_by_the_etag_read() {
    let (old, new) = (user("a@example.com"), user("b@example.com"));
    let row = schema::to_entity(&new).unwrap();
    let new_keys = index_keys(&new);
    let write = typed::<User>(
        &row,
        RowWrite::Upsert(UpdateMode::Replace),
        None,
        Some(&new_keys),
    );
    // An upsert does not know what it replaces: the state is read.
    assert!(write.known_state(&Learned::default()).is_none());
    let stored_etag = ETag::new("W/\"7\"");
    let mut stored = schema::to_entity(&old).unwrap();
    stored.etag = Some(stored_etag.clone());
    let state = State {
        current: Some(Box::new(Current {
            entity: stored,
            etag: stored_etag.clone(),
            parts: 0,
        })),
        old_keys: Some(Cow::Owned(index_keys(&old))),
        guard: Some(Cow::Owned(stored_etag.clone())),
        retry: true,
        lists: Vec::new(),
        remote: None,
    };
    let (operations, _) = plan(&write, state);
    let row_write = operations.last().expect("the row");
    assert!(
        matches!(row_write, BatchOperation::Update { if_match: IfMatch::ETag(e), .. } if *e == stored_etag),
        "{row_write:?}"
    );
    assert!(shapes(&operations).contains(&("delete *", index_keys(&old)[0].clone())));
    assert!(shapes(&operations).contains(&("insert", new_keys[0].clone())));
}

#[test]
fn a_delete_plans_its_row_and_index_rows() {
    let value = user("a@example.com");
    let keys = index_keys(&value);
    let row = Entity::new("t", schema::row_key_of(&value).unwrap());
    let etag = ETag::new("W/\"1\"");
    let write = typed::<User>(
        &row,
        RowWrite::Delete(IfMatch::ETag(etag.clone())),
        Some(&keys),
        None,
    );
    let (operations, _) = plan_known(&write);
    assert_eq!(
        shapes(&operations),
        [
            ("delete *", keys[0].clone()),
            ("delete guarded", row.row_key.clone())
        ]
    );
}

#[test]
fn a_row_alone_is_planned_as_the_caller_asked() {
    let note = Note {
        tenant: "t".into(),
        id: "n".into(),
        text: "hello".into(),
    };
    let row = schema::to_entity(&note).unwrap();
    for write in [
        RowWrite::Insert,
        RowWrite::Upsert(UpdateMode::Merge),
        RowWrite::Update(UpdateMode::Replace, IfMatch::Any),
        RowWrite::Delete(IfMatch::Any),
    ] {
        let expected = write.operation(row.clone());
        let typed = typed::<Note>(&row, write, None, None);
        let state = typed
            .known_state(&Learned::default())
            .expect("nothing read");
        let (operations, roles) = plan(&typed, state);
        assert_eq!(operations, [expected]);
        assert!(matches!(roles[..], [Role::Row]));
        // Neither type records changes: the feed's planner is not asked.
        assert!(typed.change().is_none());
    }
    let value = user("a@example.com");
    let row = schema::to_entity(&value).unwrap();
    assert!(
        typed::<User>(&row, RowWrite::Insert, None, None)
            .change()
            .is_none()
    );
}
