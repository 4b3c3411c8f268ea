//! Encrypted fields on every backend: values of every type read back as
//! written through each read path, the store holds ciphertext alone, and
//! every change to a row (bits flipped, properties or rows swapped or
//! copied, values cut short or written in plain text, the envelope taken
//! away, the wrong key) reads as a typed error, never as a value.

use std::sync::Arc;

use futures::TryStreamExt;

use tablekit::backend::{GetOptions, TableBackend};
use tablekit::encryption::{ENVELOPE_PROPERTY, EncryptionError, LocalKey, LocalKeys};
use tablekit::table::Table;
use tablekit::{DateTime, Entity, Error, TableBackendExt, TableEntity, Value, schema};

use super::unique_table;

/// A patient, with a field of each property type encrypted.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Patients", kind = "PAT")]
struct Patient {
    #[tablekit(partition_key)]
    clinic: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted)]
    national_id: String,
    #[tablekit(encrypted)]
    notes: Option<String>,
    #[tablekit(encrypted)]
    scan: Vec<u8>,
    #[tablekit(encrypted)]
    born: DateTime,
    #[tablekit(encrypted)]
    weight: f64,
    #[tablekit(encrypted)]
    visits: i64,
    #[tablekit(encrypted)]
    consent: bool,
    #[tablekit(encrypted)]
    reference: tablekit::uuid::Uuid,
    #[tablekit(encrypted, json)]
    tags: Vec<String>,
}

/// The encrypted properties of [`Patient`].
const SEALED: [&str; 9] = [
    "national_id",
    "notes",
    "scan",
    "born",
    "weight",
    "visits",
    "consent",
    "reference",
    "tags",
];

fn patient(id: u32) -> Patient {
    Patient {
        clinic: "north".into(),
        id,
        name: format!("patient {id}"),
        national_id: format!("{id:03}-45-6789"),
        notes: (!id.is_multiple_of(2)).then(|| format!("allergic to {id}")),
        scan: vec![id as u8; 40],
        born: DateTime::from_unix_nanos(i128::from(id) * 1_000_000_000_000_000).expect("a time"),
        weight: 60.5 + f64::from(id),
        visits: i64::from(id) * 3,
        consent: id.is_multiple_of(2),
        reference: tablekit::uuid::Uuid::from_u128(u128::from(id) << 64),
        tags: vec![format!("tag-{id}"), "ward".into()],
    }
}

pub(crate) fn key_one() -> LocalKey {
    LocalKey::new("k1", [11; 32])
}

/// A new table of `T` under `tag`, with the key `k1`: the table and its name.
pub(crate) async fn sealed_table<T: TableEntity>(
    backend: &Arc<dyn TableBackend>,
    tag: &str,
) -> (Table<T>, String) {
    let name = unique_table(tag);
    let t: Table<T> =
        Table::from_arc(Arc::clone(backend), &name).with_encryption(Arc::new(key_one()));
    t.create_if_missing().await.expect("the table");
    (t, name)
}

async fn raw(backend: &dyn TableBackend, table: &str, id: u32) -> Entity {
    let rk = schema::row_key_of(&patient(id)).expect("a key");
    backend
        .get_entity(table, "north", &rk, &GetOptions::default())
        .await
        .expect("the raw row")
}

/// A raw row written back under `id`'s keys, changed by `change`.
async fn put_raw(backend: &dyn TableBackend, table: &str, mut row: Entity, id: u32) {
    row.row_key = schema::row_key_of(&patient(id)).expect("a key");
    row.etag = None;
    backend
        .upsert_entity(table, &row, tablekit::backend::UpdateMode::Replace)
        .await
        .expect("a raw write");
}

pub(crate) fn encryption_error(result: tablekit::Result<impl std::fmt::Debug>) -> EncryptionError {
    match result {
        Err(Error::Encryption(e)) => e,
        other => panic!("expected an encryption error, got {other:?}"),
    }
}

