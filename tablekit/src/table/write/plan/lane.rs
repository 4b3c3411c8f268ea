//! The writers of one partition's change feed in this process, sent as
//! groups: each transaction that records changes joins its partition's
//! lane, and one writer at a time (the one whose turn it is) sends every
//! transaction waiting there as one entity group transaction, numbering
//! their changes after the head it holds and moving the head once.
//!
//! Without it, writers of one partition race for the head: each moves it
//! under its ETag, all but one lose, read it again and go round, and the
//! partition takes one transaction at a time, paying a lost race for most.
//! With it, writers of one process never race each other for the head
//! (writers of other processes still may: the ETag keeps that safe), and a
//! partition with many writers sends a few large transactions instead of
//! many small ones.
//!
//! What the group changes, and what it does not:
//! - each transaction still commits or fails whole, and alone: a
//!   transaction the store refuses (its own row's precondition, say) is
//!   taken out of the group and given its refusal, and the rest go back
//!   to the front of the lane, to be sent again by the next turn (with
//!   whatever joined the lane since); transactions that name one row are
//!   never in one group;
//! - a group that loses the head to a writer of another process goes back
//!   to the front of the lane the same way, numbered after the number it
//!   lost next time, and the turn waits a little (longer each time) before
//!   it ends; a transaction that loses the head too often ends busy;
//! - a writer's future dropped while its transaction waits in the lane
//!   takes it out; one dropped while its transaction is being sent leaves
//!   it to that send, as a dropped request would, and a transaction whose
//!   writer is gone is never sent again;
//! - a writer whose turn it is and whose future is dropped gives every
//!   transaction of its group back unsettled: each writer then settles its
//!   own from its first change row, as after a lost answer.
//!
//! The head is kept in the lane between writes (the common write then
//! sends one request). Lanes are kept in a map by backend, table and
//! partition, cleared when it holds too many; a lane in use lives on with
//! its writers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use futures::future::{Either, select};

use crate::backend::checks::operation_payload_bound;
use crate::backend::{BatchOperation, TableBackend};
use crate::clock::Clock;
use crate::datetime::DateTime;
use crate::entity::{ETag, Entity};
use crate::error::{Error, Result};
use crate::exec::send_operations;
use crate::pending::changes::{
    ANNOUNCE_EVERY, Head, announce, change_key, head_before_changes, head_move,
};
use crate::validate::limits::{MAX_BATCH_OPERATIONS, MAX_BATCH_PAYLOAD};

/// How often a transaction goes back to the lane after losing the race
/// for the head to a writer of another process before it gives up.
const HEAD_RACES: u32 = 64;

/// How often a writer whose transaction waits in the lane, while another's
/// turn runs, gives its turn to the runtime before it sleeps until woken:
/// a turn is often over by then, and a task that was never asleep needs no
/// waking.
const YIELDS: u32 = 4;

/// At most this many lanes are kept.
const KEPT_LANES: usize = 65_536;

/// The lanes, by backend, table and partition.
static LANES: LazyLock<parking_lot::Mutex<HashMap<String, Arc<Lane>>>> =
    LazyLock::new(Default::default);

/// One transaction that records changes: its own operations, and its
/// change rows (not yet numbered) with the write each records.
pub(super) struct Entry {
    operations: Vec<BatchOperation>,
    changes: Vec<(usize, Entity)>,
    /// An upper bound of its share of a group's payload.
    bound: usize,
    /// How often its group lost the head to another process.
    races: u32,
}

impl Entry {
    /// A transaction of `operations` recording `changes` (each with at
    /// least one change row: the lane numbers them).
    pub(super) fn new(operations: Vec<BatchOperation>, changes: Vec<(usize, Entity)>) -> Entry {
        use crate::validate::limits::BATCH_OPERATION_OVERHEAD;
        let rows = changes.iter().map(|(_, row)| {
            crate::json::encoded_len_bound(row)
                + row.partition_key.len()
                + row.row_key.len()
                + BATCH_OPERATION_OVERHEAD
        });
        let bound = operations
            .iter()
            .map(operation_payload_bound)
            .sum::<usize>()
            + rows.sum::<usize>();
        Entry {
            operations,
            changes,
            bound,
            races: 0,
        }
    }

