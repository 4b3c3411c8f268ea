//! Cancellation safety: every multi-row typed write, dropped after its k-th
//! poll for every k until it completes, leaves a state that the library's
//! [upkeep](tablekit::upkeep) brings back in step.
//!
//! The tables run through the fault-injection layer with
//! [yields](tablekit::layer::FaultHandle::set_yields) on: every call to the
//! store gives way once before it reaches the store and once after it was
//! applied, as a call over a network does, so every request of a write is a
//! point where the write can be dropped, including the worst one (applied,
//! answer not yet read).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::encrypted_index::Employee;
use super::fresh_table;
use super::indexes::{Filed, Staff, Tagged};
use super::large::Document;
use super::spanning::{Contact, Mover};
use tablekit::backend::TableBackend;
use tablekit::blob::BlobStore;
use tablekit::layer::FaultInjection;
use tablekit::outbox::Outbox;
use tablekit::queue::QueueStore;
use tablekit::table::{Loaded, Table};
use tablekit::upkeep::Upkeep;

/// The most polls a write may take before the harness calls it stuck.
const MAX_POLLS: usize = 2_000;

/// The paths a sample run takes: one of each kind of multi-row write.
const SAMPLE: [&str; 11] = [
    "staff update",
    "sealed upsert",
    "transaction then put",
    "renamed replace",
    "remote insert",
    "offloaded replace",
    "wide replace",
    "move",
    "remote move",
    "log flush",
    "bucketed insert",
];

/// A future that is dropped after its `limit`-th poll unless it completed:
/// `Some(output)` when it did, `None` when it was dropped.
#[derive(Debug)]
pub struct DropAfter<F> {
    inner: Option<Pin<Box<F>>>,
    polls: usize,
    limit: usize,
}

/// Runs `future` for at most `polls` polls, then drops it where it stands
/// (a client hanging up, a timeout firing); see [`DropAfter`].
pub fn drop_after_polls<F: Future>(polls: usize, future: F) -> DropAfter<F> {
    DropAfter {
        inner: Some(Box::pin(future)),
        polls: 0,
        limit: polls,
    }
}

