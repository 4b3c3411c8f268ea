//! Consumers of a change feed: each keeps its own place per partition, reads in batches, commits what it handled, and shares partitions with its other instances by lease.

use super::*;
use crate::backend::{EntityWrite, TableBackendExt};

/// Checks a consumer's name: it becomes part of a RowKey.
pub(super) fn consumer_name(name: &str) -> Result<(), InvalidInput> {
    let bad = |reason| InvalidInput::ConsumerName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(bad("it must be 1 to 63 characters long"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(bad("it may hold letters, digits, `-`, `_` and `.` only"));
    }
    Ok(())
}

/// A named reader of a change feed, which keeps a checkpoint per partition
/// in the table (see the [module docs](crate::changes)).
pub struct Consumer<T> {
    pub(super) table: Table<T>,
    pub(super) name: String,
    /// This handle's own id: a consumer without leases is read by the
    /// handle that registered it last.
    pub(super) reader: String,
    /// Whether this handle has registered the consumer.
    pub(super) registered: AtomicBool,
    /// Whether a newer handle took the consumer over from this one.
    pub(super) replaced: AtomicBool,
    /// The instance this handle is, when several share the consumer's
    /// partitions, and how long its leases last.
    pub(super) lease: Option<(String, Duration)>,
    /// The partitions it held at its last poll (with leases).
    pub(super) held: parking_lot::Mutex<Vec<String>>,
    /// The partitions it read to their end with nothing more to come
    /// until their directory row changes: a poll passes them by.
    pub(super) quiet: parking_lot::Mutex<super::quiet::QuietPartitions>,
    /// How often a poll reads every partition, quiet ones too.
    pub(super) read_all_every: Option<Duration>,
    pub(super) _marker: PhantomData<fn() -> T>,
}

/// Changes a [`Consumer`] read, and where each partition's stop: what
/// [`Consumer::commit`] stores.
#[derive(Debug, Clone)]
pub struct ChangeBatch<T> {
    /// The changes, partition by partition, each partition's in order.
    pub changes: Vec<Change<T>>,
    /// The last change number read of each partition.
    positions: Vec<(String, u64)>,
    /// The table and the consumer that read it: only that consumer commits
    /// it.
    read_by: (String, String),
}

impl<T> ChangeBatch<T> {
    /// Whether the batch holds no change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

impl<T: TableEntity> Consumer<T> {
    /// The consumer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This handle as the instance `instance` of the consumer, one of
    /// several (processes, say) that share its partitions: each poll reads
    /// only the partitions it holds a lease on. An instance is alive for
    /// `lease` after it last renewed its own row (which a poll does once
    /// half of that is gone), and holds its leases while it is alive.
    /// Each instance takes its share (the partitions over the instances
    /// alive), from partitions no one holds, held by an instance no longer
    /// alive, or held by an instance with more than its share; so an
    /// instance that stops has its partitions taken over once its lease
    /// runs out. Leases are rows of the table changed under their ETags. A
    /// partition taken over may have its last changes read again (delivery
    /// is at least once); poll more often than `lease`.
    ///
    /// `instance` is 1 to 256 bytes of any kind (a poll refuses another
    /// with [`InvalidInput::ConsumerName`]).
    pub fn leased(mut self, instance: &str, lease: Duration) -> Consumer<T> {
        self.lease = Some((instance.to_owned(), lease));
        self
    }

    /// How often a poll reads every partition, even those it passes by
    /// because nothing can have come there (`None`: never; by default every
    /// hour).
    ///
    /// A poll reads a partition while something may still come there: a
    /// writer announces a partition in the feed's directory before it sends
    /// changes to it, and once this handle has read the partition to its
    /// end, five minutes after the last announcement, it passes the
    /// partition by until the next one. So an idle feed's poll costs the
    /// directory's queries alone, however many partitions it has. Reading
    /// every partition now and then is a net for what that cannot see:
    /// writers that do not announce (builds of tablekit from before the
    /// announcements), and writers whose clocks are more than a minute
    /// behind this process's.
    pub fn read_all_every(mut self, every: Option<Duration>) -> Consumer<T> {
        self.read_all_every = every;
        self
    }

    /// The partitions this instance held at its last poll (all of them,
    /// for a consumer without [leases](Consumer::leased)).
    pub fn held(&self) -> Vec<String> {
        self.held.lock().clone()
    }

    /// The changes after this consumer's checkpoints, at most `max`,
    /// partition by partition in key order. Nothing moves until
    /// [`commit`](Consumer::commit): polling again without committing reads
    /// the same changes.
    ///
    /// The first poll registers the consumer, so that
    /// [`trim`](Changes::trim) keeps what it has not committed. A
    /// partition whose changes after the checkpoint were trimmed is
    /// [`ChangesTrimmed`](Error::ChangesTrimmed).
    pub async fn poll(&self, max: usize) -> Result<ChangeBatch<T>> {
        if !T::DESCRIPTOR.write_needs().changes {
            return Err(Error::NotSupported {
                operation: "a change feed of a kind that records no changes (declare it with `#[tablekit(changes)]`)",
            });
        }
        self.claim().await?;
        let feed = self.table.feed();
        let checkpoints = self.checkpoints().await?;
        let mut batch = ChangeBatch {
            changes: Vec::new(),
            positions: Vec::new(),
            read_by: (self.table.name().to_owned(), self.name.clone()),
        };
        let mut listed = feed.listed().await?;
        if let Some((instance, lease)) = &self.lease {
            let mine = self.balance(&listed, instance, *lease).await?;
            listed.retain(|l| mine.contains(&l.partition_key));
        }
        *self.held.lock() = listed.iter().map(|l| l.partition_key.clone()).collect();
        self.quiet
            .lock()
            .read_all_when_due(self.table.clock.now(), self.read_all_every);
        for listed in listed {
            let left = max.saturating_sub(batch.changes.len());
            if left == 0 {
                break;
            }
            let pk = listed.partition_key.as_str();
            let after = checkpoints.get(pk).map_or(0, |(seq, _)| *seq);
            if after < listed.trimmed {
                return Err(Error::ChangesTrimmed {
                    table: self.table.name().to_owned(),
                    partition_key: pk.to_owned(),
                    consumer: self.name.clone(),
                    checkpoint: after,
                    trimmed: listed.trimmed,
                });
            }
            if self.quiet.lock().passes(&listed, after) {
                continue;
            }
            let read_at = self.table.clock.now();
            let changes = feed.read(pk, after, left).await?;
            // Numbers have no gaps: one here was trimmed after the
            // directory was read (a trim that began before this consumer
            // registered).
            if let Some(first) = changes.first()
                && first.id.seq > after + 1
            {
                return Err(Error::ChangesTrimmed {
                    table: self.table.name().to_owned(),
                    partition_key: pk.to_owned(),
                    consumer: self.name.clone(),
                    checkpoint: after,
                    trimmed: first.id.seq - 1,
                });
            }
            let through = changes.last().map_or(after, |last| last.id.seq);
            let to_end = changes.len() < left;
            self.quiet.lock().note(&listed, read_at, to_end, through);
            if !changes.is_empty() {
                batch.positions.push((listed.partition_key, through));
            }
            batch.changes.extend(changes);
        }
        Ok(batch)
    }

    /// Moves this consumer's checkpoints past the changes of `batch`. A
    /// checkpoint only moves forward: committing an older batch after a
    /// newer one changes nothing.
    ///
    /// # Errors
    /// [`InvalidInput::ForeignChangeBatch`] for a batch another consumer
    /// polled (another name, or another table), which would move this one
    /// past changes it never read. Nothing moves.
    pub async fn commit(&self, batch: &ChangeBatch<T>) -> Result<()> {
        let (read_in, read_by) = &batch.read_by;
        if *read_by != self.name || read_in != self.table.name() {
            let named =
                |consumer: &str, table: &str| format!("consumer `{consumer}` of table `{table}`");
            return Err(InvalidInput::ForeignChangeBatch {
                read_by: named(read_by, read_in),
                consumer: named(&self.name, self.table.name()),
            }
            .into());
        }
        for (pk, seq) in &batch.positions {
            self.move_checkpoint(pk, *seq).await?;
        }
        Ok(())
    }

    /// Starts this consumer at the newest change of every partition, so
    /// that it reads only the changes made from now on.
    pub async fn start_from_now(&self) -> Result<()> {
        self.register().await?;
        let feed = self.table.feed();
        for pk in feed.partitions().await? {
            let newest = feed.newest(&pk).await?;
            self.move_checkpoint(&pk, newest).await?;
        }
        Ok(())
    }

    /// Moves this consumer past what was trimmed, to the oldest change
    /// kept of every partition: after a
    /// [`ChangesTrimmed`](Error::ChangesTrimmed), for a consumer that can
    /// do without the changes it missed.
    pub async fn start_from_oldest(&self) -> Result<()> {
        self.register().await?;
        for listed in self.table.feed().listed().await? {
            if listed.trimmed > 0 {
                self.move_checkpoint(&listed.partition_key, listed.trimmed)
                    .await?;
            }
        }
        Ok(())
    }

    /// Removes this consumer: its registration, so that it no longer holds
    /// trimming back, and its checkpoints.
    pub async fn unregister(&self) -> Result<()> {
        let backend = self.table.backend();
        let name = self.table.name();
        let mut keys: Vec<String> = self
            .table
            .feed()
            .directory(&self.prefix())
            .await?
            .into_iter()
            .map(|row| row.row_key)
            .collect();
        keys.push(self.registration_key());
        for key in keys {
            let delete = EntityWrite::Delete(DIRECTORY, &key, &IfMatch::Any);
            match crate::exec::write_one(backend.as_ref(), name, delete).await {
                Ok(_) | Err(Error::EntityNotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.registered.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Registers the consumer, once per handle; a handle without leases
    /// registers itself as the consumer's one reader.
    async fn register(&self) -> Result<()> {
        if self.registered.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut row = Entity::new(DIRECTORY, self.registration_key());
        if self.lease.is_none() {
            row = row.with(READER, self.reader.as_str());
        }
        let upsert = EntityWrite::Upsert(&row, UpdateMode::Merge);
        crate::exec::write_one(self.table.backend().as_ref(), self.table.name(), upsert).await?;
        self.registered.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Registers the consumer on this handle's first poll; on a later one,
    /// a handle without leases checks that it is still the consumer's
    /// reader (one point read), so that two handles of one consumer (a
    /// projector run twice) never both go on receiving every change: the
    /// newer one reads, the older one gets
    /// [`ConsumerReplaced`](Error::ConsumerReplaced) from then on.
    async fn claim(&self) -> Result<()> {
        let replaced = || Error::ConsumerReplaced {
            table: self.table.name().to_owned(),
            consumer: self.name.clone(),
        };
        if self.replaced.load(Ordering::Relaxed) {
            return Err(replaced());
        }
        if self.lease.is_some() || !self.registered.load(Ordering::Relaxed) {
            return self.register().await;
        }
        let stored = self
            .table
            .backend()
            .try_get_entity(self.table.name(), DIRECTORY, &self.registration_key())
            .await?;
        match stored
            .as_ref()
            .and_then(|row| row.properties.get(READER))
            .and_then(|v| v.as_str())
        {
            Some(reader) if reader == self.reader => Ok(()),
            Some(_) => {
                self.replaced.store(true, Ordering::Relaxed);
                Err(replaced())
            }
            // Unregistered meanwhile, or registered by a leased handle:
            // registered again, as this handle's.
            None => {
                self.registered.store(false, Ordering::Relaxed);
                self.register().await
            }
        }
    }

    /// The RowKey of the consumer's registration row.
    fn registration_key(&self) -> String {
        format!("{REGISTERED_PREFIX}{}", self.name)
    }

    /// This consumer's checkpoint in the partition `partition_key` (as
    /// stored): the number of the last change it committed; 0 for none.
    pub async fn checkpoint(&self, partition_key: &str) -> Result<u64> {
        Ok(self
            .checkpoints()
            .await?
            .get(partition_key)
            .map_or(0, |(seq, _)| *seq))
    }

    /// The RowKey start of this consumer's checkpoints.
    fn prefix(&self) -> String {
        format!("{CHECKPOINT_PREFIX}{}|", self.name)
    }

    /// This consumer's checkpoints by partition, with their ETags.
    async fn checkpoints(&self) -> Result<HashMap<String, (u64, ETag)>> {
        let prefix = self.prefix();
        let rows = self.table.feed().directory(&prefix).await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let pk = row.row_key.strip_prefix(&prefix)?.to_owned();
                let seq = row.properties.get(SEQ)?.as_i64()?;
                let etag = row.etag.clone()?;
                Some((pk, (u64::try_from(seq).ok()?, etag)))
            })
            .collect())
    }

    /// Sets the checkpoint of `pk` to `seq` unless it is already further
    /// (another instance of the consumer may move it meanwhile).
    async fn move_checkpoint(&self, pk: &str, seq: u64) -> Result<()> {
        let key = format!("{}{pk}", self.prefix());
        raise(&self.table, &key, SEQ, seq, || {
            format!(
                "the checkpoint of change feed consumer `{}` in partition {pk:?}",
                self.name
            )
        })
        .await
    }
}

/// Collects at most `max` rows of a stream.
pub(super) async fn take_max(
    stream: futures::stream::BoxStream<'_, Result<Entity>>,
    max: usize,
) -> Result<Vec<Entity>> {
    let mut rows = Vec::new();
    let mut stream = stream;
    while rows.len() < max {
        match stream.try_next().await? {
            Some(row) => rows.push(row),
            None => break,
        }
    }
    Ok(rows)
}