    /// Its own operations, as sent.
    pub(super) fn into_operations(self) -> Vec<BatchOperation> {
        self.operations
    }

    /// The operations it adds to a group.
    fn room(&self) -> usize {
        self.operations.len() + self.changes.len()
    }

    /// Its first change row, as last numbered.
    fn first_change(&self) -> Option<&Entity> {
        self.changes.first().map(|(_, row)| row)
    }
}

/// How a transaction sent in the lane ended.
pub(super) enum Outcome {
    /// Committed: the ETags of its own operations, in order.
    Committed(Vec<Option<ETag>>),
    /// Refused at its own operation `at`; nothing of it applied.
    Failed { at: usize, source: Error },
    /// Refused at the change row of its write `write`.
    Refused { write: usize, source: Error },
    /// Not committed, for this reason (the partition stayed busy, say).
    Error(Error),
    /// Its fate is open: the send's answer was lost or failed (the error,
    /// given to one transaction of the group), or the writer whose turn it
    /// was stopped. Its first change row says whether it committed.
    Unsettled(Option<Error>),
}

/// A transaction back from the lane: the entry as sent, how it ended, and
/// the number of its first change as last sent (0: never numbered).
pub(super) struct Sent {
    pub(super) entry: Entry,
    pub(super) outcome: Outcome,
    pub(super) first: u64,
}

/// A partition's lane.
struct Lane {
    /// Keeps the backend's address from being given to another backend
    /// while the lane is kept (its key holds the address).
    _backend: Weak<dyn TableBackend>,
    state: parking_lot::Mutex<LaneState>,
    /// Held by the writer whose turn it is.
    turn: tokio::sync::Mutex<()>,
    /// The count of the table's commits in this process, moved by each
    /// group that commits (see `Changes::commits_here`).
    commits: Arc<tokio::sync::watch::Sender<u64>>,
}

struct LaneState {
    /// The head as this process last moved it.
    head: Option<Head>,
    /// The number the next group numbers after at least: the last number
    /// a group of this lane found taken by another process.
    floor: u64,
    /// When (on the writers' clock) this lane last announced the partition
    /// in the change feed's directory: it announces it again before it
    /// sends once [`ANNOUNCE_EVERY`] has passed.
    announced: Option<DateTime>,
    queue: VecDeque<Arc<Slot>>,
}

/// A transaction's place in the lane.
struct Slot {
    state: parking_lot::Mutex<SlotState>,
    done: tokio::sync::Notify,
    first: AtomicU64,
}

enum SlotState {
    Waiting(Entry),
    /// In a group being sent; `gone` once its writer's future is dropped
    /// (the transaction is then never sent again).
    Sending {
        gone: bool,
    },
    Done(Entry, Outcome),
    Returned,
}

impl Slot {
    fn finish(&self, entry: Entry, outcome: Outcome) {
        *self.state.lock() = SlotState::Done(entry, outcome);
        self.done.notify_one();
    }

    fn take_done(&self) -> Option<(Entry, Outcome)> {
        let mut state = self.state.lock();
        if !matches!(*state, SlotState::Done(..)) {
            return None;
        }
        match std::mem::replace(&mut *state, SlotState::Returned) {
            SlotState::Done(entry, outcome) => Some((entry, outcome)),
            _ => None,
        }
    }
}

/// The lane of partition `pk` of `table` on `backend`.
fn lane_of(backend: &Arc<dyn TableBackend>, table: &str, pk: &str) -> Arc<Lane> {
    let key = lane_key(backend, table, pk);
    let mut lanes = LANES.lock();
    if let Some(lane) = lanes.get(&key) {
        return Arc::clone(lane);
    }
    if lanes.len() >= KEPT_LANES {
        lanes.clear();
    }
    let lane = Arc::new(Lane {
        _backend: Arc::downgrade(backend),
        state: parking_lot::Mutex::new(LaneState {
            head: None,
            floor: 0,
            announced: None,
            queue: VecDeque::new(),
        }),
        turn: tokio::sync::Mutex::new(()),
        commits: crate::pending::changes::commits(backend, table),
    });
    lanes.insert(key, Arc::clone(&lane));
    lane
}

