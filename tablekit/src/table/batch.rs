//! Atomic batches of typed writes in one partition.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use super::plan::{self, Pending, Raw, ThenRecord, Typed};
use super::write::RowWrite;
use super::{Loaded, Table};
use crate::backend::{BatchOperation, TableBackend, UpdateMode};
use crate::entity::{ETag, Entity, IfMatch};
use crate::error::Result;
use crate::schema::{self, KeyArg, TableEntity};

/// An entity with offloaded fields is written by the blob protocol (blob
/// first, then the row), which a batch of rows cannot follow; a projection
/// of an entity with indexes does not write at all.
fn refuse_in_batch<U: TableEntity>() -> Result<()> {
    Table::<U>::refuse_unwritable()?;
    if U::DESCRIPTOR.write_needs().blobs {
        return Err(crate::error::Error::NotSupported {
            operation: "batched writes of entities with offloaded fields (write them through Table or the BulkWriter)",
        });
    }
    Ok(())
}

/// An entity group transaction over entities of any types that share a
/// partition of one table: all its writes apply, or none.
///
/// This is how related rows stay consistent: an employee and the review
/// rows stored beside it, or a department and the copies of its manager's
/// details kept inside each of its employees. Each typed write brings its
/// own rows: a wide entity's parts, an entity's index rows (moved when an
/// indexed value changes). Writes that need the stored state to plan those
/// rows (an `upsert` of a type with indexes, any `merge` of one) read it when
/// the transaction is submitted, and the ETags read guard the transaction.
///
/// Entities with encrypted fields are sealed with the table's keys
/// ([`Table::with_encryption`]) when the transaction is submitted.
///
/// A failure is [`BatchFailed`](crate::Error::BatchFailed) with the index of
/// the write in the order they were added (not of a row), and the cause in
/// the write's own terms ([`PreconditionFailed`](crate::Error::PreconditionFailed)
/// on its keys, [`UniqueViolation`](crate::Error::UniqueViolation), …).
///
/// ```
/// # use tablekit::{Table, TableEntity};
/// # #[derive(TableEntity, Clone, Debug, PartialEq)]
/// # #[tablekit(table = "Staff", kind = "DEPT")]
/// # struct Department { #[tablekit(partition_key)] name: String, #[tablekit(row_key)] code: u8, manager: String }
/// # #[derive(TableEntity, Clone, Debug, PartialEq)]
/// # #[tablekit(table = "Staff", kind = "EMP")]
/// # struct Employee { #[tablekit(partition_key)] department: String, #[tablekit(row_key)] id: u32, manager: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
/// let staff: Table<Employee> = Table::new(tablekit_mem::MemBackend::new());
/// # staff.create_if_missing().await?;
/// let departments: Table<Department> = staff.of();
/// let mut tx = staff.transaction();
/// tx.insert(&Department { name: "Sales".into(), code: 1, manager: "Ann".into() })?;
/// tx.insert(&Employee { department: "Sales".into(), id: 7, manager: "Ann".into() })?;
/// tx.submit().await?;
/// assert!(departments.get("Sales", 1u8).await?.is_some());
/// # Ok(()) }
/// ```
#[must_use = "a transaction does nothing until it is submitted"]
pub struct Transaction {
    backend: Arc<dyn TableBackend>,
    table: Arc<str>,
    writes: Vec<Box<dyn Pending>>,
    /// The rows to put elsewhere once it commits, with their tables.
    then: Vec<(String, Entity)>,
    outbox: Option<Arc<dyn crate::pending::Announce>>,
    clock: Arc<dyn crate::clock::Clock>,
    /// The table's key resolver, which seals the writes of types with
    /// encrypted fields when the transaction is submitted.
    keys: Option<Arc<dyn tablekit_encrypt::KeyResolver>>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("table", &self.table)
            .field("writes", &self.writes.len())
            .field("then_put", &self.then.len())
            .finish()
    }
}

impl<T> Table<T> {
    /// A transaction over entities of any types in one partition of this
    /// table.
    pub fn transaction(&self) -> Transaction {
        Transaction {
            backend: Arc::clone(&self.backend),
            table: Arc::clone(&self.name),
            writes: Vec::new(),
            then: Vec::new(),
            outbox: self.outbox.clone(),
            clock: Arc::clone(&self.clock),
            keys: self.keys.clone(),
        }
    }
}

