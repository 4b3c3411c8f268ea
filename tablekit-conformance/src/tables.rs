//! Tables: create, list, delete, names.

use super::{assert_invalid, fresh_table, unique_table};
use tablekit::Entity;
use tablekit::TableBackendExt;
use tablekit::backend::{GetOptions, ListTablesOptions, Query, TableBackend};
use tablekit::{Error, InvalidInput};

/// Every table name, following continuation tokens.
async fn all_tables(backend: &dyn TableBackend, top: Option<u32>) -> Vec<String> {
    let mut options = ListTablesOptions::default();
    options.top = top;
    let mut names = Vec::new();
    loop {
        let page = backend.list_tables(&options).await.expect("list tables");
        if let Some(top) = top {
            assert!(
                page.tables.len() <= top as usize,
                "a table page exceeds top"
            );
        }
        names.extend(page.tables);
        match page.continuation {
            Some(token) => options.continuation = Some(token),
            None => return names,
        }
    }
}

/// Tables are created once (names compare case-insensitively, the case of
/// creation is kept), listed, and deleted.
pub async fn tables_create_list_delete(backend: &dyn TableBackend) {
    let name = unique_table("Case");
    backend.create_table(&name).await.expect("create table");
    assert!(
        matches!(
            backend.create_table(&name).await,
            Err(Error::TableAlreadyExists { .. })
        ),
        "creating a table twice must fail with TableAlreadyExists"
    );
    assert!(
        matches!(
            backend.create_table(&name.to_lowercase()).await,
            Err(Error::TableAlreadyExists { .. })
        ),
        "table names compare case-insensitively"
    );
    let listed = all_tables(backend, None).await;
    assert!(
        listed.contains(&name),
        "list_tables must return the name as created: {name} not in {listed:?}"
    );

    // Entity operations address the table in any case. (Azurite finds a
    // table by another case only when it was created in lower case, so the
    // entity calls use a lower-case table; the service accepts both.)
    let lower = name.to_lowercase();
    let entities = format!("{lower}e");
    backend
        .create_table(&entities)
        .await
        .expect("create a lower-case table");
    backend
        .insert_entity(&entities.to_uppercase(), &Entity::new("p", "r"))
        .await
        .expect("insert via upper-case name");
    backend
        .get_entity(&entities, "p", "r", &GetOptions::default())
        .await
        .expect("read via the created name");
    backend.delete_table(&entities).await.expect("delete");

    let upper = name.to_uppercase();
    backend
        .delete_table(&upper)
        .await
        .expect("delete via another case");
    assert!(
        !all_tables(backend, None).await.contains(&name),
        "a deleted table is not listed"
    );
    assert!(
        matches!(
            backend.delete_table(&name).await,
            Err(Error::TableNotFound { .. } | Error::TableBeingDeleted { .. })
        ),
        "deleting a missing table must fail"
    );
}

/// Table names are 3–63 ASCII letters and digits starting with a letter; `tables` is reserved.
pub async fn table_names_are_validated(backend: &dyn TableBackend) {
    let long = "a".repeat(64);
    for bad in [
        "ab",
        long.as_str(),
        "1abc",
        "a-bc",
        "a_bc",
        "ÄBC",
        "Tables",
        "tables",
        "TABLES",
    ] {
        assert_invalid(backend.create_table(bad).await, bad, |e| {
            matches!(e, InvalidInput::TableName { .. })
        });
    }
    let longest = unique_table(&"x".repeat(63 - 12));
    assert_eq!(longest.len(), 63);
    backend
        .create_table(&longest)
        .await
        .expect("a 63-character name is valid");
    backend.delete_table(&longest).await.expect("delete");
}

/// Operations on a table that does not exist report TableNotFound.
pub async fn missing_table_is_reported(backend: &dyn TableBackend) {
    let name = unique_table("missing");
    let is_missing = |e: &Error| matches!(e, Error::TableNotFound { .. });
    let get = backend
        .get_entity(&name, "p", "r", &GetOptions::default())
        .await;
    assert!(
        get.as_ref().is_err_and(is_missing),
        "get on a missing table: {get:?}"
    );
    let insert = backend.insert_entity(&name, &Entity::new("p", "r")).await;
    assert!(
        insert.as_ref().is_err_and(is_missing),
        "insert into a missing table: {insert:?}"
    );
    let query = backend.query_entities(&name, &Query::new()).await;
    assert!(
        query.as_ref().is_err_and(is_missing),
        "query of a missing table: {query:?}"
    );
    let delete = backend.delete_table(&name).await;
    assert!(
        delete.as_ref().is_err_and(is_missing),
        "delete of a missing table: {delete:?}"
    );
}

/// Table listings page with `top` and resume from the continuation token.
pub async fn list_tables_pages(backend: &dyn TableBackend) {
    let mut mine = Vec::new();
    for _ in 0..3 {
        mine.push(fresh_table(backend, "list").await);
    }
    let paged = all_tables(backend, Some(1)).await;
    for name in &mine {
        assert_eq!(
            paged.iter().filter(|n| *n == name).count(),
            1,
            "{name} must be listed exactly once"
        );
    }
    for name in &mine {
        backend.delete_table(name).await.expect("delete");
    }
}

/// A listing by prefix names exactly the tables whose names start with it
/// (case-sensitively), across pages.
pub async fn list_tables_by_prefix(backend: &dyn TableBackend) {
    let stem = unique_table("pre");
    let mut mine = Vec::new();
    for suffix in ["A1", "A2", "B1"] {
        let name = format!("{stem}{suffix}");
        backend.create_table(&name).await.expect("create");
        mine.push(name);
    }
    let mut options = ListTablesOptions::default().with_prefix(format!("{stem}A"));
    options.top = Some(1);
    let mut listed = Vec::new();
    loop {
        let page = backend.list_tables(&options).await.expect("list tables");
        listed.extend(page.tables);
        match page.continuation {
            Some(token) => options.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(listed, [format!("{stem}A1"), format!("{stem}A2")]);
    let lower = ListTablesOptions::default().with_prefix(stem.to_lowercase() + "a");
    let none = backend.list_tables(&lower).await.expect("list tables");
    assert!(
        none.tables.iter().all(|t| !t.starts_with(&stem)),
        "the prefix is compared case-sensitively: {:?}",
        none.tables
    );
    let hostile = ListTablesOptions::default().with_prefix("x' or TableName ne '");
    assert!(matches!(
        backend.list_tables(&hostile).await,
        Err(tablekit::Error::Invalid(InvalidInput::TableName { .. }))
    ));
    for name in &mine {
        backend.delete_table(name).await.expect("delete");
    }
}
