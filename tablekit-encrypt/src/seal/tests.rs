use proptest::prelude::*;
use tablekit_core::uuid::Uuid;

use super::*;
use crate::keys::LocalKey;
use tablekit_core::EdmType;

/// Every EDM type a value can have.
const EDM_TYPES: [EdmType; 8] = [
    EdmType::String,
    EdmType::Int32,
    EdmType::Int64,
    EdmType::Double,
    EdmType::Boolean,
    EdmType::DateTime,
    EdmType::Guid,
    EdmType::Binary,
];

fn key() -> LocalKey {
    LocalKey::new("k1", [3; 32])
}

fn at() -> Binding<'static> {
    Binding {
        table: "People",
        partition_key: "p",
        row_key: "r",
        sealed: "Ssn",
    }
}

fn values() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".*".prop_map(Value::String),
        any::<i32>().prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        any::<u64>().prop_map(|bits| Value::Double(f64::from_bits(bits))),
        any::<bool>().prop_map(Value::Boolean),
        (DateTime::MIN.ticks()..=DateTime::MAX.ticks())
            .prop_map(|t| Value::DateTime(DateTime::from_ticks(t).unwrap())),
        any::<u128>().prop_map(|g| Value::Guid(Uuid::from_u128(g))),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::Binary),
    ]
}

/// The same value, bit for bit (a NaN compares unequal to itself).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

proptest! {
    /// Every value of every EDM type comes back as it was, type and all.
    #[test]
    fn every_value_opens_to_itself(value in values()) {
        let content = ContentKey::generate().unwrap();
        let sealed = seal_value(&content, &at(), "P", &value).unwrap();
        prop_assert!(matches!(sealed, Value::Binary(_)));
        let opened = open_value(&content, &at(), "P", &sealed).unwrap();
        prop_assert!(same(&opened, &value), "{value:?} came back as {opened:?}");
    }
}

#[test]
fn every_edm_type_is_covered() {
    let samples = [
        Value::String("s".into()),
        Value::Int32(1),
        Value::Int64(1),
        Value::Double(1.5),
        Value::Boolean(true),
        Value::DateTime(DateTime::MIN),
        Value::Guid(Uuid::nil()),
        Value::Binary(vec![1]),
    ];
    let types: Vec<EdmType> = samples.iter().map(Value::edm_type).collect();
    assert_eq!(types, EDM_TYPES);
    // Two values of one text but different types stay apart.
    let content = ContentKey::generate().unwrap();
    let int = seal_value(&content, &at(), "P", &Value::Int64(7)).unwrap();
    assert_eq!(
        open_value(&content, &at(), "P", &int).unwrap(),
        Value::Int64(7)
    );
}

/// Each bit of a sealed value flipped, each length cut short: never a
/// value, always a typed error.
#[test]
fn a_changed_ciphertext_never_opens() {
    let content = ContentKey::generate().unwrap();
    let value = Value::String("ada@example.com".into());
    let Value::Binary(sealed) = seal_value(&content, &at(), "Email", &value).unwrap() else {
        unreachable!()
    };
    for bit in 0..sealed.len() * 8 {
        let mut changed = sealed.clone();
        changed[bit / 8] ^= 1 << (bit % 8);
        let opened = open_value(&content, &at(), "Email", &Value::Binary(changed));
        assert!(
            matches!(opened, Err(EncryptionError::Tampered { .. })),
            "bit {bit}: {opened:?}"
        );
    }
    for len in 0..sealed.len() {
        let opened = open_value(
            &content,
            &at(),
            "Email",
            &Value::Binary(sealed[..len].to_vec()),
        );
        assert!(
            matches!(
                opened,
                Err(EncryptionError::Tampered { .. } | EncryptionError::NotCiphertext { .. })
            ),
            "{len} bytes: {opened:?}"
        );
    }
    let mut longer = sealed.clone();
    longer.push(0);
    assert!(open_value(&content, &at(), "Email", &Value::Binary(longer)).is_err());
}

/// A ciphertext is bound to its table, keys and property.
#[test]
fn a_ciphertext_opens_only_where_it_was_sealed() {
    let content = ContentKey::generate().unwrap();
    let value = Value::String("123-45-6789".into());
    let sealed = seal_value(&content, &at(), "Ssn", &value).unwrap();
    let elsewhere = [
        (
            Binding {
                table: "Other",
                ..at()
            },
            "Ssn",
        ),
        (
            Binding {
                partition_key: "q",
                ..at()
            },
            "Ssn",
        ),
        (
            Binding {
                row_key: "s",
                ..at()
            },
            "Ssn",
        ),
        (at(), "Email"),
        // The list of what was sealed with it is bound too.
        (
            Binding {
                sealed: "Ssn,Email",
                ..at()
            },
            "Ssn",
        ),
        // The parts' lengths are bound too: no text moves between them.
        (
            Binding {
                partition_key: "pr",
                row_key: "",
                ..at()
            },
            "Ssn",
        ),
    ];
    for (place, property) in elsewhere {
        let opened = open_value(&content, &place, property, &sealed);
        assert!(
            matches!(opened, Err(EncryptionError::Tampered { .. })),
            "{place:?} {property}: {opened:?}"
        );
    }
    let other_key = ContentKey::generate().unwrap();
    assert!(matches!(
        open_value(&other_key, &at(), "Ssn", &sealed),
        Err(EncryptionError::Tampered { .. })
    ));
    assert!(matches!(
        open_value(&content, &at(), "Ssn", &value),
        Err(EncryptionError::NotCiphertext { .. })
    ));
}