/// The key of the lane of `pk` in `table` on `backend`: the backend's
/// address, the table and the partition (written by hand: it is made on
/// every write with a change feed).
fn lane_key(backend: &Arc<dyn TableBackend>, table: &str, pk: &str) -> String {
    let at = Arc::as_ptr(backend).cast::<()>() as usize as u64;
    let mut key = String::with_capacity(18 + table.len() + pk.len());
    crate::hex::push_hex16(&mut key, at);
    key.push('\u{0}');
    key.push_str(table);
    key.push('\u{0}');
    key.push_str(pk);
    key
}

/// When its writer's future is dropped: takes a slot out of its lane's
/// queue if it waits there, and marks it gone if its group is being sent.
struct Withdraw<'a> {
    lane: &'a Lane,
    slot: &'a Arc<Slot>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if matches!(
            *self.slot.state.lock(),
            SlotState::Done(..) | SlotState::Returned
        ) {
            return;
        }
        // The lane, then the slot: the order a turn takes them in, so a
        // group cannot take the slot or put it back in between.
        let mut lane = self.lane.state.lock();
        let mut slot = self.slot.state.lock();
        match &mut *slot {
            SlotState::Waiting(_) => {
                drop(slot);
                lane.queue.retain(|s| !Arc::ptr_eq(s, self.slot));
            }
            SlotState::Sending { gone } => *gone = true,
            SlotState::Done(..) | SlotState::Returned => {}
        }
    }
}

/// Sends `entry` in its partition's lane: with the transactions waiting
/// there when its turn comes, or by another writer's turn. The one loop of
/// the lane: a transaction that goes back to the lane (its group had one
/// refused, or lost the head) waits here again for a turn. While another
/// writer's turn runs, it first gives the runtime its turn a few times
/// ([`YIELDS`]) before it sleeps until woken: with many writers on few
/// threads, the turn is often over by then, and its end wakes no sleeper
/// (64 writers on the in-memory store: 0.41–0.47 of the two-row floor
/// before, 0.53–0.56 after).
pub(super) async fn send(
    backend: &Arc<dyn TableBackend>,
    table: &str,
    pk: &str,
    clock: &dyn Clock,
    entry: Entry,
) -> Sent {
    let lane = lane_of(backend, table, pk);
    let slot = Arc::new(Slot {
        state: parking_lot::Mutex::new(SlotState::Waiting(entry)),
        done: tokio::sync::Notify::new(),
        first: AtomicU64::new(0),
    });
    lane.state.lock().queue.push_back(Arc::clone(&slot));
    let _withdraw = Withdraw {
        lane: &lane,
        slot: &slot,
    };
    let mut yields = 0;
    loop {
        if let Some((entry, outcome)) = slot.take_done() {
            let first = slot.first.load(Ordering::Relaxed);
            return Sent {
                entry,
                outcome,
                first,
            };
        }
        if yields < YIELDS && lane.turn.try_lock().is_err() {
            yields += 1;
            tokio::task::yield_now().await;
            continue;
        }
        let done = std::pin::pin!(slot.done.notified());
        let turn = std::pin::pin!(lane.turn.lock());
        if let Either::Right((turn, _)) = select(done, turn).await {
            if matches!(*slot.state.lock(), SlotState::Waiting(_)) {
                lead(&lane, backend, table, pk, clock).await;
            }
            drop(turn);
        }
    }
}

/// Whose an operation of a group's transaction is.
#[derive(Clone, Copy)]
enum Owner {
    /// Operation `at` of transaction `slot`.
    Own {
        slot: usize,
        at: usize,
    },
    /// The change row of write `write` of transaction `slot`.
    Change {
        slot: usize,
        write: usize,
    },
    Head,
}

/// The transactions of one turn, as taken from the lane.
struct Group {
    members: Vec<(Arc<Slot>, Option<Entry>)>,
    /// The operations sent, while they are out of their entries.
    sent: Vec<BatchOperation>,
    owners: Vec<Owner>,
}

