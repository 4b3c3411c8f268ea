//! An entity with two indexes (a unique email, a non-unique last name),
//! beside the same rows written by hand in one transaction in the same run:
//! insert, update (the email moves) and delete. Requests per write path and
//! per read are printed before the timings.
//!
//! `tablekit` writes as a table does by default, with the short write
//! history that settles lost answers (`_Writes`, up to 64 tags of 8
//! characters); `by_hand_with_history` writes those same rows by hand.
//! `tablekit_without_history` writes exactly the rows `by_hand` does.
//! `plain_insert` shows the cost of a typed write without indexes, for scale.
//!
//! `cargo bench -p tablekit --bench indexes`

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures::TryStreamExt;
use tablekit::TableBackendExt;
use tablekit::layer::{FaultHandle, FaultInjection, Operation};
use tablekit::{
    BatchOperation, ETag, Entity, IfMatch, Loaded, Table, TableBackend, TableEntity, UpdateMode,
};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Staff", kind = "EMP")]
#[tablekit(index(name = "email", tag = "email"))]
#[tablekit(index(name = "last_name", tag = "last", copy(first_name, email)))]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    first_name: String,
    #[tablekit(index = "last_name")]
    last_name: String,
    #[tablekit(unique = "email")]
    email: String,
    salary: i64,
}

/// The same entity without indexes: the baseline of a typed write.
#[derive(TableEntity, Clone, Debug)]
#[tablekit(table = "Staff", kind = "PLAIN")]
struct Plain {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: u32,
    first_name: String,
    last_name: String,
    email: String,
    salary: i64,
}

fn plain_value(id: u32) -> Plain {
    Plain {
        department: "Sales".into(),
        id,
        first_name: "Jim".into(),
        last_name: "Jones".into(),
        email: format!("{id}@x"),
        salary: 1000,
    }
}

use common::now;

fn employee(id: u32, email: &str) -> Employee {
    Employee {
        department: "Sales".into(),
        id,
        first_name: "Jim".into(),
        last_name: "Jones".into(),
        email: email.into(),
        salary: 1000,
    }
}

/// The entity's row as a user would build it by hand, with the properties
/// tablekit writes (its kind and version), so that both sides store the
/// same rows.
fn hand_row(id: u32, email: &str) -> Entity {
    Entity::new("Sales", format!("H_{id:010}"))
        .with("first_name", "Jim")
        .with("last_name", "Jones")
        .with("email", email)
        .with("salary", 1000i64)
        .with("_Kind", "H")
        .with("_Version", 1)
}

/// The rows of the hand-written layout, the same as tablekit's: the
/// entity, its email row (a full copy), its last-name row (two fields),
/// each index row naming its index and its entity.
fn hand_rows(id: u32, email: &str) -> [Entity; 3] {
    let main = hand_row(id, email);
    let mut by_email = main.clone();
    by_email.row_key = format!("hemail_{email}");
    by_email.properties.remove("_Kind");
    by_email.insert("_Index", "email");
    by_email.insert("_Row", main.row_key.clone());
    let by_name = Entity::new("Sales", format!("hlast_Jones|{}", main.row_key))
        .with("first_name", "Jim")
        .with("email", email)
        .with("_Version", 1)
        .with("_Index", "last_name")
        .with("_Row", main.row_key.clone());
    [main, by_email, by_name]
}

/// A write history as a user keeping one by hand would: a new 8-character
/// tag, then the newest 63 tags before it.
fn hand_history(tag: u32, older: &str) -> String {
    let kept = older.len().min(9 * 63 - 1);
    if kept == 0 {
        format!("{tag:08x}")
    } else {
        format!("{tag:08x} {}", &older[..kept])
    }
}