impl<F: Future> Future for DropAfter<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        this.polls += 1;
        if let Poll::Ready(output) = inner.as_mut().poll(cx) {
            this.inner = None;
            return Poll::Ready(Some(output));
        }
        if this.polls >= this.limit {
            // Dropped here, with whatever it had in flight.
            this.inner = None;
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

/// How many (path, k) cases a run checked, per path.
#[derive(Debug, Default, Clone)]
pub struct CancelOutcomes {
    /// For each write path, the number of k it was dropped after (the last
    /// k being the run that completed).
    pub cases: Vec<(&'static str, usize)>,
}

impl CancelOutcomes {
    /// The cases of every path together.
    pub fn total(&self) -> usize {
        self.cases.iter().map(|(_, n)| n).sum()
    }

    fn add(&mut self, path: &'static str) {
        match self.cases.iter_mut().find(|(p, _)| *p == path) {
            Some((_, n)) => *n += 1,
            None => self.cases.push((path, 1)),
        }
    }
}

/// The stores and tables a run writes to.
struct Harness {
    upkeep: Upkeep,
    staff: Table<Staff>,
    contacts: Table<Contact>,
    filed: Table<Filed>,
    documents: Table<Document>,
    years: Table<Tagged>,
    movers: Table<Mover>,
    /// Entities with encrypted fields, indexed and unique.
    sealed: Table<Employee>,
    /// The blob store (through the yielding layer) and the container the
    /// logs write to.
    blobs: Arc<dyn BlobStore>,
    container: String,
    /// The store itself, for the bucketed tables a run makes.
    backend: Arc<dyn TableBackend>,
    tables: Arc<dyn TableBackend>,
    tag: String,
    sample: bool,
}

impl Harness {
    async fn new(
        backend: Arc<dyn TableBackend>,
        blobs: Arc<dyn BlobStore>,
        queues: Arc<dyn QueueStore>,
        sample: bool,
    ) -> Harness {
        let name = fresh_table(&*backend, "cancel").await;
        super::spanning::cities_table(backend.as_ref()).await;
        let store = Arc::clone(&backend);
        let layer = FaultInjection::new(Arc::clone(&backend));
        layer.handle().set_yields(true);
        let tables: Arc<dyn TableBackend> = Arc::new(layer);
        let blob_layer = FaultInjection::new(Arc::clone(&blobs));
        blob_layer.handle().set_yields(true);
        let blobs: Arc<dyn BlobStore> = Arc::new(blob_layer);
        let container = name.to_ascii_lowercase();
        blobs
            .create_container(&container)
            .await
            .expect("create the container");
        let queue = format!("tk-cancel-{}", name.to_ascii_lowercase());
        queues.create_queue(&queue).await.expect("create the queue");
        let outbox = Outbox::new(queues, queue);
        let table = |t: &Arc<dyn TableBackend>| Table::<Staff>::from_arc(Arc::clone(t), &name);
        let base = table(&tables);
        let staff = base.clone();
        let contacts = base.of::<Contact>().with_outbox(outbox);
        let filed = base
            .of::<Filed>()
            .with_blob_store(Arc::clone(&blobs), &container);
        let documents = base
            .of::<Document>()
            .with_blob_store(Arc::clone(&blobs), &container);
        let years = base.of::<Tagged>();
        let movers = base.of::<Mover>();
        let sealed = (base.of::<Employee>()).with_encryption(Arc::new(super::encrypted::key_one()));
        let upkeep = Upkeep::new()
            .watch(&sealed)
            .watch(&staff)
            .watch(&contacts)
            .watch(&filed)
            .watch(&documents)
            .watch(&years)
            .watch(&movers);
        let tag: String = std::iter::repeat_with(fastrand::lowercase)
            .take(6)
            .collect();
        Harness {
            upkeep,
            staff,
            contacts,
            filed,
            documents,
            years,
            movers,
            sealed,
            blobs,
            container,
            backend: store,
            tables,
            tag,
            sample,
        }
    }

    /// Whether the run takes `path` (a sample takes a few).
    fn wanted(&self, path: &str) -> bool {
        !self.sample || SAMPLE.contains(&path)
    }

    /// A partition of its own for case `k` of `path`.
    fn partition(&self, path: &str, k: usize) -> String {
        format!("{}-{path}-{k}", self.tag)
    }

    /// Lets what dropped writes left running end, then runs the upkeep
    /// (everything due at once), which must find nothing it cannot finish.
    async fn upkeep(&self) {
        crate::settle().await;
        let round = self.upkeep.run_round_now().await;
        assert!(round.failures.is_empty(), "upkeep failed: {round:?}");
        assert!(
            round.pending.values().all(|&n| n == 0),
            "work left pending: {round:?}"
        );
    }
}

/// The audit found the local indexes clean.
#[track_caller]
fn assert_clean(audit: tablekit::Result<tablekit::index::IndexAudit>, what: &str) {
    let audit = audit.expect("verify the indexes");
    assert!(audit.is_clean(), "{what}: indexes out of step: {audit:?}");
}

/// The indexes of the contacts of partition `pk` kept elsewhere are in step.
async fn assert_remote_clean(t: &Table<Contact>, pk: &str, what: &str) {
    let audit = t
        .verify_remote_indexes(pk)
        .await
        .expect("verify the remote indexes");
    assert!(
        audit.is_clean(),
        "{what}: indexes kept elsewhere out of step: {audit:?}"
    );
}

/// The value stored is `before` or `after`, whole.
#[track_caller]
fn one_of<T: PartialEq + std::fmt::Debug>(
    stored: Option<Loaded<T>>,
    before: Option<&T>,
    after: Option<&T>,
    what: &str,
) {
    let stored = stored.map(Loaded::into_inner);
    assert!(
        stored.as_ref() == before || stored.as_ref() == after,
        "{what}: stored {stored:?}, neither {before:?} nor {after:?}"
    );
}

fn staff(pk: &str, id: u32, seed: u32) -> Staff {
    Staff {
        department: pk.into(),
        id,
        email: format!("e{seed}@x"),
        last_name: format!("Last{seed}"),
        first_name: "Ada".into(),
        phone: Some(format!("{seed}")),
        salary: seed,
        hours: [seed as u8, 1],
        team: ["red", "blue"][seed as usize % 2].into(),
    }
}

fn contact(pk: &str, id: u32, seed: u32) -> Contact {
    Contact {
        team: pk.into(),
        id,
        email: format!("c{seed}@x"),
        city: ["Oslo", "Rome"][seed as usize % 2].into(),
        salary: seed,
        tier: ["gold", "silver"][seed as usize % 2].into(),
    }
}

fn filed(pk: &str, seed: u32) -> Filed {
    Filed {
        folder: pk.into(),
        id: 1,
        title: format!("t{seed}"),
        // Large enough for the blob store.
        body: format!("{seed}").repeat(40_000),
    }
}

fn document(pk: &str, seed: u32) -> Document {
    Document {
        folder: pk.into(),
        id: 1,
        body: vec![seed as u8; 100],
        summary: format!("s{seed}"),
    }
}

fn year(pk: &str, seed: u32) -> Tagged {
    Tagged {
        site: pk.into(),
        year: 2026,
        daily: (0..400).map(|d| d * 2 + seed).collect(),
        code: format!("code{seed}"),
    }
}

fn mover(pk: &str, id: u32, seed: u32) -> Mover {
    Mover {
        department: pk.into(),
        id,
        last_name: format!("L{seed}"),
        salary: seed,
        badge: format!("b{id}"),
    }
}

/// One write of one entity, as a case of the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Insert,
    Upsert,
    Update,
    /// Through the value read.
    Replace,
    /// Through the value read.
    Merge,
    /// Through the value read.
    Delete,
    DeleteUnconditionally,
}

/// Stores `before` (if any), then makes `how` write `after` (the keys of
/// `pk` and `rk`), dropped after poll `k`; then the upkeep. The entity is
/// `before` or `after` (gone, for a delete), whole: a torn wide entity or
/// a row naming a missing blob fails the read. Whether the write completed.
#[allow(clippy::too_many_arguments)]
async fn write_case<T, P, R>(
    h: &Harness,
    t: &Table<T>,
    pk: P,
    rk: R,
    before: Option<&T>,
    after: &T,
    how: Write,
    k: usize,
) -> bool
where
    T: tablekit::TableEntity + Clone + PartialEq + std::fmt::Debug + Send + 'static,
    P: tablekit::schema::KeyArg<T::PartitionKey> + Copy,
    R: tablekit::schema::KeyArg<T::RowKey> + Copy,
{
    if let Some(before) = before {
        t.insert(before).await.expect("insert");
    }
    let done = write_dropped(t, pk, rk, after, how, k).await;
    h.upkeep().await;
    let deletes = matches!(how, Write::Delete | Write::DeleteUnconditionally);
    let after = (!deletes).then_some(after);
    let what = format!("{how:?} (k = {k})");
    one_of(t.get(pk, rk).await.expect("get"), before, after, &what);
    done
}

/// Makes `how` write `after` (the keys of `pk` and `rk`, stored already
/// unless `how` inserts), dropped after poll `k`. Whether the write
/// completed.
async fn write_dropped<T, P, R>(t: &Table<T>, pk: P, rk: R, after: &T, how: Write, k: usize) -> bool
where
    T: tablekit::TableEntity + Clone + PartialEq + std::fmt::Debug + Send + 'static,
    P: tablekit::schema::KeyArg<T::PartitionKey> + Copy,
    R: tablekit::schema::KeyArg<T::RowKey> + Copy,
{
    let read = || async { t.get(pk, rk).await.expect("get").expect("stored") };
    match how {
        Write::Insert => drop_after_polls(k, t.insert(after)).await.map(drop),
        Write::Upsert => drop_after_polls(k, t.upsert(after)).await.map(drop),
        Write::Update => {
            let change = after.clone();
            let update = t.update(pk, rk, move |value| *value = change.clone());
            drop_after_polls(k, update).await.map(drop)
        }
        Write::Replace | Write::Merge => {
            let mut loaded = read().await;
            *loaded = after.clone();
            let write = async {
                match how {
                    Write::Replace => t.replace(&mut loaded).await,
                    _ => t.merge(&mut loaded).await,
                }
            };
            drop_after_polls(k, write).await.map(drop)
        }
        Write::Delete => {
            let loaded = read().await;
            drop_after_polls(k, t.delete(&loaded)).await.map(drop)
        }
        Write::DeleteUnconditionally => drop_after_polls(k, t.delete_unconditionally(pk, rk))
            .await
            .map(drop),
    }
    .is_some()
}

/// Runs `$body` (which returns whether the write completed) for k = 1, 2,
/// … until it does, counting each k as a case of `$path`.
macro_rules! every_k {
    ($outcomes:ident, $h:ident, $path:expr, |$k:ident| $body:block) => {{
        let mut $k = 1usize;
        while $h.wanted($path) {
            let done: bool = $body;
            $outcomes.add($path);
            if done {
                break;
            }
            $k += 1;
            assert!($k <= MAX_POLLS, "{}: the write never completes", $path);
        }
    }};
}

// After the macro, which it uses.
mod sealed;

/// Writes of entities with local indexes (a unique one, a compound one and
/// an index entity), dropped at every poll: insert, upsert, replace, merge,
/// update, delete, a transaction of two writes and a bulk upsert.
async fn local_index_paths(h: &Harness, out: &mut CancelOutcomes) {
    let t = &h.staff;
    every_k!(out, h, "staff insert", |k| {
        let pk = h.partition("si", k);
        let after = staff(&pk, 1, 1);
        let done = write_case(h, t, &*pk, 1u32, None, &after, Write::Insert, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "staff insert");
        done
    });
    every_k!(out, h, "staff upsert", |k| {
        let pk = h.partition("su", k);
        let (before, after) = (staff(&pk, 1, 1), staff(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Upsert, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "staff upsert");
        done
    });
    every_k!(out, h, "staff replace", |k| {
        let pk = h.partition("sr", k);
        let (before, after) = (staff(&pk, 1, 1), staff(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Replace, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "staff replace");
        done
    });
    every_k!(out, h, "staff merge", |k| {
        let pk = h.partition("sm", k);
        let (before, after) = (staff(&pk, 1, 1), staff(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Merge, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "staff merge");
        done
    });
    every_k!(out, h, "staff update", |k| {
        let pk = h.partition("sp", k);
        let (before, after) = (staff(&pk, 1, 1), staff(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Update, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "staff update");
        done
    });
    every_k!(out, h, "staff delete", |k| {
        let pk = h.partition("sd", k);
        let (before, after) = (staff(&pk, 1, 1), staff(&pk, 1, 1));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Delete, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "staff delete");
        done
    });
    every_k!(out, h, "staff delete_unconditionally", |k| {
        let pk = h.partition("sx", k);
        let (before, after) = (staff(&pk, 1, 1), staff(&pk, 1, 1));
        let done = write_case(
            h,
            t,
            &*pk,
            1u32,
            Some(&before),
            &after,
            Write::DeleteUnconditionally,
            k,
        )
        .await;
        assert_clean(t.verify_indexes(&*pk).await, "staff delete_unconditionally");
        done
    });
}

/// Transactions (with a put elsewhere) and the bulk writer over an entity
/// with local indexes, dropped at every poll.
async fn local_index_group_paths(h: &Harness, out: &mut CancelOutcomes) {
    let t = &h.staff;
    every_k!(out, h, "transaction", |k| {
        let pk = h.partition("st", k);
        let kept = staff(&pk, 1, 1);
        t.insert(&kept).await.expect("insert");
        let loaded = t.get(&*pk, 1).await.expect("get").expect("stored");
        let added = staff(&pk, 2, 3);
        let mut transaction = t.transaction();
        transaction.delete(&loaded).expect("a delete");
        transaction.insert(&added).expect("an insert");
        let done = drop_after_polls(k, transaction.submit()).await.is_some();
        h.upkeep().await;
        let (first, second) = (
            t.get(&*pk, 1).await.expect("get"),
            t.get(&*pk, 2).await.expect("get"),
        );
        assert!(
            first.is_some() != second.is_some(),
            "transaction: half applied: {first:?} {second:?}"
        );
        assert_clean(t.verify_indexes(&*pk).await, "transaction");
        done
    });
    every_k!(out, h, "transaction then put", |k| {
        // A row put into another table once the insert commits: it exists
        // exactly when the insert does.
        let pk = h.partition("tp", k);
        let added = staff(&pk, 1, 1);
        let put = tablekit::Entity::new(pk.as_str(), "then").with("K", k as i64);
        let mut transaction = t.transaction();
        transaction.insert(&added).expect("an insert");
        transaction
            .then_put("ConformanceCities", put.clone())
            .expect("a put");
        let done = drop_after_polls(k, transaction.submit()).await.is_some();
        h.upkeep().await;
        let inserted = t.get(&*pk, 1).await.expect("get").is_some();
        let landed = tablekit::TableBackendExt::try_get_entity(
            h.backend.as_ref(),
            "ConformanceCities",
            &pk,
            "then",
        )
        .await
        .expect("read the put");
        assert_eq!(
            landed.is_some(),
            inserted,
            "transaction then put (k = {k}): the put exists exactly when the insert does"
        );
        if let Some(landed) = landed {
            assert_eq!(landed.properties, put.properties, "transaction then put");
        }
        assert!(
            !done || inserted,
            "transaction then put: completed, not applied"
        );
        done
    });
    every_k!(out, h, "bulk upsert", |k| {
        let pk = h.partition("sb", k);
        // Two of the four exist before.
        let before: Vec<Staff> = (0..2).map(|id| staff(&pk, id, id)).collect();
        t.bulk()
            .unpaced()
            .insert(&before)
            .await
            .failures
            .is_empty()
            .then_some(())
            .expect("insert");
        let after: Vec<Staff> = (0..4).map(|id| staff(&pk, id, id + 10)).collect();
        let writer = t.bulk().unpaced();
        let done = drop_after_polls(k, writer.upsert(&after)).await.is_some();
        h.upkeep().await;
        for id in 0..4u32 {
            let stored = t.get(&*pk, id).await.expect("get");
            let old = before.get(id as usize);
            one_of(stored, old, Some(&after[id as usize]), "bulk upsert");
        }
        assert_clean(t.verify_indexes(&*pk).await, "bulk upsert");
        done
    });
}

/// Writes of an entity whose indexes are kept in another partition and
/// another table, through the outbox: the steps after the commit.
async fn remote_index_paths(h: &Harness, out: &mut CancelOutcomes) {
    let t = &h.contacts;
    let check = |pk: String, what: &'static str| async move {
        assert_remote_clean(t, &pk, what).await;
    };
    every_k!(out, h, "remote insert", |k| {
        let pk = h.partition("ri", k);
        let after = contact(&pk, 1, 1);
        let done = write_case(h, t, &*pk, 1u32, None, &after, Write::Insert, k).await;
        check(pk, "remote insert").await;
        done
    });
    every_k!(out, h, "remote replace", |k| {
        let pk = h.partition("rr", k);
        let (before, after) = (contact(&pk, 1, 1), contact(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Replace, k).await;
        check(pk, "remote replace").await;
        done
    });
    every_k!(out, h, "remote merge", |k| {
        let pk = h.partition("rm", k);
        let (before, after) = (contact(&pk, 1, 1), contact(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Merge, k).await;
        check(pk, "remote merge").await;
        done
    });
    every_k!(out, h, "remote update", |k| {
        let pk = h.partition("ru", k);
        let (before, after) = (contact(&pk, 1, 1), contact(&pk, 1, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Update, k).await;
        check(pk, "remote update").await;
        done
    });
    every_k!(out, h, "remote delete", |k| {
        let pk = h.partition("rd", k);
        let (before, after) = (contact(&pk, 1, 1), contact(&pk, 1, 1));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Delete, k).await;
        check(pk, "remote delete").await;
        done
    });
}

/// Writes of entities with values in the blob store (always, and when too
/// large), and of wide entities, dropped at every poll.
async fn blob_and_wide_paths(h: &Harness, out: &mut CancelOutcomes) {
    let no_orphans = || async {
        let orphans = h
            .filed
            .orphan_blobs(Duration::ZERO)
            .await
            .expect("list orphans");
        assert!(orphans.is_empty(), "orphan blobs left: {orphans:?}");
        let orphans = h
            .documents
            .orphan_blobs(Duration::ZERO)
            .await
            .expect("list orphans");
        assert!(orphans.is_empty(), "orphan blobs left: {orphans:?}");
    };
    let t = &h.filed;
    every_k!(out, h, "offloaded insert", |k| {
        let pk = h.partition("oi", k);
        let after = filed(&pk, 1);
        let done = write_case(h, t, &*pk, 1u32, None, &after, Write::Insert, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "offloaded insert");
        no_orphans().await;
        done
    });
    every_k!(out, h, "offloaded replace", |k| {
        let pk = h.partition("or", k);
        let (before, after) = (filed(&pk, 1), filed(&pk, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Replace, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "offloaded replace");
        no_orphans().await;
        done
    });
    every_k!(out, h, "offloaded delete", |k| {
        let pk = h.partition("od", k);
        let (before, after) = (filed(&pk, 1), filed(&pk, 1));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Delete, k).await;
        no_orphans().await;
        done
    });
    let t = &h.documents;
    every_k!(out, h, "blob upsert", |k| {
        let pk = h.partition("bu", k);
        let (before, after) = (document(&pk, 1), document(&pk, 2));
        let done = write_case(h, t, &*pk, 1u32, Some(&before), &after, Write::Upsert, k).await;
        no_orphans().await;
        done
    });
    let t = &h.years;
    every_k!(out, h, "wide replace", |k| {
        let pk = h.partition("wr", k);
        let (before, after) = (
            year(&pk, 1),
            Tagged {
                daily: (0..150).collect(),
                ..year(&pk, 2)
            },
        );
        let done = write_case(
            h,
            t,
            &*pk,
            2026u16,
            Some(&before),
            &after,
            Write::Replace,
            k,
        )
        .await;
        assert_clean(t.verify_indexes(&*pk).await, "wide replace");
        done
    });
    every_k!(out, h, "wide delete", |k| {
        let pk = h.partition("wd", k);
        let (before, after) = (year(&pk, 1), year(&pk, 1));
        let done = write_case(h, t, &*pk, 2026u16, Some(&before), &after, Write::Delete, k).await;
        assert_clean(t.verify_indexes(&*pk).await, "wide delete");
        done
    });
}

/// Moves to another partition (or to other keys in place) of plain,
/// indexed, remote-indexed, offloaded and wide entities, dropped at every
/// poll.
async fn move_paths(h: &Harness, out: &mut CancelOutcomes) {
    let t = &h.movers;
    every_k!(out, h, "move", |k| {
        let (from, to) = (h.partition("mf", k), h.partition("mt", k));
        let (before, after) = (mover(&from, 1, 1), mover(&to, 1, 2));
        move_case(h, t, (&*from, 1u32), (&*to, 1u32), &before, &after, k).await
    });
    every_k!(out, h, "move in place", |k| {
        // Another id in the partition: the unique badge is taken over.
        let pk = h.partition("mi", k);
        let before = mover(&pk, 1, 1);
        let after = Mover {
            id: 2,
            ..mover(&pk, 1, 2)
        };
        move_case(h, t, (&*pk, 1u32), (&*pk, 2u32), &before, &after, k).await
    });
    let t = &h.staff;
    every_k!(out, h, "staff move", |k| {
        let (from, to) = (h.partition("smf", k), h.partition("smt", k));
        let (before, after) = (staff(&from, 1, 1), staff(&to, 1, 2));
        move_case(h, t, (&*from, 1u32), (&*to, 1u32), &before, &after, k).await
    });
    let t = &h.contacts;
    every_k!(out, h, "remote move", |k| {
        let (from, to) = (h.partition("rmf", k), h.partition("rmt", k));
        let (before, after) = (contact(&from, 1, 1), contact(&to, 1, 2));
        let done = move_case(h, t, (&*from, 1u32), (&*to, 1u32), &before, &after, k).await;
        assert_remote_clean(t, &from, "remote move (from)").await;
        assert_remote_clean(t, &to, "remote move (to)").await;
        done
    });
    every_k!(out, h, "remote move in place", |k| {
        // Another id in the partition: the index entity of its tier lists
        // the old id, then the new one.
        let pk = h.partition("rmi", k);
        let before = contact(&pk, 1, 1);
        let after = Contact {
            id: 2,
            ..contact(&pk, 1, 1)
        };
        let done = move_case(h, t, (&*pk, 1u32), (&*pk, 2u32), &before, &after, k).await;
        assert_remote_clean(t, &pk, "remote move in place").await;
        done
    });
    let t = &h.filed;
    every_k!(out, h, "offloaded move", |k| {
        let (from, to) = (h.partition("omf", k), h.partition("omt", k));
        let before = filed(&from, 1);
        let after = Filed {
            folder: to.clone(),
            ..filed(&to, 2)
        };
        move_case(h, t, (&*from, 1u32), (&*to, 1u32), &before, &after, k).await
    });
    let t = &h.years;
    every_k!(out, h, "wide move", |k| {
        let (from, to) = (h.partition("wmf", k), h.partition("wmt", k));
        let (before, after) = (year(&from, 1), year(&to, 2));
        move_case(h, t, (&*from, 2026u16), (&*to, 2026u16), &before, &after, k).await
    });
}

/// Stores `before`, then moves it to `after` (at the keys `to`), dropped
/// after poll `k`; then the upkeep. The entity is at its old keys with
/// `before` or at its new ones with `after`, whole, in exactly one place;
/// the indexes of both partitions verify clean. Whether the move completed.
async fn move_case<T, R>(
    h: &Harness,
    t: &Table<T>,
    from: (&str, R),
    to: (&str, R),
    before: &T,
    after: &T,
    k: usize,
) -> bool
where
    T: tablekit::TableEntity + Clone + PartialEq + std::fmt::Debug,
    for<'a> &'a str: tablekit::schema::KeyArg<T::PartitionKey>,
    R: tablekit::schema::KeyArg<T::RowKey> + Copy,
{
    t.insert(before).await.expect("insert");
    let loaded = t.get(from.0, from.1).await.expect("get").expect("stored");
    let done = drop_after_polls(k, t.move_to(&loaded, after))
        .await
        .is_some();
    h.upkeep().await;
    let (old, new) = (
        t.get(from.0, from.1).await.expect("get"),
        t.get(to.0, to.1).await.expect("get"),
    );
    let what = format!("move (k = {k})");
    match (&old, &new) {
        (Some(old), None) => assert_eq!(**old, *before, "{what}: the old entity changed"),
        (None, Some(new)) => assert_eq!(**new, *after, "{what}: not the value moved"),
        _ => panic!("{what}: in neither or both places: {old:?} {new:?}"),
    }
    assert_clean(t.verify_indexes(from.0).await, &what);
    assert_clean(t.verify_indexes(to.0).await, &what);
    done
}

/// Every multi-row typed write path, dropped after its k-th poll for every
/// k until it completes, each case followed by a round of the upkeep and
/// checks: indexes (local and kept elsewhere) verify clean, no row names a
/// missing blob and no orphan blob is left, no entity is in neither or both
/// partitions, no wide entity is torn, and each entity holds the value
/// before or after the write. With `sample`, a few paths only (for a store
/// over the network).
pub async fn writes_are_safe_to_drop(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn BlobStore>,
    queues: Arc<dyn QueueStore>,
    sample: bool,
) -> CancelOutcomes {
    let harness = Harness::new(backend, blobs, queues, sample).await;
    let mut outcomes = CancelOutcomes::default();
    let h = &harness;
    let out = &mut outcomes;
    local_index_paths(h, out).await;
    local_index_group_paths(h, out).await;
    sealed::sealed_index_paths(h, out).await;
    remote_index_paths(h, out).await;
    blob_and_wide_paths(h, out).await;
    move_paths(h, out).await;
    renamed_kind_paths(h, out).await;
    log_and_bucket_paths(h, out).await;
    outcomes
}

/// Writes of a renamed kind's entity stored under its old name, which move
/// it (with a unique index, an index by value and an index entity) to the
/// kind's own RowKey, dropped at every poll: afterwards the entity lies
/// under exactly one of its names (none, for a delete that completed),
/// holds the value before or after, and its index rows are in step.
async fn renamed_kind_paths(h: &Harness, out: &mut CancelOutcomes) {
    use super::versions::{Widget, WidgetV1, row_keys_under};
    let old: Table<WidgetV1> = Table::from_arc(Arc::clone(&h.backend), h.staff.name());
    let t: Table<Widget> = h.staff.of::<Widget>();
    let v1 = |pk: &str, seed: u32| WidgetV1 {
        shop: pk.into(),
        sku: "w".into(),
        code: format!("c{seed}"),
        colour: ["red", "blue"][seed as usize % 2].into(),
        shelf: format!("s{seed}"),
        price: seed,
    };
    for (path, how) in [
        ("renamed upsert", Write::Upsert),
        ("renamed replace", Write::Replace),
        ("renamed merge", Write::Merge),
        ("renamed update", Write::Update),
        ("renamed delete", Write::Delete),
        (
            "renamed delete unconditionally",
            Write::DeleteUnconditionally,
        ),
    ] {
        every_k!(out, h, path, |k| {
            let pk = h.partition(path, k);
            let stored = v1(&pk, 1);
            old.insert(&stored)
                .await
                .expect("insert under the old kind");
            let before = Widget::from(stored);
            let after = Widget {
                stock: 4,
                ..Widget::from(v1(&pk, 2))
            };
            let pk = &*pk;
            let done = write_dropped(&t, pk, "w", &after, how, k).await;
            h.upkeep().await;
            let deletes = matches!(how, Write::Delete | Write::DeleteUnconditionally);
            let what = format!("{path} (k = {k})");
            let stored = t.get(pk, "w").await.expect("get");
            let lies = usize::from(stored.is_some());
            one_of(stored, Some(&before), (!deletes).then_some(&after), &what);
            let (backend, table) = (&*h.backend, h.staff.name());
            let rows = row_keys_under(backend, table, pk, "WDG_w").await.len()
                + row_keys_under(backend, table, pk, "WIDGET_w").await.len();
            assert_eq!(rows, lies, "{what}: the entity lies under {rows} names");
            assert_clean(t.verify_indexes(pk).await, &what);
            done
        });
    }
}

/// A log flush and an append that flushes, dropped at every poll: after the
/// next flush, every record is in the store exactly once, in order. A write
/// into a period's table (created on first use), dropped at every poll:
/// after the upkeep the entity is there whole or not at all, and the write
/// done again lands.
async fn log_and_bucket_paths(h: &Harness, out: &mut CancelOutcomes) {
    use tablekit::log::{LogConfig, LogReader, LogWriter};
    let log = |prefix: &str| {
        LogWriter::<u32>::new(Arc::clone(&h.blobs), &h.container, prefix)
            .with_config(LogConfig::default().max_bytes(1 << 20))
    };
    let read = |prefix: String| async move {
        LogReader::<u32>::new(Arc::clone(&h.blobs), &h.container, &prefix)
            .read(..)
            .await
            .expect("read the log")
    };
    every_k!(out, h, "log flush", |k| {
        let prefix = h.partition("lf", k);
        let writer = log(&prefix);
        for n in 0..3 {
            writer.append(&n).await.expect("append");
        }
        let done = drop_after_polls(k, writer.flush()).await.is_some();
        // More records after the dropped flush, then the flush that must
        // settle it: nothing lost, nothing written twice.
        writer.append(&3).await.expect("append");
        writer.flush().await.expect("flush");
        assert_eq!(read(prefix).await, [0, 1, 2, 3], "log flush (k = {k})");
        done
    });
    every_k!(out, h, "log append", |k| {
        // A buffer of two records: the second append flushes.
        let prefix = h.partition("la", k);
        let writer = LogWriter::<u32>::new(Arc::clone(&h.blobs), &h.container, &prefix)
            .with_config(LogConfig::default().max_bytes(4));
        writer.append(&0).await.expect("append");
        let done = drop_after_polls(k, writer.append(&1)).await.is_some();
        writer.append(&2).await.expect("append");
        writer.shutdown().await.expect("shutdown");
        // A dropped append may or may not have taken its record; one that
        // returned did.
        let read = read(prefix).await;
        assert!(
            read == [0, 1, 2] || (!done && read == [0, 2]),
            "log append (k = {k}): {read:?}"
        );
        done
    });
    let prefix = format!("{}bk", h.tag);
    let event = |k: usize, n: u32| super::scale::Event {
        source: format!("s{k}"),
        id: n,
        at: tablekit::DateTime::parse(&format!("2026-11-2{}T18:00:00Z", k % 8 + 1))
            .expect("a time"),
    };
    every_k!(out, h, "bucketed insert", |k| {
        let base = Table::<super::scale::Event>::from_arc(Arc::clone(&h.tables), &prefix);
        let buckets = tablekit::bucket::Buckets::new(base).expect("a bucket prefix");
        let after = event(k, 1);
        let done = drop_after_polls(k, buckets.insert(&after)).await.is_some();
        h.upkeep().await;
        let table = buckets.table_of(&after);
        let stored = table
            .get(after.source.as_str(), after.id)
            .await
            .or_else(|e| match e {
                tablekit::Error::TableNotFound { .. } => Ok(None),
                e => Err(e),
            })
            .expect("get");
        one_of(stored, None, Some(&after), "bucketed insert");
        // Done again, it lands (or finds itself there).
        match buckets.insert(&after).await {
            Ok(_) | Err(tablekit::Error::EntityAlreadyExists { .. }) => {}
            Err(e) => panic!("bucketed insert again: {e}"),
        }
        done
    });
    // The tables the bucketed cases made.
    let base = Table::<super::scale::Event>::from_arc(Arc::clone(&h.backend), &prefix);
    let buckets = tablekit::bucket::Buckets::new(base).expect("a bucket prefix");
    for table in buckets.tables().await.expect("the bucket tables") {
        h.backend
            .delete_table(&table.name)
            .await
            .expect("delete a bucket table");
    }
}
