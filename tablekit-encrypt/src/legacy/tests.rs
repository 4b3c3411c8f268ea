//! A row written by the old Python SDK (`azure-cosmosdb-table` 1.0.6,
//! its key-encryption key an AES key wrap under the id `k1`), as the store
//! holds it; the same round trip runs against Azurite in
//! `tablekit-azure/tests/old_sdk.rs`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::*;
use crate::keys::LocalKey;

fn written() -> Entity {
    let b64 = |text: &str| Value::Binary(STANDARD.decode(text).unwrap());
    Entity::new("sales", "EMP_0000000001")
        .with("email", b64("9wkZvskwBLIRMNEDUj8JcA=="))
        .with("notes", b64("IgtFb2ugfUaEljxWE//hb+onNN6WBiZBdBF1l5iwo/btqnoxsOcJrcX7C5toEbunpunRWcPA4pjZVJUfA/J6EQ=="))
        .with("name", "Ada")
        .with(LEGACY_PROPERTIES, b64("BBLpLcP2lo47UYGfo2ybO4qTL7SxaXJ3BgqeLMkSdfA="))
        .with(LEGACY_METADATA, r#"{"WrappedContentKey": {"KeyId": "k1", "EncryptedKey": "amza3RAfwx8ICSqNgxUXiaxKnWlXw1g9sLE6Ij+K+D6+PtkITwrQXQ==", "Algorithm": "A256KW"}, "EncryptionAgent": {"Protocol": "1.0", "EncryptionAlgorithm": "AES_CBC_256"}, "ContentEncryptionIV": "ZzlRYX7uRRsV45XMBcXyvw==", "KeyWrappingMetadata": {"EncryptionLibrary": "Python 1.4.2"}}"#)
}

fn key() -> LocalKey {
    LocalKey::new("k1", [11; 32])
}

#[tokio::test]
async fn a_row_of_the_old_python_sdk_opens_to_its_strings() {
    let mut row = written();
    let id = open_legacy(&mut row, "Staff", &["email", "notes"], &key())
        .await
        .unwrap();
    assert_eq!(id.as_deref(), Some("legacy:k1"));
    assert_eq!(row.get("email"), Some(&Value::from("ada@example.com")));
    assert_eq!(
        row.get("notes"),
        Some(&Value::from(
            "héllo wörld, a longer note of more than one block"
        ))
    );
    assert_eq!(row.get("name"), Some(&Value::from("Ada")));
    assert!(!is_legacy(&row));
    // A row without the old metadata is not one.
    assert_eq!(
        open_legacy(&mut row, "Staff", &["email"], &key())
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn old_rows_that_do_not_open_are_typed_errors() {
    // Another key, another id, another row's keys.
    let wrong = open_legacy(
        &mut written(),
        "Staff",
        &["email"],
        &LocalKey::new("k1", [12; 32]),
    )
    .await;
    assert!(
        matches!(wrong, Err(EncryptionError::WrongKey { .. })),
        "{wrong:?}"
    );
    let unknown = open_legacy(
        &mut written(),
        "Staff",
        &["email"],
        &LocalKey::new("k2", [11; 32]),
    )
    .await;
    assert!(
        matches!(unknown, Err(EncryptionError::UnknownKey { .. })),
        "{unknown:?}"
    );
    let mut moved = written();
    moved.row_key = "EMP_0000000002".into();
    let swapped = open_legacy(&mut moved, "Staff", &["email"], &key()).await;
    assert!(
        matches!(swapped, Err(EncryptionError::Tampered { .. })),
        "{swapped:?}"
    );
    // A value in plain text where the type encrypts; a listed one that is
    // not binary; metadata cut short or missing.
    let mut plain = written().with("phone", "123");
    let refused = open_legacy(&mut plain, "Staff", &["email", "phone"], &key()).await;
    assert!(
        matches!(refused, Err(EncryptionError::Tampered { .. })),
        "{refused:?}"
    );
    let mut text = written().with("email", "ada@example.com");
    let refused = open_legacy(&mut text, "Staff", &["email"], &key()).await;
    assert!(
        matches!(refused, Err(EncryptionError::NotCiphertext { .. })),
        "{refused:?}"
    );
    let mut cut = written();
    let Some(Value::String(meta)) = cut.get(LEGACY_METADATA).cloned() else {
        panic!()
    };
    cut.properties
        .insert(LEGACY_METADATA, Value::String(meta[..40].to_owned()));
    let refused = open_legacy(&mut cut, "Staff", &["email"], &key()).await;
    assert!(
        matches!(refused, Err(EncryptionError::BadEnvelope { .. })),
        "{refused:?}"
    );
    let mut half = written();
    half.properties.remove(LEGACY_PROPERTIES);
    let refused = open_legacy(&mut half, "Staff", &["email"], &key()).await;
    assert!(
        matches!(refused, Err(EncryptionError::BadEnvelope { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn rows_written_in_the_old_format_open_to_what_was_written() {
    let old = OldSdkFormat(key());
    assert!(old.writes_old_format());
    let mut row = Entity::new("sales", "EMP_0000000002")
        .with("email", "grace@example.com")
        .with("notes", "")
        .with("name", "Grace");
    seal_legacy(&mut row, &["email", "notes", "phone"], &old)
        .await
        .unwrap();
    assert!(matches!(row.get("email"), Some(Value::Binary(_))));
    assert!(is_legacy(&row));
    let mut opened = row.clone();
    let id = open_legacy(&mut opened, "Staff", &["email", "notes"], &key())
        .await
        .unwrap();
    assert_eq!(id.as_deref(), Some("legacy:k1"));
    assert_eq!(opened.get("email"), Some(&Value::from("grace@example.com")));
    assert_eq!(opened.get("notes"), Some(&Value::from("")));
    // Strings alone.
    let mut number = Entity::new("p", "r").with("age", 42i32);
    let refused = seal_legacy(&mut number, &["age"], &old).await;
    assert!(
        matches!(refused, Err(EncryptionError::OldFormatNotString { .. })),
        "{refused:?}"
    );
}