impl Drop for Group {
    /// A turn stopped before it ended (its writer's future dropped): every
    /// transaction not yet given its end goes back unsettled, with its
    /// operations.
    fn drop(&mut self) {
        self.give_back();
        for (slot, entry) in self.members.drain(..) {
            if let Some(entry) = entry {
                slot.finish(entry, Outcome::Unsettled(None));
            }
        }
    }
}

impl Group {
    /// Takes the waiting transactions that fit in one transaction beside
    /// the head's move, in order, passing over one that names a row a
    /// transaction taken already names.
    fn take(lane: &Lane) -> Group {
        let mut members = Vec::new();
        let mut room = MAX_BATCH_OPERATIONS - 1;
        let mut payload = MAX_BATCH_PAYLOAD - 1024;
        let mut rows: HashSet<String> = HashSet::new();
        let mut state = lane.state.lock();
        let mut kept = VecDeque::with_capacity(state.queue.len());
        while let Some(slot) = state.queue.pop_front() {
            let mut slot_state = slot.state.lock();
            let SlotState::Waiting(entry) = &*slot_state else {
                continue;
            };
            let (needs, bound) = (entry.room(), entry.bound);
            let clash = entry.operations.iter().any(|op| rows.contains(op.keys().1));
            let fits = members.is_empty() || (needs <= room && bound <= payload);
            if clash || !fits {
                drop(slot_state);
                kept.push_back(slot);
                if room == 0 {
                    break;
                }
                continue;
            }
            room = room.saturating_sub(needs);
            payload = payload.saturating_sub(bound);
            rows.extend(entry.operations.iter().map(|op| op.keys().1.to_owned()));
            let sending = SlotState::Sending { gone: false };
            let SlotState::Waiting(entry) = std::mem::replace(&mut *slot_state, sending) else {
                unreachable!("matched as waiting above");
            };
            drop(slot_state);
            members.push((slot, Some(entry)));
        }
        kept.extend(state.queue.drain(..));
        state.queue = kept;
        Group {
            members,
            sent: Vec::new(),
            owners: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.members.iter().all(|(_, entry)| entry.is_none())
    }

    /// Moves the members' operations into one transaction, their changes
    /// numbered after `seq`, and the head's move last. Returns the last
    /// change's number.
    fn assemble(&mut self, pk: &str, mut seq: u64, head: Option<&Head>) -> u64 {
        for (s, (slot, entry)) in self.members.iter_mut().enumerate() {
            let Some(entry) = entry else { continue };
            for (at, op) in entry.operations.drain(..).enumerate() {
                self.sent.push(op);
                self.owners.push(Owner::Own { slot: s, at });
            }
            slot.first.store(seq + 1, Ordering::Relaxed);
            for (write, mut row) in entry.changes.drain(..) {
                seq += 1;
                row.row_key = change_key(seq);
                self.sent.push(BatchOperation::Insert(row));
                self.owners.push(Owner::Change { slot: s, write });
            }
        }
        self.sent.push(head_move(pk, seq, head));
        self.owners.push(Owner::Head);
        seq
    }

    /// Moves the operations sent back into their entries.
    fn give_back(&mut self) {
        let members = &mut self.members;
        for (op, owner) in self.sent.drain(..).zip(self.owners.drain(..)) {
            match (owner, op) {
                (Owner::Own { slot, .. }, op) => {
                    if let Some(entry) = members[slot].1.as_mut() {
                        entry.operations.push(op);
                    }
                }
                (Owner::Change { slot, write }, BatchOperation::Insert(row)) => {
                    if let Some(entry) = members[slot].1.as_mut() {
                        entry.changes.push((write, row));
                    }
                }
                _ => {}
            }
        }
    }

    /// Gives member `slot` its end.
    fn finish(&mut self, slot: usize, outcome: Outcome) {
        if let Some(entry) = self.members[slot].1.take() {
            self.members[slot].0.finish(entry, outcome);
        }
    }

    /// Gives every member still in the group its `outcome()`, in order.
    fn finish_all(&mut self, mut outcome: impl FnMut() -> Outcome) {
        for s in 0..self.members.len() {
            if self.members[s].1.is_some() {
                self.finish(s, outcome());
            }
        }
    }
}

/// One turn: sends the transactions waiting in the lane as one. Each
/// ends here, but for those of a group the store refused for another's
/// sake (one member refused, or the head lost to another process): they go
/// back to the front of the lane, for the next turn to send again.
async fn lead(
    lane: &Lane,
    backend: &Arc<dyn TableBackend>,
    table: &str,
    pk: &str,
    clock: &dyn Clock,
) {
    let mut group = Group::take(lane);
    if group.is_empty() {
        return;
    }
    let (kept, floor, announced) = {
        let state = lane.state.lock();
        (state.head.clone(), state.floor, state.announced)
    };
    let kept = (kept, announced);
    let head = match announced_head(lane, backend.as_ref(), table, pk, clock, kept).await {
        Ok(head) => head,
        Err(e) => {
            let mut e = Some(e);
            return group.finish_all(|| Outcome::Unsettled(e.take()));
        }
    };
    let start = head.as_ref().map_or(0, |h| h.seq).max(floor);
    let last = group.assemble(pk, start, head.as_ref());
    let result = send_operations(backend.as_ref(), table, &group.sent).await;
    let owners = group.owners.clone();
    group.give_back();
    let error = match result {
        Ok(etags) => return committed(lane, &mut group, &owners, etags, last),
        Err(e) => e,
    };
    lane.state.lock().head = None;
    match group.committed(backend.as_ref(), table).await {
        // Committed though its answer says otherwise: each member
        // settles its own, from its change row.
        Ok(true) => return group.finish_all(|| Outcome::Unsettled(None)),
        Ok(false) => {}
        Err(_) => {
            let mut error = Some(error);
            return group.finish_all(|| Outcome::Unsettled(error.take()));
        }
    }
    let (index, source) = match error {
        Error::BatchFailed { index, source } => (index, *source),
        e => {
            let mut e = Some(e);
            return group.finish_all(|| Outcome::Unsettled(e.take()));
        }
    };
    let lost = match (owners.get(index).copied(), source) {
        (Some(Owner::Own { slot, at }), source) => {
            group.finish(slot, Outcome::Failed { at, source });
            return group.send_again(lane);
        }
        (Some(change @ Owner::Change { .. }), Error::EntityAlreadyExists { .. }) => {
            // A change number taken: the head is behind it.
            group
                .change_key_of(change)
                .and_then(|key| crate::pending::changes::seq_of_change(&key))
        }
        (Some(Owner::Change { slot, write }), source) => {
            group.finish(slot, Outcome::Refused { write, source });
            return group.send_again(lane);
        }
        (
            Some(Owner::Head),
            Error::PreconditionFailed { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::EntityNotFound { .. },
        ) => None,
        (_, source) => {
            let mut source = Some(source);
            return group.finish_all(|| match source.take() {
                Some(source) => Outcome::Error(source),
                None => Outcome::Unsettled(None),
            });
        }
    };
    // Another process's writer moved the head first.
    let races = group.lost_head();
    if races > HEAD_RACES {
        return group.finish_all(|| {
            Outcome::Error(Error::Transient {
                message: format!(
                    "the change feed of partition {pk:?} in table `{table}` stayed busy: \
                     {HEAD_RACES} transactions of other processes took its next number first"
                ),
            })
        });
    }
    {
        let mut state = lane.state.lock();
        state.floor = state.floor.max(lost.unwrap_or(0));
    }
    group.send_again(lane);
    // The turn waits before it ends: the other process's writers go first.
    let most = 1u64 << races.min(6);
    tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(0..most))).await;
}

