//! The one validator every backend runs before it acts.
//!
//! The real service enforces these rules; the Azurite emulator skips many
//! of them. Checking them here, on the client, gives the same bad
//! input the same typed error on every backend. Where the service's exact limit
//! is unknown, the conservative value is used (strings 32,000 UTF-16 units,
//! binaries 64,000 bytes).
//!
//! # The rules
//!
//! Each rule is refused with its own [`InvalidInput`] variant, before
//! anything is sent:
//!
//! - **Table names**: 3 to 63 ASCII letters and digits, starting with a
//!   letter; not `tables`. Names compare without regard to case.
//! - **Keys**: a PartitionKey and a RowKey of at most 512 UTF-16 code units
//!   (1 KiB) each, without `/`, `\`, `#`, `?`, control characters
//!   (U+0000–U+001F, U+007F–U+009F). An empty key is allowed. The store
//!   orders keys by UTF-16 code unit, upper case before lower case.
//! - **Property names**: 1 to 255 characters, letters, digits and `_`, not
//!   starting with a digit; `PartitionKey`, `RowKey` and `Timestamp` are
//!   the store's own. At most 252 properties of one's own per entity.
//! - **Values**: strings of at most 32,000 UTF-16 units, binaries of at most
//!   64,000 bytes, timestamps between 1601-01-01 and 9999-12-31, integers
//!   within their type; a whole entity of at most 1 MiB by the service's
//!   size formula.
//! - **Entity group transactions**: 1 to 100 operations, one partition of
//!   one table, each entity at most once, a payload of at most 4 MiB; all
//!   or nothing.
//! - **Queries**: at most 15 comparisons in a filter and 64 levels of
//!   nesting, property names that are no words of the filter language, a
//!   page of 1 to 1,000 entities (`top`), selected names that are valid
//!   property names (or `PartitionKey`, `RowKey`, `Timestamp`).
//!
//! ETags guard writes: a replace, merge or delete with an ETag is refused
//! ([`Error::PreconditionFailed`](crate::Error::PreconditionFailed)) when
//! the row changed since it was read.

use crate::entity::{Entity, Properties};
use crate::error::{InvalidInput, KeyKind};
use crate::filter::Filter;
use crate::keyorder::{is_plain_key_byte, utf16_len};
use crate::value::{Value, ValueRef};

/// The store's limits, as constants.
pub mod limits;

use limits::*;

/// Checks a table name: 3–63 ASCII letters and digits, starting with a letter,
/// not `tables` in any case.
pub fn table_name(name: &str) -> Result<(), InvalidInput> {
    let bad = |reason| {
        Err(InvalidInput::TableName {
            name: name.to_owned(),
            reason,
        })
    };
    if !(3..=63).contains(&name.len()) {
        return bad("must be 3 to 63 characters long");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return bad("may hold only ASCII letters and digits");
    }
    if !name.as_bytes()[0].is_ascii_alphabetic() {
        return bad("must start with a letter");
    }
    if name.eq_ignore_ascii_case("tables") {
        return bad("`tables` is reserved");
    }
    Ok(())
}

/// Checks the prefix of a table listing: ASCII letters and digits only, as
/// in table names (so it can stand in a `$filter` literal as it is).
pub fn table_prefix(prefix: &str) -> Result<(), InvalidInput> {
    if prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Ok(());
    }
    Err(InvalidInput::TableName {
        name: prefix.to_owned(),
        reason: "a table name prefix may hold only ASCII letters and digits",
    })
}

/// Checks the page size of a blob or queue listing (`maxresults`, 1 to
/// 5,000) and returns it, 5,000 when none is given.
///
/// # Errors
/// [`InvalidInput::TopOutOfRange`] for 0 or more than 5,000.
pub fn list_page_size(max_results: Option<u32>) -> Result<u32, InvalidInput> {
    let size = max_results.unwrap_or(limits::MAX_LIST_RESULTS);
    if size == 0 || size > limits::MAX_LIST_RESULTS {
        return Err(InvalidInput::TopOutOfRange {
            top: size,
            max: limits::MAX_LIST_RESULTS,
        });
    }
    Ok(size)
}

/// Whether the store refuses `c` in a PartitionKey or RowKey.
pub fn is_forbidden_key_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?' | '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{9F}')
}

