//! The door checks of the table contract: one function per method of
//! [`TableBackend`](super::TableBackend), holding every check that method's
//! input must pass on every backend, in the order the service makes them.
//!
//! A backend calls the method's door first and keeps only the checks that
//! are its own (a Cosmos DB account's key ranges, a merge's size once
//! merged into the stored row). So the rules are written once
//! ([`crate::validate`] and [`checks`](super::checks) hold them) and made
//! once per call, and bad input gets the same
//! [`InvalidInput`] on every backend.

use super::{BatchOperation, GetOptions, ListTablesOptions, Query, sorted};
use crate::entity::Entity;
use crate::error::{Error, InvalidInput};
use crate::validate::{self, limits::MAX_PAGE_SIZE};

/// [`create_table`](super::TableBackend::create_table): the table's name.
pub fn create_table(table: &str) -> Result<(), InvalidInput> {
    validate::table_name(table)
}

/// [`delete_table`](super::TableBackend::delete_table): the table's name.
pub fn delete_table(table: &str) -> Result<(), InvalidInput> {
    validate::table_name(table)
}

/// [`list_tables`](super::TableBackend::list_tables): `top` in 1..=1000 and
/// the prefix. Returns the page size: `top`, or 1,000.
pub fn list_tables(options: &ListTablesOptions) -> Result<usize, InvalidInput> {
    let limit = match options.top {
        Some(top) if top == 0 || top > MAX_PAGE_SIZE => {
            return Err(InvalidInput::TopOutOfRange {
                top,
                max: MAX_PAGE_SIZE,
            });
        }
        Some(top) => top,
        None => MAX_PAGE_SIZE,
    };
    if let Some(prefix) = &options.prefix {
        validate::table_prefix(prefix)?;
    }
    Ok(limit as usize)
}

/// [`get_entity`](super::TableBackend::get_entity): the table's name, the
/// keys and the names selected.
pub fn get_entity(
    table: &str,
    partition_key: &str,
    row_key: &str,
    options: &GetOptions,
) -> Result<(), InvalidInput> {
    validate::table_name(table)?;
    validate::keys(partition_key, row_key)?;
    match &options.select {
        Some(select) => validate::select_names(select),
        None => Ok(()),
    }
}

/// [`query_entities`](super::TableBackend::query_entities): the table's
/// name and the query ([`checks::query`](super::checks::query)).
pub fn query_entities(table: &str, query: &Query) -> Result<(), InvalidInput> {
    validate::table_name(table)?;
    super::checks::query(query)
}

/// [`insert_entity`](super::TableBackend::insert_entity),
/// [`update_entity`](super::TableBackend::update_entity) and
/// [`upsert_entity`](super::TableBackend::upsert_entity): the table's name
/// and the entity (keys, property names, values, count and size).
pub fn write_entity(table: &str, entity: &Entity) -> Result<(), InvalidInput> {
    validate::table_name(table)?;
    validate::entity(entity)
}

/// [`delete_entity`](super::TableBackend::delete_entity): the table's name
/// and the keys.
pub fn delete_entity(table: &str, partition_key: &str, row_key: &str) -> Result<(), InvalidInput> {
    validate::table_name(table)?;
    validate::keys(partition_key, row_key)
}

/// One of the four single-row writes, as a backend that folds them into
/// [`sorted::Write`] meets them: the door of its method.
pub fn write(table: &str, write: sorted::Write<'_>) -> Result<(), InvalidInput> {
    match write {
        sorted::Write::Insert(entity)
        | sorted::Write::Update(entity, ..)
        | sorted::Write::Upsert(entity, _) => write_entity(table, entity),
        sorted::Write::Delete(pk, rk, _) => delete_entity(table, pk, rk),
    }
}

/// [`submit_transaction`](super::TableBackend::submit_transaction): the
/// table's name and the batch ([`checks::batch`](super::checks::batch): an
/// operation invalid on its own is [`Error::BatchFailed`] with its index).
pub fn submit_transaction(table: &str, operations: &[BatchOperation]) -> Result<(), Error> {
    validate::table_name(table)?;
    super::checks::batch(operations)
}