/// A store of its own holding one entity written by hand, with the ETag of
/// its row.
fn hand_store(id: u32) -> (MemBackend, ETag) {
    let backend = MemBackend::new();
    now(backend.create_table("Staff")).unwrap();
    let ops = hand_rows(id, "h0@x").map(BatchOperation::Insert);
    let etag = now(backend.submit_transaction("Staff", &ops)).unwrap()[0]
        .clone()
        .unwrap();
    (backend, etag)
}

/// The transaction of an insert by hand: the row (with `history`, when
/// kept), its email row, its name row.
fn hand_insert(id: u32, history: Option<String>) -> [BatchOperation; 3] {
    let [mut main, by_email, by_name] = hand_rows(id, &format!("{id}@x"));
    if let Some(history) = history {
        main.insert("_Writes", history);
    }
    [
        BatchOperation::Insert(main),
        BatchOperation::Insert(by_email),
        BatchOperation::Upsert {
            entity: by_name,
            mode: UpdateMode::Replace,
        },
    ]
}

/// The transaction of an update by hand whose email moves (write `flip`),
/// over the version `etag`: the row (with `history`, when kept), the old
/// email row deleted, the new one inserted, the name row replaced.
fn hand_update(id: u32, flip: u32, etag: &ETag, history: Option<String>) -> [BatchOperation; 4] {
    let (old, new) = (format!("h{}@x", (flip + 1) % 2), format!("h{}@x", flip % 2));
    let [mut main, by_email, by_name] = hand_rows(id, &new);
    if let Some(history) = history {
        main.insert("_Writes", history);
    }
    [
        BatchOperation::Update {
            entity: main,
            mode: UpdateMode::Replace,
            if_match: IfMatch::ETag(etag.clone()),
        },
        BatchOperation::Delete {
            partition_key: "Sales".into(),
            row_key: format!("hemail_{old}"),
            if_match: IfMatch::Any,
        },
        BatchOperation::Insert(by_email),
        BatchOperation::Upsert {
            entity: by_name,
            mode: UpdateMode::Replace,
        },
    ]
}

fn requests(handle: &FaultHandle) -> usize {
    Operation::ENTITY_OPERATIONS
        .iter()
        .map(|op| handle.calls(*op))
        .sum()
}

/// Prints how many requests each write path and each read makes.
fn print_requests() {
    let backend = MemBackend::new();
    now(backend.create_table("Staff")).unwrap();
    let layer = FaultInjection::new(backend);
    let handle = layer.handle();
    let table: Table<Employee> = Table::new(layer);
    let count = |what: &str, before: usize| println!("  {what}: {}", requests(&handle) - before);
    println!("requests per operation, entity with two indexes:");
    let r = requests(&handle);
    now(table.insert(&employee(1, "a@x"))).unwrap();
    count("insert", r);
    let mut loaded = now(table.get("Sales", 1u32)).unwrap().unwrap();
    loaded.email = "b@x".into();
    let r = requests(&handle);
    now(table.replace(&mut loaded)).unwrap();
    count("replace (Loaded)", r);
    loaded.salary += 1;
    let r = requests(&handle);
    now(table.merge(&mut loaded)).unwrap();
    count("merge (Loaded)", r);
    let r = requests(&handle);
    now(table.upsert(&employee(1, "c@x"))).unwrap();
    count("upsert", r);
    let r = requests(&handle);
    now(table.upsert_merge(&employee(1, "d@x"))).unwrap();
    count("upsert_merge", r);
    let r = requests(&handle);
    now(table.replace_unconditionally(&employee(1, "e@x"))).unwrap();
    count("replace_unconditionally", r);
    let r = requests(&handle);
    now(table.update("Sales", 1u32, |e| e.email = "f@x".into())).unwrap();
    count("update", r);
    let by_email = table.index(Employee::indexes().email);
    let r = requests(&handle);
    assert!(now(by_email.get("Sales", "f@x")).unwrap().is_some());
    count("unique lookup (index row copies the entity)", r);
    let r = requests(&handle);
    assert!(now(by_email.get_loaded("Sales", "f@x")).unwrap().is_some());
    count("unique lookup with the entity's ETag", r);
    let by_name = table.index(Employee::indexes().last_name);
    let r = requests(&handle);
    let all: Vec<Employee> = now(by_name.find("Sales", "Jones").try_collect()).unwrap();
    assert_eq!(all.len(), 1);
    count("non-unique lookup, 1 match, followed to the entity", r);
    let loaded = now(table.get("Sales", 1u32)).unwrap().unwrap();
    let r = requests(&handle);
    now(table.delete(&loaded)).unwrap();
    count("delete (Loaded)", r);
    now(table.insert(&employee(1, "a@x"))).unwrap();
    let r = requests(&handle);
    now(table.delete_unconditionally("Sales", 1u32)).unwrap();
    count("delete_unconditionally", r);
}

