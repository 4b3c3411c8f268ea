//! The forms of index rows and index entities (an index's one row per
//! value listing the entities that hold it): the indexes write them, the
//! typed client skips them, and pending steps change index entities.

use crate::entity::Entity;
use crate::filter::RowView;
use crate::props::KIND_PROPERTY;
use crate::value::Value;

/// The property of an index row that names its index.
pub const INDEX_PROPERTY: &str = "_Index";
/// The property of an index row that holds the entity's RowKey.
pub const ROW_PROPERTY: &str = "_Row";

/// Whether `row` is an index row or an index entity (of any type).
pub fn is_index_row(row: &Entity) -> bool {
    is_index_row_view(row.into())
}

/// [`is_index_row`] of a row however it is read.
pub(crate) fn is_index_row_view(row: RowView<'_>) -> bool {
    let marked =
        row.properties.contains(ROW_PROPERTY) || row.properties.contains(&list_property(0));
    marked && (row.properties.contains(INDEX_PROPERTY) || !row.properties.contains(KIND_PROPERTY))
}

/// The properties of an index entity that hold its list: `_Rows0`,
/// `_Rows1`, …, each the RowKeys of entities holding the value, one per
/// line, in order.
pub const LIST_PROPERTY: &str = "_Rows";
/// The most characters of one list property (a string property holds 64 KiB
/// of UTF-16).
const LIST_CHUNK: usize = 32_000;
/// The most list properties of an index entity, which keeps it under the
/// 1 MiB of a row.
const LIST_CHUNKS: usize = 14;
/// The most characters of RowKeys an index entity lists.
pub(crate) const LIST_MAX_CHARS: usize = LIST_CHUNK * LIST_CHUNKS;

/// The first list property of an index entity, which every one has.
pub(crate) const LIST_FIRST_PROPERTY: &str = "_Rows0";

fn list_property(chunk: usize) -> String {
    format!("{LIST_PROPERTY}{chunk}")
}

/// The RowKeys an index entity lists, in order.
pub(crate) fn list_members(row: &Entity) -> Vec<String> {
    let mut members = Vec::new();
    for chunk in 0..LIST_CHUNKS {
        match row.properties.get(&list_property(chunk)) {
            Some(Value::String(text)) => members.extend(
                text.split('\n')
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned),
            ),
            _ => break,
        }
    }
    members
}

/// The index entity `key` of partition `pk` listing `members`, marked with
/// the index name `marker` when given; `Err` with the number of members
/// when they do not fit.
pub(crate) fn list_row_named(
    marker: Option<&str>,
    pk: &str,
    key: &str,
    members: &[String],
) -> Result<Entity, usize> {
    let mut entity = Entity::new(pk, key);
    let mut chunk = String::new();
    let mut chunk_len = 0;
    let mut chunks = 0;
    for member in members {
        let len = crate::keyorder::utf16_len(member) + 1;
        if chunk_len + len > LIST_CHUNK {
            if chunks + 1 >= LIST_CHUNKS {
                return Err(members.len());
            }
            entity
                .properties
                .insert(list_property(chunks), std::mem::take(&mut chunk));
            chunks += 1;
            chunk_len = 0;
        }
        chunk.push_str(member);
        chunk.push('\n');
        chunk_len += len;
    }
    entity.properties.insert(list_property(chunks), chunk);
    if let Some(marker) = marker {
        entity.properties.insert(INDEX_PROPERTY, marker.to_owned());
    }
    Ok(entity)
}
