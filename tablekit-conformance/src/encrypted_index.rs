//! Indexes on encrypted fields on every backend: an entity is found by an
//! equal value through rows that hold a keyed hash of it, never the value;
//! unique values are refused when taken; every write keeps the rows in
//! step; verify and repair see them; a table without the index key, or
//! with another one, finds nothing and writes nothing.

use std::sync::Arc;

use futures::TryStreamExt;

use tablekit::backend::{Query, TableBackend};
use tablekit::encryption::ENVELOPE_PROPERTY;
use tablekit::encryption::{
    ContentKey, EncryptionError, IndexKey, KeyResolver, LocalKey, LocalKeys, WrappedKey,
};
use tablekit::{Error, TableBackendExt, TableEntity, Value};

use super::encrypted::{encryption_error, key_one, sealed_table};

/// An employee whose email (unique) and city (not) are encrypted and
/// indexed, beside a plain index.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "PER")]
pub(crate) struct Employee {
    #[tablekit(partition_key)]
    pub(crate) department: String,
    #[tablekit(row_key)]
    pub(crate) id: u32,
    #[tablekit(encrypted, unique = "email")]
    pub(crate) email: String,
    #[tablekit(encrypted, index = "city")]
    pub(crate) city: Option<String>,
    #[tablekit(index = "team")]
    pub(crate) team: String,
}

fn employee(id: u32, email: &str, city: Option<&str>) -> Employee {
    Employee {
        department: "sales".into(),
        id,
        email: email.into(),
        city: city.map(Into::into),
        team: format!("team-{}", id % 2),
    }
}

/// Every row of table `name`, shown: what the store holds.
async fn stored(backend: &dyn TableBackend, name: &str) -> (usize, String) {
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    (rows.len(), format!("{rows:?}"))
}

/// Finds, gets and pages by an encrypted value; the store holds hashes
/// alone; a taken unique value is refused with nothing written, and its
/// message holds no value.
pub async fn encrypted_values_are_found_through_hashed_index_rows(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Employee>(&backend, "sealedfind").await;
    let ada = employee(1, "ada@example.com", Some("Oslo"));
    let bob = employee(2, "bob@example.com", Some("Oslo"));
    let eve = employee(3, "eve@example.com", None);
    for e in [&ada, &bob, &eve] {
        t.insert(e).await.expect("insert");
    }
    let by_email = t.index(Employee::indexes().email);
    let found = by_email.get("sales", "bob@example.com").await.expect("get");
    assert_eq!(found.as_ref(), Some(&bob));
    assert_eq!(
        by_email
            .get("sales", "nobody@example.com")
            .await
            .expect("get"),
        None
    );
    assert_eq!(
        by_email.get("other", "bob@example.com").await.expect("get"),
        None
    );
    let loaded = by_email
        .get_loaded("sales", "ada@example.com")
        .await
        .expect("get");
    assert_eq!(loaded.map(|l| (*l).clone()), Some(ada.clone()));
    let by_city = t.index(Employee::indexes().city);
    let in_oslo: Vec<Employee> = by_city
        .find("sales", "Oslo")
        .try_collect()
        .await
        .expect("find");
    assert_eq!(in_oslo, [ada.clone(), bob.clone()]);
    let page = by_city
        .find_page("sales", "Oslo", 1, None)
        .await
        .expect("a page");
    assert_eq!(page.items, std::slice::from_ref(&ada));
    let next = by_city
        .find_page("sales", "Oslo", 1, page.next.as_ref())
        .await
        .expect("the next page");
    assert_eq!(next.items, std::slice::from_ref(&bob));
    let team: Vec<Employee> = (t.index(Employee::indexes().team))
        .find("sales", "team-1")
        .try_collect()
        .await
        .expect("find");
    assert_eq!(team, [ada.clone(), eve.clone()]);

    // Three entities, two email rows... each with its rows: no value, and
    // the index RowKeys a tag and a hash.
    let (count, shown) = stored(&*backend, &name).await;
    assert_eq!(count, 3 + 3 + 2 + 3, "entities, emails, cities, teams");
    assert!(
        !shown.contains("example.com") && !shown.contains("Oslo"),
        "{shown}"
    );
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    let hashed = |tag: &str| {
        rows.iter()
            .filter_map(|r| r.row_key.strip_prefix(tag))
            .all(|rest| rest.len() >= 64 && rest[..64].bytes().all(|b| b.is_ascii_hexdigit()))
    };
    assert!(hashed("PER.email_") && hashed("PER.city_"));

    let taken = employee(4, "ada@example.com", None);
    match t.insert(&taken).await {
        Err(Error::UniqueViolation { index, value, .. }) => {
            assert_eq!(index, "email");
            assert!(!value.contains("ada"), "the value in a message: {value}");
        }
        other => panic!("a taken encrypted value: {other:?}"),
    }
    assert!(t.get("sales", 4u32).await.expect("get").is_none());
    assert_eq!(stored(&*backend, &name).await.0, count);
    in_transactions(&t, &backend, &name, count).await;
    backend.delete_table(&name).await.expect("drop");
}

