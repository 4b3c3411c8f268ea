//! Differential test: random sequences of writes, batches and queries run on
//! the in-memory backend and on a plain model of the service's semantics; the
//! outcomes, the stored data and every query's results must agree.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tablekit::filter::Filter;
use tablekit::{
    BatchOperation, ETag, Entity, Error, IfMatch, Query, TableBackend, TableBackendExt, UpdateMode,
    Value,
};
use tablekit_mem::{Adversarial, MemBackend};

/// Keys from a small alphabet that exercises UTF-16 order and case.
fn key() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('a'),
            Just('B'),
            Just('é'),
            Just('\u{E000}'),
            Just('\u{1F600}'),
            Just(' ')
        ],
        0..3,
    )
    .prop_map(|c| c.into_iter().collect())
}

fn props() -> impl Strategy<Value = Vec<(String, i32)>> {
    proptest::collection::vec(
        (
            prop_oneof![Just("x"), Just("y"), Just("z")].prop_map(String::from),
            0..5i32,
        ),
        0..3,
    )
}

#[derive(Debug, Clone)]
enum Guard {
    Any,
    Current,
    Stale,
}

/// Properties of a generated entity.
type Props = Vec<(String, i32)>;
/// One operation of a generated batch: RowKey, properties, and which write
/// (0 insert, 1 insert-or-merge, 2 delete).
type BatchStep = (String, Props, u8);
/// A row as a query returns it: keys in UTF-16 and the properties.
type Row = (Vec<u16>, Vec<u16>, BTreeMap<String, i32>);

#[derive(Debug, Clone)]
enum Step {
    Insert(String, String, Vec<(String, i32)>),
    Update(String, String, Vec<(String, i32)>, bool, Guard),
    Upsert(String, String, Vec<(String, i32)>, bool),
    Delete(String, String, Guard),
    Batch(String, Vec<BatchStep>),
    Query(Option<String>, Option<(String, String)>, u32),
}

fn guard() -> impl Strategy<Value = Guard> {
    prop_oneof![Just(Guard::Any), Just(Guard::Current), Just(Guard::Stale)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (key(), key(), props()).prop_map(|(p, r, x)| Step::Insert(p, r, x)),
        (key(), key(), props(), any::<bool>(), guard())
            .prop_map(|(p, r, x, m, g)| Step::Update(p, r, x, m, g)),
        (key(), key(), props(), any::<bool>()).prop_map(|(p, r, x, m)| Step::Upsert(p, r, x, m)),
        (key(), key(), guard()).prop_map(|(p, r, g)| Step::Delete(p, r, g)),
        (
            key(),
            proptest::collection::vec((key(), props(), 0..3u8), 1..4)
        )
            .prop_map(|(p, ops)| Step::Batch(p, ops)),
        (
            proptest::option::of(key()),
            proptest::option::of((key(), key())),
            1..5u32
        )
            .prop_map(|(p, range, top)| Step::Query(p, range, top)),
    ]
}

/// What the service stores, ordered by UTF-16 code units.
type Model = BTreeMap<(Vec<u16>, Vec<u16>), BTreeMap<String, i32>>;

