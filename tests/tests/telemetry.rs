//! What an OpenTelemetry exporter receives from tablekit, on the in-memory
//! store, the disk store and Azurite: one span per operation with the
//! database attributes and an outcome, storage calls (and HTTP attempts) as
//! its children, events for retries, throttles and settled answers, and the
//! metrics of the `metrics` feature.
//!
//! A binary of its own, its tests one at a time (the meter is the
//! process's), each on a current-thread runtime so that its subscriber sees
//! every task.

use std::sync::Arc;

use opentelemetry::trace::SpanKind;
use tablekit::TableBackendExt;
use tablekit::layer::{Fault, FaultInjection, Injection, Operation};
use tablekit::{BatchOperation, Entity, IfMatch, Table, TableBackend, TableEntity, UpdateMode};

#[path = "../../tablekit-azure/tests/azurite/mod.rs"]
mod azurite;
#[path = "../support/otel.rs"]
mod otel;
#[path = "../support/otel_metrics.rs"]
mod otel_metrics;

use otel::{Otel, attr, attr_value, children, event_attr, events, failed, named};

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Staff", kind = "EMP")]
#[tablekit(index(name = "email", tag = "email"))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
    name: String,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Notes", kind = "NOTE")]
struct Note {
    #[tablekit(partition_key)]
    owner: String,
    #[tablekit(row_key)]
    id: u32,
    text: String,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Docs", kind = "DOC")]
struct Document {
    #[tablekit(partition_key)]
    folder: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(blob)]
    body: Vec<u8>,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Contacts", kind = "CON")]
#[tablekit(index(name = "city", tag = "city", partition = "city"))]
struct Contact {
    #[tablekit(partition_key)]
    owner: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(index = "city")]
    city: String,
}

fn ada() -> Employee {
    Employee {
        department: "Sales".into(),
        id: 7,
        email: "ada@example.com".into(),
        name: "Ada".into(),
    }
}

/// The stores every test runs on.
#[derive(Clone, Copy, Debug)]
enum Store {
    Memory,
    Disk,
    Azurite,
}

const STORES: [Store; 3] = [Store::Memory, Store::Disk, Store::Azurite];

struct Opened {
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn tablekit::BlobStore>,
    system: &'static str,
    kind: SpanKind,
    _dir: Option<tempfile::TempDir>,
}

fn open(store: Store) -> Opened {
    match store {
        Store::Memory => Opened {
            backend: Arc::new(tablekit_mem::MemBackend::new()),
            blobs: Arc::new(tablekit_mem::MemBlobStore::new()),
            system: "tablekit.memory",
            kind: SpanKind::Internal,
            _dir: None,
        },
        Store::Disk => {
            let dir = tempfile::tempdir().unwrap();
            let local = Arc::new(tablekit_local::LocalStorage::open(dir.path()).unwrap());
            Opened {
                backend: local.clone(),
                blobs: local,
                system: "tablekit.local",
                kind: SpanKind::Internal,
                _dir: Some(dir),
            }
        }
        Store::Azurite => Opened {
            backend: Arc::new(tablekit_azure::AzureTables::new(azurite::account()).unwrap()),
            blobs: Arc::new(tablekit_azure::AzureBlobs::new(azurite::account()).unwrap()),
            system: "azure.tables",
            kind: SpanKind::Client,
            _dir: None,
        },
    }
}