/// A typed write of `value`, its index rows planned when it is submitted.
fn typed<U: TableEntity>(
    value: &U,
    write: RowWrite,
    known: Option<&Arc<[String]>>,
) -> Result<Typed<'static, U>> {
    refuse_in_batch::<U>()?;
    // A type with encrypted fields is sealed when the transaction is
    // submitted (with its table's keys), and its index keys read then.
    let entity = schema::to_entity_unsealed(value)?;
    let new_keys = match schema::encrypted::<U>() {
        Some(_) => None,
        None => super::new_index_keys(value, &entity),
    };
    Ok(Typed {
        entity: Cow::Owned(entity),
        write,
        known: known.map(|keys| Cow::Owned(keys.to_vec())),
        new_keys: new_keys.map(Cow::Owned),
        _marker: PhantomData,
    })
}

/// A typed delete of the entity with these encoded keys.
fn delete_of<U: TableEntity>(
    pk: String,
    rk: String,
    if_match: IfMatch,
    known: Option<&Arc<[String]>>,
) -> Result<Typed<'static, U>> {
    refuse_in_batch::<U>()?;
    Ok(Typed {
        entity: Cow::Owned(crate::entity::Entity::new(pk, rk)),
        write: RowWrite::Delete(if_match),
        known: known.map(|keys| Cow::Owned(keys.to_vec())),
        new_keys: None,
        _marker: PhantomData,
    })
}

/// A write through a [`Loaded`], guarded by its ETag.
fn loaded_write<U: TableEntity>(loaded: &Loaded<U>, mode: UpdateMode) -> Result<Typed<'static, U>> {
    let write = RowWrite::Update(mode, IfMatch::ETag(loaded.etag.clone()));
    let mut typed = typed(&loaded.value, write, loaded.index_keys().as_ref())?;
    if mode == UpdateMode::Replace {
        super::unknown::restore(typed.entity.to_mut(), &loaded.unknown);
    }
    Ok(typed)
}

/// A delete through a [`Loaded`], guarded by its ETag.
fn loaded_delete<U: TableEntity>(loaded: &Loaded<U>) -> Result<Typed<'static, U>> {
    delete_of(
        schema::partition_key_of(&loaded.value)?,
        schema::row_key_of(&loaded.value)?,
        IfMatch::ETag(loaded.etag.clone()),
        loaded.index_keys().as_ref(),
    )
}

/// A delete by keys, whatever the version.
fn key_delete<U: TableEntity>(
    pk: &impl KeyArg<U::PartitionKey>,
    rk: &impl KeyArg<U::RowKey>,
) -> Result<Typed<'static, U>> {
    let (pk, rk) = schema::encode_keys::<U>(pk, rk)?;
    delete_of(pk, rk, IfMatch::Any, None)
}

impl Transaction {
    fn add<U: TableEntity>(&mut self, write: Typed<'static, U>) -> &mut Self {
        self.writes.push(Box::new(write));
        self
    }

    /// Puts `row` (inserts it, or replaces it whole) into the table `table`
    /// once this transaction commits: a row of another table or partition
    /// that must exist exactly when the writes do, such as an audit entry
    /// or an event for other services.
    ///
    /// The put is recorded in the transaction (an outbox record in the
    /// partition of its writes), so it commits or fails with them; then it
    /// is applied right after the commit. If the writer stops in between
    /// (a crash, a dropped future), the table's
    /// [`OutboxWorker`](crate::outbox::OutboxWorker) or the
    /// [upkeep](crate::upkeep) applies it. Applying it again changes nothing,
    /// and of two puts of one row by different transactions, the one planned
    /// later by its writer's clock stays (give such rows keys of their own,
    /// as an audit entry has, when writers' clocks may disagree).
    ///
    /// The table must exist: a put into a missing table is left in its
    /// record, tried again by the upkeep, and reported in its failures
    /// until the table is made. The transaction needs at least one write of
    /// its own; a row whose RowKey starts with `~tk|` (tablekit's own rows)
    /// is refused.
    ///
    /// ```
    /// # use tablekit::{Entity, Table, TableEntity};
    /// # #[derive(TableEntity, Clone, Debug, PartialEq)]
    /// # #[tablekit(table = "Orders", kind = "ORD")]
    /// # struct Order { #[tablekit(partition_key)] customer: String, #[tablekit(row_key)] number: u32, total: f64 }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tablekit::Result<()> {
    /// # let backend = tablekit_mem::MemBackend::new();
    /// let orders: Table<Order> = Table::new(backend.clone());
    /// # orders.create_if_missing().await?;
    /// # tablekit::TableBackend::create_table(&backend, "Audit").await?;
    /// let mut tx = orders.transaction();
    /// tx.insert(&Order { customer: "c1".into(), number: 7, total: 12.5 })?;
    /// tx.then_put("Audit", Entity::new("c1", "order 7").with("Action", "placed"))?;
    /// tx.submit().await?;
    /// let entry = tablekit::TableBackendExt::try_get_entity(&backend, "Audit", "c1", "order 7").await?;
    /// assert!(entry.is_some());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`InvalidInput`](crate::InvalidInput) for a table name or a row the
    /// store refuses; a row under tablekit's reserved RowKeys too.
    pub fn then_put(&mut self, table: &str, row: Entity) -> Result<&mut Self> {
        crate::validate::table_name(table)?;
        crate::validate::entity(&row)?;
        if row.row_key.starts_with(crate::pending::RESERVED_PREFIX) {
            return Err(crate::error::InvalidInput::ReservedRowKey {
                row_key: row.row_key,
            }
            .into());
        }
        self.then.push((table.to_owned(), row));
        Ok(self)
    }

