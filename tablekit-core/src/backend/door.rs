//! The door checks of the table contract: one function per method of
//! [`TableBackend`](super::TableBackend), named as the method and taking
//! its arguments, holding every check that method's input must pass on
//! every backend, in the order the service makes them.
//!
//! No backend calls them: the [`Served`](crate::layer::Served) layer,
//! which every backend stands behind, calls the method's door before the
//! method. A backend keeps only the checks that are its own (a Cosmos DB
//! account's key ranges, a merge's size once merged into the stored row).
//! So the rules are written once ([`crate::validate`] and
//! [`checks`](super::checks) hold them) and made once per call, and bad
//! input gets the same [`InvalidInput`] on every backend.

use super::{BatchOperation, EntityWrite, GetOptions, ListTablesOptions, Query, RowVisitor};
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
/// the prefix.
pub fn list_tables(options: &ListTablesOptions) -> Result<(), InvalidInput> {
    if let Some(top) = options.top.filter(|&top| top == 0 || top > MAX_PAGE_SIZE) {
        return Err(InvalidInput::TopOutOfRange {
            top,
            max: MAX_PAGE_SIZE,
        });
    }
    if let Some(prefix) = &options.prefix {
        validate::table_prefix(prefix)?;
    }
    Ok(())
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

/// [`read_rows`](super::TableBackend::read_rows): as
/// [`query_entities`].
pub fn read_rows(
    table: &str,
    query: &Query,
    read: &mut RowVisitor<'_>,
) -> Result<(), InvalidInput> {
    let _ = read;
    query_entities(table, query)
}

/// [`read_row`](super::TableBackend::read_row): the table's name and the
/// keys, as [`get_entity`].
pub fn read_row(
    table: &str,
    partition_key: &str,
    row_key: &str,
    read: &mut RowVisitor<'_>,
) -> Result<(), InvalidInput> {
    let _ = read;
    validate::table_name(table)?;
    validate::keys(partition_key, row_key)
}

/// [`write_entity`](super::TableBackend::write_entity): the table's name,
/// then the entity (keys, property names, values, count and size), or a
/// delete's keys.
pub fn write_entity(table: &str, write: EntityWrite<'_>) -> Result<(), InvalidInput> {
    validate::table_name(table)?;
    write.validate()
}

/// [`submit_transaction`](super::TableBackend::submit_transaction): the
/// table's name and the batch ([`checks::batch`](super::checks::batch): an
/// operation invalid on its own is [`Error::BatchFailed`] with its index).
pub fn submit_transaction(table: &str, operations: &[BatchOperation]) -> Result<(), Error> {
    validate::table_name(table)?;
    super::checks::batch(operations)
}