/// A table name no other test uses.
fn table_name(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}{}x{nanos}x{n}", std::process::id())
        .chars()
        .take(60)
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_typed_insert_of_an_indexed_entity_is_one_operation_with_storage_children() {
    for store in STORES {
        let otel = Otel::start();
        let _metrics = otel_metrics::Metrics::start();
        let opened = open(store);
        let name = table_name("Staff");
        let staff: Table<Employee> = Table::from_arc(Arc::clone(&opened.backend), &name);
        runtime().block_on(async {
            staff.create_if_missing().await.unwrap();
            otel.reset();
            staff.insert(&ada()).await.unwrap();
        });
        let spans = otel.spans();
        let operations = named(&spans, "tablekit.operation");
        assert_eq!(
            operations.len(),
            0,
            "{store:?}: spans are renamed by otel.name"
        );
        let inserts: Vec<_> = spans
            .iter()
            .filter(|s| s.name == format!("insert {name}"))
            .collect();
        assert_eq!(inserts.len(), 1, "{store:?}: {spans:#?}");
        let insert = inserts[0];
        assert_eq!(insert.span_kind, opened.kind, "{store:?}");
        for (key, value) in [
            ("db.system.name", opened.system),
            ("db.collection.name", name.as_str()),
            ("db.operation.name", "insert"),
            ("tablekit.kind", "EMP"),
            ("tablekit.outcome", "ok"),
        ] {
            assert_eq!(attr(insert, key).as_deref(), Some(value), "{store:?} {key}");
        }
        assert!(!failed(insert), "{store:?}");
        // Keys are personal data until the user says otherwise.
        for span in &spans {
            assert_eq!(attr(span, "tablekit.partition_key"), None, "{store:?}");
            assert!(
                span.attributes
                    .iter()
                    .all(|kv| !kv.value.as_str().contains("ada@")),
                "{store:?}: a value in {span:#?}"
            );
        }
        // The entity row and its index row: one transaction of the store.
        let storage = children(&spans, insert);
        let batch: Vec<_> = storage
            .iter()
            .filter(|s| attr(s, "db.operation.name").as_deref() == Some("submit_transaction"))
            .collect();
        assert_eq!(batch.len(), 1, "{store:?}: {storage:#?}");
        assert_eq!(
            attr(batch[0], "db.operation.batch.size").as_deref(),
            Some("2")
        );
        // Counts are integers, as the conventions type them, never text;
        // every store names its namespace.
        assert_eq!(
            attr_value(batch[0], "db.operation.batch.size"),
            Some(opentelemetry::Value::I64(2)),
            "{store:?}"
        );
        assert!(
            attr(batch[0], "db.namespace").is_some_and(|n| !n.is_empty()),
            "{store:?}: {:?}",
            batch[0].attributes
        );
        assert_eq!(batch[0].span_kind, opened.kind, "{store:?}");
        match store {
            Store::Azurite => {
                let azurite = azurite::azurite();
                assert_eq!(
                    attr(batch[0], "server.address").as_deref(),
                    Some(azurite.host)
                );
                assert_eq!(
                    attr_value(batch[0], "server.port"),
                    Some(opentelemetry::Value::I64(i64::from(azurite.table_port)))
                );
                assert_eq!(
                    attr(batch[0], "azure.resource_provider.namespace").as_deref(),
                    Some("Microsoft.Tables")
                );
                assert_eq!(
                    attr(batch[0], "db.namespace").as_deref(),
                    Some("devstoreaccount1")
                );
                // Each HTTP attempt, with both request ids.
                let attempts = children(&spans, batch[0]);
                assert_eq!(attempts.len(), 1, "{attempts:#?}");
                let attempt = attempts[0];
                assert_eq!(attempt.name, "POST");
                assert_eq!(attempt.span_kind, SpanKind::Client);
                assert_eq!(
                    attr_value(attempt, "http.response.status_code"),
                    Some(opentelemetry::Value::I64(202))
                );
                assert!(attr(attempt, "az.client_request_id").is_some_and(|id| id.len() == 36));
                assert!(attr(attempt, "az.service_request_id").is_some_and(|id| !id.is_empty()));
                assert_eq!(attr(attempt, "http.request.resend_count"), None);
            }
            _ => assert_eq!(attr(batch[0], "server.address"), None, "{store:?}"),
        }
    }
}

#[test]
fn a_typed_write_with_a_blob_has_the_blob_request_as_a_child() {
    for store in STORES {
        let otel = Otel::start();
        let opened = open(store);
        let name = table_name("Docs");
        let container = name.to_ascii_lowercase();
        let docs: Table<Document> = Table::from_arc(Arc::clone(&opened.backend), &name)
            .with_blob_store(Arc::clone(&opened.blobs), &container);
        runtime().block_on(async {
            // The table and its container.
            docs.create_if_missing().await.unwrap();
            otel.reset();
            docs.insert(&Document {
                folder: "f".into(),
                id: 1,
                body: vec![7; 1000],
            })
            .await
            .unwrap();
        });
        let spans = otel.spans();
        let insert = named(&spans, &format!("insert {name}"));
        assert_eq!(insert.len(), 1, "{store:?}: {spans:#?}");
        let under: Vec<String> = children(&spans, insert[0])
            .iter()
            .map(|s| attr(s, "db.operation.name").unwrap_or_default())
            .collect();
        assert!(
            under.contains(&"put_blob".to_owned()),
            "{store:?}: {under:?}"
        );
        assert!(
            under.contains(&"insert_entity".to_owned()),
            "{store:?}: {under:?}"
        );
        let blob = children(&spans, insert[0])
            .into_iter()
            .find(|s| attr(s, "db.operation.name").as_deref() == Some("put_blob"))
            .unwrap();
        assert_eq!(attr(blob, "db.collection.name"), Some(container.clone()));
        let system = match store {
            Store::Azurite => "azure.blobs",
            _ => opened.system,
        };
        assert_eq!(attr(blob, "db.system.name").as_deref(), Some(system));
    }
}