/// Values of every type are sealed on the way in and read back equal by
/// `get`, queries, pages and updates; the store holds ciphertext alone;
/// readers and writers that do not encrypt refuse the type.
pub async fn encrypted_fields_read_back_and_are_stored_sealed(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Patient>(&backend, "sealed").await;
    let t = t.with_encryption(Arc::new(LocalKeys::new(key_one())));
    for id in 1..=3 {
        t.insert(&patient(id)).await.expect("insert");
    }
    for id in 1..=3 {
        let read = t.get("north", id).await.expect("get").expect("stored");
        assert_eq!(*read, patient(id));
        let row = raw(&*backend, &name, id).await;
        for property in SEALED {
            match row.get(property) {
                Some(Value::Binary(_)) => {}
                None if property == "notes" && id.is_multiple_of(2) => {}
                other => panic!("{property} is stored as {other:?}"),
            }
        }
        assert_eq!(row.get("name"), Some(&Value::from(format!("patient {id}"))));
        let shown = format!("{row:?}");
        assert!(
            !shown.contains("-45-6789") && !shown.contains("allergic"),
            "{shown}"
        );
        assert!(row.get(ENVELOPE_PROPERTY).is_some());
    }
    let all = t
        .query()
        .partition("north")
        .collect()
        .await
        .expect("a query");
    let all: Vec<Patient> = all.into_iter().map(|p| (*p).clone()).collect();
    assert_eq!(all, (1..=3).map(patient).collect::<Vec<_>>());
    let (page, _) = t
        .query()
        .partition("north")
        .page_size(2)
        .page()
        .await
        .expect("a page");
    assert_eq!(page.len(), 2);
    assert_eq!(*page[1], patient(2));

    // Written again every way: still read back equal.
    let mut read = t.get("north", 1u32).await.expect("get").expect("stored");
    read.notes = Some("changed".into());
    t.replace(&mut read).await.expect("replace");
    t.update("north", 2u32, |p: &mut Patient| p.visits += 1)
        .await
        .expect("update");
    let mut third = patient(3);
    third.national_id = "999-99-9999".into();
    t.upsert(&third).await.expect("upsert");
    let mut want = vec![patient(1), patient(2), third];
    want[0].notes = Some("changed".into());
    want[1].visits += 1;
    for p in &want {
        let read = t.get("north", p.id).await.expect("get").expect("stored");
        assert_eq!(&*read, p);
    }

    many_at_once_and_refusals(&t, &*backend, &name).await;
    backend.delete_table(&name).await.expect("drop");
}

/// The bulk writer and transactions seal each entity; what does not
/// encrypt refuses the type in plain terms.
async fn many_at_once_and_refusals(t: &Table<Patient>, backend: &dyn TableBackend, name: &str) {
    // Many at once: the bulk writer seals each.
    let report = t.bulk().insert(&[patient(4), patient(5)]).await;
    assert!(report.is_complete(), "{report:?}");
    for id in [4, 5] {
        assert_eq!(
            *t.get("north", id).await.expect("get").expect("stored"),
            patient(id)
        );
        let row = raw(backend, name, id).await;
        assert!(matches!(row.get("national_id"), Some(Value::Binary(_))));
    }
    // A transaction seals its writes when it is submitted, with the
    // table's keys.
    let four = t.get("north", 4u32).await.expect("get").expect("stored");
    let mut changed = four.clone();
    changed.notes = Some("changed in a transaction".into());
    let mut transaction = t.transaction();
    transaction.insert(&patient(6)).expect("insert");
    transaction.replace(&changed).expect("replace");
    transaction
        .delete_unconditionally::<Patient>("north", 5u32)
        .expect("delete");
    transaction.submit().await.expect("a transaction");
    assert_eq!(
        *t.get("north", 6u32).await.expect("get").expect("stored"),
        patient(6)
    );
    assert_eq!(
        t.get("north", 4u32)
            .await
            .expect("get")
            .expect("stored")
            .notes,
        changed.notes
    );
    assert!(t.get("north", 5u32).await.expect("get").is_none());
    let row = raw(backend, name, 6).await;
    assert!(matches!(row.get("national_id"), Some(Value::Binary(_))));
    assert!(!format!("{row:?}").contains("-45-6789"));

    // What does not encrypt refuses the type, in plain terms.
    let row = raw(backend, name, 1).await;
    let refused = encryption_error(schema::from_entity::<Patient>(&row));
    assert!(
        matches!(refused, EncryptionError::NotDecrypted { .. }),
        "{refused}"
    );
    let refused = encryption_error(schema::to_entity(&patient(1)));
    assert!(
        matches!(refused, EncryptionError::NotDecrypted { .. }),
        "{refused}"
    );
    let keyless: Table<Patient> = Table::from_arc(Arc::clone(t.backend()), name);
    assert_eq!(
        encryption_error(keyless.get("north", 1u32).await),
        EncryptionError::NoKeys {
            table: name.to_owned()
        }
    );
    assert_eq!(
        encryption_error(keyless.insert(&patient(9)).await),
        EncryptionError::NoKeys {
            table: name.to_owned()
        }
    );
    let mut transaction = keyless.transaction();
    transaction.insert(&patient(9)).expect("insert");
    assert_eq!(
        encryption_error(transaction.submit().await),
        EncryptionError::NoKeys {
            table: name.to_owned()
        }
    );
    assert!(t.get("north", 9u32).await.expect("get").is_none());
}