fn row() -> Entity {
    Entity::new("p", "r")
        .with("Email", "ada@example.com")
        .with("Age", 36i32)
        .with("Team", "engines")
}

#[tokio::test]
async fn a_row_seals_and_opens_only_its_named_properties() {
    let mut sealed = row();
    seal_entity(&mut sealed, "People", &["Email", "Age", "Absent"], &key())
        .await
        .unwrap();
    assert!(matches!(sealed.get("Email"), Some(Value::Binary(_))));
    assert!(matches!(sealed.get("Age"), Some(Value::Binary(_))));
    assert_eq!(sealed.get("Team"), Some(&Value::from("engines")));
    assert!(sealed.get("Absent").is_none());
    let text = format!("{sealed:?}");
    assert!(!text.contains("ada@example.com"));
    let mut opened = sealed.clone();
    let opened_under = open_entity(&mut opened, "People", &["Email", "Age", "Absent"], &key())
        .await
        .unwrap();
    assert_eq!(opened_under.as_deref(), Some("k1"));
    assert_eq!(opened.properties, row().properties);
    // A row with none of them: nothing to seal, no envelope.
    let mut plain = Entity::new("p", "r").with("Team", "x");
    seal_entity(&mut plain, "People", &["Email"], &key())
        .await
        .unwrap();
    assert!(plain.get(ENVELOPE_PROPERTY).is_none());
    let none = open_entity(&mut plain, "People", &["Email"], &key()).await;
    assert_eq!(none, Ok(None));
}

/// A row with its properties or envelope moved, changed or taken away:
/// every open is the value or an error.
#[tokio::test]
async fn a_changed_row_never_opens_to_a_wrong_value() {
    let names = ["Email", "Age"];
    let mut a = row();
    seal_entity(&mut a, "People", &names, &key()).await.unwrap();
    let mut b = Entity::new("p", "r2")
        .with("Email", "grace@example.com")
        .with("Age", 40i32);
    seal_entity(&mut b, "People", &names, &key()).await.unwrap();

    let open = |mut row: Entity| async move {
        open_entity(&mut row, "People", &names, &key())
            .await
            .map(|_| row)
    };
    // Properties swapped between the two of one row.
    let mut swapped = a.clone();
    let (email, age) = (
        a.get("Email").cloned().unwrap(),
        a.get("Age").cloned().unwrap(),
    );
    swapped.insert("Email", age);
    swapped.insert("Age", email);
    assert!(matches!(
        open(swapped).await,
        Err(EncryptionError::Tampered { .. })
    ));
    // A property, or the whole envelope, from another row.
    let mut moved = a.clone();
    moved.insert("Email", b.get("Email").cloned().unwrap());
    assert!(matches!(
        open(moved).await,
        Err(EncryptionError::Tampered { .. })
    ));
    let mut enveloped = a.clone();
    enveloped.insert(
        ENVELOPE_PROPERTY,
        b.get(ENVELOPE_PROPERTY).cloned().unwrap(),
    );
    assert!(matches!(
        open(enveloped).await,
        Err(EncryptionError::Tampered { .. })
    ));
    // The envelope gone, or changed.
    let mut bare = a.clone();
    bare.properties.remove(ENVELOPE_PROPERTY);
    assert!(matches!(
        open(bare).await,
        Err(EncryptionError::MissingEnvelope { .. })
    ));
    let Some(Value::String(text)) = a.get(ENVELOPE_PROPERTY).cloned() else {
        unreachable!()
    };
    let mut renamed = a.clone();
    renamed.insert(ENVELOPE_PROPERTY, text.replace("\"k1\"", "\"k9\""));
    assert_eq!(
        open(renamed).await.unwrap_err(),
        EncryptionError::UnknownKey {
            key_id: "k9".into()
        }
    );
    let envelope = Envelope::from_text(&text).unwrap();
    for byte in 0..envelope.wrapped.bytes.len() {
        let mut changed = envelope.clone();
        changed.wrapped.bytes[byte] ^= 0x10;
        let mut row = a.clone();
        row.insert(ENVELOPE_PROPERTY, changed.to_text());
        assert!(
            matches!(open(row).await, Err(EncryptionError::WrongKey { .. })),
            "byte {byte}"
        );
    }
    // A sealed property taken out, or one added: the list tells.
    let mut taken = a.clone();
    taken.properties.remove("Age");
    assert_eq!(
        open(taken).await.unwrap_err(),
        EncryptionError::Tampered {
            table: "People".into(),
            partition_key: "p".into(),
            row_key: "r".into(),
            property: "Age".into()
        }
    );
    let mut listed = Envelope::from_text(&text).unwrap();
    listed.properties.retain(|p| p != "Age");
    let mut shortened = a.clone();
    shortened.properties.remove("Age");
    shortened.insert(ENVELOPE_PROPERTY, listed.to_text());
    assert!(matches!(
        open(shortened).await,
        Err(EncryptionError::Tampered { .. })
    ));
    let mut typed = a.clone();
    typed.insert(ENVELOPE_PROPERTY, 5i32);
    assert!(matches!(
        open(typed).await,
        Err(EncryptionError::BadEnvelope { .. })
    ));
    // A plain value where ciphertext belongs.
    let mut plain = a.clone();
    plain.insert("Age", 36i32);
    assert!(matches!(
        open(plain).await,
        Err(EncryptionError::NotCiphertext { .. })
    ));
    // The right row opens under a ring that knows the key, not under
    // another key of the same id.
    let wrong = LocalKey::new("k1", [4; 32]);
    let mut row = a.clone();
    let opened = open_entity(&mut row, "People", &names, &wrong).await;
    assert_eq!(
        opened.unwrap_err(),
        EncryptionError::WrongKey {
            key_id: "k1".into()
        }
    );
    assert_eq!(open(a).await.unwrap().properties, row_props());
}