/// A transaction seals its writes with the table's keys and keeps their
/// hashed index rows: a new value is found, a taken one refused whole.
async fn in_transactions(
    t: &tablekit::Table<Employee>,
    backend: &Arc<dyn TableBackend>,
    name: &str,
    count: usize,
) {
    let dan = employee(5, "dan@example.com", Some("Rome"));
    let mut tx = t.transaction();
    tx.insert(&dan).expect("insert");
    tx.submit().await.expect("a transaction");
    let by_email = t.index(Employee::indexes().email);
    let found = by_email.get("sales", "dan@example.com").await.expect("get");
    assert_eq!(found.as_ref(), Some(&dan));
    let (now, shown) = stored(&**backend, name).await;
    assert_eq!(now, count + 4, "the entity and its three index rows");
    assert!(!shown.contains("dan@"), "{shown}");

    let mut tx = t.transaction();
    tx.insert(&employee(6, "fay@example.com", None))
        .expect("insert");
    tx.insert(&employee(7, "bob@example.com", None))
        .expect("insert");
    match tx.submit().await {
        Err(Error::BatchFailed { index: 1, .. }) => {}
        other => panic!("a taken encrypted value in a transaction: {other:?}"),
    }
    assert!(t.get("sales", 6u32).await.expect("get").is_none());
    assert_eq!(stored(&**backend, name).await.0, count + 4);

    // A replace moves the hashed index rows in the same transaction.
    let mut loaded = t.get("sales", 5u32).await.expect("get").expect("stored");
    loaded.email = "dan@example.org".into();
    let mut tx = t.transaction();
    tx.replace(&loaded).expect("replace");
    tx.submit().await.expect("a transaction");
    let old = by_email.get("sales", "dan@example.com").await.expect("get");
    assert_eq!(old, None);
    let found = by_email.get("sales", "dan@example.org").await.expect("get");
    assert_eq!(found.as_ref(), Some(&*loaded));
    assert_eq!(stored(&**backend, name).await.0, count + 4);
    assert!(t.verify_indexes("sales").await.expect("verify").is_clean());
}

