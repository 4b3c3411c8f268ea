//! How the instances of one consumer share its partitions: each instance
//! keeps one row of its own alive (renewed once half its time is gone),
//! and each partition's lease row names the instance holding it, which
//! holds it as long as its own row is alive. So holding partitions costs
//! one write per instance per half lease, however many partitions it
//! holds; a lease row is written only when a partition changes hands.

use super::*;
use crate::pending::changes::INSTANCE_PREFIX;

/// The longest name of an instance, in bytes (it becomes part of a RowKey,
/// in hex).
const MAX_INSTANCE: usize = 256;

/// An instance whose row ran out this many lease periods ago has its row
/// deleted by another instance.
const FORGOTTEN_AFTER: u32 = 10;

/// At most this many rows of instances long gone are deleted by one poll.
const FORGET_PER_POLL: usize = 4;

/// The instances of a consumer alive now, by name, until when.
type Alive = HashMap<String, DateTime>;

impl<T: TableEntity> Consumer<T> {
    /// Takes and keeps this instance's share of `listed`; the partitions
    /// it holds.
    pub(super) async fn balance(
        &self,
        listed: &[Listed],
        instance: &str,
        period: Duration,
    ) -> Result<Vec<String>> {
        let now = self.table.clock.now();
        let alive = self.keep_alive(instance, period, now).await?;
        let prefix = format!("{LEASE_PREFIX}{}|", self.name);
        let leases: HashMap<String, Entity> = self
            .table
            .feed()
            .directory(&prefix)
            .await?
            .into_iter()
            .filter_map(|row| Some((row.row_key.strip_prefix(&prefix)?.to_owned(), row)))
            .collect();
        let live = |pk: &str| holder(leases.get(pk)?, &alive, now);
        let mut counts: HashMap<String, usize> = HashMap::new();
        counts.insert(instance.to_owned(), 0);
        for pk in leases.keys() {
            if let Some(owner) = live(pk) {
                *counts.entry(owner).or_default() += 1;
            }
        }
        let share = listed.len().div_ceil(counts.len());
        // Its own first, then free ones, then some of an instance's above
        // its share.
        let mut order: Vec<(u8, &str)> = listed
            .iter()
            .map(|l| {
                let rank = match live(&l.partition_key) {
                    Some(owner) if owner == instance => 0,
                    None => 1,
                    Some(_) => 2,
                };
                (rank, l.partition_key.as_str())
            })
            .collect();
        order.sort_by_key(|(rank, _)| *rank);
        let mut mine = Vec::new();
        for (rank, pk) in order {
            if rank == 0 {
                mine.push(pk.to_owned());
                continue;
            }
            if mine.len() >= share {
                break;
            }
            if let Some(owner) = live(pk) {
                let count = counts.get(&owner).copied().unwrap_or(0);
                if count <= share {
                    continue;
                }
                counts.insert(owner, count - 1);
            }
            if self.take_lease(pk, leases.get(pk), instance).await? {
                mine.push(pk.to_owned());
            }
        }
        Ok(mine)
    }

    /// Reads the consumer's instances, renews this one's row once half its
    /// time is gone, and deletes a few rows of instances long gone; the
    /// instances alive.
    async fn keep_alive(&self, instance: &str, period: Duration, now: DateTime) -> Result<Alive> {
        if instance.is_empty() || instance.len() > MAX_INSTANCE {
            return Err(InvalidInput::ConsumerName {
                name: instance.to_owned(),
                reason: "an instance's name must be 1 to 256 bytes long",
            }
            .into());
        }
        let backend = self.table.backend();
        let prefix = format!("{INSTANCE_PREFIX}{}|", self.name);
        let rows = self.table.feed().directory(&prefix).await?;
        let mut alive = Alive::new();
        let forgotten = now.checked_sub(period.saturating_mul(FORGOTTEN_AFTER)).ok();
        let mut forgetting = 0;
        for row in rows {
            let Some((owner, until)) = lease_of(&row) else {
                continue;
            };
            if until > now {
                alive.insert(owner, until);
            } else if forgotten.is_some_and(|at| until < at) && forgetting < FORGET_PER_POLL {
                forgetting += 1;
                // Under its ETag: an instance that came back keeps its row.
                let etag = row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                let delete = EntityWrite::Delete(DIRECTORY, &row.row_key, &etag);
                match crate::exec::write_one(backend.as_ref(), self.table.name(), delete).await {
                    Ok(_)
                    | Err(Error::EntityNotFound { .. } | Error::PreconditionFailed { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let half = now.checked_add(period / 2).map_err(Error::from)?;
        if alive.get(instance).is_none_or(|until| *until <= half) {
            let until = now.checked_add(period).map_err(Error::from)?;
            let key = format!("{prefix}{}", crate::hex::hex(instance.as_bytes()));
            let row = Entity::new(DIRECTORY, key)
                .with(LEASE_OWNER, instance)
                .with(LEASE_UNTIL, until);
            let upsert = EntityWrite::Upsert(&row, UpdateMode::Replace);
            crate::exec::write_one(backend.as_ref(), self.table.name(), upsert).await?;
            alive.insert(instance.to_owned(), until);
        }
        Ok(alive)
    }

    /// Takes the lease of `pk` for `instance`, under the ETag of the lease
    /// row read; whether it did (another instance may have moved it
    /// meanwhile).
    async fn take_lease(&self, pk: &str, stored: Option<&Entity>, instance: &str) -> Result<bool> {
        let backend = self.table.backend();
        let key = format!("{LEASE_PREFIX}{}|{pk}", self.name);
        let row = Entity::new(DIRECTORY, key).with(LEASE_OWNER, instance);
        let if_match = stored.and_then(|row| row.etag.clone()).map(IfMatch::ETag);
        let write = match &if_match {
            Some(if_match) => EntityWrite::Update(&row, UpdateMode::Replace, if_match),
            None => EntityWrite::Insert(&row),
        };
        let written = crate::exec::write_one(backend.as_ref(), self.table.name(), write).await;
        match written {
            Ok(_) => Ok(true),
            Err(Error::PreconditionFailed { .. } | Error::EntityAlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The instance holding the lease `row`, if it holds it now: one whose own
/// row is alive (or, for a lease row that carries its own time, as an
/// earlier build of tablekit wrote them, one whose lease has not run out).
fn holder(row: &Entity, alive: &Alive, now: DateTime) -> Option<String> {
    let owner = row.properties.get(LEASE_OWNER)?.as_str()?;
    let own_time = row
        .properties
        .get(LEASE_UNTIL)
        .and_then(|v| v.as_datetime());
    let holds = alive.contains_key(owner) || own_time.is_some_and(|until| until > now);
    holds.then(|| owner.to_owned())
}
