//! A signal of the changes this process commits: what lets a consumer
//! sleep long and still read a change made here at once.

use super::Changes;
use crate::schema::TableEntity;

impl<T: TableEntity> Changes<T> {
    /// A signal of the changes this process commits to this kind's table
    /// (through this backend): [`CommitsHere::changed`] returns once one
    /// committed since it last returned. A consumer that waits on it
    /// beside a timer reads new changes at once when they are made here,
    /// and polls rarely when nothing happens. Changes made by other
    /// processes (or through another backend value) do not move it: keep
    /// the timer for them.
    pub fn commits_here(&self) -> CommitsHere {
        let commits = crate::pending::changes::commits(self.table.backend(), self.table.name());
        CommitsHere {
            receiver: commits.subscribe(),
        }
    }
}

/// The changes committed by this process to a table with a change feed,
/// from [`Changes::commits_here`].
#[derive(Debug)]
pub struct CommitsHere {
    receiver: tokio::sync::watch::Receiver<u64>,
}

impl CommitsHere {
    /// Returns once a change was committed by this process since this was
    /// made or last returned (at once, if one was).
    pub async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            // The counters are kept for the process's life: never closed.
            std::future::pending::<()>().await;
        }
    }
}