fn benches(c: &mut Criterion) {
    print_requests();
    let ids = AtomicU32::new(0);
    let next = || ids.fetch_add(1, Ordering::Relaxed);

    // What a typed write costs over a hand-made row, without indexes: the
    // part of the figures below that is not about indexes.
    // Each side inserts into a table of its own, which grows alike.
    let fresh = || {
        let backend = MemBackend::new();
        now(backend.create_table("Staff")).unwrap();
        backend
    };
    let plain: Table<Plain> = Table::new(fresh());
    let bare: Table<Plain> = Table::new(fresh()).without_write_history();
    let hand_backend = fresh();
    let mut g = c.benchmark_group("plain_insert");
    g.bench_function("tablekit", |b| {
        b.iter(|| {
            let id = next();
            let value = plain_value(id);
            now(plain.insert(black_box(&value))).unwrap()
        })
    });
    g.bench_function("tablekit_without_history", |b| {
        b.iter(|| {
            let id = next();
            let value = plain_value(id);
            now(bare.insert(black_box(&value))).unwrap()
        })
    });
    g.bench_function("by_hand", |b| {
        b.iter(|| {
            let id = next();
            now(hand_backend.insert_entity("Staff", black_box(&hand_row(id, &format!("{id}@x")))))
                .unwrap()
        })
    });
    g.finish();

    let bare_indexed: Table<Employee> = Table::new(fresh()).without_write_history();
    let (table_backend, hand_backend) = (fresh(), fresh());
    let inserting: Table<Employee> = Table::new(table_backend);
    let mut g = c.benchmark_group("index_insert");
    g.bench_function("tablekit", |b| {
        b.iter(|| {
            let id = next();
            now(inserting.insert(black_box(&employee(id, &format!("{id}@x"))))).unwrap()
        })
    });
    g.bench_function("tablekit_without_history", |b| {
        b.iter(|| {
            let id = next();
            now(bare_indexed.insert(black_box(&employee(id, &format!("{id}@x"))))).unwrap()
        })
    });
    g.bench_function("by_hand", |b| {
        b.iter(|| {
            let ops = hand_insert(next(), None);
            now(hand_backend.submit_transaction("Staff", black_box(&ops))).unwrap()
        })
    });
    let hand_backend = fresh();
    g.bench_function("by_hand_with_history", |b| {
        b.iter(|| {
            let id = next();
            let ops = hand_insert(id, Some(hand_history(id, "")));
            now(hand_backend.submit_transaction("Staff", black_box(&ops))).unwrap()
        })
    });
    g.finish();

    // The email moves between two values on every write. Each side has a
    // store of its own, holding its one entity: the inserts above grew
    // theirs, and a bigger store costs more per write.
    let table: Table<Employee> = Table::new(fresh());
    let bare_indexed: Table<Employee> = Table::new(fresh()).without_write_history();
    let id = next();
    now(table.insert(&employee(id, "u0@x"))).unwrap();
    let mut loaded: Loaded<Employee> = now(table.get("Sales", id)).unwrap().unwrap();
    let hand_id = next();
    let (backend, mut hand_etag) = hand_store(hand_id);
    let mut flip = 0u32;
    let mut g = c.benchmark_group("index_update");
    g.bench_function("tablekit", |b| {
        b.iter(|| {
            flip += 1;
            loaded.email = format!("u{}@x", flip % 2);
            now(table.replace(black_box(&mut loaded))).unwrap()
        })
    });
    let id = next();
    now(bare_indexed.insert(&employee(id, "w0@x"))).unwrap();
    let mut bare_loaded: Loaded<Employee> = now(bare_indexed.get("Sales", id)).unwrap().unwrap();
    let mut flip = 0u32;
    g.bench_function("tablekit_without_history", |b| {
        b.iter(|| {
            flip += 1;
            bare_loaded.email = format!("w{}@x", flip % 2);
            now(bare_indexed.replace(black_box(&mut bare_loaded))).unwrap()
        })
    });
    let mut flip = 0u32;
    g.bench_function("by_hand", |b| {
        b.iter(|| {
            flip += 1;
            let ops = hand_update(hand_id, flip, &hand_etag, None);
            let etags = now(backend.submit_transaction("Staff", black_box(&ops))).unwrap();
            hand_etag = etags[0].clone().unwrap();
        })
    });
    // The same, with the history the default table writes, kept by hand.
    let hand_id = next();
    let (backend, mut hand_etag) = hand_store(hand_id);
    let mut history = String::new();
    let mut flip = 0u32;
    g.bench_function("by_hand_with_history", |b| {
        b.iter(|| {
            flip += 1;
            let written = Some(hand_history(flip, &history));
            let mut ops = hand_update(hand_id, flip, &hand_etag, written);
            let etags = now(backend.submit_transaction("Staff", black_box(&ops))).unwrap();
            hand_etag = etags[0].clone().unwrap();
            // The history written, kept for the next write.
            if let BatchOperation::Update { entity, .. } = &mut ops[0]
                && let Some(tablekit::Value::String(text)) = entity.properties.remove("_Writes")
            {
                history = text;
            }
        })
    });
    g.finish();

    // Deletes, each side on a store of its own.
    let table: Table<Employee> = Table::new(fresh());
    let backend = fresh();
    let mut g = c.benchmark_group("index_delete");
    g.bench_function("tablekit", |b| {
        b.iter_batched(
            || {
                let id = next();
                now(table.insert(&employee(id, &format!("{id}@x")))).unwrap();
                now(table.get("Sales", id)).unwrap().unwrap()
            },
            |loaded| now(table.delete(black_box(&loaded))).unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("by_hand", |b| {
        b.iter_batched(
            || {
                let id = next();
                let email = format!("{id}@x");
                let rows = hand_rows(id, &email);
                let ops: Vec<_> = rows.iter().cloned().map(BatchOperation::Insert).collect();
                let etag = now(backend.submit_transaction("Staff", &ops)).unwrap()[0]
                    .clone()
                    .unwrap();
                // As a user reading the row would: its keys and its email.
                let read = now(backend.get_entity(
                    "Staff",
                    "Sales",
                    &rows[0].row_key,
                    &Default::default(),
                ))
                .unwrap();
                (read, etag)
            },
            |(read, etag)| {
                let email = match read.get("email") {
                    Some(tablekit::Value::String(email)) => email.clone(),
                    _ => unreachable!("written above"),
                };
                let ops = [
                    BatchOperation::Delete {
                        partition_key: "Sales".into(),
                        row_key: read.row_key.clone(),
                        if_match: IfMatch::ETag(etag),
                    },
                    BatchOperation::Delete {
                        partition_key: "Sales".into(),
                        row_key: format!("hemail_{email}"),
                        if_match: IfMatch::Any,
                    },
                    BatchOperation::Delete {
                        partition_key: "Sales".into(),
                        row_key: format!("hlast_Jones|{}", read.row_key),
                        if_match: IfMatch::Any,
                    },
                ];
                now(backend.submit_transaction("Staff", black_box(&ops))).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = indexes;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(indexes);