/// What a changed row must read as.
type Expected = fn(&EncryptionError) -> bool;

/// Every change to a sealed row reads as a typed error: no `get` or query
/// returns a value that differs from what was written.
pub async fn changed_encrypted_rows_never_read_as_values(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Patient>(&backend, "tamper").await;
    t.insert(&patient(1)).await.expect("insert");
    t.insert(&patient(2)).await.expect("insert");
    let one = raw(&*backend, &name, 1).await;
    let two = raw(&*backend, &name, 2).await;
    let binary = |row: &Entity, p: &str| match row.get(p) {
        Some(Value::Binary(b)) => b.clone(),
        other => panic!("{p}: {other:?}"),
    };

    let mut cases: Vec<(&str, Entity, Expected)> = Vec::new();
    let tampered: Expected = |e| matches!(e, EncryptionError::Tampered { .. });
    let mut flipped = one.clone();
    let mut bytes = binary(&one, "national_id");
    bytes[20] ^= 0x04;
    flipped.insert("national_id", bytes);
    cases.push(("a bit flipped", flipped, tampered));
    let mut moved = one.clone();
    moved.insert(
        "national_id",
        two.get("national_id").cloned().expect("sealed"),
    );
    cases.push(("a value from another row", moved, tampered));
    let mut swapped = one.clone();
    swapped.insert("national_id", one.get("notes").cloned().expect("sealed"));
    swapped.insert("notes", one.get("national_id").cloned().expect("sealed"));
    cases.push(("two properties swapped", swapped, tampered));
    let mut envelope = one.clone();
    envelope.insert(
        ENVELOPE_PROPERTY,
        two.get(ENVELOPE_PROPERTY).cloned().expect("sealed"),
    );
    cases.push(("another row's envelope", envelope, tampered));
    let mut cut = one.clone();
    cut.insert("scan", binary(&one, "scan")[..10].to_vec());
    cases.push(("a value cut short", cut, |e| {
        matches!(e, EncryptionError::NotCiphertext { .. })
    }));
    let mut plain = one.clone();
    plain.insert("national_id", "123-45-6789");
    cases.push(("a plain value", plain, |e| {
        matches!(e, EncryptionError::NotCiphertext { .. })
    }));
    let mut taken_out = one.clone();
    taken_out.properties.remove("notes");
    cases.push(("an optional value taken out", taken_out, tampered));
    let mut bare = one.clone();
    bare.properties.remove(ENVELOPE_PROPERTY);
    cases.push(("no envelope", bare, |e| {
        matches!(e, EncryptionError::MissingEnvelope { .. })
    }));
    for (what, row, expected) in cases {
        put_raw(&*backend, &name, row, 1).await;
        let got = encryption_error(t.get("north", 1u32).await);
        assert!(expected(&got), "{what}: {got}");
        let queried = t.query().partition("north").collect().await;
        assert!(
            matches!(queried, Err(Error::Encryption(_))),
            "{what}: a query read {queried:?}"
        );
    }
    // A whole row copied under other keys.
    put_raw(&*backend, &name, one.clone(), 5).await;
    assert!(matches!(
        encryption_error(t.get("north", 5u32).await),
        EncryptionError::Tampered { .. }
    ));
    // The row as written reads again; under other keys, it does not.
    put_raw(&*backend, &name, one, 1).await;
    let read = t.get("north", 1u32).await.expect("get").expect("stored");
    assert_eq!(*read, patient(1));
    let other_bytes = t
        .clone()
        .with_encryption(Arc::new(LocalKey::new("k1", [12; 32])));
    assert_eq!(
        encryption_error(other_bytes.get("north", 1u32).await),
        EncryptionError::WrongKey {
            key_id: "k1".into()
        }
    );
    let other_id = t
        .clone()
        .with_encryption(Arc::new(LocalKey::new("k9", [11; 32])));
    assert_eq!(
        encryption_error(other_id.get("north", 1u32).await),
        EncryptionError::UnknownKey {
            key_id: "k1".into()
        }
    );
    backend.delete_table(&name).await.expect("drop");
}