    /// [`then_put`](Transaction::then_put) of a typed value into its table
    /// (`into`, a table of any store's name: the value's keys and properties
    /// are written as [`Table::upsert`] writes them). The type must be
    /// written as one row: one with indexes, parts or offloaded fields is
    /// refused with [`NotSupported`](crate::Error::NotSupported).
    pub fn then_put_value<U: TableEntity>(
        &mut self,
        into: &Table<U>,
        value: &U,
    ) -> Result<&mut Self> {
        Table::<U>::refuse_unwritable()?;
        if crate::schema::encrypted::<U>().is_some() {
            return Err(crate::error::Error::NotSupported {
                operation: "then_put of a type with encrypted fields, not yet",
            });
        }
        if crate::schema::expiry_property::<U>().is_some() {
            // Its expiry index row would not go before it.
            return Err(crate::error::Error::NotSupported {
                operation: "then_put of a type whose entities expire, not yet",
            });
        }
        if U::DESCRIPTOR.write_needs() != crate::schema::WriteNeeds::NONE {
            return Err(crate::error::Error::NotSupported {
                operation: "then_put of a type with indexes, parts, offloaded fields or a change feed (a put elsewhere is one row)",
            });
        }
        self.then_put(into.name(), schema::to_entity(value)?)
    }

    /// Inserts a new entity; the transaction fails if its keys are taken.
    pub fn insert<U: TableEntity>(&mut self, value: &U) -> Result<&mut Self> {
        Ok(self.add(typed(value, RowWrite::Insert, None)?))
    }

    /// Replaces an entity if it is still the version read.
    pub fn replace<U: TableEntity>(&mut self, loaded: &Loaded<U>) -> Result<&mut Self> {
        Ok(self.add(loaded_write(loaded, UpdateMode::Replace)?))
    }

    /// Merges into an entity if it is still the version read.
    pub fn merge<U: TableEntity>(&mut self, loaded: &Loaded<U>) -> Result<&mut Self> {
        Ok(self.add(loaded_write(loaded, UpdateMode::Merge)?))
    }

    /// Inserts an entity or replaces the stored one.
    pub fn upsert<U: TableEntity>(&mut self, value: &U) -> Result<&mut Self> {
        Ok(self.add(typed(value, RowWrite::Upsert(UpdateMode::Replace), None)?))
    }

    /// Inserts an entity or merges it into the stored one.
    pub fn upsert_merge<U: TableEntity>(&mut self, value: &U) -> Result<&mut Self> {
        Ok(self.add(typed(value, RowWrite::Upsert(UpdateMode::Merge), None)?))
    }

    /// Replaces the stored entity whatever its version; the transaction
    /// fails if there is none.
    pub fn replace_unconditionally<U: TableEntity>(&mut self, value: &U) -> Result<&mut Self> {
        let write = RowWrite::Update(UpdateMode::Replace, IfMatch::Any);
        Ok(self.add(typed(value, write, None)?))
    }

