//! Filters of keys alone are answered from the key range, without
//! evaluating the filter on each row (`backend::sorted::keys_only`). The
//! in-memory backend evaluates every filter as a tree: on the same rows,
//! both must answer every such filter alike, keys in the store's order
//! (UTF-16 code units) included.

use tablekit::filter::{CompareOp, Filter, prop};
use tablekit::{Entity, Query, TableBackend, TableBackendExt};
use tablekit_local::LocalStorage;
use tablekit_mem::MemBackend;

/// Keys whose byte order and UTF-16 order differ (a supplementary
/// character sorts before U+E000 in UTF-16, after it in UTF-8), prefixes of
/// each other, and a quote.
const KEYS: [&str; 9] = [
    "a",
    "ab",
    "b",
    "b'c",
    "\u{E000}",
    "\u{E000}x",
    "\u{10000}",
    "\u{FFFD}",
    "z",
];

const OPS: [CompareOp; 5] = [
    CompareOp::Eq,
    CompareOp::Gt,
    CompareOp::Ge,
    CompareOp::Lt,
    CompareOp::Le,
];

fn comparison(rng: &mut fastrand::Rng) -> Filter {
    let name = if rng.bool() { "PartitionKey" } else { "RowKey" };
    let op = OPS[rng.usize(..OPS.len())];
    // A value that is a key, or lies between keys.
    let mut value = KEYS[rng.usize(..KEYS.len())].to_owned();
    if rng.u8(..4) == 0 {
        value.push('0');
    }
    prop(name).compare(op, value)
}

#[tokio::test]
async fn key_only_filters_answer_as_the_tree_does() {
    let local = LocalStorage::temporary().unwrap();
    let mem = MemBackend::new();
    for store in [&local as &dyn TableBackend, &mem] {
        store.create_table("Keys").await.unwrap();
        for pk in KEYS {
            for rk in KEYS {
                store
                    .insert_entity("Keys", &Entity::new(pk, rk).with("V", 1))
                    .await
                    .unwrap();
            }
        }
    }
    let mut rng = fastrand::Rng::with_seed(41);
    let mut nonempty = 0;
    for _ in 0..400 {
        let mut filter = comparison(&mut rng);
        for _ in 0..rng.usize(..3) {
            filter = filter.and(comparison(&mut rng));
        }
        assert!(tablekit::backend::sorted::keys_only(&filter));
        let query = Query::new().filter(filter.clone());
        let keys = |rows: Vec<Entity>| -> Vec<(String, String)> {
            rows.into_iter()
                .map(|e| (e.partition_key, e.row_key))
                .collect()
        };
        let from_local = keys(local.query_all("Keys", query.clone()).await.unwrap());
        let from_mem = keys(mem.query_all("Keys", query).await.unwrap());
        assert_eq!(from_local, from_mem, "{filter:?}");
        nonempty += usize::from(!from_mem.is_empty());
    }
    assert!(nonempty > 100, "{nonempty} filters matched rows");
}

/// A page is read into room for a whole page (an entity is over a hundred
/// bytes; a vector grown by doubling copies them about twice over); a short
/// page gives that room back, so that a query of a few rows holds a few
/// rows' memory.
#[tokio::test]
async fn a_short_page_keeps_only_its_own_room() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStorage::open(dir.path()).unwrap();
    store.create_table("Rooms").await.unwrap();
    for r in 0..3 {
        store
            .insert_entity("Rooms", &Entity::new("p", format!("r{r}")))
            .await
            .unwrap();
    }
    let page = store.query_entities("Rooms", &Query::new()).await.unwrap();
    assert_eq!(page.entities.len(), 3);
    assert!(
        page.entities.capacity() <= 6,
        "room for {} kept",
        page.entities.capacity()
    );
}
