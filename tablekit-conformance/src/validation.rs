//! Every limit of the service, each with its typed error, and nothing written.

use super::{assert_invalid, fresh_table};
use tablekit::TableBackendExt;
use tablekit::backend::{GetOptions, Query, TableBackend, UpdateMode};
use tablekit::filter::prop;
use tablekit::validate::limits;
use tablekit::{Entity, IfMatch};
use tablekit::{InvalidInput, KeyKind};

/// Tries every write of `entity`, expecting the error `check` accepts from
/// each, then checks that nothing was stored.
async fn rejected_everywhere(
    backend: &dyn TableBackend,
    table: &str,
    entity: &Entity,
    what: &str,
    check: impl Fn(&InvalidInput) -> bool,
) {
    assert_invalid(
        backend.insert_entity(table, entity).await,
        &format!("insert: {what}"),
        &check,
    );
    for mode in [UpdateMode::Replace, UpdateMode::Merge] {
        let update = backend
            .update_entity(table, entity, mode, &IfMatch::Any)
            .await;
        assert_invalid(update, &format!("{mode:?}: {what}"), &check);
        assert_invalid(
            backend.upsert_entity(table, entity, mode).await,
            &format!("upsert {mode:?}: {what}"),
            &check,
        );
    }
    let stored = backend.query_all(table, Query::new()).await.expect("query");
    assert!(
        stored.is_empty(),
        "{what}: a rejected write must store nothing"
    );
}

/// Keys: at most 512 UTF-16 code units, none of `/ \ # ?` or control characters.
pub async fn key_limits_are_enforced(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "keys").await;
    let longest = "k".repeat(limits::MAX_KEY_UTF16);
    backend
        .insert_entity(&table, &Entity::new(&longest, &longest))
        .await
        .expect("512-unit keys are valid");
    backend
        .delete_entity(&table, &longest, &longest, &IfMatch::Any)
        .await
        .expect("delete");

    let too_long = "k".repeat(limits::MAX_KEY_UTF16 + 1);
    rejected_everywhere(
        backend,
        &table,
        &Entity::new(&too_long, "r"),
        "long PartitionKey",
        |e| {
            matches!(
                e,
                InvalidInput::KeyTooLong {
                    kind: KeyKind::PartitionKey,
                    utf16_len: 513,
                    ..
                }
            )
        },
    )
    .await;
    let emoji = "\u{1F600}".repeat(300);
    rejected_everywhere(
        backend,
        &table,
        &Entity::new("p", &emoji),
        "long RowKey in UTF-16",
        |e| {
            matches!(
                e,
                InvalidInput::KeyTooLong {
                    kind: KeyKind::RowKey,
                    utf16_len: 600,
                    ..
                }
            )
        },
    )
    .await;
    for c in [
        '/', '\\', '#', '?', '\0', '\t', '\n', '\r', '\u{1F}', '\u{7F}', '\u{85}', '\u{9F}',
    ] {
        let key = format!("a{c}b");
        rejected_everywhere(backend, &table, &Entity::new("p", &key), &format!("RowKey with {c:?}"), |e| {
            matches!(e, InvalidInput::KeyForbiddenCharacter { character, kind: KeyKind::RowKey, .. } if *character == c)
        })
        .await;
        let get = backend
            .get_entity(&table, &key, "r", &GetOptions::default())
            .await;
        assert_invalid(get, "get with a forbidden character", |e| {
            matches!(
                e,
                InvalidInput::KeyForbiddenCharacter {
                    kind: KeyKind::PartitionKey,
                    ..
                }
            )
        });
        let delete = backend
            .delete_entity(&table, "p", &key, &IfMatch::Any)
            .await;
        assert_invalid(delete, "delete with a forbidden character", |e| {
            matches!(e, InvalidInput::KeyForbiddenCharacter { .. })
        });
    }
    backend.delete_table(&table).await.expect("delete table");
}

