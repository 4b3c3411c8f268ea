//! Data shared by the benchmarks: a million entities of ten properties, and a
//! plain `BTreeMap` baseline holding the same keys and values.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use futures::FutureExt as _;
use tablekit::{BatchOperation, DateTime, Entity, Properties, TableBackend, Value};
use tablekit_mem::MemBackend;

pub const TABLE: &str = "bench";
pub const PARTITIONS: usize = 1000;
pub const ROWS_PER_PARTITION: usize = 1000;

pub fn pk(p: usize) -> String {
    format!("dept{p:04}")
}

pub fn rk(r: usize) -> String {
    format!("emp{r:06}")
}

/// An employee-like entity of ten properties.
pub fn entity(p: usize, r: usize) -> Entity {
    let n = p * ROWS_PER_PARTITION + r;
    Entity::new(pk(p), rk(r))
        .with("Name", format!("Employee {n}"))
        .with("Email", format!("employee{n}@contoso.com"))
        .with("Age", (20 + n % 45) as i32)
        .with("Salary", 1000.0 + (n % 5000) as f64 * 1.25)
        .with("Active", !n.is_multiple_of(3))
        .with(
            "Hired",
            DateTime::from_ticks(DateTime::MIN.ticks() + n as i64 * 10_000_000_000)
                .expect("in range"),
        )
        .with(
            "Badge",
            tablekit::uuid::Uuid::from_u128(n as u128 * 0x9E37_79B9_7F4A_7C15),
        )
        .with("Score", n as i64 * 7)
        .with("Dept", format!("Department {p}"))
        .with("Photo", vec![(n % 251) as u8; 16])
}

/// Runs a future that the in-memory backend completes without waiting.
pub fn now<T>(future: impl std::future::Future<Output = T>) -> T {
    future
        .now_or_never()
        .expect("the in-memory backend never waits")
}

pub fn load_mem() -> MemBackend {
    let backend = MemBackend::new();
    now(backend.create_table(TABLE)).expect("create");
    for p in 0..PARTITIONS {
        for chunk in (0..ROWS_PER_PARTITION).collect::<Vec<_>>().chunks(100) {
            let ops: Vec<_> = chunk
                .iter()
                .map(|r| BatchOperation::Insert(entity(p, *r)))
                .collect();
            now(backend.submit_transaction(TABLE, &ops)).expect("load");
        }
    }
    backend
}

/// The baseline: partitions of rows of (name, value) lists.
pub type Baseline = BTreeMap<String, BTreeMap<String, Vec<(String, Value)>>>;

pub fn load_baseline() -> Baseline {
    let mut map = Baseline::new();
    for p in 0..PARTITIONS {
        for r in 0..ROWS_PER_PARTITION {
            let e = entity(p, r);
            map.entry(e.partition_key).or_default().insert(
                e.row_key,
                e.properties
                    .into_iter()
                    .map(|(n, v)| (n.into_owned(), v))
                    .collect(),
            );
        }
    }
    map
}

/// The baseline's point read: an owned copy of the entity, as a backend returns.
pub fn baseline_get(map: &Baseline, pk: &str, rk: &str) -> Option<Entity> {
    let props = map.get(pk)?.get(rk)?;
    let mut e = Entity::new(pk, rk);
    e.properties = props.iter().cloned().collect::<Properties>();
    Some(e)
}

/// Bytes of the payload itself: keys, names and values, as UTF-8 and raw numbers.
pub fn raw_payload(e: &Entity) -> usize {
    let values: usize = e
        .properties
        .iter()
        .map(|(name, v)| {
            name.len()
                + match v {
                    Value::String(s) => s.len(),
                    Value::Binary(b) => b.len(),
                    Value::Int32(_) => 4,
                    Value::Boolean(_) => 1,
                    Value::Guid(_) => 16,
                    _ => 8,
                }
        })
        .sum();
    e.partition_key.len() + e.row_key.len() + values
}