#[test]
fn keys_are_recorded_only_when_asked_for() {
    let otel = Otel::start();
    let _metrics = otel_metrics::Metrics::start();
    let staff: Table<Employee> = Table::new(tablekit_mem::MemBackend::new());
    tablekit::telemetry::record_keys(true);
    runtime().block_on(async {
        staff.create_if_missing().await.unwrap();
        staff.insert(&ada()).await.unwrap();
    });
    tablekit::telemetry::record_keys(false);
    let spans = otel.spans();
    let insert = named(&spans, "insert Staff")[0];
    assert_eq!(
        attr(insert, "tablekit.partition_key").as_deref(),
        Some("Sales")
    );
    assert!(attr(insert, "tablekit.row_key").is_some());
}

#[test]
fn a_retried_etag_conflict_is_a_retry_event_and_the_update_ends_well() {
    for store in STORES {
        let otel = Otel::start();
        let metrics = otel_metrics::Metrics::start();
        let opened = open(store);
        let name = table_name("Notes");
        let notes: Table<Note> = Table::from_arc(Arc::clone(&opened.backend), &name);
        let note = Note {
            owner: "ada".into(),
            id: 1,
            text: "a".into(),
        };
        runtime().block_on(async {
            notes.create_if_missing().await.unwrap();
            notes.insert(&note).await.unwrap();
            otel.reset();
            let mut first = true;
            let other = notes.clone();
            notes
                .update_with("ada", 1, &Default::default(), |mut n: Note| {
                    let interfere = std::mem::take(&mut first);
                    let other = other.clone();
                    async move {
                        if interfere {
                            // Another writer changes the row meanwhile.
                            let mut theirs = other.get("ada", 1).await?.unwrap();
                            theirs.text = "theirs".into();
                            other.replace(&mut theirs).await?;
                        }
                        n.text.push('!');
                        Ok::<_, tablekit::Error>(n)
                    }
                })
                .await
                .unwrap();
        });
        let spans = otel.spans();
        let update = named(&spans, &format!("update {name}"));
        assert_eq!(update.len(), 1, "{store:?}: {spans:#?}");
        let update = update[0];
        assert_eq!(attr(update, "tablekit.outcome").as_deref(), Some("ok"));
        let retries = events(update, "retry");
        assert_eq!(retries.len(), 1, "{store:?}: {update:#?}");
        assert_eq!(
            event_attr(retries[0], "reason").as_deref(),
            Some("etag_conflict")
        );
        assert!(event_attr(retries[0], "wait_ms").is_some());
        // The refused replace is a failed storage call under the update.
        let refused: Vec<_> = children(&spans, update)
            .into_iter()
            .filter(|s| failed(s))
            .collect();
        assert_eq!(refused.len(), 1, "{store:?}");
        assert_eq!(
            attr(refused[0], "error.type").as_deref(),
            Some("PreconditionFailed")
        );
        assert_eq!(
            attr(refused[0], "db.response.status_code").as_deref(),
            Some("412")
        );
        assert_eq!(
            metrics.counter(
                "tablekit.client.retries",
                &[
                    ("reason", "etag_conflict"),
                    ("db.system.name", opened.system)
                ]
            ),
            1,
            "{store:?}"
        );
    }
}