/// Every write moves the hashed rows with the value (insert, replace,
/// update, upsert, delete); verify sees them in step, and repair brings
/// back a row taken away.
pub async fn encrypted_index_rows_follow_every_write(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Employee>(&backend, "sealedwrites").await;
    let by_email = t.index(Employee::indexes().email);
    let by_city = t.index(Employee::indexes().city);
    t.insert(&employee(1, "a@x.org", Some("Rome")))
        .await
        .expect("insert");
    t.insert(&employee(2, "b@x.org", None))
        .await
        .expect("insert");

    let mut one = t.get("sales", 1u32).await.expect("get").expect("stored");
    one.email = "a2@x.org".into();
    t.replace(&mut one).await.expect("replace");
    t.update("sales", 2u32, |e: &mut Employee| {
        e.city = Some("Rome".into())
    })
    .await
    .expect("update");
    t.upsert(&employee(3, "c@x.org", Some("Lima")))
        .await
        .expect("upsert");
    t.upsert(&employee(3, "c2@x.org", Some("Rome")))
        .await
        .expect("upsert over");
    assert_eq!(by_email.get("sales", "a@x.org").await.expect("get"), None);
    assert_eq!(by_email.get("sales", "c@x.org").await.expect("get"), None);
    for (email, id) in [("a2@x.org", 1), ("b@x.org", 2), ("c2@x.org", 3)] {
        let found = by_email.get("sales", email).await.expect("get");
        assert_eq!(found.map(|e| e.id), Some(id), "{email}");
    }
    let rome: Vec<u32> = by_city
        .find("sales", "Rome")
        .map_ok(|e| e.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(rome, [1, 2, 3]);
    let lima: Vec<Employee> = by_city
        .find("sales", "Lima")
        .try_collect()
        .await
        .expect("find");
    assert!(lima.is_empty());
    // Taken by another entity: refused on every path.
    let mut two = t.get("sales", 2u32).await.expect("get").expect("stored");
    two.email = "a2@x.org".into();
    assert!(matches!(
        t.replace(&mut two).await,
        Err(Error::UniqueViolation { .. })
    ));
    assert!(matches!(
        t.upsert(&employee(9, "c2@x.org", None)).await,
        Err(Error::UniqueViolation { .. })
    ));

    let audit = t.verify_indexes("sales").await.expect("verify");
    assert!(audit.is_clean() && audit.unreadable.is_empty(), "{audit:?}");
    // An index row taken away is found missing, and repaired.
    let rows = backend.query_all(&name, Query::new()).await.expect("rows");
    let email_row = rows
        .iter()
        .find(|r| r.row_key.starts_with("PER.email_"))
        .expect("a row");
    backend
        .delete_entity(&name, "sales", &email_row.row_key, &tablekit::IfMatch::Any)
        .await
        .expect("a raw delete");
    let audit = t.verify_indexes("sales").await.expect("verify");
    assert_eq!(audit.missing.len(), 1, "{audit:?}");
    t.repair_indexes("sales").await.expect("repair");
    assert!(t.verify_indexes("sales").await.expect("verify").is_clean());
    for email in ["a2@x.org", "b@x.org", "c2@x.org"] {
        assert!(
            by_email.get("sales", email).await.expect("get").is_some(),
            "{email}"
        );
    }

    let three = t.get("sales", 3u32).await.expect("get").expect("stored");
    t.delete(&three).await.expect("delete");
    for id in [1u32, 2] {
        t.delete_unconditionally("sales", id).await.expect("delete");
    }
    assert_eq!(
        stored(&*backend, &name).await.0,
        0,
        "index rows left behind"
    );
    backend.delete_table(&name).await.expect("drop");
}

/// A resolver with keys but no index key.
#[derive(Debug)]
struct NoIndexKey(LocalKey);

#[tablekit::encryption::async_trait]
impl KeyResolver for NoIndexKey {
    fn current_key_id(&self) -> &str {
        self.0.current_key_id()
    }
    async fn wrap(&self, id: &str, key: &ContentKey) -> Result<WrappedKey, EncryptionError> {
        self.0.wrap(id, key).await
    }
    async fn unwrap(&self, id: &str, key: &WrappedKey) -> Result<ContentKey, EncryptionError> {
        self.0.unwrap(id, key).await
    }
}

/// A table whose resolver has no index key writes nothing and finds
/// nothing, in plain terms; one with another index key finds nothing; a
/// ring started from the first key keeps finding what it wrote.
pub async fn encrypted_indexes_need_their_index_key(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Employee>(&backend, "sealedkey").await;
    t.insert(&employee(1, "a@x.org", None))
        .await
        .expect("insert");
    let keyless = t.clone().with_encryption(Arc::new(NoIndexKey(key_one())));
    let refused = keyless.insert(&employee(2, "b@x.org", None)).await;
    assert_eq!(encryption_error(refused), EncryptionError::NoIndexKey);
    let lookup = keyless
        .index(Employee::indexes().email)
        .get("sales", "a@x.org")
        .await;
    assert_eq!(encryption_error(lookup), EncryptionError::NoIndexKey);
    assert!(t.get("sales", 2u32).await.expect("get").is_none());

    let other = t.clone().with_encryption(Arc::new(
        LocalKeys::new(key_one()).with_index_key(IndexKey::new([5; 32])),
    ));
    let found = other
        .index(Employee::indexes().email)
        .get("sales", "a@x.org")
        .await;
    assert_eq!(found.expect("get"), None, "found under another index key");

    // A rotation's ring, started from the first key: the index still finds.
    let ring = LocalKeys::new(key_one()).with(LocalKey::new("k2", [22; 32]), true);
    let rotated = t.clone().with_encryption(Arc::new(ring));
    rotated
        .insert(&employee(3, "c@x.org", None))
        .await
        .expect("insert");
    let by_email = rotated.index(Employee::indexes().email);
    for (email, id) in [("a@x.org", 1), ("c@x.org", 3)] {
        let found = by_email.get("sales", email).await.expect("get");
        assert_eq!(found.map(|e| e.id), Some(id));
    }
    let row = backend
        .query_all(&name, Query::new())
        .await
        .expect("rows")
        .into_iter()
        .find(|r| r.row_key.starts_with("PER_"))
        .expect("an entity");
    assert!(matches!(row.get("email"), Some(Value::Binary(_))));
    backend.delete_table(&name).await.expect("drop");
}

/// The email ciphertext and envelope of every row of `name` holding one.
async fn sealed_rows(
    backend: &dyn TableBackend,
    name: &str,
) -> Vec<(String, Option<Value>, String)> {
    let rows = backend.query_all(name, Query::new()).await.expect("rows");
    rows.into_iter()
        .filter_map(|row| {
            let Some(Value::String(envelope)) = row.get(ENVELOPE_PROPERTY).cloned() else {
                return None;
            };
            Some((row.row_key.clone(), row.get("email").cloned(), envelope))
        })
        .collect()
}

/// A rewrap moves every content key (the entities' and their index rows'
/// copies) under the new key without touching a ciphertext, dropped and
/// resumed from its checkpoints, an index row missing on the way; then
/// the old key can go: everything reads and is found by value.
pub async fn rewraps_rotate_keys_without_touching_values(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Employee>(&backend, "rewrap").await;
    let index_key = IndexKey::new([8; 32]);
    let t = t.with_encryption(Arc::new(
        LocalKeys::new(key_one()).with_index_key(index_key.clone()),
    ));
    let staff: Vec<Employee> = (1..=7)
        .map(|id| employee(id, &format!("e{id}@x.org"), (id % 2 == 1).then_some("Oslo")))
        .collect();
    for e in &staff {
        t.insert(e).await.expect("insert");
    }
    let before = sealed_rows(&*backend, &name).await;
    // An index row gone before the rotation: the rewrap passes it by.
    let lost = (before.iter())
        .find(|(rk, _, _)| rk.starts_with("PER.city_"))
        .map(|(rk, _, _)| rk.clone())
        .expect("a city row");
    (backend.delete_entity(&name, "sales", &lost, &tablekit::IfMatch::Any))
        .await
        .expect("a raw delete");

    let second = LocalKey::new("k2", [22; 32]);
    let ring = LocalKeys::new(key_one())
        .with(second.clone(), true)
        .with_index_key(index_key.clone());
    // Every request gives way, as one over a network does: a point to be
    // dropped at.
    let layer = tablekit::layer::FaultInjection::new(Arc::clone(&backend));
    layer.handle().set_yields(true);
    let rotating: tablekit::Table<Employee> =
        tablekit::Table::from_arc(Arc::new(layer), &name).with_encryption(Arc::new(ring));
    let full = rotating.migrate().dry_run().run().await.expect("a dry run");
    let counted = rotating
        .migrate()
        .rewrap_only()
        .dry_run()
        .run()
        .await
        .expect("a dry run");
    assert_eq!(counted.rewrapped, 7, "{counted:?}");
    let (report, last, dropped) = rewrap_dropped_and_resumed(&rotating).await;
    assert!(dropped >= 3, "dropped {dropped} times");
    let report = report.expect("the rewrap finishes");
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(
        report.rewrapped + report.already_current,
        report.scanned,
        "{report:?}"
    );
    // (Rows a dropped run rewrapped after its last checkpoint count as
    // current in the run that read them again.)
    assert!(report.scanned >= 7, "{report:?}");
    // A rewrap's checkpoint resumes a rewrap alone.
    let refused = rotating
        .migrate()
        .resume(last.expect("a checkpoint"))
        .run()
        .await;
    let mismatch = |e: &Error| {
        matches!(
            e.invalid_input(),
            Some(tablekit::InvalidInput::CheckpointMismatch { .. })
        )
    };
    assert!(refused.as_ref().is_err_and(mismatch), "{refused:?}");
    assert_eq!(full.scanned, 7);

    // The ciphertexts as they were; every envelope under the new key.
    let after = sealed_rows(&*backend, &name).await;
    assert_eq!(after.len(), before.len() - 1);
    for (rk, email, envelope) in &after {
        let was = before
            .iter()
            .find(|(r, _, _)| r == rk)
            .expect("the same rows");
        assert_eq!(email, &was.1, "{rk}: a ciphertext changed");
        assert!(envelope.contains("\"kid\":\"k2\""), "{rk}: {envelope}");
    }

    // The old key gone: every read, and every lookup by value.
    let new_only = t
        .clone()
        .with_encryption(Arc::new(LocalKeys::new(second).with_index_key(index_key)));
    read_and_found(&new_only, &staff).await;
    backend.delete_table(&name).await.expect("drop");
}

/// Runs the rewrap of `rotating`, dropped after a few polls and resumed
/// from its last checkpoint until it finishes: its report, the last
/// checkpoint, and how many runs were dropped.
async fn rewrap_dropped_and_resumed(
    rotating: &tablekit::Table<Employee>,
) -> (
    Option<tablekit::table::MigrationReport>,
    Option<tablekit::table::MigrationCheckpoint>,
    usize,
) {
    let mut last: Option<tablekit::table::MigrationCheckpoint> = None;
    let (mut report, mut dropped) = (None, 0);
    for round in 0..200 {
        let saved = std::sync::Mutex::new(None);
        let mut run = rotating.migrate().rewrap_only().scope(|q| q.page_size(2));
        run = run.on_checkpoint(|c| *saved.lock().unwrap() = Some(c.clone()));
        if let Some(checkpoint) = last.clone() {
            run = run.resume(checkpoint);
        }
        // One poll more each round: the run gets through at last.
        let done = super::drop_after_polls(3 + round, run.run()).await;
        if let Some(saved) = saved.into_inner().unwrap() {
            last = Some(saved);
        }
        match done {
            Some(done) => {
                report = Some(done.unwrap_or_else(|e| panic!("a rewrap: {e:?}")));
                break;
            }
            None => dropped += 1,
        }
    }
    (report, last, dropped)
}

/// Each of `staff` reads through `t` and is found by its email; the index
/// row taken away is repaired, and the city index finds four.
async fn read_and_found(t: &tablekit::Table<Employee>, staff: &[Employee]) {
    let by_email = t.index(Employee::indexes().email);
    for e in staff {
        assert_eq!(t.get("sales", e.id).await.expect("get").as_deref(), Some(e));
        let found = by_email.get("sales", &*e.email).await.expect("by email");
        assert_eq!(found.as_ref(), Some(e));
    }
    let audit = t.repair_indexes("sales").await.expect("repair");
    assert_eq!(audit.missing.len(), 1, "{audit:?}");
    let oslo: Vec<Employee> = (t.index(Employee::indexes().city))
        .find("sales", "Oslo")
        .try_collect()
        .await
        .expect("find");
    assert_eq!(oslo.len(), 4);
}