    /// Merges into the stored entity whatever its version; the transaction
    /// fails if there is none.
    pub fn merge_unconditionally<U: TableEntity>(&mut self, value: &U) -> Result<&mut Self> {
        let write = RowWrite::Update(UpdateMode::Merge, IfMatch::Any);
        Ok(self.add(typed(value, write, None)?))
    }

    /// Deletes an entity if it is still the version read.
    pub fn delete<U: TableEntity>(&mut self, loaded: &Loaded<U>) -> Result<&mut Self> {
        Ok(self.add(loaded_delete(loaded)?))
    }

    /// Deletes the entity of type `U` with these keys whatever its version;
    /// the transaction fails if there is none.
    pub fn delete_unconditionally<U: TableEntity>(
        &mut self,
        pk: impl KeyArg<U::PartitionKey>,
        rk: impl KeyArg<U::RowKey>,
    ) -> Result<&mut Self> {
        Ok(self.add(key_delete::<U>(&pk, &rk)?))
    }

    /// Adds a raw operation on a row no type describes (it gets no index
    /// rows and no checks of its own).
    pub fn push_raw(&mut self, operation: BatchOperation) -> &mut Self {
        self.writes.push(Box::new(Raw(operation)));
        self
    }

    /// How many writes the transaction holds.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether the transaction holds no write.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Runs the transaction; one ETag per write, in the order they were
    /// added (`None` for a delete).
    pub async fn submit(mut self) -> Result<Vec<Option<ETag>>> {
        super::operation(&*self.backend, "transaction", &self.table, None, None)
            .batch_size(self.writes.len())
            .run(async {
                self.prepare().await?;
                self.run().await
            })
            .await
    }

    /// Readies the writes: puts their expiry index rows, and seals those
    /// of types with encrypted fields with the table's keys. Once, before
    /// the transaction plans (a retry plans again over the same rows).
    async fn prepare(&mut self) -> Result<()> {
        let table = self.untyped();
        for write in &mut self.writes {
            write.prepare(&table).await?;
        }
        Ok(())
    }

    /// The table of the writes, with the transaction's keys and clock.
    fn untyped(&self) -> Table<()> {
        let mut table: Table<()> = Table::from_arc(Arc::clone(&self.backend), &self.table);
        table.keys = self.keys.clone();
        table.clock = Arc::clone(&self.clock);
        table
    }

    /// Runs the writes, then finishes the outbox records they wrote. A
    /// transaction refused because an entity that has expired holds a
    /// unique value one of them gives runs again once that entity is
    /// deleted (an expired entity holds nothing), a few times at most.
    pub(super) async fn run(&self) -> Result<Vec<Option<ETag>>> {
        let mut freed = 0;
        loop {
            let error = match self.run_once().await {
                Err(error) if freed < 4 => error,
                done => return done,
            };
            let write = match &error {
                crate::error::Error::BatchFailed { index, .. } => self.writes.get(*index),
                _ => None,
            };
            match write {
                Some(write) if write.free(&self.untyped(), &error).await? => freed += 1,
                _ => return Err(error),
            }
        }
    }

    /// [`run`](Self::run)'s one attempt.
    async fn run_once(&self) -> Result<Vec<Option<ETag>>> {
        let mut writes: Vec<&dyn Pending> = self.writes.iter().map(|w| &**w).collect();
        // The puts elsewhere are recorded in the partition of the writes.
        let then = match (self.then.is_empty(), writes.first()) {
            (true, _) => None,
            (false, None) => {
                return Err(crate::error::Error::Configuration {
                    message: "a transaction with rows to put once it commits needs a write of \
                              its own, in whose partition they are recorded"
                        .into(),
                });
            }
            (false, Some(first)) => Some(ThenRecord::new(
                &self.table,
                first.keys().0,
                self.then.clone(),
            )),
        };
        if let Some(then) = &then {
            writes.push(then);
        }
        // (Values kept outside the row cannot join a transaction: nothing
        // it replaces is offloaded.)
        let clock = self.clock.as_ref();
        let mut etags =
            plan::run(&self.backend, &self.table, &writes, clock, &mut Vec::new()).await?;
        etags.truncate(self.writes.len());
        for (pk, rk) in writes.iter().filter_map(|w| w.spans()) {
            crate::pending::finish_after_commit(
                &self.backend,
                &self.table,
                self.outbox.as_ref(),
                pk,
                rk,
            )
            .await;
        }
        Ok(etags)
    }
}

