//! Single-entity operations: CRUD, ETags, replace versus merge, upserts, projections.

use super::fresh_table;
use tablekit::DateTime;
use tablekit::Error;
use tablekit::TableBackendExt;
use tablekit::Value;
use tablekit::backend::{GetOptions, Query, TableBackend, UpdateMode};
use tablekit::filter::Filter;
use tablekit::{ETag, Entity, IfMatch};

async fn get(backend: &dyn TableBackend, table: &str, pk: &str, rk: &str) -> Entity {
    backend
        .get_entity(table, pk, rk, &GetOptions::default())
        .await
        .unwrap_or_else(|e| panic!("get ({pk:?}, {rk:?}): {e}"))
}

/// An entity holding every EDM type, edge values included.
pub fn every_type_entity(pk: &str, rk: &str) -> Entity {
    Entity::new(pk, rk)
        .with("Str", "héllo wörld \u{1F600} ' \" \\ / # ?")
        .with("Empty", "")
        .with("I32", i32::MIN)
        .with("I32Max", i32::MAX)
        .with("I64", i64::MAX)
        .with("I64Min", i64::MIN)
        .with("Dbl", 1.5)
        .with("DblWhole", 3.0)
        .with("DblTiny", 5e-324)
        .with("DblHuge", 1.7976931348623157e308)
        .with("DblNan", f64::NAN)
        .with("DblInf", f64::INFINITY)
        .with("DblNegInf", f64::NEG_INFINITY)
        .with("BoolT", true)
        .with("BoolF", false)
        .with("DtMin", DateTime::MIN)
        .with("DtMax", DateTime::MAX)
        .with(
            "DtTicks",
            DateTime::parse("2020-01-02T03:04:05.1234567Z").expect("valid"),
        )
        .with(
            "Guid",
            tablekit::uuid::Uuid::from_u128(0xc9da6455_213d_42c9_9a79_3e9149a57833),
        )
        .with("Bin", vec![0u8, 1, 2, 255])
        .with("BinEmpty", Vec::<u8>::new())
}

fn assert_same_properties(read: &Entity, written: &Entity) {
    assert_eq!(
        read.properties.len(),
        written.properties.len(),
        "property count differs: read {:?}",
        read.properties
    );
    for (name, value) in written.properties.iter() {
        assert_eq!(
            read.get(name),
            Some(value),
            "property {name} did not round-trip"
        );
    }
}

/// Every EDM type round-trips through insert and get, with an ETag and a Timestamp.
pub async fn insert_and_get_every_type(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "types").await;
    let entity = every_type_entity("p", "r1");
    let etag = backend
        .insert_entity(&table, &entity)
        .await
        .expect("insert");
    let read = get(backend, &table, "p", "r1").await;
    assert_eq!(
        (read.partition_key.as_str(), read.row_key.as_str()),
        ("p", "r1")
    );
    assert_same_properties(&read, &entity);
    assert_eq!(
        read.etag.as_ref(),
        Some(&etag),
        "the read ETag is the one the insert returned"
    );
    let timestamp = read.timestamp.expect("a read entity carries its Timestamp");
    assert_eq!(
        etag.timestamp(),
        Some(timestamp),
        "the ETag names the Timestamp's instant"
    );
    let listed = backend
        .query_all(&table, Query::new())
        .await
        .expect("query");
    assert_eq!(listed.len(), 1);
    assert_same_properties(&listed[0], &entity);
    backend.delete_table(&table).await.expect("delete table");
}

