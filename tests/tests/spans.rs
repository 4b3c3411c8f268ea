//! The typed layer and the in-memory backend run in spans a subscriber sees,
//! as the REST backend's requests do.

use std::sync::Arc;

use futures::TryStreamExt;
use tablekit::{Table, TableEntity};
use tablekit_mem::MemBackend;

#[path = "../support/recorder.rs"]
mod recorder;

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Staff", kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    name: String,
}

#[tokio::test(flavor = "current_thread")]
async fn typed_operations_and_the_memory_backend_run_in_spans() {
    let recorder = recorder::Recorder::default();
    let lines = Arc::clone(&recorder.lines);
    let _guard = tracing::subscriber::set_default(recorder);
    tracing::callsite::rebuild_interest_cache();

    let staff: Table<Employee> = Table::new(MemBackend::new());
    staff.create_if_missing().await.unwrap();
    let ada = Employee {
        department: "Sales".into(),
        id: 7,
        name: "Ada".into(),
    };
    staff.insert(&ada).await.unwrap();
    let mut read = staff.get("Sales", 7).await.unwrap().unwrap();
    read.name = "Ada L.".into();
    staff.replace(&mut read).await.unwrap();
    staff
        .update("Sales", 7, |e| e.name.push('!'))
        .await
        .unwrap();
    let _: Vec<_> = staff
        .query()
        .partition("Sales")
        .stream()
        .try_collect()
        .await
        .unwrap();
    let report = staff.bulk().upsert(std::slice::from_ref(&ada)).await;
    assert!(report.failures.is_empty());

    let lines = lines.lock().unwrap().clone();
    let has = |needle: &str| lines.iter().any(|l| l.contains(needle));
    for op in ["insert", "read", "replace", "update", "query", "bulk"] {
        assert!(
            has(&format!(
                "span DEBUG tablekit::table op=\"{op}\" table=\"Staff\" kind=\"EMP\""
            )),
            "no span for {op}: {lines:#?}"
        );
    }
    assert!(has("pk=\"Sales\" rk=\"EMP_0000000007\""), "{lines:#?}");
    for op in [
        "create_table",
        "insert_entity",
        "get_entity",
        "update_entity",
        "query_entities",
        "submit_transaction",
    ] {
        assert!(
            has(&format!(
                "span DEBUG tablekit_mem::op op=\"{op}\" table=\"Staff\""
            )),
            "no span for {op}: {lines:#?}"
        );
    }
}