/// An entity group transaction of typed writes of one type: up to 100 rows
/// of one partition, applied all or none. It is a [`Transaction`] whose
/// writes are all of type `T`; see there for the rows each write brings and
/// how failures are reported.
///
/// Adding a write only builds its row; the batch rules are checked when it
/// is [submitted](TableBatch::submit).
#[must_use = "a batch does nothing until it is submitted"]
pub struct TableBatch<T> {
    table: Table<T>,
    transaction: Transaction,
    operations: Vec<BatchOperation>,
}

impl<T: TableEntity> TableBatch<T> {
    pub(super) fn new(table: Table<T>) -> TableBatch<T> {
        TableBatch {
            transaction: table.transaction(),
            table,
            operations: Vec::new(),
        }
    }

    /// Adds a write, and records the operation on its entity's row.
    fn add(&mut self, write: Typed<'static, T>) -> &mut Self {
        self.operations
            .push(write.write.operation(write.entity.as_ref().clone()));
        self.transaction.add(write);
        self
    }

    /// Inserts a new entity.
    pub fn insert(&mut self, value: &T) -> Result<&mut Self> {
        Ok(self.add(typed(value, RowWrite::Insert, None)?))
    }

    /// Replaces an entity if it is still the version read.
    pub fn replace(&mut self, loaded: &Loaded<T>) -> Result<&mut Self> {
        Ok(self.add(loaded_write(loaded, UpdateMode::Replace)?))
    }

    /// Merges into an entity if it is still the version read.
    pub fn merge(&mut self, loaded: &Loaded<T>) -> Result<&mut Self> {
        Ok(self.add(loaded_write(loaded, UpdateMode::Merge)?))
    }

    /// Inserts or replaces.
    pub fn upsert(&mut self, value: &T) -> Result<&mut Self> {
        Ok(self.add(typed(value, RowWrite::Upsert(UpdateMode::Replace), None)?))
    }

    /// Replaces the stored entity whatever its version (`If-Match: *`); the
    /// batch fails if there is none.
    pub fn replace_unconditionally(&mut self, value: &T) -> Result<&mut Self> {
        let write = RowWrite::Update(UpdateMode::Replace, IfMatch::Any);
        Ok(self.add(typed(value, write, None)?))
    }

    /// Merges into the stored entity whatever its version (`If-Match: *`);
    /// the batch fails if there is none.
    pub fn merge_unconditionally(&mut self, value: &T) -> Result<&mut Self> {
        let write = RowWrite::Update(UpdateMode::Merge, IfMatch::Any);
        Ok(self.add(typed(value, write, None)?))
    }

    /// Inserts or merges.
    pub fn upsert_merge(&mut self, value: &T) -> Result<&mut Self> {
        Ok(self.add(typed(value, RowWrite::Upsert(UpdateMode::Merge), None)?))
    }

    /// Deletes an entity if it is still the version read.
    pub fn delete(&mut self, loaded: &Loaded<T>) -> Result<&mut Self> {
        Ok(self.add(loaded_delete(loaded)?))
    }

    /// Deletes the entity with these keys whatever its version.
    pub fn delete_unconditionally(
        &mut self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
    ) -> Result<&mut Self> {
        Ok(self.add(key_delete::<T>(&pk, &rk)?))
    }

    /// Adds a raw operation, for rows of other kinds in the same partition.
    pub fn push(&mut self, operation: BatchOperation) -> &mut Self {
        self.transaction.push_raw(operation.clone());
        self.operations.push(operation);
        self
    }

    /// How many writes the batch holds.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// The writes as added, each as the operation on its entity's row. A
    /// wide entity's parts and an entity's index rows are added when the
    /// batch is submitted, and encrypted values sealed then (they show
    /// here as given).
    pub fn operations(&self) -> &[BatchOperation] {
        &self.operations
    }

    /// Runs the batch atomically; one ETag per write (`None` for deletes).
    pub async fn submit(mut self) -> Result<Vec<Option<ETag>>> {
        let backend = Arc::clone(self.table.backend());
        super::operation(
            &*backend,
            "batch",
            self.table.name(),
            T::DESCRIPTOR.kind,
            None,
        )
        .batch_size(self.transaction.writes.len())
        .run(async {
            self.transaction.prepare().await?;
            let write = super::write::Write::Transaction(&self.transaction);
            self.table
                .enter(write)
                .await
                .map(super::write::Written::etags)
        })
        .await
    }
}