/// A ring of keys reads rows of each; a write uses the current one; a
/// migration seals again the rows of other keys (a rotation), bound to
/// its key; a merge that would leave some sealed values under an old
/// content key is refused.
pub async fn encrypted_rows_read_under_every_key_of_a_ring(backend: Arc<dyn TableBackend>) {
    let (old, name) = sealed_table::<Patient>(&backend, "ring").await;
    old.insert(&patient(1)).await.expect("insert");
    let ring = LocalKeys::new(key_one()).with(LocalKey::new("k2", [22; 32]), true);
    let t = old.clone().with_encryption(Arc::new(ring));
    let mut read = t.get("north", 1u32).await.expect("get").expect("under k1");
    read.weight = 70.0;
    t.replace(&mut read).await.expect("replace under k2");
    let row = raw(&*backend, &name, 1).await;
    let Some(Value::String(envelope)) = row.get(ENVELOPE_PROPERTY) else {
        panic!("no envelope");
    };
    assert!(envelope.contains("\"kid\":\"k2\""), "{envelope}");
    assert!(matches!(
        encryption_error(old.get("north", 1u32).await),
        EncryptionError::UnknownKey { .. }
    ));
    let k2_only = old
        .clone()
        .with_encryption(Arc::new(LocalKey::new("k2", [22; 32])));
    let read = k2_only
        .get("north", 1u32)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(read.weight, 70.0);

    // Rotation: the ring's current key is k3; a migration seals every row
    // of another key again under it, and its checkpoint names k3.
    for id in 2..=4 {
        old.insert(&patient(id)).await.expect("insert under k1");
    }
    let rotated = old.clone().with_encryption(Arc::new(
        LocalKeys::new(key_one())
            .with(LocalKey::new("k2", [22; 32]), false)
            .with(LocalKey::new("k3", [33; 32]), true),
    ));
    let mut checkpoint = None;
    let report = rotated
        .migrate()
        .on_checkpoint(|c| checkpoint = Some(c.clone()))
        .run()
        .await
        .expect("a rotation");
    assert_eq!(
        (report.resealed, report.upgraded, report.failed),
        (4, 4, 0),
        "{report:?}"
    );
    let checkpoint = checkpoint.expect("a checkpoint");
    assert_eq!(checkpoint.job().key_id.as_deref(), Some("k3"));
    let k3_only = old
        .clone()
        .with_encryption(Arc::new(LocalKey::new("k3", [33; 32])));
    for id in 1..=4 {
        let read = k3_only
            .get("north", id)
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(read.id, id);
    }
    let again = k3_only.migrate().run().await.expect("nothing left");
    assert_eq!((again.resealed, again.already_current), (0, 4), "{again:?}");
    // Its checkpoint resumes a rotation to k3 alone.
    let to_k2 = old.clone().with_encryption(Arc::new(
        LocalKeys::new(LocalKey::new("k3", [33; 32])).with(LocalKey::new("k2", [22; 32]), true),
    ));
    let refused = to_k2.migrate().resume(checkpoint).run().await;
    assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");

    // A merge of some encrypted fields but not all: refused, nothing written.
    let mut read = k3_only
        .get("north", 1u32)
        .await
        .expect("get")
        .expect("stored");
    let row = raw(&*backend, &name, 1).await;
    read.notes = None;
    let refused = k3_only.merge(&mut read).await;
    assert!(
        matches!(refused, Err(Error::NotSupported { .. })),
        "{refused:?}"
    );
    assert_eq!(raw(&*backend, &name, 1).await.etag, row.etag);
    backend.delete_table(&name).await.expect("drop");
}

/// A note with a change feed and an encrypted text.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Notes", kind = "NOTE", changes)]
struct Note {
    #[tablekit(partition_key)]
    owner: String,
    #[tablekit(row_key)]
    id: u32,
    title: String,
    #[tablekit(encrypted)]
    text: String,
}

