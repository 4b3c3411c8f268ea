//! What the writer keeps of the transactions it committed: what they read
//! of the store's own bookkeeping ([`Learned`]), so that later ones need
//! not read it again; forgotten whenever commits are discarded or the
//! engine is opened again.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::logged::Learned;
use crate::names::NameIds;

/// What the writer keeps of its committed transactions' [`Learned`]: see
/// [`LocalStorage::learn`](crate::LocalStorage::learn).
pub(crate) struct Kept {
    /// The ids of property names met.
    pub(crate) name_ids: NameIds,
    /// The bound on the times given (`i64::MIN`: not known; see
    /// [`LocalStorage::next_ticks`](crate::LocalStorage::next_ticks)).
    pub(crate) ticks_bound: AtomicI64,
}

impl Default for Kept {
    fn default() -> Self {
        Kept {
            name_ids: NameIds::default(),
            ticks_bound: AtomicI64::new(i64::MIN),
        }
    }
}

impl crate::LocalStorage {
    /// Keeps what a transaction the writer just committed to the engine
    /// read of the store's bookkeeping (on the writer thread).
    pub(crate) fn learn(&self, learned: Learned) {
        let kept = &self.shared.kept;
        kept.name_ids.extend(learned.name_ids);
        if let Some(bound) = learned.ticks_bound {
            kept.ticks_bound.fetch_max(bound, Ordering::Relaxed);
        }
    }

    /// Forgets all that was learned from commits: they may be discarded
    /// (a failed sync), or the engine opened again on its file. The ids
    /// such commits gave may then be given again to other names, and a
    /// bound they moved may be back where it was.
    pub(crate) fn forget_learned(&self) {
        let kept = &self.shared.kept;
        kept.name_ids.clear();
        kept.ticks_bound.store(i64::MIN, Ordering::Relaxed);
    }
}