/// On the embedded stores, behind fault injection standing for a busy
/// store (the REST client's own throttled answers are `wire_spans.rs`'s).
#[test]
fn a_throttled_batch_shows_its_throttles_and_waits() {
    for store in [Store::Memory, Store::Disk] {
        let otel = Otel::start();
        let metrics = otel_metrics::Metrics::start();
        let opened = open(store);
        let faults = FaultInjection::new(Arc::clone(&opened.backend));
        let handle = faults.handle();
        let name = table_name("Notes");
        let notes: Table<Note> = Table::from_arc(Arc::new(faults), &name);
        let items: Vec<Note> = (0..10)
            .map(|id| Note {
                owner: "ada".into(),
                id,
                text: "x".into(),
            })
            .collect();
        let report = runtime().block_on(async {
            notes.create_if_missing().await.unwrap();
            handle.inject(
                Injection::on(Operation::SubmitTransaction)
                    .times(2)
                    .fault(Fault::Throttled),
            );
            otel.reset();
            notes.bulk().upsert(&items).await
        });
        assert!(report.failures.is_empty(), "{store:?}: {report:?}");
        let spans = otel.spans();
        let bulk = named(&spans, &format!("bulk {name}"));
        assert_eq!(bulk.len(), 1, "{store:?}: {spans:#?}");
        assert_eq!(events(bulk[0], "throttled").len(), 2, "{:#?}", bulk[0]);
        // Each throttled batch waits, then goes again.
        let retries = events(bulk[0], "retry");
        assert_eq!(retries.len(), 2, "{:#?}", bulk[0]);
        for retry in &retries {
            assert_eq!(event_attr(retry, "reason").as_deref(), Some("throttled"));
            let wait: u64 = event_attr(retry, "wait_ms").unwrap().parse().unwrap();
            assert!(wait > 0, "{retry:?}");
        }
        assert_eq!(attr(bulk[0], "tablekit.outcome").as_deref(), Some("ok"));
        let system = [("db.system.name", opened.system)];
        assert_eq!(metrics.counter("tablekit.client.throttles", &system), 2);
        assert_eq!(
            metrics.counter("tablekit.client.retries", &[("reason", "throttled")]),
            2
        );
    }
}

#[test]
fn a_failure_inside_a_batch_names_the_operation() {
    for store in STORES {
        let otel = Otel::start();
        let _metrics = otel_metrics::Metrics::start();
        let opened = open(store);
        let name = table_name("Batch");
        let backend = &opened.backend;
        runtime().block_on(async {
            backend.create_table(&name).await.unwrap();
            let etag = backend
                .insert_entity(&name, &Entity::new("p", "a"))
                .await
                .unwrap();
            backend
                .upsert_entity(&name, &Entity::new("p", "a"), UpdateMode::Replace)
                .await
                .unwrap();
            otel.reset();
            let error = backend
                .submit_transaction(
                    &name,
                    &[
                        BatchOperation::Insert(Entity::new("p", "b")),
                        BatchOperation::Update {
                            entity: Entity::new("p", "a"),
                            mode: UpdateMode::Replace,
                            if_match: IfMatch::ETag(etag),
                        },
                    ],
                )
                .await
                .unwrap_err();
            assert!(
                matches!(error, tablekit::Error::BatchFailed { index: 1, .. }),
                "{error:?}"
            );
        });
        let spans = otel.spans();
        let batch = named(&spans, &format!("submit_transaction {name}"));
        assert_eq!(batch.len(), 1, "{store:?}: {spans:#?}");
        let batch = batch[0];
        assert!(failed(batch), "{store:?}");
        assert_eq!(
            attr(batch, "tablekit.batch.failed_index").as_deref(),
            Some("1")
        );
        assert_eq!(
            attr(batch, "error.type").as_deref(),
            Some("PreconditionFailed")
        );
        assert_eq!(
            attr(batch, "db.response.status_code").as_deref(),
            Some("412")
        );
        assert_eq!(attr(batch, "db.operation.batch.size").as_deref(), Some("2"));
        let description = otel::status_description(batch);
        assert!(description.contains("operation 1"), "{description}");
        assert_eq!(attr(batch, "tablekit.outcome").as_deref(), Some("error"));
    }
}