/// The change feed carries encrypted values sealed, as written: its rows
/// hold ciphertext, and a typed reader of the feed opens them with the
/// table's keys.
pub async fn change_feeds_carry_encrypted_values_sealed(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Note>(&backend, "sealedfeed").await;
    let note = |id: u32, text: &str| Note {
        owner: "ada".into(),
        id,
        title: format!("note {id}"),
        text: text.into(),
    };
    t.insert(&note(1, "the first secret"))
        .await
        .expect("insert");
    t.insert(&note(2, "the second secret"))
        .await
        .expect("insert");
    let mut read = t.get("ada", 1u32).await.expect("get").expect("stored");
    read.text = "changed secret".into();
    t.replace(&mut read).await.expect("replace");
    let consumer = t.changes().consumer("check").expect("a consumer");
    let batch = consumer.poll(100).await.expect("poll");
    let values: Vec<Note> = batch
        .changes
        .iter()
        .map(|c| c.value.clone().expect("a value"))
        .collect();
    assert_eq!(
        values,
        [
            note(1, "the first secret"),
            note(2, "the second secret"),
            note(1, "changed secret")
        ]
    );
    for change in &batch.changes {
        assert!(change.decode_error.is_none(), "{:?}", change.decode_error);
        assert!(
            matches!(change.properties.get("text"), Some(Value::Binary(_))),
            "the feed's row holds {:?}",
            change.properties.get("text")
        );
    }
    backend.delete_table(&name).await.expect("drop");
}

/// A contact with an encrypted phone, indexed by a plain field whose
/// index rows copy the entity.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Contacts", kind = "CON")]
#[tablekit(index(name = "city", tag = "city"))]
struct Card {
    #[tablekit(partition_key)]
    book: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(index = "city")]
    city: String,
    #[tablekit(encrypted)]
    phone: String,
}

/// Index rows copy sealed values as they are (never in plain text), and
/// an index read opens them: before and after the value changes.
pub async fn index_rows_copy_encrypted_values_sealed(backend: Arc<dyn TableBackend>) {
    let (t, name) = sealed_table::<Card>(&backend, "sealedindex").await;
    let contact = |id: u32, phone: &str| Card {
        book: "b".into(),
        id,
        city: "Oslo".into(),
        phone: phone.into(),
    };
    t.insert(&contact(1, "+47 1111")).await.expect("insert");
    t.insert(&contact(2, "+47 2222")).await.expect("insert");
    let by_city = t.index(Card::indexes().city);
    let found: Vec<Card> = by_city
        .find("b", "Oslo")
        .try_collect()
        .await
        .expect("found");
    assert_eq!(found, [contact(1, "+47 1111"), contact(2, "+47 2222")]);
    let mut read = t.get("b", 1u32).await.expect("get").expect("stored");
    read.phone = "+47 3333".into();
    t.replace(&mut read).await.expect("replace");
    let found: Vec<Card> = by_city
        .find("b", "Oslo")
        .try_collect()
        .await
        .expect("found");
    assert_eq!(found[0], contact(1, "+47 3333"));
    let rows = backend
        .query_all(&name, tablekit::backend::Query::new())
        .await
        .expect("every row");
    let shown = format!("{rows:?}");
    assert!(!shown.contains("+47"), "a phone in plain text: {shown}");
    assert!(rows.len() >= 4, "the entities and their index rows");
    backend.delete_table(&name).await.expect("drop");
}

/// A patient's name and national id: a projection (which marks the
/// encrypted field it reads as its entity does).
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(projection_of = Patient)]
struct PatientId {
    #[tablekit(partition_key)]
    clinic: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    #[tablekit(encrypted)]
    national_id: String,
}

/// A projection of an entity with encrypted fields reads them opened (it
/// selects the envelope with its fields), and never writes: its write
/// would leave the fields it lacks under the old content key.
pub async fn projections_of_encrypted_entities_read_and_never_write(
    backend: Arc<dyn TableBackend>,
) {
    let (t, name) = sealed_table::<Patient>(&backend, "sealedprojection").await;
    t.insert(&patient(1)).await.expect("insert");
    t.insert(&patient(2)).await.expect("insert");
    let ids = t
        .query()
        .partition("north")
        .project::<PatientId>()
        .collect()
        .await
        .expect("a projected query");
    let want: Vec<(String, String)> = (1..=2)
        .map(|id| (patient(id).name, patient(id).national_id))
        .collect();
    let got: Vec<(String, String)> = ids
        .iter()
        .map(|p| (p.name.clone(), p.national_id.clone()))
        .collect();
    assert_eq!(got, want);
    let projected = t.of::<PatientId>();
    let mut one = projected
        .get("north", 1u32)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(one.national_id, patient(1).national_id);
    one.name = "renamed".into();
    let refused = projected.replace(&mut one).await;
    assert!(
        matches!(refused, Err(Error::NotSupported { .. })),
        "{refused:?}"
    );
    assert_eq!(
        *t.get("north", 1u32).await.expect("get").expect("stored"),
        patient(1)
    );
    backend.delete_table(&name).await.expect("drop");
}