/// Inserting an existing entity fails with EntityAlreadyExists and changes nothing.
pub async fn insert_conflicts(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "conflict").await;
    backend
        .insert_entity(&table, &Entity::new("p", "r").with("v", 1))
        .await
        .expect("insert");
    let again = backend
        .insert_entity(&table, &Entity::new("p", "r").with("v", 2))
        .await;
    assert!(
        matches!(again, Err(Error::EntityAlreadyExists { .. })),
        "second insert: {again:?}"
    );
    assert_eq!(
        get(backend, &table, "p", "r").await.get("v"),
        Some(&Value::Int32(1))
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// Reading a missing entity fails with EntityNotFound naming its keys.
pub async fn get_missing_entity(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "missing").await;
    match backend
        .get_entity(&table, "p", "nope", &GetOptions::default())
        .await
    {
        Err(Error::EntityNotFound {
            partition_key,
            row_key,
            ..
        }) => {
            assert_eq!((partition_key.as_str(), row_key.as_str()), ("p", "nope"));
        }
        other => panic!("get of a missing entity: {other:?}"),
    }
    assert_eq!(
        backend
            .try_get_entity(&table, "p", "nope")
            .await
            .expect("try_get"),
        None
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// The empty PartitionKey and RowKey are valid and addressable; an entity
/// of both keys empty that is not there is missing, like any other.
pub async fn empty_keys_are_allowed(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "empty").await;
    let missing = |got: tablekit::Result<Entity>| match got {
        Err(Error::EntityNotFound {
            partition_key,
            row_key,
            ..
        }) => assert_eq!((partition_key.as_str(), row_key.as_str()), ("", "")),
        other => panic!("a missing entity of empty keys: {other:?}"),
    };
    missing(
        backend
            .get_entity(&table, "", "", &GetOptions::default())
            .await,
    );
    assert_eq!(
        backend
            .try_get_entity(&table, "", "")
            .await
            .expect("try_get"),
        None
    );
    assert!(matches!(
        backend.delete_entity(&table, "", "", &IfMatch::Any).await,
        Err(Error::EntityNotFound { .. })
    ));
    assert!(matches!(
        backend
            .update_entity(
                &table,
                &Entity::new("", ""),
                UpdateMode::Merge,
                &IfMatch::Any
            )
            .await,
        Err(Error::EntityNotFound { .. })
    ));
    backend
        .insert_entity(&table, &Entity::new("", "").with("v", 1))
        .await
        .expect("insert empty keys");
    assert_eq!(
        get(backend, &table, "", "").await.get("v"),
        Some(&Value::Int32(1))
    );
    backend
        .delete_entity(&table, "", "", &IfMatch::Any)
        .await
        .expect("delete empty keys");
    missing(
        backend
            .get_entity(&table, "", "", &GetOptions::default())
            .await,
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// Keys may hold quotes, percent signs, spaces and any non-forbidden character.
pub async fn special_characters_in_keys(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "chars").await;
    let keys = [
        "o'p",
        "''",
        "a%20b",
        "100%",
        "a+b",
        "a b",
        "a&b=c",
        "*",
        "\u{A0}",
        "é",
        "\u{1F600}",
        "\u{E000}",
        "\"q\"",
        "a:b",
        "a;b,c",
        "(x)",
        "~!@$^[]{}|<>",
    ];
    for (i, key) in keys.iter().enumerate() {
        let entity = Entity::new(*key, *key).with("i", i as i32);
        backend
            .insert_entity(&table, &entity)
            .await
            .unwrap_or_else(|e| panic!("insert {key:?}: {e}"));
    }
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            get(backend, &table, key, key).await.get("i"),
            Some(&Value::Int32(i as i32)),
            "{key:?}"
        );
        let query =
            Query::new().filter(Filter::partition_key().eq(*key) & Filter::row_key().eq(*key));
        let found = backend.query_all(&table, query).await.expect("query");
        assert_eq!(found.len(), 1, "query by key {key:?}");
        backend
            .update_entity(
                &table,
                &Entity::new(*key, *key),
                UpdateMode::Merge,
                &IfMatch::Any,
            )
            .await
            .unwrap_or_else(|e| panic!("merge {key:?}: {e}"));
        backend
            .delete_entity(&table, key, key, &IfMatch::Any)
            .await
            .unwrap_or_else(|e| panic!("delete {key:?}: {e}"));
    }
    backend.delete_table(&table).await.expect("delete table");
}