/// The head a turn numbers after: the one the lane keeps, or read (the
/// partition listed when it has none). The partition is announced first
/// once the lane's last announcement (`kept`'s second) is
/// [`ANNOUNCE_EVERY`] old (a listing is one).
async fn announced_head(
    lane: &Lane,
    backend: &dyn TableBackend,
    table: &str,
    pk: &str,
    clock: &dyn Clock,
    (kept, announced): (Option<Head>, Option<DateTime>),
) -> Result<Option<Head>> {
    let now = clock.now();
    let due = announced.is_none_or(|at| now >= at.saturating_add(ANNOUNCE_EVERY));
    let (head, fresh) = match kept {
        Some(head) => (Some(head), false),
        None => head_before_changes(backend, table, pk, now).await?,
    };
    if due && !fresh {
        announce(backend, table, pk, now).await?;
    }
    if due || fresh {
        lane.state.lock().announced = Some(now);
    }
    Ok(head)
}

impl Group {
    /// Puts every member still in the group back at the front of the
    /// lane, in order, to be sent again by the next turn; a member whose
    /// writer is gone is dropped instead (nothing of it applied).
    fn send_again(mut self, lane: &Lane) {
        let mut state = lane.state.lock();
        for (slot, entry) in self.members.drain(..).rev() {
            let Some(entry) = entry else { continue };
            let mut slot_state = slot.state.lock();
            if matches!(*slot_state, SlotState::Sending { gone: true }) {
                *slot_state = SlotState::Returned;
                continue;
            }
            *slot_state = SlotState::Waiting(entry);
            drop(slot_state);
            state.queue.push_front(slot);
        }
    }

