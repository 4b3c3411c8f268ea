//! Typed queries, batches and the bulk writer on the in-memory backend, also
//! against adversarial pages.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::layer::{FaultInjection, Injection, Operation};
use tablekit::{Error, InvalidInput, KeyKind, Table, TableBackend, TableEntity};
use tablekit_mem::{Adversarial, MemBackend};

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
    age: i32,
}

/// Same keys and kind, fewer fields: a projection of `Employee`.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP")]
struct EmployeeName {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Reviews", kind = "REV")]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key = 0)]
    employee: u32,
    #[tablekit(row_key = 1)]
    year: u16,
    score: f64,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Sessions")]
struct Session {
    #[tablekit(partition_key = 0)]
    tenant: String,
    #[tablekit(partition_key = 1)]
    user: String,
    #[tablekit(partition_key = 2)]
    session: u32,
    started: i64,
}

fn employee(department: &str, id: u32) -> Employee {
    Employee {
        department: department.into(),
        id,
        name: format!("emp {id}"),
        age: 20 + (id % 40) as i32,
    }
}

fn backends() -> Vec<Arc<dyn TableBackend>> {
    vec![
        Arc::new(MemBackend::new()),
        Arc::new(
            MemBackend::builder()
                .adversarial(Adversarial::default())
                .build(),
        ),
    ]
}

#[tokio::test]
async fn ranges_filters_projections_and_limits() {
    for backend in backends() {
        let staff: Table<Employee> = Table::from_arc(backend, "Staff");
        staff.create_if_missing().await.unwrap();
        let people: Vec<_> = (1..=300)
            .map(|id| employee(if id % 2 == 0 { "Sales" } else { "Ops" }, id))
            .collect();
        let report = staff.bulk().insert(&people).await;
        assert!(report.is_complete(), "{:?}", report.failures);

        let in_range = staff
            .query()
            .partition("Sales")
            .rows(100..=199)
            .collect()
            .await
            .unwrap();
        let ids: Vec<u32> = in_range.iter().map(|e| e.id).collect();
        assert_eq!(ids, (100..=198).step_by(2).collect::<Vec<_>>());

        let half_open = staff
            .query()
            .partition("Ops")
            .rows(..5)
            .collect()
            .await
            .unwrap();
        assert_eq!(half_open.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 3]);

        let cols = Employee::columns();
        let older = staff
            .query()
            .partition("Sales")
            .filter(cols.age.ge(55) & cols.name.ne("emp 36"))
            .collect()
            .await
            .unwrap();
        assert!(older.iter().all(|e| e.age >= 55 && e.id != 36) && !older.is_empty());

        let names = staff
            .query()
            .partition("Ops")
            .rows(1..=9)
            .project::<EmployeeName>()
            .collect()
            .await
            .unwrap();
        assert_eq!(names.len(), 5);
        assert_eq!(names[0].name, "emp 1");

        let limited = staff.query().limit(7).collect().await.unwrap();
        assert_eq!(limited.len(), 7);

        // collect() reads page by page; it gives what stream() gives, at
        // every limit, across pages of every size.
        for page_size in [1, 3, 40, 1000] {
            for limit in [None, Some(0), Some(1), Some(3), Some(7), Some(10_000)] {
                let query = || {
                    let query = staff.query().partition("Sales").page_size(page_size);
                    match limit {
                        Some(n) => query.limit(n),
                        None => query,
                    }
                };
                let ids = |rows: Vec<tablekit::Loaded<Employee>>| {
                    rows.iter().map(|e| e.id).collect::<Vec<_>>()
                };
                let collected = ids(query().collect().await.unwrap());
                let streamed = ids(query().stream().try_collect().await.unwrap());
                assert_eq!(
                    collected, streamed,
                    "page size {page_size}, limit {limit:?}"
                );
                if let Some(n) = limit {
                    assert!(
                        collected.len() == n || n > 100,
                        "{limit:?}: {}",
                        collected.len()
                    );
                }
            }
        }

        // Page by page, resuming from a token kept as text.
        let mut seen = 0;
        let mut token = None;
        loop {
            let mut query = staff.query().partition("Sales").page_size(40);
            if let Some(text) = token.take() {
                let parsed: tablekit::ContinuationToken =
                    tablekit::ContinuationToken::to_string(&text)
                        .parse()
                        .unwrap();
                query = query.resume(parsed);
            }
            let (items, next) = query.page().await.unwrap();
            assert!(items.len() <= 40);
            seen += items.len();
            match next {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, 150);
    }
}

#[tokio::test]
async fn compound_and_hierarchical_keys() {
    let backend: Arc<dyn TableBackend> = Arc::new(MemBackend::new());
    let reviews: Table<Review> = Table::from_arc(Arc::clone(&backend), "Reviews");
    reviews.create_if_missing().await.unwrap();
    for employee in [7u32, 8, 70] {
        for year in [2019u16, 2020, 2021] {
            reviews
                .insert(&Review {
                    department: "Sales".into(),
                    employee,
                    year,
                    score: f64::from(year - 2000),
                })
                .await
                .unwrap();
        }
    }
    let of_seven = reviews
        .query()
        .partition("Sales")
        .row_prefix((7u32,))
        .collect()
        .await
        .unwrap();
    assert_eq!(
        of_seven
            .iter()
            .map(|r| (r.employee, r.year))
            .collect::<Vec<_>>(),
        [(7, 2019), (7, 2020), (7, 2021)]
    );
    let window = reviews
        .query()
        .partition("Sales")
        .rows((7, 2020)..=(8, 2019))
        .collect()
        .await
        .unwrap();
    assert_eq!(
        window
            .iter()
            .map(|r| (r.employee, r.year))
            .collect::<Vec<_>>(),
        [(7, 2020), (7, 2021), (8, 2019)]
    );
    let one = reviews
        .get("Sales", (70, 2021))
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(one.score, 21.0);

    let sessions: Table<Session> = Table::from_arc(backend, "Sessions");
    sessions.create_if_missing().await.unwrap();
    for (tenant, user, session) in [
        ("a", "u1", 1),
        ("a", "u1", 2),
        ("a", "u2", 1),
        ("a b", "u1", 1),
        ("ab", "u1", 1),
        ("b", "u1", 1),
    ] {
        sessions
            .insert(&Session {
                tenant: tenant.into(),
                user: user.into(),
                session,
                started: 0,
            })
            .await
            .unwrap();
    }
    let tenant_a = sessions
        .query()
        .partition_prefix(("a".to_string(),))
        .collect()
        .await
        .unwrap();
    assert_eq!(tenant_a.len(), 3, "tenant `a` only, not `a b` or `ab`");
    assert!(tenant_a.iter().all(|s| s.tenant == "a"));
    let user = sessions
        .query()
        .partition_prefix(("a".to_string(), "u1".to_string()))
        .collect()
        .await
        .unwrap();
    assert_eq!(user.iter().map(|s| s.session).collect::<Vec<_>>(), [1, 2]);
    let exact = sessions
        .get(("a".to_string(), "u2".to_string(), 1), ())
        .await
        .unwrap();
    assert!(exact.is_some());
}

#[tokio::test]
async fn key_too_long_names_the_fields() {
    let staff: Table<Employee> = Table::new(MemBackend::new());
    staff.create_if_missing().await.unwrap();
    let long = employee(&"d".repeat(600), 1);
    match staff.insert(&long).await {
        Err(Error::Invalid(InvalidInput::EncodedKeyTooLong {
            kind: KeyKind::PartitionKey,
            fields,
            utf16_len,
            ..
        })) => {
            assert_eq!((fields, utf16_len), ("department", 600));
        }
        other => panic!("{other:?}"),
    }
    // Escapes count: 200 slashes are 600 units once escaped.
    let slashes = employee(&"/".repeat(200), 1);
    assert!(matches!(
        staff.insert(&slashes).await,
        Err(Error::Invalid(InvalidInput::EncodedKeyTooLong { .. }))
    ));
    // Forbidden characters are escaped, never refused or dropped.
    let odd = employee("a/b\\c#d?e\tf", 2);
    staff.insert(&odd).await.unwrap();
    assert_eq!(
        staff
            .get("a/b\\c#d?e\tf", 2)
            .await
            .unwrap()
            .unwrap()
            .department,
        "a/b\\c#d?e\tf"
    );
}

#[tokio::test]
async fn atomic_batches_name_the_failing_operation() {
    let staff: Table<Employee> = Table::new(MemBackend::new());
    staff.create_if_missing().await.unwrap();
    staff.insert(&employee("Sales", 2)).await.unwrap();
    let mut batch = staff.batch();
    batch.insert(&employee("Sales", 1)).unwrap();
    batch.insert(&employee("Sales", 2)).unwrap();
    batch.upsert(&employee("Sales", 3)).unwrap();
    match batch.submit().await {
        Err(Error::BatchFailed { index: 1, source }) => {
            assert!(matches!(*source, Error::EntityAlreadyExists { .. }))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        staff.get("Sales", 1).await.unwrap().is_none(),
        "nothing applied"
    );

    let loaded = staff.get("Sales", 2).await.unwrap().unwrap();
    let mut batch = staff.batch();
    batch.insert(&employee("Sales", 1)).unwrap();
    batch.delete(&loaded).unwrap();
    assert_eq!(batch.submit().await.unwrap().len(), 2);
    assert!(staff.get("Sales", 2).await.unwrap().is_none());
}

#[tokio::test]
async fn bulk_writer_reports_exactly_the_failed_items() {
    let backend = MemBackend::new();
    let faulty = FaultInjection::new(backend.clone());
    let handle = faulty.handle();
    let staff: Table<Employee> = Table::new(faulty);
    staff.create_if_missing().await.unwrap();
    // Three items exist already; one partition's first batch fails transiently.
    for id in [5, 150, 290] {
        staff.insert(&employee("Sales", id)).await.unwrap();
    }
    let mut items: Vec<_> = (0..300).map(|id| employee("Sales", id)).collect();
    items.extend((0..50).map(|id| employee("Ops", id)));
    items.push(employee("Sales", 7)); // the same entity twice: applied in order, in a later batch
    let mut bad = employee("Ops", 1000);
    bad.name = "x".repeat(40_000); // over the string limit: fails alone
    items.push(bad);
    handle.inject(Injection::on(Operation::SubmitTransaction).times(1));

    let report = staff.bulk().parallelism(3).insert(&items).await;
    let failed: Vec<usize> = report.failures.iter().map(|f| f.index).collect();
    // Items 5, 150, 290 conflict; item 351 is too long; one batch of up to
    // 100 failed transiently.
    for index in [5, 150, 290, 351] {
        assert!(failed.contains(&index), "{index} not reported: {failed:?}");
    }
    let transient: Vec<_> = report
        .failures
        .iter()
        .filter(|f| f.error.is_transient())
        .collect();
    assert!(!transient.is_empty() && transient.len() <= 100);
    // Item 300 + 50 = 350 is the second `Sales 7`: a conflict with the
    // first, unless the batch of the first is the one that failed (the
    // partitions' batches race for the injected fault).
    let first_failed = transient.iter().any(|f| f.index == 7);
    assert_eq!(
        failed.contains(&350),
        !first_failed,
        "the second `Sales 7`: {failed:?}"
    );
    assert_eq!(
        report.written + report.failures.len(),
        items.len(),
        "every item accounted for"
    );
    // Every item reported written is stored.
    let stored = staff.query().collect().await.unwrap().len();
    assert_eq!(stored, report.written + 3);
    let all: Vec<_> = staff.query().stream().try_collect().await.unwrap();
    assert_eq!(all.len(), stored);
}

/// Four writers load the same 1,000 rows at once: every row is written once,
/// every other copy is reported as a conflict, and a batch full of conflicts
/// costs a few requests, not one per row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_bulk_loads_do_not_degrade_to_one_request_per_row() {
    let faulty = FaultInjection::new(MemBackend::new());
    let handle = faulty.handle();
    let staff: Table<Employee> = Table::new(faulty);
    staff.create_if_missing().await.unwrap();
    let items: Vec<_> = (0..1000)
        .map(|id| employee(&format!("D{}", id % 10), id))
        .collect();
    let writers = (0..4).map(|_| {
        let (staff, items) = (staff.clone(), items.clone());
        tokio::spawn(async move { staff.bulk().insert(&items).await })
    });
    let reports = futures::future::join_all(writers).await;
    let (mut written, mut conflicts, mut batches, mut queries) = (0, 0, 0, 0);
    for report in reports {
        let report = report.unwrap();
        written += report.written;
        batches += report.batches;
        queries += report.queries;
        for failure in &report.failures {
            assert!(
                matches!(*failure.error, Error::EntityAlreadyExists { .. }),
                "{failure:?}"
            );
        }
        conflicts += report.failures.len();
        assert_eq!(report.written + report.failures.len(), items.len());
    }
    assert_eq!(written, 1000, "each row written exactly once");
    assert_eq!(conflicts, 3000);
    assert_eq!(staff.query().collect().await.unwrap().len(), 1000);
    let requests =
        handle.calls(Operation::SubmitTransaction) + handle.calls(Operation::QueryEntities) - 1;
    assert_eq!(requests, batches + queries);
    println!(
        "4 writers x 1,000 rows: {batches} batches + {queries} probe queries = {requests} requests"
    );
    // One request per conflicting row would be about 3,000 on top of the 40 batches.
    assert!(requests <= 200, "{requests} requests");
}

/// Deleting rows that are mostly gone, spread thinly over a full partition:
/// the conflicts are found by probing (key by key when the range is crowded),
/// and exactly the missing rows are reported.
#[tokio::test]
async fn bulk_deletes_of_missing_rows_are_settled_by_probes() {
    let staff: Table<Employee> = Table::new(MemBackend::new());
    staff.create_if_missing().await.unwrap();
    let stored: Vec<_> = (0..3000).map(|id| employee("D", id)).collect();
    assert!(staff.bulk().insert(&stored).await.is_complete());
    // Every 30th row; all but every third of those was deleted already.
    let targets: Vec<_> = (0..3000).step_by(30).map(|id| employee("D", id)).collect();
    let gone: Vec<_> = targets.iter().skip(1).step_by(3).cloned().collect();
    let gone2: Vec<_> = targets.iter().skip(2).step_by(3).cloned().collect();
    assert!(staff.bulk().delete(&gone).await.is_complete());
    assert!(staff.bulk().delete(&gone2).await.is_complete());
    let report = staff.bulk().delete(&targets).await;
    assert_eq!(report.written, 34);
    assert_eq!(report.failures.len(), 66);
    for failure in &report.failures {
        assert_ne!(
            failure.index % 3,
            0,
            "only rows deleted before fail: {failure:?}"
        );
        assert!(
            matches!(*failure.error, Error::EntityNotFound { .. }),
            "{failure:?}"
        );
    }
    assert!(report.queries > 0 && report.batches <= 4, "{report:?}");
    assert_eq!(staff.query().collect().await.unwrap().len(), 3000 - 100);
}

#[tokio::test]
async fn update_retries_when_another_writer_got_there_first() {
    let backend = MemBackend::new();
    let staff: Table<Employee> = Table::new(backend.clone());
    staff.create_if_missing().await.unwrap();
    staff.insert(&employee("Sales", 1)).await.unwrap();
    let intruder: Table<Employee> = Table::new(backend);
    let mut calls = 0;
    let updated = staff
        .update("Sales", 1, |e| {
            calls += 1;
            if calls == 1 {
                // Another writer changes the row between our read and our write.
                let mut other = e.clone();
                other.name = "changed by someone else".into();
                futures::executor::block_on(intruder.replace_unconditionally(&other)).unwrap();
            }
            e.age += 100;
        })
        .await
        .unwrap();
    assert_eq!(calls, 2, "the closure ran again on the fresh copy");
    assert_eq!(
        updated.name, "changed by someone else",
        "the other writer's change is kept"
    );
    assert_eq!(updated.age, employee("Sales", 1).age + 100);
    let stored = staff.get("Sales", 1).await.unwrap().unwrap();
    assert_eq!(
        (stored.name.as_str(), stored.age),
        ("changed by someone else", updated.age)
    );
}

/// Rows near the 1 MiB entity limit: about four fit in a batch's 4 MiB.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Heavy", kind = "H")]
struct Heavy {
    #[tablekit(partition_key)]
    group: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(series)]
    chunks: Vec<String>,
}

