//! Instructions per call of the in-memory backend and of a typed table over
//! it, for comparisons finer than the CPU-time benches can make on a noisy
//! machine: run it under callgrind, which counts the instructions of
//! `measured` alone.
//!
//! ```text
//! cargo bench -p tablekit-mem --bench instructions --no-run
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='instructions::measured' \
//!     target/release/deps/instructions-* typed_insert 2000
//! ```
//!
//! The name is given exactly: a pattern such as `*measured*` also matches
//! the closures inside `measured`, and each entry into one toggles the
//! collection off again, which leaves a count that does not grow with the
//! calls.
//!
//! The modes: `insert` and `get` (the backend, one row of ten
//! properties), `typed_insert`, `typed_get`, `typed_replace` and
//! `typed_delete` (a typed table over it), `indexed_insert` and
//! `indexed_replace` (a type with a unique index, whose writes are planned
//! transactions), `batch` (a typed batch of 100 inserts); `kind_insert`
//! and `kind_replace` (a type with a kind), `changes_insert` and
//! `changes_replace` (the same type with a change feed), `consume` (a
//! consumer reading and committing the changes of `n` inserts, 100 a
//! poll), `feed_rows` (the three rows a typed insert with a change feed
//! sends, as one transaction straight to the backend: the floor of any
//! such write); `memo_insert` and `memo_get` (a type with two 1 KiB text
//! fields), `sealed_insert` and `sealed_get` (the same two fields
//! `encrypted`, under a local key). Instructions per
//! call are the collected total over the count. Without valgrind it simply
//! runs.

use std::hint::black_box;

use tablekit::TableBackendExt;
use tablekit::{Entity, Table, TableBackend, TableEntity};
use tablekit_mem::MemBackend;

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Items")]
struct Item {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    name: String,
    count: i64,
    score: f64,
    done: bool,
}

#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "People", kind = "PERSON")]
#[tablekit(index(name = "email", tag = "email"))]
struct Person {
    #[tablekit(partition_key)]
    team: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(unique = "email")]
    email: String,
    name: String,
}

/// `Item` with a kind: the baseline of `Logged`.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Kinded", kind = "ITEM")]
struct Kinded {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    name: String,
    count: i64,
    score: f64,
    done: bool,
}

/// `Kinded` with a change feed.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Logged", kind = "ITEM", changes)]
struct Logged {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    name: String,
    count: i64,
    score: f64,
    done: bool,
}

/// Two 1 KiB texts: the baseline of `Sealed`.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Memos")]
struct Memo {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    title: String,
    body: String,
    notes: String,
}

/// `Memo` with both texts encrypted.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Sealed")]
struct Sealed {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    title: String,
    #[tablekit(encrypted)]
    body: String,
    #[tablekit(encrypted)]
    notes: String,
}

macro_rules! memo_of {
    ($ty:ident, $rk:expr) => {{
        let rk: u32 = $rk;
        $ty {
            pk: "p".into(),
            rk,
            title: format!("memo {rk}"),
            body: "b".repeat(1024),
            notes: "n".repeat(1024),
        }
    }};
}

macro_rules! item_of {
    ($ty:ident, $rk:expr) => {{
        let rk: u32 = $rk;
        $ty {
            pk: "p".into(),
            rk,
            name: format!("item {rk}"),
            count: i64::from(rk),
            score: f64::from(rk) / 3.0,
            done: rk.is_multiple_of(2),
        }
    }};
}

fn item(rk: u32) -> Item {
    Item {
        pk: "p".into(),
        rk,
        name: format!("item {rk}"),
        count: i64::from(rk),
        score: f64::from(rk) / 3.0,
        done: rk.is_multiple_of(2),
    }
}

fn person(id: u32, version: u32) -> Person {
    Person {
        team: "t".into(),
        id,
        email: format!("p{id}v{version}@example.com"),
        name: format!("person {id}"),
    }
}