/// A response lost on its way back (fault injection in front of each
/// store): a typed write settles it, or, without the write's history,
/// cannot.
#[test]
fn a_lost_answer_shows_whether_it_was_settled() {
    for store in STORES {
        let otel = Otel::start();
        let metrics = otel_metrics::Metrics::start();
        let opened = open(store);
        let faults = FaultInjection::new(Arc::clone(&opened.backend));
        let handle = faults.handle();
        let name = table_name("Notes");
        let notes: Table<Note> = Table::from_arc(Arc::new(faults), &name);
        let note = |id| Note {
            owner: "ada".into(),
            id,
            text: "x".into(),
        };
        let lose_the_next_insert = || {
            handle.inject(
                Injection::on(Operation::InsertEntity)
                    .times(1)
                    .fault(Fault::LostResponse),
            );
        };
        runtime().block_on(async {
            notes.create_if_missing().await.unwrap();
            otel.reset();
            // Settled: the typed write reads back that it landed.
            lose_the_next_insert();
            notes.insert(&note(1)).await.unwrap();
            // Unknown: without the write's history nothing can tell.
            lose_the_next_insert();
            let error = notes
                .clone()
                .without_write_history()
                .insert(&note(2))
                .await
                .unwrap_err();
            assert!(error.is_outcome_unknown(), "{store:?}: {error:?}");
        });
        let spans = otel.spans();
        let inserts = named(&spans, &format!("insert {name}"));
        assert_eq!(inserts.len(), 2, "{store:?}: {spans:#?}");
        let (settled, unknown) = (inserts[0], inserts[1]);
        assert_eq!(attr(settled, "tablekit.outcome").as_deref(), Some("ok"));
        let events_of = events(settled, "settled");
        assert_eq!(events_of.len(), 1, "{store:?}: {settled:#?}");
        assert_eq!(event_attr(events_of[0], "landed").as_deref(), Some("true"));
        assert_eq!(
            attr(unknown, "tablekit.outcome").as_deref(),
            Some("unknown")
        );
        assert!(failed(unknown));
        assert_eq!(
            attr(unknown, "error.type").as_deref(),
            Some("OutcomeUnknown")
        );
        assert_eq!(events(unknown, "outcome unknown").len(), 1, "{unknown:#?}");
        assert!(events(unknown, "settled").is_empty());
        assert_eq!(metrics.counter("tablekit.client.outcomes_unknown", &[]), 1);
        assert_eq!(metrics.counter("tablekit.client.outcomes_settled", &[]), 1);
    }
}

#[test]
fn a_callers_span_is_the_parent_of_the_operations() {
    let otel = Otel::start();
    let _metrics = otel_metrics::Metrics::start();
    let notes: Table<Note> = Table::new(tablekit_mem::MemBackend::new());
    runtime().block_on(async {
        use tracing::Instrument as _;
        notes.create_if_missing().await.unwrap();
        let request = tracing::info_span!("GET /notes");
        async {
            notes
                .insert(&Note {
                    owner: "ada".into(),
                    id: 1,
                    text: "x".into(),
                })
                .await
                .unwrap();
            notes.get("ada", 1).await.unwrap().unwrap();
        }
        .instrument(request)
        .await;
    });
    let spans = otel.spans();
    let request = named(&spans, "GET /notes")[0];
    let under: Vec<String> = children(&spans, request)
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(under, ["insert Notes", "read Notes"], "{spans:#?}");
}

#[test]
fn the_duration_histogram_counts_each_operation_once() {
    for store in STORES {
        let _otel = Otel::start();
        let metrics = otel_metrics::Metrics::start();
        let opened = open(store);
        let name = table_name("Count");
        let staff: Table<Employee> = Table::from_arc(Arc::clone(&opened.backend), &name);
        let operations = runtime().block_on(async {
            // A direct call to the backend: an operation of its own.
            opened.backend.create_table(&name).await.unwrap();
            let mut read = {
                staff.insert(&ada()).await.unwrap();
                staff.get("Sales", 7).await.unwrap().unwrap()
            };
            read.name = "Ada L.".into();
            staff.replace(&mut read).await.unwrap();
            assert!(staff.get("Sales", 8).await.unwrap().is_none());
            staff.delete(&read).await.unwrap();
            6
        });
        let having = [
            ("db.collection.name", name.as_str()),
            ("db.system.name", opened.system),
        ];
        assert_eq!(
            metrics.histogram_count("db.client.operation.duration", &having),
            operations,
            "{store:?}"
        );
        assert_eq!(
            metrics.histogram_bounds("db.client.operation.duration"),
            [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0]
        );
    }
}