/// Checks a PartitionKey or RowKey: at most 512 UTF-16 code units, none of the
/// forbidden characters. The empty key is allowed.
pub fn key(kind: KeyKind, key: &str) -> Result<(), InvalidInput> {
    // One pass over the bytes settles the common case; only a key with a
    // suspect byte (a forbidden ASCII one, or any non-ASCII) is decoded.
    let forbidden = match key.bytes().position(|b| !is_plain_key_byte(b)) {
        None => None,
        Some(start) => key[start..].chars().find(|c| is_forbidden_key_char(*c)),
    };
    if let Some(character) = forbidden {
        return Err(InvalidInput::KeyForbiddenCharacter {
            kind,
            key: key.to_owned(),
            character,
        });
    }
    // Cheap bound first: a key of n bytes has at most n UTF-16 units.
    if key.len() > MAX_KEY_UTF16 {
        let utf16_len = utf16_len(key);
        if utf16_len > MAX_KEY_UTF16 {
            return Err(InvalidInput::KeyTooLong {
                kind,
                key: key.to_owned(),
                utf16_len,
                max: MAX_KEY_UTF16,
            });
        }
    }
    Ok(())
}

/// Checks a property name: 1–255 characters, a C#-style identifier (letters,
/// digits, `_`; not starting with a digit), not a system property name.
pub fn property_name(name: &str) -> Result<(), InvalidInput> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(InvalidInput::PropertyNameEmpty);
    };
    // A name of at most 255 bytes has at most 255 characters: count only longer ones.
    let len = if name.len() <= MAX_PROPERTY_NAME {
        0
    } else {
        name.chars().count()
    };
    if len > MAX_PROPERTY_NAME {
        return Err(InvalidInput::PropertyNameTooLong {
            name: name.to_owned(),
            len,
            max: MAX_PROPERTY_NAME,
        });
    }
    let bad_char = if !(first.is_alphabetic() || first == '_') {
        Some(first)
    } else if name.is_ascii() {
        // The common case, without Unicode tables.
        name.bytes()
            .find(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .map(char::from)
    } else {
        chars.find(|c| !(c.is_alphanumeric() || *c == '_'))
    };
    if let Some(character) = bad_char {
        return Err(InvalidInput::PropertyNameInvalid {
            name: name.to_owned(),
            character,
        });
    }
    if matches!(name, "PartitionKey" | "RowKey" | "Timestamp") {
        return Err(InvalidInput::PropertyNameReserved {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Checks one property value's size.
pub fn property_value(name: &str, value: &Value) -> Result<(), InvalidInput> {
    property_value_ref(name, value.as_value_ref())
}

/// [`property_value`] for a borrowed value.
#[inline]
pub fn property_value_ref(name: &str, value: ValueRef<'_>) -> Result<(), InvalidInput> {
    match value {
        ValueRef::String(s) if s.len() > MAX_STRING_UTF16 => {
            let utf16_len = utf16_len(s);
            if utf16_len > MAX_STRING_UTF16 {
                return Err(InvalidInput::StringTooLong {
                    property: name.to_owned(),
                    utf16_len,
                    max: MAX_STRING_UTF16,
                });
            }
        }
        ValueRef::Binary(b) if b.len() > MAX_BINARY_BYTES => {
            return Err(InvalidInput::BinaryTooLong {
                property: name.to_owned(),
                len: b.len(),
                max: MAX_BINARY_BYTES,
            });
        }
        _ => {}
    }
    Ok(())
}

/// Checks one property, name and value, and returns its part of the
/// service's entity-size formula: `8 + 2·len(name) + sizeof(value)`.
pub fn property(name: &str, value: ValueRef<'_>) -> Result<usize, InvalidInput> {
    property_name(name)?;
    property_value_ref(name, value)?;
    Ok(property_size(name, value))
}

/// A property's part of the service's entity-size formula:
/// `8 + 2·len(name) + sizeof(value)`.
#[inline]
pub fn property_size(name: &str, value: ValueRef<'_>) -> usize {
    8 + 2 * utf16_len(name) + value.stored_size()
}

/// Checks the number of custom properties of an entity.
pub fn property_count(
    partition_key: &str,
    row_key: &str,
    count: usize,
) -> Result<(), InvalidInput> {
    if count > MAX_PROPERTIES {
        return Err(InvalidInput::TooManyProperties {
            partition_key: partition_key.to_owned(),
            row_key: row_key.to_owned(),
            count,
            max: MAX_PROPERTIES,
        });
    }
    Ok(())
}

/// Checks a property set: count, names, values. Returns the properties' part
/// of the service's entity-size formula (`Σ 8 + 2·len(name) + sizeof(value)`).
pub fn properties(
    partition_key: &str,
    row_key: &str,
    props: &Properties,
) -> Result<usize, InvalidInput> {
    property_count(partition_key, row_key, props.len())?;
    props.iter().try_fold(0, |size, (name, value)| {
        Ok(size + property(name, value.as_value_ref())?)
    })
}

/// Checks an entity's size by the service's formula, given its properties'
/// part of it ([`properties`]): the keys' part is added here.
pub fn entity_size(
    partition_key: &str,
    row_key: &str,
    properties_size: usize,
) -> Result<(), InvalidInput> {
    let size = keys_size(partition_key, row_key) + properties_size;
    if size > MAX_ENTITY_SIZE {
        return Err(InvalidInput::EntityTooLarge {
            partition_key: partition_key.to_owned(),
            row_key: row_key.to_owned(),
            size,
            max: MAX_ENTITY_SIZE,
        });
    }
    Ok(())
}

/// The keys' part of the service's entity-size formula: `4 + 2·(len(PK) +
/// len(RK))`.
pub fn keys_size(partition_key: &str, row_key: &str) -> usize {
    4 + 2 * (utf16_len(partition_key) + utf16_len(row_key))
}

/// Checks everything about an entity that is written: keys, property count,
/// names, value sizes, and the entity's size by the service's formula
/// ([`Entity::stored_size`], computed in the same pass).
pub fn entity(entity: &Entity) -> Result<(), InvalidInput> {
    keys(&entity.partition_key, &entity.row_key)?;
    let size = properties(&entity.partition_key, &entity.row_key, &entity.properties)?;
    entity_size(&entity.partition_key, &entity.row_key, size)
}

/// Checks both keys of an addressed entity.
pub fn keys(partition_key: &str, row_key: &str) -> Result<(), InvalidInput> {
    key(KeyKind::PartitionKey, partition_key)?;
    key(KeyKind::RowKey, row_key)
}

/// Checks a filter: at most 15 comparisons, at most
/// [`MAX_FILTER_DEPTH`] levels deep, and only names that
/// [`filter_property_name`] accepts, so that rendering it can never change
/// its structure.
pub fn filter(filter: &Filter) -> Result<(), InvalidInput> {
    let count = filter.comparison_count();
    if count > MAX_FILTER_COMPARISONS {
        return Err(InvalidInput::FilterTooComplex {
            count,
            max: MAX_FILTER_COMPARISONS,
        });
    }
    let depth = filter.depth();
    if depth > MAX_FILTER_DEPTH {
        return Err(InvalidInput::FilterTooDeep {
            depth,
            max: MAX_FILTER_DEPTH,
        });
    }
    filter
        .comparisons()
        .try_for_each(|(name, _, _)| filter_property_name(name))
}

/// The words of the filter language. A property of one of these names could
/// be read as an operator or a constant (Azurite reads operators in any case),
/// so a filter may not name one.
const FILTER_KEYWORDS: [&str; 14] = [
    "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false", "null", "NaN", "INF",
];

/// Checks a name used in a filter: `PartitionKey`, `RowKey`, `Timestamp`, or
/// a valid property name ([`property_name`]) that is not a word of the filter
/// language (`and`, `not`, `eq`, `true`, … in any case).
pub fn filter_property_name(name: &str) -> Result<(), InvalidInput> {
    if matches!(name, "PartitionKey" | "RowKey" | "Timestamp") {
        return Ok(());
    }
    let refuse = |reason: InvalidInput| InvalidInput::FilterPropertyName {
        name: name.to_owned(),
        reason: Box::new(reason),
    };
    property_name(name).map_err(refuse)?;
    if FILTER_KEYWORDS
        .iter()
        .any(|word| word.eq_ignore_ascii_case(name))
    {
        return Err(refuse(InvalidInput::PropertyNameReserved {
            name: name.to_owned(),
        }));
    }
    Ok(())
}

/// Checks the names of a projection; the system properties may be selected.
pub fn select_names(select: &[String]) -> Result<(), InvalidInput> {
    for name in select {
        if !matches!(name.as_str(), "PartitionKey" | "RowKey" | "Timestamp") {
            property_name(name)?;
        }
    }
    Ok(())
}

/// Checks a blob container name: 3–63 characters of lower-case ASCII letters,
/// digits and hyphens, starting and ending with a letter or digit, no two
/// hyphens in a row.
pub fn container_name(name: &str) -> Result<(), InvalidInput> {
    let bad = |reason| {
        Err(InvalidInput::ContainerName {
            name: name.to_owned(),
            reason,
        })
    };
    if !(3..=63).contains(&name.len()) {
        return bad("must be 3 to 63 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("may hold only lower-case ASCII letters, digits and `-`");
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return bad("hyphens must stand between letters or digits, one at a time");
    }
    Ok(())
}

/// Checks a queue name: 3–63 characters of lower-case ASCII letters, digits
/// and single hyphens, starting and ending with a letter or digit.
pub fn queue_name(name: &str) -> Result<(), InvalidInput> {
    container_name(name).map_err(|error| match error {
        InvalidInput::ContainerName { name, reason } => InvalidInput::QueueName { name, reason },
        other => other,
    })
}

/// Checks a message's text: at most 64 KiB of UTF-8, and only characters
/// the service's XML carries.
pub fn message_text(text: &str) -> Result<(), InvalidInput> {
    use limits::MAX_MESSAGE_BYTES;
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(InvalidInput::MessageTooLarge {
            bytes: text.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    let refused = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    match text.char_indices().find(|&(_, c)| refused(c)) {
        Some((position, character)) => Err(InvalidInput::MessageCharacter {
            character,
            position,
        }),
        None => Ok(()),
    }
}

/// Checks how many messages a get or peek asks for: 1 to 32.
pub fn message_count(count: u32) -> Result<(), InvalidInput> {
    use limits::MAX_MESSAGES_PER_GET;
    if (1..=MAX_MESSAGES_PER_GET).contains(&count) {
        Ok(())
    } else {
        Err(InvalidInput::MessageCount {
            count,
            max: MAX_MESSAGES_PER_GET,
        })
    }
}

/// Checks a visibility timeout or delay: whole seconds, from `min` to 7
/// days. `what` names it in the error.
pub fn visibility(
    what: &'static str,
    duration: std::time::Duration,
    min: std::time::Duration,
) -> Result<(), InvalidInput> {
    use limits::MAX_VISIBILITY;
    let bad = |reason| {
        Err(InvalidInput::QueueDuration {
            what,
            duration,
            reason,
        })
    };
    if duration.subsec_nanos() != 0 {
        return bad("must be whole seconds");
    }
    if duration < min {
        return bad(if min.is_zero() {
            "must not be negative"
        } else {
            "must be at least 1 second"
        });
    }
    if duration > MAX_VISIBILITY {
        return bad("must be at most 7 days");
    }
    Ok(())
}

/// Checks a message id or pop receipt: not empty.
pub fn message_handle(what: &'static str, value: &str) -> Result<(), InvalidInput> {
    if value.is_empty() {
        Err(InvalidInput::MessageHandle { what })
    } else {
        Ok(())
    }
}

/// Checks a Get Messages: the queue's name, the count (1–32) and the
/// visibility timeout (1 s to 7 days).
pub fn get_messages(
    queue: &str,
    count: u32,
    visibility_timeout: std::time::Duration,
) -> Result<(), InvalidInput> {
    queue_name(queue)?;
    message_count(count)?;
    visibility(
        "visibility timeout",
        visibility_timeout,
        std::time::Duration::from_secs(1),
    )
}

/// Checks a Peek Messages: the queue's name and the count (1–32).
pub fn peek_messages(queue: &str, count: u32) -> Result<(), InvalidInput> {
    queue_name(queue)?;
    message_count(count)
}

/// Checks an Update Message: the queue's name, the message's handles, the
/// visibility timeout (0 to 7 days) and the new text, if any.
pub fn update_message(
    queue: &str,
    id: &str,
    pop_receipt: &str,
    visibility_timeout: std::time::Duration,
    text: Option<&str>,
) -> Result<(), InvalidInput> {
    delete_message(queue, id, pop_receipt)?;
    visibility(
        "visibility timeout",
        visibility_timeout,
        std::time::Duration::ZERO,
    )?;
    text.map_or(Ok(()), message_text)
}

/// Checks a Delete Message: the queue's name and the message's handles.
pub fn delete_message(queue: &str, id: &str, pop_receipt: &str) -> Result<(), InvalidInput> {
    queue_name(queue)?;
    message_handle("message id", id)?;
    message_handle("pop receipt", pop_receipt)
}

/// Checks a blob name: 1–1,024 characters.
pub fn blob_name(name: &str) -> Result<(), InvalidInput> {
    let len = name.chars().count();
    if len == 0 || len > 1024 {
        return Err(InvalidInput::BlobName {
            name: name.to_owned(),
            reason: "must be 1 to 1024 characters long",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::checks::{batch, batch_payload_size, operation_payload_bound};
    use crate::error::Error;

    /// A plain key byte is exactly an ASCII character the store allows in
    /// keys: the fast pass of [`key`](super::key) decides as the slow one.
    #[test]
    fn plain_bytes_are_the_allowed_ascii_ones() {
        for b in 0..=u8::MAX {
            assert_eq!(
                is_plain_key_byte(b),
                b.is_ascii() && !is_forbidden_key_char(char::from(b)),
                "{b:#x}"
            );
        }
    }

    /// A batch whose bound is over 4 MiB but whose exact size is not passes;
    /// 100 bytes more and it is refused.
    #[test]
    fn batch_size_is_exact_at_the_limit() {
        use crate::backend::BatchOperation;
        let make = |fill: usize| -> Vec<BatchOperation> {
            (0..100)
                .map(|i| {
                    let mut e = Entity::new("p", format!("r{i:03}"));
                    e.insert("A", "a".repeat(fill.min(32_000)));
                    e.insert("B", "b".repeat(fill.saturating_sub(32_000)));
                    for k in 0..200 {
                        e.insert(format!("N{k}"), 0_i64);
                    }
                    BatchOperation::Insert(e)
                })
                .collect()
        };
        let base = batch_payload_size(&make(0));
        let fill = (MAX_BATCH_PAYLOAD - base) / 100;
        let fits = make(fill);
        assert!(batch_payload_size(&fits) <= MAX_BATCH_PAYLOAD);
        let bound: usize = fits.iter().map(operation_payload_bound).sum();
        assert!(bound > MAX_BATCH_PAYLOAD, "the bound alone would refuse it");
        assert!(batch(&fits).is_ok());
        let over = make(fill + 1);
        assert!(matches!(
            batch(&over),
            Err(Error::Invalid(InvalidInput::BatchTooLarge { .. }))
        ));
    }

    #[test]
    fn table_names() {
        for ok in ["abc", "MyTable", "a12", &"a".repeat(63)] {
            assert!(table_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            &"a".repeat(64),
            "1abc",
            "a-bc",
            "a_bc",
            "ÄBC",
            "Tables",
            "tables",
            "TABLES",
            "",
        ] {
            assert!(
                matches!(table_name(bad), Err(InvalidInput::TableName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn keys_and_lengths() {
        assert!(key(KeyKind::RowKey, "").is_ok());
        assert!(key(KeyKind::RowKey, &"a".repeat(512)).is_ok());
        assert!(key(KeyKind::RowKey, &"é".repeat(512)).is_ok());
        assert!(matches!(
            key(KeyKind::RowKey, &"a".repeat(513)),
            Err(InvalidInput::KeyTooLong { utf16_len: 513, .. })
        ));
        assert!(matches!(
            key(KeyKind::PartitionKey, &"\u{1F600}".repeat(300)),
            Err(InvalidInput::KeyTooLong {
                utf16_len: 600,
                kind: KeyKind::PartitionKey,
                ..
            })
        ));
        for c in [
            '/', '\\', '#', '?', '\0', '\t', '\n', '\r', '\u{1F}', '\u{7F}', '\u{9F}',
        ] {
            assert!(
                matches!(key(KeyKind::PartitionKey, &format!("a{c}b")), Err(InvalidInput::KeyForbiddenCharacter { character, .. }) if character == c),
                "{c:?}"
            );
        }
        for c in ['\'', '%', '+', ' ', '&', '*', '\u{A0}'] {
            assert!(key(KeyKind::RowKey, &format!("a{c}b")).is_ok(), "{c:?}");
        }
    }

    #[test]
    fn property_names() {
        assert!(property_name("Name").is_ok());
        assert!(property_name("_x1").is_ok());
        assert!(property_name(&"n".repeat(255)).is_ok());
        assert_eq!(property_name(""), Err(InvalidInput::PropertyNameEmpty));
        assert!(matches!(
            property_name(&"n".repeat(256)),
            Err(InvalidInput::PropertyNameTooLong { len: 256, .. })
        ));
        for bad in ["a-b", "1abc", "a b", "a.b", "odata.foo", "$x"] {
            assert!(
                matches!(
                    property_name(bad),
                    Err(InvalidInput::PropertyNameInvalid { .. })
                ),
                "{bad}"
            );
        }
        for reserved in ["PartitionKey", "RowKey", "Timestamp"] {
            assert!(matches!(
                property_name(reserved),
                Err(InvalidInput::PropertyNameReserved { .. })
            ));
        }
    }

    #[test]
    fn container_names() {
        assert!(container_name("offload").is_ok());
        assert!(container_name("a-1-b").is_ok());
        for bad in ["ab", "Abc", "-abc", "abc-", "a--b", "a_b"] {
            assert!(container_name(bad).is_err(), "{bad}");
        }
        assert!(blob_name("").is_err());
        assert!(blob_name(&"x".repeat(1025)).is_err());
        assert!(blob_name("tbl/pk/rk/prop").is_ok());
    }
}