fn row(rk: u32) -> Entity {
    let mut entity = Entity::new("p", format!("{rk:08}"));
    for i in 0..10 {
        entity
            .properties
            .insert(format!("P{i}"), format!("value {i} of {rk}"));
    }
    entity
}

/// Makes the store and what `mode` reads or changes, then runs it.
fn prepare(rt: &tokio::runtime::Runtime, mode: &str, n: u32) {
    let backend = MemBackend::new();
    let items: Table<Item> = Table::new(backend.clone());
    let people: Table<Person> = Table::new(backend.clone());
    let kinded: Table<Kinded> = Table::new(backend.clone());
    let logged: Table<Logged> = Table::new(backend.clone());
    let memos: Table<Memo> = Table::new(backend.clone());
    let key = tablekit::encryption::LocalKey::new("bench", [5; 32]);
    let sealed: Table<Sealed> =
        Table::new(backend.clone()).with_encryption(std::sync::Arc::new(key));
    rt.block_on(async {
        memos.create_if_missing().await.unwrap();
        sealed.create_if_missing().await.unwrap();
        if mode == "memo_get" {
            for i in 0..n {
                memos.insert(&memo_of!(Memo, i)).await.unwrap();
            }
        }
        if mode == "sealed_get" {
            for i in 0..n {
                sealed.insert(&memo_of!(Sealed, i)).await.unwrap();
            }
        }
        items.create_if_missing().await.unwrap();
        people.create_if_missing().await.unwrap();
        kinded.create_if_missing().await.unwrap();
        logged.create_if_missing().await.unwrap();
        // What a mode reads or changes is there before it runs.
        if matches!(mode, "get" | "typed_get" | "typed_replace" | "typed_delete") {
            for i in 0..n {
                items.insert(&item(i)).await.unwrap();
            }
        }
        if mode == "indexed_replace" {
            for i in 0..n {
                people.insert(&person(i, 0)).await.unwrap();
            }
        }
        if mode == "kind_replace" {
            for i in 0..n {
                kinded.insert(&item_of!(Kinded, i)).await.unwrap();
            }
        }
        if matches!(mode, "changes_replace" | "consume") {
            for i in 0..n {
                logged.insert(&item_of!(Logged, i)).await.unwrap();
            }
        }
    });
    let tables = Tables {
        items,
        people,
        kinded,
        logged,
        memos,
        sealed,
    };
    measured(rt, mode, n, &backend, &tables);
}

/// The tables of the modes.
struct Tables {
    items: Table<Item>,
    people: Table<Person>,
    kinded: Table<Kinded>,
    logged: Table<Logged>,
    memos: Table<Memo>,
    sealed: Table<Sealed>,
}