#[test]
fn paced_writers_say_when_they_wait_and_report_their_rate() {
    let otel = Otel::start();
    let metrics = otel_metrics::Metrics::start();
    let notes: Table<Note> = Table::new(tablekit_mem::MemBackend::new());
    let items: Vec<Note> = (0..300)
        .map(|id| Note {
            owner: "ada".into(),
            id,
            text: "x".into(),
        })
        .collect();
    runtime().block_on(async {
        notes.create_if_missing().await.unwrap();
        otel.reset();
        // Fixed rates, 200 a second: the second and third transactions of
        // 100 wait (half a second each, less what the previous took).
        let fixed = tablekit::pacing::Pacing::new(200.0, 200.0);
        let report = notes.bulk().pacing(fixed).upsert(&items).await;
        assert!(report.failures.is_empty(), "{report:?}");
        // Adaptive rates, named for the metric: each transaction taken
        // raises the account's rate.
        let adaptive = tablekit::pacing::Pacing::adaptive(2_000.0, 20_000.0).for_account("acme");
        let report = notes.bulk().pacing(adaptive.clone()).upsert(&items).await;
        assert!(report.failures.is_empty(), "{report:?}");
        let (_, account) = adaptive.rates("ada");
        assert_eq!(
            metrics.gauge("tablekit.pacing.rate", &[("tablekit.account", "acme")]),
            Some(account)
        );
    });
    let spans = otel.spans();
    let bulk = named(&spans, "bulk Notes");
    assert_eq!(bulk.len(), 2, "{spans:#?}");
    let paced = events(bulk[0], "paced");
    assert!(!paced.is_empty() && paced.len() <= 2, "{:#?}", bulk[0]);
    for event in paced {
        let wait: u64 = event_attr(event, "wait_ms").unwrap().parse().unwrap();
        assert!(wait > 0 && wait <= 1_000, "{event:?}");
    }
}

#[test]
fn the_upkeep_reports_what_it_did() {
    let _otel = Otel::start();
    let metrics = otel_metrics::Metrics::start();
    let backend = Arc::new(tablekit_mem::MemBackend::new());
    let blobs = Arc::new(tablekit_mem::MemBlobStore::new());
    let docs: Table<Document> =
        Table::from_arc(backend.clone(), "Docs").with_blob_store(blobs.clone(), "docs");
    let report = runtime().block_on(async {
        // The table and its container.
        docs.create_if_missing().await.unwrap();
        for id in 0..3 {
            docs.insert(&Document {
                folder: "f".into(),
                id,
                body: vec![1; 100],
            })
            .await
            .unwrap();
        }
        // Two rows go without their blobs: those blobs are orphans now.
        for id in ["DOC_0000000000", "DOC_0000000001"] {
            backend
                .delete_entity("Docs", "f", id, &IfMatch::Any)
                .await
                .unwrap();
        }
        tablekit::upkeep::Upkeep::new()
            .watch(&docs)
            .run_round_now()
            .await
    });
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(report.blobs_removed, 2, "{report:?}");
    assert_eq!(
        metrics.counter("tablekit.upkeep.orphan_blobs_removed", &[]),
        2
    );
    assert_eq!(
        metrics.gauge("tablekit.upkeep.pending", &[("db.collection.name", "Docs")]),
        Some(0.0)
    );
}

/// An index kept in another partition is written after the commit, in a
/// task of its own: its requests are still the operation's, in its trace
/// and under its span, and the operation is counted once.
#[test]
fn work_finished_after_the_commit_belongs_to_its_operation() {
    let otel = Otel::start();
    let metrics = otel_metrics::Metrics::start();
    let contacts: Table<Contact> = Table::new(tablekit_mem::MemBackend::new());
    runtime().block_on(async {
        contacts.create_if_missing().await.unwrap();
        otel.reset();
        contacts
            .insert(&Contact {
                owner: "ada".into(),
                id: 1,
                city: "Oslo".into(),
            })
            .await
            .unwrap();
    });
    let spans = otel.spans();
    let insert = named(&spans, "insert Contacts");
    assert_eq!(insert.len(), 1, "{spans:#?}");
    let insert = insert[0];
    // Every other span is a descendant of the insert.
    let ancestors = |span: &opentelemetry_sdk::trace::SpanData| {
        let mut chain = Vec::new();
        let mut parent = span.parent_span_id;
        while let Some(up) = spans.iter().find(|s| s.span_context.span_id() == parent) {
            chain.push(up.span_context.span_id());
            parent = up.parent_span_id;
        }
        chain
    };
    let storage: Vec<_> = spans
        .iter()
        .filter(|s| s.span_context.span_id() != insert.span_context.span_id())
        .collect();
    // The entity's transaction, and the index row put in the city's
    // partition after it.
    assert!(storage.len() >= 2, "{spans:#?}");
    for span in &storage {
        assert_eq!(span.span_context.trace_id(), insert.span_context.trace_id());
        assert!(
            ancestors(span).contains(&insert.span_context.span_id()),
            "{} is not under the insert: {spans:#?}",
            span.name
        );
    }
    let table = [("db.collection.name", "Contacts")];
    assert_eq!(
        metrics.histogram_count("db.client.operation.duration", &table),
        2,
        "the table's creation and the insert"
    );
}