/// Properties: at most 252, names of 1–255 identifier characters, not reserved.
pub async fn property_limits_are_enforced(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "props").await;
    let mut full = Entity::new("p", "full");
    for i in 0..limits::MAX_PROPERTIES {
        full.insert(format!("p{i}"), i as i32);
    }
    backend
        .insert_entity(&table, &full)
        .await
        .expect("252 properties are valid");
    backend
        .delete_entity(&table, "p", "full", &IfMatch::Any)
        .await
        .expect("delete");
    full.insert("one_more", 1);
    rejected_everywhere(backend, &table, &full, "253 properties", |e| {
        matches!(
            e,
            InvalidInput::TooManyProperties {
                count: 253,
                max: 252,
                ..
            }
        )
    })
    .await;

    let longest = "n".repeat(limits::MAX_PROPERTY_NAME);
    backend
        .insert_entity(&table, &Entity::new("p", "n").with(longest.clone(), 1))
        .await
        .expect("255-char name");
    backend
        .delete_entity(&table, "p", "n", &IfMatch::Any)
        .await
        .expect("delete");
    let too_long = "n".repeat(limits::MAX_PROPERTY_NAME + 1);
    rejected_everywhere(
        backend,
        &table,
        &Entity::new("p", "r").with(too_long.clone(), 1),
        "256-char name",
        |e| matches!(e, InvalidInput::PropertyNameTooLong { len: 256, .. }),
    )
    .await;
    rejected_everywhere(
        backend,
        &table,
        &Entity::new("p", "r").with("", 1),
        "empty name",
        |e| matches!(e, InvalidInput::PropertyNameEmpty),
    )
    .await;
    for bad in ["a-b", "1abc", "a b", "a.b", "odata.etag", "$x"] {
        rejected_everywhere(
            backend,
            &table,
            &Entity::new("p", "r").with(bad, 1),
            bad,
            |e| matches!(e, InvalidInput::PropertyNameInvalid { name, .. } if name == bad),
        )
        .await;
    }
    for reserved in ["PartitionKey", "RowKey", "Timestamp"] {
        rejected_everywhere(
            backend,
            &table,
            &Entity::new("p", "r").with(reserved, "x"),
            reserved,
            |e| matches!(e, InvalidInput::PropertyNameReserved { .. }),
        )
        .await;
    }
    backend.delete_table(&table).await.expect("delete table");
}