/// The calls counted.
#[inline(never)]
fn measured(
    rt: &tokio::runtime::Runtime,
    mode: &str,
    n: u32,
    backend: &MemBackend,
    tables: &Tables,
) {
    let Tables {
        items,
        people,
        kinded,
        logged,
        memos,
        sealed,
    } = tables;
    rt.block_on(async {
        match mode {
            "insert" => {
                for i in 0..n {
                    black_box(backend.insert_entity("Items", &row(i)).await.unwrap());
                }
            }
            "get" => {
                let options = tablekit::GetOptions::default();
                for i in 0..n {
                    let rk = tablekit::schema::row_key_of(&item(i)).unwrap();
                    black_box(
                        backend
                            .get_entity("Items", "p", &rk, &options)
                            .await
                            .unwrap(),
                    );
                }
            }
            "typed_insert" => {
                for i in 0..n {
                    black_box(items.insert(&item(i)).await.unwrap());
                }
            }
            "typed_get" => {
                for i in 0..n {
                    black_box(items.get("p", i).await.unwrap());
                }
            }
            "typed_replace" => {
                for i in 0..n {
                    let mut loaded = items.get("p", i).await.unwrap().unwrap();
                    loaded.count += 1;
                    black_box(items.replace(&mut loaded).await.unwrap());
                }
            }
            "typed_delete" => {
                for i in 0..n {
                    items.delete_unconditionally("p", i).await.unwrap();
                }
            }
            "indexed_insert" => {
                for i in 0..n {
                    black_box(people.insert(&person(i, 0)).await.unwrap());
                }
            }
            "indexed_replace" => {
                for i in 0..n {
                    let mut loaded = people.get("t", i).await.unwrap().unwrap();
                    loaded.email = format!("p{i}v1@example.com");
                    black_box(people.replace(&mut loaded).await.unwrap());
                }
            }
            "batch" => {
                for start in (0..n).step_by(100) {
                    let mut batch = items.batch();
                    for i in start..(start + 100).min(n) {
                        batch.insert(&item(i)).unwrap();
                    }
                    black_box(batch.submit().await.unwrap());
                }
            }
            "kind_insert" => {
                for i in 0..n {
                    black_box(kinded.insert(&item_of!(Kinded, i)).await.unwrap());
                }
            }
            "changes_insert" => {
                for i in 0..n {
                    black_box(logged.insert(&item_of!(Logged, i)).await.unwrap());
                }
            }
            "kind_replace" => {
                for i in 0..n {
                    let mut loaded = kinded.get("p", i).await.unwrap().unwrap();
                    loaded.count += 1;
                    black_box(kinded.replace(&mut loaded).await.unwrap());
                }
            }
            "changes_replace" => {
                for i in 0..n {
                    let mut loaded = logged.get("p", i).await.unwrap().unwrap();
                    loaded.count += 1;
                    black_box(logged.replace(&mut loaded).await.unwrap());
                }
            }
            "feed_rows" => {
                // The rows a typed insert with a change feed sends, as one
                // transaction straight to the backend: the entity's row,
                // its change row (the same properties and three more) and
                // the partition's head. No feed write can cost less.
                for i in 0..n {
                    let entity = tablekit::schema::to_entity(&item_of!(Logged, i)).unwrap();
                    let mut change = entity.clone();
                    change.row_key = format!("~tk|change|{:016x}", i + 1);
                    change.properties.insert("_ChangeOp", "insert");
                    change
                        .properties
                        .insert("_ChangeRow", entity.row_key.as_str());
                    change.properties.insert("_ChangeTag", "0123456789abcdef");
                    let head = Entity::new("p", "~tk|changes").with("_ChangeSeq", i64::from(i) + 1);
                    let operations = [
                        tablekit::BatchOperation::Insert(entity),
                        tablekit::BatchOperation::Insert(change),
                        tablekit::BatchOperation::Upsert {
                            entity: head,
                            mode: tablekit::UpdateMode::Replace,
                        },
                    ];
                    black_box(
                        backend
                            .submit_transaction("Logged", &operations)
                            .await
                            .unwrap(),
                    );
                }
            }
            "consume" => {
                // Reads the `n` changes the setup recorded, 100 a poll.
                let consumer = logged.changes().consumer("bench").unwrap();
                loop {
                    let batch = consumer.poll(100).await.unwrap();
                    if batch.is_empty() {
                        break;
                    }
                    consumer.commit(&batch).await.unwrap();
                }
            }
            "memo_insert" => {
                for i in 0..n {
                    black_box(memos.insert(&memo_of!(Memo, i)).await.unwrap());
                }
            }
            "memo_get" => {
                for i in 0..n {
                    black_box(memos.get("p", i).await.unwrap());
                }
            }
            "sealed_insert" => {
                for i in 0..n {
                    black_box(sealed.insert(&memo_of!(Sealed, i)).await.unwrap());
                }
            }
            "sealed_get" => {
                for i in 0..n {
                    black_box(sealed.get("p", i).await.unwrap());
                }
            }
            other => panic!("unknown mode `{other}`"),
        }
    });
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let mode = args.next().unwrap_or_else(|| "typed_insert".into());
    let n: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    prepare(&rt, &mode, n);
}