fn row_props() -> tablekit_core::Properties {
    let mut props = row().properties;
    props.retain(|name, _| name != "Team");
    props.insert("Team", "engines");
    props
}

/// Each write draws a new content key and nonces: the same value sealed
/// twice is stored differently.
#[tokio::test]
async fn the_same_value_seals_differently_each_time() {
    let mut one = row();
    let mut two = row();
    seal_entity(&mut one, "People", &["Email"], &key())
        .await
        .unwrap();
    seal_entity(&mut two, "People", &["Email"], &key())
        .await
        .unwrap();
    assert_ne!(one.get("Email"), two.get("Email"));
    assert_ne!(one.get(ENVELOPE_PROPERTY), two.get(ENVELOPE_PROPERTY));
}

/// The index RowKeys a sealed row records are bound to its ciphertexts:
/// one changed, added or taken out, and nothing opens.
#[tokio::test]
async fn recorded_index_keys_are_bound_to_the_ciphertexts() {
    let indexed = vec!["P.email_00ff".to_owned(), String::new()];
    let mut row = Entity::new("p", "r").with("Email", "ada@example.com");
    seal_indexed(&mut row, "People", &["Email"], indexed.clone(), &key())
        .await
        .unwrap();
    let Some(Value::String(text)) = row.get(ENVELOPE_PROPERTY).cloned() else {
        panic!("an envelope");
    };
    assert_eq!(Envelope::from_text(&text).unwrap().indexed, indexed);
    let mut opened = row.clone();
    open_entity(&mut opened, "People", &["Email"], &key())
        .await
        .unwrap();
    assert_eq!(opened.get("Email"), Some(&Value::from("ada@example.com")));
    for changed in [
        vec!["P.email_00fe".to_owned(), String::new()],
        vec!["P.email_00ff".to_owned()],
        vec!["P.email_00ff".to_owned(), String::new(), "P.x_1".to_owned()],
        Vec::new(),
    ] {
        let mut envelope = Envelope::from_text(&text).unwrap();
        envelope.indexed = changed.clone();
        let mut tampered = row.clone();
        tampered
            .properties
            .insert(ENVELOPE_PROPERTY, Value::String(envelope.to_text()));
        let result = open_entity(&mut tampered, "People", &["Email"], &key()).await;
        assert!(
            matches!(result, Err(EncryptionError::Tampered { .. })),
            "{changed:?}: {result:?}"
        );
    }
}

/// An index key hashes the same text the same way, another key otherwise;
/// a ring's is its first key's, and neither shows in `Debug`.
#[tokio::test]
async fn index_keys_hash_stably_and_stay_hidden() {
    let first = LocalKey::new("k1", [3; 32]);
    let ring = crate::keys::LocalKeys::new(first.clone()).with(LocalKey::new("k2", [4; 32]), true);
    let (a, b) = (
        first.index_key().await.unwrap(),
        ring.index_key().await.unwrap(),
    );
    assert_eq!(a.hash("P.email_ada"), b.hash("P.email_ada"));
    assert_eq!(a.hash("P.email_ada").len(), 64);
    assert_ne!(a.hash("P.email_ada"), a.hash("P.email_bob"));
    let other = crate::keys::IndexKey::new([9; 32]);
    assert_ne!(other.hash("P.email_ada"), a.hash("P.email_ada"));
    let given = ring.clone().with_index_key(other.clone());
    assert_eq!(given.index_key().await.unwrap().hash("x"), other.hash("x"));
    assert_eq!(format!("{other:?}"), "IndexKey(..)");
    // Not the key-encryption key itself.
    let kek_as_index = crate::keys::IndexKey::new([3; 32]);
    assert_ne!(kek_as_index.hash("x"), a.hash("x"));
}