    /// Counts a head lost by every member still in the group; returns the
    /// most any of them lost.
    fn lost_head(&mut self) -> u32 {
        let entries = self.members.iter_mut().filter_map(|(_, e)| e.as_mut());
        entries.fold(0, |most, entry| {
            entry.races += 1;
            most.max(entry.races)
        })
    }

    /// The RowKey of the change row sent as `owner`, read back from its
    /// entry.
    fn change_key_of(&self, owner: Owner) -> Option<String> {
        let Owner::Change { slot, write } = owner else {
            return None;
        };
        let entry = self.members[slot].1.as_ref()?;
        let (_, row) = entry.changes.iter().find(|(w, _)| *w == write)?;
        Some(row.row_key.clone())
    }

    /// Whether the group's transaction committed (its answer lost, or a
    /// resend of it refused): its first member's first change row holds
    /// that member's tag.
    async fn committed(&self, backend: &dyn TableBackend, table: &str) -> Result<bool> {
        use crate::backend::TableBackendExt;
        use crate::pending::changes::TAG;
        let Some(row) = self
            .members
            .iter()
            .find_map(|(_, entry)| entry.as_ref()?.first_change())
        else {
            return Ok(false);
        };
        let stored = backend
            .try_get_entity(table, &row.partition_key, &row.row_key)
            .await?;
        let tag = |row: &Entity| {
            row.properties
                .get(TAG)
                .and_then(|tag| tag.as_str())
                .map(str::to_owned)
        };
        Ok(stored.is_some_and(|stored| tag(&stored).is_some() && tag(&stored) == tag(row)))
    }
}

/// The group committed: keeps the head it moved, and gives each member
/// the ETags of its own operations.
fn committed(
    lane: &Lane,
    group: &mut Group,
    owners: &[Owner],
    etags: Vec<Option<ETag>>,
    last: u64,
) {
    let mut each: Vec<Vec<Option<ETag>>> = vec![Vec::new(); group.members.len()];
    let mut head = None;
    for (owner, etag) in owners.iter().zip(etags) {
        match owner {
            Owner::Own { slot, .. } => each[*slot].push(etag),
            Owner::Head => head = etag.filter(|etag| !etag.as_str().is_empty()),
            Owner::Change { .. } => {}
        }
    }
    lane.state.lock().head = head.map(|etag| Head { seq: last, etag });
    lane.commits.send_modify(|n| *n = n.wrapping_add(1));
    for (s, etags) in each.into_iter().enumerate() {
        group.finish(s, Outcome::Committed(etags));
    }
}

#[cfg(test)]
pub(super) fn kept_lane_key(backend: &Arc<dyn TableBackend>, table: &str, pk: &str) -> String {
    let _ = lane_of(backend, table, pk);
    lane_key(backend, table, pk)
}

#[cfg(test)]
pub(super) fn forget_lane(key: &str) {
    LANES.lock().remove(key);
}
