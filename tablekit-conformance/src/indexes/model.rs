//! A model run: random writes against a plain model of the index rows, with faults injected at every step.

use super::*;

/// One step of the model-based test.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Insert,
    Replace,
    Merge,
    Upsert,
    UpsertMerge,
    ReplaceAny,
    MergeAny,
    Update,
    Delete,
    DeleteAny,
    Bulk,
    MergeElement,
    Batch,
}

pub(super) const STEPS: [Step; 13] = [
    Step::Insert,
    Step::Replace,
    Step::Merge,
    Step::Upsert,
    Step::UpsertMerge,
    Step::ReplaceAny,
    Step::MergeAny,
    Step::Update,
    Step::Delete,
    Step::DeleteAny,
    Step::Bulk,
    Step::MergeElement,
    Step::Batch,
];

/// Random sequences of every write path over a few ids and emails, with
/// transient failures and lost responses injected at random steps. After
/// each sequence, every entity has exactly its index rows, no index row
/// points at nothing, no two entities share an email, and each entity is
/// the one the writes that succeeded (or were settled) leave.
pub async fn index_model_runs(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> ModelOutcomes {
    index_model_runs_of::<Staff>(backend, runs, steps, seed).await
}

/// A random staff member `id` of department `pk`, for the model run.
pub(super) fn random_staff(rng: &mut fastrand::Rng, pk: &str, id: u32) -> Staff {
    let emails = ["a@x", "b@x", "c@x", "d@x"];
    Staff {
        department: pk.to_owned(),
        id,
        email: emails[rng.usize(0..emails.len())].into(),
        last_name: ["Jones", "Smith"][rng.usize(0..2)].into(),
        first_name: ["Ann", "Bob"][rng.usize(0..2)].into(),
        phone: rng.bool().then(|| format!("p{}", rng.u8(..))),
        salary: rng.u32(..1000),
        hours: [rng.u8(..24), rng.u8(..24)],
        team: ["red", "blue"][rng.usize(0..2)].into(),
    }
}

/// Applies one step of the model run, writing `value` (as an `M`) through
/// `table` (under faults) and reading through `plain`; a batch's other
/// entity is read back into `model`.
pub(super) async fn apply_model_step<M: ModelStaff>(
    step: Step,
    (table, plain): (&Table<M>, &Table<M>),
    pk: &str,
    value: &Staff,
    model: &mut BTreeMap<u32, Staff>,
    rng: &mut fastrand::Rng,
) -> Result<(), Error> {
    let id = value.id;
    let typed = M::from_staff(value.clone());
    match step {
        Step::Insert => table.insert(&typed).await.map(drop),
        Step::Upsert => table.upsert(&typed).await.map(drop),
        Step::UpsertMerge => table.upsert_merge(&typed).await.map(drop),
        Step::ReplaceAny => table.replace_unconditionally(&typed).await.map(drop),
        Step::MergeAny => table.merge_unconditionally(&typed).await.map(drop),
        Step::DeleteAny => table.delete_unconditionally(pk, id).await,
        Step::Replace | Step::Merge | Step::Delete => {
            match plain.get(pk, id).await.expect("read") {
                None => Ok(()),
                Some(mut loaded) => {
                    let stored = loaded.to_staff();
                    *loaded = M::from_staff(Staff {
                        department: stored.department,
                        id: stored.id,
                        ..value.clone()
                    });
                    match step {
                        Step::Replace => table.replace(&mut loaded).await.map(drop),
                        Step::Merge => table.merge(&mut loaded).await.map(drop),
                        _ => table.delete(&loaded).await,
                    }
                }
            }
        }
        Step::Update => {
            let v = value.clone();
            table
                .update(pk, id, move |s| {
                    let mut staff = s.to_staff();
                    staff.email = v.email.clone();
                    staff.last_name = v.last_name.clone();
                    staff.salary = v.salary;
                    *s = M::from_staff(staff);
                })
                .await
                .map(drop)
        }
        Step::MergeElement => {
            let element = M::hours_at(rng.usize(0..2));
            table
                .merge_element(pk, id, &element, &value.hours[0], &IfMatch::Any)
                .await
                .map(drop)
        }
        Step::Batch => {
            // This write and the delete of another entity, together.
            let mut batch = table.batch();
            batch.upsert(&typed).expect("add");
            let other = rng.u32(1..=3);
            if other != id && model.contains_key(&other) {
                batch.delete_unconditionally(pk, other).expect("add");
            }
            let result = batch.submit().await.map(drop);
            // The other entity follows the store too.
            if other != id {
                match plain.get(pk, other).await.expect("read back") {
                    Some(stored) => model.insert(other, Loaded::into_inner(stored).to_staff()),
                    None => model.remove(&other),
                };
            }
            result.map_err(|e| match e {
                Error::BatchFailed { source, .. } => *source,
                e => e,
            })
        }
        Step::Bulk => bulk_step(table, &typed, rng).await,
    }
}

/// A bulk upsert or delete of one entity, its failure as the model reads it.
async fn bulk_step<M: ModelStaff>(
    table: &Table<M>,
    typed: &M,
    rng: &mut fastrand::Rng,
) -> Result<(), Error> {
    let report = if rng.bool() {
        table.bulk().upsert(std::slice::from_ref(typed)).await
    } else {
        table.bulk().delete(std::slice::from_ref(typed)).await
    };
    match report.failures.first() {
        None => Ok(()),
        // Kept as it is when the model can use it; any
        // other failure makes the model read the row back.
        Some(f) => Err(match &*f.error {
            Error::UniqueViolation {
                table,
                partition_key,
                index,
                value,
                held_by,
            } => Error::UniqueViolation {
                table: table.clone(),
                partition_key: partition_key.clone(),
                index,
                value: value.clone(),
                held_by: held_by.clone(),
            },
            other => Error::Transient {
                message: other.to_string(),
            },
        }),
    }
}

/// [`index_model_runs`] over entities of type `M`.
pub async fn index_model_runs_of<M: ModelStaff>(
    backend: Arc<dyn TableBackend>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> ModelOutcomes {
    let mut outcomes = ModelOutcomes::default();
    let name = fresh_table(&*backend, "idxmodel").await;
    let layer = FaultInjection::new(Arc::clone(&backend));
    let handle = layer.handle();
    handle.seed(seed);
    let table: Table<M> = Table::from_arc(Arc::new(layer), &name);
    let plain: Table<M> = Table::from_arc(Arc::clone(&backend), &name);
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..runs {
        let pk = format!("run{run}");
        let mut model: BTreeMap<u32, Staff> = BTreeMap::new();
        for _ in 0..steps {
            handle.clear();
            if rng.f64() < 0.5 {
                let fault = if rng.bool() {
                    Fault::Transient
                } else {
                    Fault::LostResponse
                };
                handle.inject(Injection::any().skip(rng.usize(0..4)).fault(fault));
            }
            let id = rng.u32(1..=3);
            let value = random_staff(&mut rng, &pk, id);
            let step = STEPS[rng.usize(0..STEPS.len())];
            let result =
                apply_model_step(step, (&table, &plain), &pk, &value, &mut model, &mut rng).await;
            handle.clear();
            match &result {
                Ok(()) => outcomes.applied += 1,
                Err(Error::UniqueViolation { .. }) => outcomes.unique_violations += 1,
                Err(e) if e.is_outcome_unknown() || e.is_transient() => outcomes.faulted += 1,
                Err(_) => outcomes.refused += 1,
            }
            // The model follows the store: a write that failed for certain
            // changed nothing, any other outcome is read back.
            let certain_refusal = matches!(
                &result,
                Err(Error::UniqueViolation { .. }
                    | Error::EntityAlreadyExists { .. }
                    | Error::EntityNotFound { .. }
                    | Error::PreconditionFailed { .. })
            );
            if let Err(Error::UniqueViolation {
                held_by,
                value: email,
                ..
            }) = &result
            {
                let holder = model.values().find(|s| s.email == *email).map(|s| s.id);
                assert!(
                    holder.is_some(),
                    "run {run}: {email} refused, but no entity holds it ({held_by})"
                );
            }
            if !certain_refusal {
                let stored = plain
                    .get(pk.as_str(), id)
                    .await
                    .expect("read back")
                    .map(|stored| Loaded::into_inner(stored).to_staff());
                // A write that succeeded left exactly what it wrote.
                let written = match step {
                    Step::Insert | Step::Upsert | Step::ReplaceAny => Some(Some(&value)),
                    Step::Replace if model.contains_key(&id) => Some(Some(&value)),
                    Step::Delete | Step::DeleteAny => Some(None),
                    _ => None,
                };
                if let (Ok(()), Some(written)) = (&result, written) {
                    assert_eq!(stored.as_ref(), written, "run {run}: {step:?} succeeded");
                }
                match stored {
                    Some(stored) => model.insert(id, stored),
                    None => model.remove(&id),
                };
            }
            let problems = index_problems::<M>(&*backend, &name, &pk).await;
            assert!(
                problems.is_empty(),
                "run {run}, after {step:?} ({result:?}): {problems:?}"
            );
        }
        partition_matches_model(&plain, &pk, &model, run).await;
    }
    backend.delete_table(&name).await.expect("drop");
    outcomes.calls = handle_calls(&handle);
    outcomes
}

/// After a run, the partition holds the model's entities, no email twice, and
/// each is found by its email.
async fn partition_matches_model<M: ModelStaff>(
    plain: &Table<M>,
    pk: &str,
    model: &BTreeMap<u32, Staff>,
    run: usize,
) {
    let stored: BTreeMap<u32, Staff> = plain
        .query()
        .partition(pk)
        .stream()
        .map_ok(|s| {
            let s = Loaded::into_inner(s).to_staff();
            (s.id, s)
        })
        .try_collect()
        .await
        .expect("read the partition");
    assert_eq!(&stored, model, "run {run}");
    let mut emails: Vec<&str> = stored.values().map(|s| s.email.as_str()).collect();
    emails.sort_unstable();
    emails.dedup();
    assert_eq!(emails.len(), stored.len(), "run {run}: an email held twice");
    for s in stored.values() {
        let found = M::by_email(plain, pk, s.email.as_str())
            .await
            .expect("lookup")
            .map(|found| found.to_staff());
        assert_eq!(found.as_ref(), Some(s), "run {run}: lookup by email");
    }
}

/// How many table requests the fault layer saw.
pub(crate) fn handle_calls(handle: &tablekit::layer::FaultHandle) -> usize {
    use tablekit::layer::Operation::*;
    [
        GetEntity,
        QueryEntities,
        InsertEntity,
        UpdateEntity,
        UpsertEntity,
        DeleteEntity,
        SubmitTransaction,
    ]
    .into_iter()
    .map(|op| handle.calls(op))
    .sum()
}

/// How the steps of [`index_model_runs`] ended.
#[derive(Debug, Default, Clone, Copy)]
pub struct ModelOutcomes {
    /// Steps that succeeded.
    pub applied: usize,
    /// Steps refused as breaking a unique index.
    pub unique_violations: usize,
    /// Steps that failed with an injected fault the write could not settle.
    pub faulted: usize,
    /// Steps refused for another reason (conflict, missing entity, ETag).
    pub refused: usize,
    /// Calls the typed client made through the fault layer.
    pub calls: usize,
}

impl ModelOutcomes {
    /// Asserts that the runs went through every kind of outcome.
    #[track_caller]
    pub fn assert_varied(&self) {
        assert!(
            self.applied > 0 && self.unique_violations > 0 && self.faulted > 0 && self.refused > 0,
            "the runs did not reach every outcome: {self:?}"
        );
    }
}

/// [`index_model_runs`] with a few runs, for the conformance list, over
/// both entity types.
pub async fn indexes_stay_in_step_under_faults(backend: Arc<dyn TableBackend>) {
    index_model_runs(Arc::clone(&backend), 20, 8, 0x1D3)
        .await
        .assert_varied();
    index_model_runs_of::<PlainStaff>(backend, 20, 8, 0x1D4)
        .await
        .assert_varied();
}