#[tokio::test]
async fn bulk_writer_keeps_batches_under_the_payload_limit() {
    let backend = MemBackend::new();
    let counted = FaultInjection::new(backend.clone());
    let handle = counted.handle();
    let heavy: Table<Heavy> = Table::new(counted);
    heavy.create_if_missing().await.unwrap();
    // 15 strings of 30,000 two-byte characters: ~0.9 MB of JSON per entity,
    // so at most four fit in one batch's 4 MiB.
    let items: Vec<Heavy> = (0..10)
        .map(|id| Heavy {
            group: "g".into(),
            id,
            chunks: (0..15)
                .map(|c| char::from_u32(0xE0 + c).unwrap().to_string().repeat(30_000))
                .collect(),
        })
        .collect();
    let report = heavy.bulk().insert(&items).await;
    assert!(report.is_complete(), "{:?}", report.failures.first());
    assert_eq!(report.written, 10);
    // 4 + 4 + 2: each batch as full as the limit allows, and accepted.
    assert_eq!(report.batches, 3);
    assert_eq!(
        handle.calls(Operation::SubmitTransaction),
        report.batches,
        "no batch was refused and re-sent"
    );
    let stored: Vec<_> = heavy.query().stream().try_collect().await.unwrap();
    assert_eq!(stored.len(), 10);
    assert_eq!(stored[3].chunks, items[3].chunks);
}

/// A read makes room for a whole page before it reads one (a value is a
/// few hundred bytes: a vector grown by doubling would copy the page about
/// twice over); a short page must give that room back, so that a query of
/// a few rows holds a few rows' memory, not a thousand's.
#[tokio::test]
async fn a_short_page_keeps_only_its_own_room() {
    for backend in backends() {
        let staff = Table::<Employee>::new(Arc::clone(&backend));
        staff.create_if_missing().await.unwrap();
        for id in 0..3 {
            staff.insert(&employee("Sales", id)).await.unwrap();
        }
        let collected = staff.query().partition("Sales").collect().await.unwrap();
        let (paged, _) = staff.query().partition("Sales").page().await.unwrap();
        for rows in [collected, paged] {
            assert_eq!(rows.len(), 3);
            assert!(
                rows.capacity() <= 6,
                "room for {} rows kept",
                rows.capacity()
            );
        }
        // A full page read into its room keeps all its rows.
        for id in 3..1_200 {
            staff.insert(&employee("Sales", id)).await.unwrap();
        }
        let all = staff.query().partition("Sales").collect().await.unwrap();
        assert_eq!(all.len(), 1_200);
        assert!(all.iter().enumerate().all(|(i, e)| e.id == i as u32));
    }
}