fn utf16(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

fn entity(pk: &str, rk: &str, props: &[(String, i32)]) -> Entity {
    let mut e = Entity::new(pk, rk);
    for (n, v) in props {
        e.insert(n.clone(), *v);
    }
    e
}

/// The outcome of a write, as the model predicts it.
#[derive(Debug, PartialEq)]
enum Outcome {
    Ok,
    NotFound,
    Exists,
    Precondition,
    BatchFailedAt(usize),
}

fn outcome<T>(result: &Result<T, Error>) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(Error::EntityNotFound { .. }) => Outcome::NotFound,
        Err(Error::EntityAlreadyExists { .. }) => Outcome::Exists,
        Err(Error::PreconditionFailed { .. }) => Outcome::Precondition,
        Err(Error::BatchFailed { index, .. }) => Outcome::BatchFailedAt(*index),
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

fn apply(model: &mut Model, key: (Vec<u16>, Vec<u16>), props: &[(String, i32)], merge: bool) {
    let slot = model.entry(key).or_default();
    if !merge {
        slot.clear();
    }
    for (n, v) in props {
        slot.insert(n.clone(), *v);
    }
}

async fn run(backend: &MemBackend, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let table = "model";
    backend.create_table(table).await.unwrap();
    let mut model = Model::new();
    let mut etags: BTreeMap<(Vec<u16>, Vec<u16>), ETag> = BTreeMap::new();
    let stale = ETag::new("W/\"datetime'2000-01-01T00%3A00%3A00Z'\"");
    let if_match = |g: &Guard, current: Option<&ETag>| match g {
        Guard::Any => IfMatch::Any,
        Guard::Current => current.cloned().map_or(IfMatch::Any, IfMatch::ETag),
        Guard::Stale => IfMatch::ETag(stale.clone()),
    };
    for step in steps {
        match step {
            Step::Insert(pk, rk, props) => {
                let k = (utf16(&pk), utf16(&rk));
                let expected = if model.contains_key(&k) {
                    Outcome::Exists
                } else {
                    Outcome::Ok
                };
                let result = backend
                    .insert_entity(table, &entity(&pk, &rk, &props))
                    .await;
                prop_assert_eq!(outcome(&result), expected);
                if let Ok(tag) = result {
                    apply(&mut model, k.clone(), &props, false);
                    etags.insert(k, tag);
                }
            }
            Step::Update(pk, rk, props, merge, g) => {
                let k = (utf16(&pk), utf16(&rk));
                let m = if_match(&g, etags.get(&k));
                let expected = match (model.contains_key(&k), &g) {
                    (false, _) => Outcome::NotFound,
                    (true, Guard::Stale) => Outcome::Precondition,
                    _ => Outcome::Ok,
                };
                let mode = if merge {
                    UpdateMode::Merge
                } else {
                    UpdateMode::Replace
                };
                let result = backend
                    .update_entity(table, &entity(&pk, &rk, &props), mode, &m)
                    .await;
                prop_assert_eq!(outcome(&result), expected);
                if let Ok(tag) = result {
                    apply(&mut model, k.clone(), &props, merge);
                    etags.insert(k, tag);
                }
            }
            Step::Upsert(pk, rk, props, merge) => {
                let k = (utf16(&pk), utf16(&rk));
                let mode = if merge {
                    UpdateMode::Merge
                } else {
                    UpdateMode::Replace
                };
                let tag = backend
                    .upsert_entity(table, &entity(&pk, &rk, &props), mode)
                    .await
                    .unwrap();
                apply(&mut model, k.clone(), &props, merge);
                etags.insert(k, tag);
            }
            Step::Delete(pk, rk, g) => {
                let k = (utf16(&pk), utf16(&rk));
                let m = if_match(&g, etags.get(&k));
                let expected = match (model.contains_key(&k), &g) {
                    (false, _) => Outcome::NotFound,
                    (true, Guard::Stale) => Outcome::Precondition,
                    _ => Outcome::Ok,
                };
                let result = backend.delete_entity(table, &pk, &rk, &m).await;
                prop_assert_eq!(outcome(&result), expected);
                if result.is_ok() {
                    model.remove(&k);
                    etags.remove(&k);
                }
            }
            Step::Batch(pk, ops) => {
                // Distinct RowKeys only: a repeated entity is a validation error tested elsewhere.
                let mut seen = std::collections::HashSet::new();
                let ops: Vec<_> = ops
                    .into_iter()
                    .filter(|(rk, _, _)| seen.insert(rk.clone()))
                    .collect();
                let mut expected = Outcome::Ok;
                let mut batch = Vec::new();
                for (i, (rk, props, kind)) in ops.iter().enumerate() {
                    let k = (utf16(&pk), utf16(rk));
                    let exists = model.contains_key(&k);
                    let e = entity(&pk, rk, props);
                    let (op, fails) = match kind {
                        0 => (BatchOperation::Insert(e), exists),
                        1 => (
                            BatchOperation::Upsert {
                                entity: e,
                                mode: UpdateMode::Merge,
                            },
                            false,
                        ),
                        _ => (
                            BatchOperation::Delete {
                                partition_key: pk.clone(),
                                row_key: rk.clone(),
                                if_match: IfMatch::Any,
                            },
                            !exists,
                        ),
                    };
                    if fails && expected == Outcome::Ok {
                        expected = Outcome::BatchFailedAt(i);
                    }
                    batch.push(op);
                }
                let result = backend.submit_transaction(table, &batch).await;
                prop_assert_eq!(outcome(&result), expected);
                if let Ok(tags) = result {
                    for ((rk, props, kind), tag) in ops.iter().zip(tags) {
                        let k = (utf16(&pk), utf16(rk));
                        match kind {
                            0 => apply(&mut model, k.clone(), props, false),
                            1 => apply(&mut model, k.clone(), props, true),
                            _ => {
                                model.remove(&k);
                            }
                        }
                        match tag {
                            Some(tag) => etags.insert(k, tag),
                            None => etags.remove(&k),
                        };
                    }
                }
            }
            Step::Query(pk, range, top) => {
                let mut filter = None::<Filter>;
                let mut and = |f: Filter| {
                    filter = Some(match filter.take() {
                        Some(g) => g & f,
                        None => f,
                    })
                };
                if let Some(pk) = &pk {
                    and(Filter::partition_key().eq(pk.as_str()));
                }
                if let Some((lo, hi)) = &range {
                    and(Filter::row_key().ge(lo.as_str()) & Filter::row_key().lt(hi.as_str()));
                }
                let mut query = Query::new().top(top);
                query.filter = filter;
                let found = backend.query_all(table, query).await.unwrap();
                let got: Vec<Row> = found
                    .iter()
                    .map(|e| {
                        let props = e
                            .properties
                            .iter()
                            .map(|(n, v)| {
                                (n.to_owned(), if let Value::Int32(i) = v { *i } else { -1 })
                            })
                            .collect();
                        (utf16(&e.partition_key), utf16(&e.row_key), props)
                    })
                    .collect();
                let want: Vec<_> = model
                    .iter()
                    .filter(|((p, r), _)| {
                        pk.as_ref().is_none_or(|pk| utf16(pk) == *p)
                            && range
                                .as_ref()
                                .is_none_or(|(lo, hi)| utf16(lo) <= *r && *r < utf16(hi))
                    })
                    .map(|((p, r), props)| (p.clone(), r.clone(), props.clone()))
                    .collect();
                prop_assert_eq!(got, want);
            }
        }
    }
    Ok(())
}

/// Runs `work` to its end on a runtime of one thread (long reads give the
/// thread back between pages, so they need a runtime to come back to them).
fn on_one_thread<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(work)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_backend_behaves_like_the_model(steps in proptest::collection::vec(step(), 1..40)) {
        let backend = MemBackend::new();
        on_one_thread(run(&backend, steps))?;
    }

    #[test]
    fn adversarial_pages_change_nothing(steps in proptest::collection::vec(step(), 1..40), seed: u64) {
        let backend = MemBackend::builder().adversarial(Adversarial { seed, ..Adversarial::default() }).build();
        on_one_thread(run(&backend, steps))?;
    }
}
