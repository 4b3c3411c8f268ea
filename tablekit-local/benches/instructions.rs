//! Instructions of typed calls on the local store, for comparisons finer
//! than the CPU-time bench (`local.rs`) can make on a noisy machine. The
//! store works on a thread of its own, so count every thread's, from the
//! start, and take the difference of two runs:
//!
//! ```text
//! cargo bench -p tablekit-local --bench instructions --no-run
//! valgrind --tool=callgrind --callgrind-out-file=a target/release/deps/instructions-* typed_get 2000
//! valgrind --tool=callgrind --callgrind-out-file=b target/release/deps/instructions-* typed_get 0
//! ```
//!
//! `(a − b) / 2000` is one call's. Every mode first inserts as many rows
//! (`typed_insert` does only that); `typed_get`, `typed_replace` (a get and
//! a replace) and `typed_delete` then work on them: subtract
//! `typed_insert`'s count for those. `typed_range` and `untyped_range`
//! read every row [`READS`] times, as one partition's typed query and as
//! the untyped backend's, and `passed_range` passes every row by (a filter
//! no row meets): subtract `typed_insert`'s count of the same rows and
//! divide by `READS` times the rows for one row's read. `indexed_insert`
//! inserts entities with a unique index instead, and `indexed_get` then
//! reads each through the index, which copies no field (the index row,
//! then the entity), and `indexed_project` reads each so as a projection
//! of its name: subtract `indexed_insert`'s. Each write is durable;
//! the time a sync waits is not instructions.

use std::hint::black_box;

use tablekit::{Query, Table, TableBackendExt, TableEntity};
use tablekit_local::LocalStorage;

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

/// An item found by its unique code, through an index that copies no
/// field (a read through it follows it to the entity).
#[derive(TableEntity, Debug, Clone)]
#[tablekit(table = "Coded", kind = "C")]
#[tablekit(index(name = "code", copy()))]
struct Coded {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    #[tablekit(unique = "code")]
    code: String,
    name: String,
}

/// A coded item's name alone, read through its index.
#[derive(TableEntity, Debug, Clone)]
#[tablekit(projection_of = Coded)]
struct CodedName {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    name: String,
}

fn coded_item(rk: u32) -> Coded {
    Coded {
        pk: "p".into(),
        rk,
        code: format!("code-{rk}"),
        name: format!("item {rk}"),
    }
}

/// How many times the range modes read every row.
const READS: usize = 20;

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

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let mode = args.next().unwrap_or_else(|| "typed_insert".into());
    let n: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    // Refused before anything is made: no store is left behind by a typo.
    const MODES: [&str; 10] = [
        "typed_insert",
        "typed_get",
        "typed_replace",
        "typed_delete",
        "typed_range",
        "untyped_range",
        "passed_range",
        "indexed_insert",
        "indexed_get",
        "indexed_project",
    ];
    if !MODES.contains(&mode.as_str()) {
        eprintln!("unknown mode `{mode}`; one of {}", MODES.join(", "));
        std::process::exit(2);
    }
    let dir = std::env::temp_dir().join(format!("tablekit-instructions-{}", std::process::id()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = LocalStorage::open(&dir).expect("open");
    let items: Table<Item> = Table::new(store);
    rt.block_on(async {
        items.create_if_missing().await.expect("table");
        if mode.starts_with("indexed_") {
            let coded = items.of::<Coded>();
            for i in 0..n {
                black_box(coded.insert(&coded_item(i)).await.expect("insert"));
            }
            if mode == "indexed_get" {
                let by_code = coded.index(Coded::indexes().code);
                for i in 0..n {
                    let found = by_code.get("p", &format!("code-{i}")).await;
                    assert!(black_box(found.expect("get")).is_some());
                }
            }
            if mode == "indexed_project" {
                let by_code = coded.index(Coded::indexes().code).project::<CodedName>();
                for i in 0..n {
                    let found = by_code.get("p", &format!("code-{i}")).await;
                    assert!(black_box(found.expect("get")).is_some());
                }
            }
            return;
        }
        for i in 0..n {
            black_box(items.insert(&item(i)).await.expect("insert"));
        }
        match mode.as_str() {
            "typed_insert" => {}
            "typed_get" => {
                for i in 0..n {
                    black_box(items.get("p", i).await.expect("get"));
                }
            }
            "typed_replace" => {
                for i in 0..n {
                    let mut loaded = items.get("p", i).await.expect("get").expect("stored");
                    loaded.count += 1;
                    black_box(items.replace(&mut loaded).await.expect("replace"));
                }
            }
            "typed_delete" => {
                for i in 0..n {
                    items.delete_unconditionally("p", i).await.expect("delete");
                }
            }
            "typed_range" => {
                for _ in 0..READS {
                    let rows = items.query().partition("p").collect().await;
                    assert_eq!(black_box(rows.expect("range")).len(), n as usize);
                }
            }
            "untyped_range" => {
                let backend = items.backend();
                for _ in 0..READS {
                    let rows = backend.query_all("Items", Query::new()).await;
                    assert_eq!(black_box(rows.expect("range")).len(), n as usize);
                }
            }
            "passed_range" => {
                // Every row passed by a filter of a property no row meets.
                let backend = items.backend();
                let none = Query::new().filter(tablekit::filter::prop("count").lt(-1));
                for _ in 0..READS {
                    let rows = backend.query_all("Items", none.clone()).await;
                    assert!(black_box(rows.expect("range")).is_empty());
                }
            }
            other => unreachable!("`{other}` is not in MODES"),
        }
    });
    drop(items);
    let _ = std::fs::remove_dir_all(&dir);
}