/// Every write gives a new ETag with a later Timestamp.
pub async fn etags_and_timestamps_change_on_every_write(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "etags").await;
    let e = Entity::new("p", "r").with("v", 1);
    let mut tags: Vec<ETag> = vec![backend.insert_entity(&table, &e).await.expect("insert")];
    tags.push(
        backend
            .update_entity(&table, &e, UpdateMode::Replace, &IfMatch::Any)
            .await
            .expect("replace"),
    );
    tags.push(
        backend
            .update_entity(&table, &e, UpdateMode::Merge, &IfMatch::Any)
            .await
            .expect("merge"),
    );
    tags.push(
        backend
            .upsert_entity(&table, &e, UpdateMode::Replace)
            .await
            .expect("insert-or-replace"),
    );
    tags.push(
        backend
            .upsert_entity(&table, &e, UpdateMode::Merge)
            .await
            .expect("insert-or-merge"),
    );
    for pair in tags.windows(2) {
        assert_ne!(pair[0], pair[1], "each write must give a new ETag");
        if let (Some(a), Some(b)) = (pair[0].timestamp(), pair[1].timestamp()) {
            assert!(a < b, "each write's timestamp is later than the one before");
        }
    }
    let read = get(backend, &table, "p", "r").await;
    assert_eq!(
        read.etag.as_ref(),
        tags.last(),
        "a read returns the latest ETag"
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// Replace removes properties not sent; merge keeps them and may change a type.
pub async fn replace_drops_and_merge_keeps(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "merge").await;
    let original = Entity::new("p", "r").with("a", 1).with("b", "two");
    backend
        .insert_entity(&table, &original)
        .await
        .expect("insert");

    let merge = Entity::new("p", "r").with("b", 2.5).with("c", true);
    backend
        .update_entity(&table, &merge, UpdateMode::Merge, &IfMatch::Any)
        .await
        .expect("merge");
    let read = get(backend, &table, "p", "r").await;
    assert_eq!(
        read.get("a"),
        Some(&Value::Int32(1)),
        "merge keeps properties not sent"
    );
    assert_eq!(
        read.get("b"),
        Some(&Value::Double(2.5)),
        "merge may change a property's type"
    );
    assert_eq!(
        read.get("c"),
        Some(&Value::Boolean(true)),
        "merge adds new properties"
    );

    let replace = Entity::new("p", "r").with("z", "only");
    backend
        .update_entity(&table, &replace, UpdateMode::Replace, &IfMatch::Any)
        .await
        .expect("replace");
    let read = get(backend, &table, "p", "r").await;
    assert_eq!(
        read.properties.len(),
        1,
        "replace drops properties not sent: {:?}",
        read.properties
    );
    assert_eq!(read.get("z"), Some(&Value::String("only".into())));
    backend.delete_table(&table).await.expect("delete table");
}

