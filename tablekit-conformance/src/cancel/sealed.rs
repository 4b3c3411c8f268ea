//! Writes of an entity with encrypted, indexed fields, dropped at every
//! poll.

use tablekit::TableEntity;
use tablekit::table::Loaded;

use super::{CancelOutcomes, Harness, MAX_POLLS, Write, assert_clean, write_case};
use crate::encrypted_index::Employee;

fn sealed(pk: &str, seed: u32) -> Employee {
    Employee {
        department: pk.into(),
        id: 1,
        email: format!("p{seed}@x"),
        city: (seed % 2 == 1).then(|| format!("city{seed}")),
        team: format!("t{seed}"),
    }
}

/// Writes of an entity with encrypted fields, unique and indexed (its index
/// rows keyed by hashes, recorded in its sealed row), dropped at every
/// poll: the value is whole and opens, its index rows are in step, and it
/// is found by its encrypted value.
pub(super) async fn sealed_index_paths(h: &Harness, out: &mut CancelOutcomes) {
    let t = &h.sealed;
    let cases = [
        ("sealed insert", "ei", Write::Insert),
        ("sealed upsert", "eu", Write::Upsert),
        ("sealed replace", "er", Write::Replace),
        ("sealed merge", "em", Write::Merge),
        ("sealed update", "ep", Write::Update),
        ("sealed delete", "ed", Write::Delete),
        (
            "sealed delete_unconditionally",
            "ex",
            Write::DeleteUnconditionally,
        ),
    ];
    for (path, short, how) in cases {
        every_k!(out, h, path, |k| {
            let pk = h.partition(short, k);
            // Before, no city (no row in its index); after, one.
            let (before, after) = (sealed(&pk, 2), sealed(&pk, 3));
            let before = (how != Write::Insert).then_some(&before);
            let done = write_case(h, t, &*pk, 1u32, before, &after, how, k).await;
            assert_clean(t.verify_indexes(&*pk).await, path);
            let stored = t
                .get(&*pk, 1u32)
                .await
                .expect("get")
                .map(Loaded::into_inner);
            let by_email = t.index(Employee::indexes().email);
            for e in [before, Some(&after)].into_iter().flatten() {
                let found = by_email.get(&*pk, &*e.email).await.expect("by email");
                let holds = stored.as_ref().is_some_and(|s| s.email == e.email);
                assert_eq!(
                    found.is_some(),
                    holds,
                    "{path} (k = {k}): found by {}",
                    e.email
                );
            }
            done
        });
    }
}