/// A merge whose result would break a limit fails, though each part is valid.
///
/// The client cannot see this coming without reading the stored entity, so a
/// REST backend relies on the service here (Azurite does not check).
pub async fn merged_entities_must_fit(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "mergefit").await;
    let mut base = Entity::new("p", "r");
    for i in 0..200 {
        base.insert(format!("a{i}"), i);
    }
    backend
        .insert_entity(&table, &base)
        .await
        .expect("200 properties");
    let mut more = Entity::new("p", "r");
    for i in 0..60 {
        more.insert(format!("b{i}"), i);
    }
    for result in [
        backend
            .update_entity(&table, &more, UpdateMode::Merge, &IfMatch::Any)
            .await,
        backend
            .upsert_entity(&table, &more, UpdateMode::Merge)
            .await,
    ] {
        // The count is exact where the client checks, unknown where the service does.
        assert_invalid(
            result,
            "merge to 260 properties",
            |e| matches!(e, InvalidInput::TooManyProperties { count, .. } if *count > 252),
        );
    }
    // Replacing with the same 60 is fine: replace does not keep the old ones.
    backend
        .update_entity(&table, &more, UpdateMode::Replace, &IfMatch::Any)
        .await
        .expect("replace");

    let mut big = Entity::new("p", "big");
    for i in 0..20 {
        big.insert(format!("s{i}"), "x".repeat(14_000));
    }
    backend
        .insert_entity(&table, &big)
        .await
        .expect("a 560 KB entity");
    let mut more = Entity::new("p", "big");
    for i in 20..40 {
        more.insert(format!("s{i}"), "x".repeat(14_000));
    }
    let result = backend
        .update_entity(&table, &more, UpdateMode::Merge, &IfMatch::Any)
        .await;
    assert_invalid(result, "merge over 1 MiB", |e| {
        matches!(e, InvalidInput::EntityTooLarge { .. })
    });
    let stored = backend
        .try_get_entity(&table, "p", "big")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        stored.properties.len(),
        20,
        "the failed merge changed nothing"
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// Values: strings ≤ 32,000 UTF-16 units, binaries ≤ 64,000 bytes, entities ≤ 1 MiB
/// by the service's size formula.
pub async fn value_and_entity_limits_are_enforced(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "values").await;
    let at_limit = Entity::new("p", "ok")
        .with("s", "s".repeat(limits::MAX_STRING_UTF16))
        .with("b", vec![7u8; limits::MAX_BINARY_BYTES]);
    backend
        .insert_entity(&table, &at_limit)
        .await
        .expect("values at the limits are valid");
    backend
        .delete_entity(&table, "p", "ok", &IfMatch::Any)
        .await
        .expect("delete");

    let long_string = Entity::new("p", "r").with("s", "s".repeat(limits::MAX_STRING_UTF16 + 1));
    rejected_everywhere(backend, &table, &long_string, "string over 32,000 units", |e| {
        matches!(e, InvalidInput::StringTooLong { property, utf16_len: 32_001, .. } if property == "s")
    })
    .await;
    // 16,001 emoji are 32,002 UTF-16 units but only 16,001 chars.
    let emoji = Entity::new("p", "r").with("e", "\u{1F600}".repeat(16_001));
    rejected_everywhere(
        backend,
        &table,
        &emoji,
        "string over the limit in UTF-16",
        |e| {
            matches!(
                e,
                InvalidInput::StringTooLong {
                    utf16_len: 32_002,
                    ..
                }
            )
        },
    )
    .await;
    let long_binary = Entity::new("p", "r").with("b", vec![0u8; limits::MAX_BINARY_BYTES + 1]);
    rejected_everywhere(
        backend,
        &table,
        &long_binary,
        "binary over 64,000 bytes",
        |e| matches!(e, InvalidInput::BinaryTooLong { len: 64_001, .. }),
    )
    .await;
    // 40 strings of 14,000 characters: each valid, together over 1 MiB.
    let mut large = Entity::new("p", "r");
    for i in 0..40 {
        large.insert(format!("s{i}"), "x".repeat(14_000));
    }
    assert!(large.stored_size() > limits::MAX_ENTITY_SIZE);
    rejected_everywhere(
        backend,
        &table,
        &large,
        "entity over 1 MiB",
        |e| matches!(e, InvalidInput::EntityTooLarge { size, .. } if *size == large.stored_size()),
    )
    .await;
    backend.delete_table(&table).await.expect("delete table");
}

/// Queries: `top` in 1–1,000, at most 15 comparisons, valid selected names.
pub async fn query_limits_are_enforced(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "qlimits").await;
    for top in [0, 1001] {
        let result = backend.query_entities(&table, &Query::new().top(top)).await;
        assert_invalid(result, "top out of range", |e| {
            matches!(e, InvalidInput::TopOutOfRange { .. })
        });
    }
    let mut fifteen = prop("n").eq(0);
    for i in 1..15 {
        fifteen = fifteen | prop("n").eq(i);
    }
    backend
        .query_entities(&table, &Query::new().filter(fifteen.clone()))
        .await
        .expect("15 comparisons");
    let sixteen = fifteen | prop("n").eq(15);
    let result = backend
        .query_entities(&table, &Query::new().filter(sixteen))
        .await;
    assert_invalid(result, "16 comparisons", |e| {
        matches!(e, InvalidInput::FilterTooComplex { count: 16, max: 15 })
    });
    let result = backend
        .query_entities(&table, &Query::new().select(["a-b"]))
        .await;
    assert_invalid(result, "bad selected name", |e| {
        matches!(e, InvalidInput::PropertyNameInvalid { .. })
    });
    backend.delete_table(&table).await.expect("delete table");
}