/// `If-Match` holds with the current ETag or `*`; a stale ETag fails with
/// PreconditionFailed; a missing entity fails with EntityNotFound even with `*`.
pub async fn update_and_delete_conditions(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "ifmatch").await;
    let e = Entity::new("p", "r").with("v", 1);
    for mode in [UpdateMode::Replace, UpdateMode::Merge] {
        let missing = backend.update_entity(&table, &e, mode, &IfMatch::Any).await;
        assert!(
            matches!(missing, Err(Error::EntityNotFound { .. })),
            "{mode:?} of a missing entity: {missing:?}"
        );
    }
    let missing = backend.delete_entity(&table, "p", "r", &IfMatch::Any).await;
    assert!(
        matches!(missing, Err(Error::EntityNotFound { .. })),
        "delete of a missing entity: {missing:?}"
    );

    let first = backend.insert_entity(&table, &e).await.expect("insert");
    let second = backend
        .update_entity(
            &table,
            &e.clone().with("v", 2),
            UpdateMode::Replace,
            &IfMatch::ETag(first.clone()),
        )
        .await
        .expect("replace with the current ETag");
    for mode in [UpdateMode::Replace, UpdateMode::Merge] {
        let stale = backend
            .update_entity(&table, &e, mode, &IfMatch::ETag(first.clone()))
            .await;
        assert!(
            matches!(stale, Err(Error::PreconditionFailed { .. })),
            "{mode:?} with a stale ETag: {stale:?}"
        );
    }
    let stale = backend
        .delete_entity(&table, "p", "r", &IfMatch::ETag(first))
        .await;
    assert!(
        matches!(stale, Err(Error::PreconditionFailed { .. })),
        "delete with a stale ETag: {stale:?}"
    );
    assert_eq!(
        get(backend, &table, "p", "r").await.get("v"),
        Some(&Value::Int32(2)),
        "failed writes change nothing"
    );

    let third = backend
        .update_entity(&table, &e, UpdateMode::Merge, &IfMatch::ETag(second))
        .await
        .expect("merge with the current ETag");
    backend
        .delete_entity(&table, "p", "r", &IfMatch::ETag(third))
        .await
        .expect("delete with the current ETag");
    assert_eq!(
        backend
            .try_get_entity(&table, "p", "r")
            .await
            .expect("read"),
        None
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// Insert-or-replace and insert-or-merge create missing entities and update existing ones.
pub async fn upserts_create_and_update(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "upsert").await;
    let base = Entity::new("p", "r").with("a", 1).with("b", 1);
    backend
        .upsert_entity(&table, &base, UpdateMode::Replace)
        .await
        .expect("insert-or-replace creates");
    backend
        .upsert_entity(
            &table,
            &Entity::new("p", "r").with("b", 2),
            UpdateMode::Replace,
        )
        .await
        .expect("insert-or-replace replaces");
    let read = get(backend, &table, "p", "r").await;
    assert_eq!(
        (read.get("a"), read.get("b")),
        (None, Some(&Value::Int32(2))),
        "insert-or-replace replaces whole"
    );

    backend
        .upsert_entity(
            &table,
            &Entity::new("p", "r2").with("c", 3),
            UpdateMode::Merge,
        )
        .await
        .expect("insert-or-merge creates");
    backend
        .upsert_entity(
            &table,
            &Entity::new("p", "r2").with("d", 4),
            UpdateMode::Merge,
        )
        .await
        .expect("insert-or-merge merges");
    let read = get(backend, &table, "p", "r2").await;
    assert_eq!(
        (read.get("c"), read.get("d")),
        (Some(&Value::Int32(3)), Some(&Value::Int32(4)))
    );
    backend.delete_table(&table).await.expect("delete table");
}

/// `$select` returns only the chosen properties, and always the keys.
pub async fn projections(backend: &dyn TableBackend) {
    let table = fresh_table(backend, "select").await;
    backend
        .insert_entity(
            &table,
            &Entity::new("p", "r")
                .with("a", 1)
                .with("b", "x")
                .with("c", true),
        )
        .await
        .expect("insert");
    let read = backend
        .get_entity(
            &table,
            "p",
            "r",
            &GetOptions::default().select(["b", "Missing"]),
        )
        .await
        .expect("get with select");
    assert_eq!(
        (read.partition_key.as_str(), read.row_key.as_str()),
        ("p", "r"),
        "keys always come back"
    );
    assert_eq!(
        read.properties.len(),
        1,
        "only the selected properties: {:?}",
        read.properties
    );
    assert_eq!(read.get("b"), Some(&Value::String("x".into())));
    assert!(read.etag.is_some(), "the ETag comes back with a projection");

    let rows = backend
        .query_all(&table, Query::new().select(["a", "c"]))
        .await
        .expect("query with select");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].properties.len(), 2, "{:?}", rows[0].properties);
    assert_eq!(rows[0].get("c"), Some(&Value::Boolean(true)));
    backend.delete_table(&table).await.expect("delete table");
}
