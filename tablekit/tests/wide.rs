//! Wide entities: one logical entity over several rows of a partition,
//! written in one transaction, read with one range query, never half-seen.

use tablekit::layer::{FaultInjection, Operation};
use tablekit::table::wide;
use tablekit::{Error, Loaded, Query, Table, TableBackendExt, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Series", kind = "YEAR", wide, rename_all = "PascalCase")]
struct Year {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    year: u16,
    #[tablekit(series)]
    daily: Vec<u32>,
    label: String,
}

fn year(site: &str, year: u16, days: usize, seed: u32) -> Year {
    Year {
        site: site.into(),
        year,
        daily: (0..days as u32).map(|d| d * 7 + seed).collect(),
        label: format!("{site} {year} v{seed}"),
    }
}

async fn rows_in(backend: &MemBackend) -> usize {
    backend
        .query_all("Series", Query::new())
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_wide_entity_spans_parts_and_reads_back_in_one_query() {
    let backend = MemBackend::new();
    let faulty = FaultInjection::new(backend.clone());
    let handle = faulty.handle();
    let years: Table<Year> = Table::new(faulty);
    years.create_if_missing().await.unwrap();

    let y = year("north", 2024, 366, 1);
    years.insert(&y).await.unwrap();
    assert_eq!(
        rows_in(&backend).await,
        2,
        "366 + 1 properties need two rows"
    );
    let rows = backend.query_all("Series", Query::new()).await.unwrap();
    assert_eq!(wide::base_of(&rows[0].row_key), Some("YEAR_02024"));
    assert!(rows.iter().all(|r| r.properties.len() <= 252));

    let before = handle.calls(Operation::QueryEntities);
    let read = years.get("north", 2024u16).await.unwrap().expect("stored");
    assert_eq!(
        handle.calls(Operation::QueryEntities) - before,
        1,
        "one range query reads every part"
    );
    assert_eq!(*read, y);
    assert!(matches!(
        years.insert(&y).await,
        Err(Error::EntityAlreadyExists { .. })
    ));

    // Fewer parts: the surplus part goes in the same transaction.
    let mut smaller = read.clone();
    smaller.daily.truncate(10);
    years.replace(&mut smaller).await.unwrap();
    assert_eq!(rows_in(&backend).await, 1);
    assert_eq!(
        years
            .get("north", 2024u16)
            .await
            .unwrap()
            .unwrap()
            .daily
            .len(),
        10
    );

    // More parts again, then delete removes every one.
    years.upsert(&year("north", 2024, 600, 2)).await.unwrap();
    assert_eq!(rows_in(&backend).await, 3);
    let loaded = years.get("north", 2024u16).await.unwrap().unwrap();
    years.delete(&loaded).await.unwrap();
    assert_eq!(rows_in(&backend).await, 0);
    assert!(years.get("north", 2024u16).await.unwrap().is_none());
}

#[tokio::test]
async fn racing_writers_one_wins_whole() {
    let backend = MemBackend::new();
    let years: Table<Year> = Table::new(backend.clone());
    years.create_if_missing().await.unwrap();
    years.insert(&year("s", 1, 300, 0)).await.unwrap();
    let mut a = years.get("s", 1u16).await.unwrap().unwrap();
    let mut b = years.get("s", 1u16).await.unwrap().unwrap();
    assert_eq!(
        Loaded::etag(&a),
        Loaded::etag(&b),
        "the entity's ETag is its part 0's"
    );
    *a = year("s", 1, 500, 1);
    *b = year("s", 1, 100, 2);
    years.replace(&mut a).await.unwrap();
    assert!(matches!(
        years.replace(&mut b).await,
        Err(Error::PreconditionFailed { .. })
    ));
    assert!(matches!(
        years.merge(&mut b).await,
        Err(Error::PreconditionFailed { .. })
    ));
    assert!(matches!(
        years.delete(&b).await,
        Err(Error::PreconditionFailed { .. })
    ));
    assert_eq!(
        *years.get("s", 1u16).await.unwrap().unwrap(),
        year("s", 1, 500, 1),
        "A's version, whole"
    );

    // update() re-reads and re-applies across parts.
    let updated = years.update("s", 1u16, |y| y.daily.push(42)).await.unwrap();
    assert_eq!(updated.daily.len(), 501);
    assert_eq!(years.get("s", 1u16).await.unwrap().unwrap().daily[500], 42);
}

// Failures at each step of a wide write are a conformance test:
// `tablekit_conformance::wide_entities_are_never_half_written`.

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Docs", kind = "DOC", wide)]
struct Document {
    #[tablekit(partition_key)]
    folder: String,
    #[tablekit(row_key)]
    name: String,
    #[tablekit(series)]
    pages: Vec<String>,
}

#[tokio::test]
async fn size_splits_and_queries_join_parts() {
    let backend = MemBackend::new();
    let docs: Table<Document> = Table::new(backend.clone());
    docs.create_if_missing().await.unwrap();
    // 40 pages of 30,000 characters: 2.4 MB by the size formula, over 1 MiB.
    let big = Document {
        folder: "f".into(),
        name: "a".into(),
        pages: vec!["x".repeat(30_000); 40],
    };
    docs.insert(&big).await.unwrap();
    let parts = backend.query_all("Docs", Query::new()).await.unwrap();
    assert!(parts.len() >= 3, "split by size into {} parts", parts.len());
    assert!(parts.iter().all(|p| p.stored_size() <= 1024 * 1024));
    for (name, pages) in [("ab", 1), ("b", 300), ("c", 2)] {
        docs.insert(&Document {
            folder: "f".into(),
            name: name.into(),
            pages: vec!["p".into(); pages],
        })
        .await
        .unwrap();
    }
    let all = docs.query().partition("f").collect().await.unwrap();
    let mut names: Vec<_> = all
        .iter()
        .map(|d| (d.name.clone(), d.pages.len()))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("a".to_string(), 40),
            ("ab".into(), 1),
            ("b".into(), 300),
            ("c".into(), 2)
        ]
    );
    let some = docs
        .query()
        .partition("f")
        .rows("ab".to_string()..="b".to_string())
        .collect()
        .await
        .unwrap();
    assert_eq!(
        some.iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .len(),
        2
    );
    assert!(matches!(
        docs.query().page().await,
        Err(Error::NotSupported { .. })
    ));
    // A batch writes a wide entity's parts in its own transaction.
    let mut batch = docs.batch();
    let mut moved = big.clone();
    moved.name = "batched".into();
    batch.upsert(&moved).unwrap();
    batch.submit().await.unwrap();
    assert_eq!(
        docs.get("f", "batched")
            .await
            .unwrap()
            .map(Loaded::into_inner),
        Some(moved)
    );
    let report = docs.bulk().upsert(&[big.clone(), big]).await;
    assert!(report.is_complete(), "{:?}", report.failures);
}

#[tokio::test]
async fn too_many_parts_is_a_typed_error() {
    let backend = MemBackend::new();
    let years: Table<Year> = Table::new(backend.clone());
    years.create_if_missing().await.unwrap();
    let huge = year("h", 1, 101 * 249, 0);
    let result = years.insert(&huge).await;
    assert!(matches!(result, Err(Error::Invalid(_))), "{result:?}");
    assert_eq!(rows_in(&backend).await, 0);
}
