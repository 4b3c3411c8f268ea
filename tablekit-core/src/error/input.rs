//! What is wrong with a value given or read: [`InvalidInput`] for input
//! the store would refuse, [`SchemaError`] for a row that does not read as
//! its type, and the parts they name.

/// The row a [`SchemaError`] was met in: its keys, and its kind and the
/// schema version it was written with, where the row names them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowContext {
    /// The row's PartitionKey.
    pub partition_key: String,
    /// The row's RowKey.
    pub row_key: String,
    /// The kind the row was read as, if the type has one.
    pub kind: Option<&'static str>,
    /// The schema version stored in the row (`_Version`), if any.
    pub version: Option<i64>,
}

impl RowContext {
    /// A row's context: its keys, the kind it was read as and its stored
    /// schema version.
    pub fn new(
        partition_key: impl Into<String>,
        row_key: impl Into<String>,
        kind: Option<&'static str>,
        version: Option<i64>,
    ) -> RowContext {
        RowContext {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            kind,
            version,
        }
    }
}

impl std::fmt::Display for RowContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row ({:?}, {:?})", self.partition_key, self.row_key)?;
        if let Some(kind) = self.kind {
            write!(f, " of kind `{kind}`")?;
        }
        if let Some(version) = self.version {
            write!(f, " version {version}")?;
        }
        Ok(())
    }
}

/// `" in {row}"`, or nothing for no row.
fn in_row(row: &Option<Box<RowContext>>) -> String {
    row.as_ref()
        .map_or_else(String::new, |row| format!(" in {row}"))
}

impl InvalidInput {
    /// The mismatch of the first of `fields` (name, what a checkpoint names,
    /// what the `job` resumed names) whose two sides differ: the error a
    /// resume from another job's checkpoint is refused with.
    #[doc(hidden)]
    pub fn first_mismatch(
        job: &'static str,
        fields: impl IntoIterator<Item = (&'static str, String, String)>,
    ) -> Option<InvalidInput> {
        fields
            .into_iter()
            .find(|(_, theirs, ours)| theirs != ours)
            .map(
                |(field, checkpoint, current)| InvalidInput::CheckpointMismatch {
                    job,
                    field,
                    checkpoint: checkpoint.into(),
                    current: current.into(),
                },
            )
    }
}

impl SchemaError {
    /// The error with the row it was met in, unless it names one already.
    pub fn in_row(mut self, context: impl FnOnce() -> RowContext) -> SchemaError {
        match &mut self {
            SchemaError::Property { row, .. } | SchemaError::UnsupportedVersion { row, .. }
                if row.is_none() =>
            {
                *row = Some(Box::new(context()));
            }
            _ => {}
        }
        self
    }
}

/// Why a stored row cannot be read as a typed entity. Never a wrong value:
/// tablekit refuses the row instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The row belongs to another entity kind.
    #[error("row {row_key:?} is not of kind `{expected}`")]
    WrongKind {
        /// The kind the reader expected.
        expected: &'static str,
        /// The RowKey of the row.
        row_key: String,
    },
    /// The row was written by a schema version this reader does not accept.
    #[error("kind `{kind}` version {found} is outside the supported versions {min}..={max}{}", in_row(.row))]
    UnsupportedVersion {
        /// The kind.
        kind: &'static str,
        /// The version stored in the row.
        found: i64,
        /// The oldest version the reader accepts.
        min: u32,
        /// The newest version the reader accepts.
        max: u32,
        /// The row, where known.
        row: Option<Box<RowContext>>,
    },
    /// The row's kind is not one of an enum of kinds.
    #[error("row {row_key:?} is of no kind among {expected:?}")]
    UnknownKind {
        /// The kinds the reader knows.
        expected: &'static [&'static str],
        /// The RowKey of the row.
        row_key: String,
    },
    /// A key could not be decoded into the typed key fields.
    #[error("{kind} {key:?} does not decode into ({fields}): {reason}")]
    KeyDecode {
        /// Which key.
        kind: KeyKind,
        /// The key as stored.
        key: String,
        /// The key fields, in order.
        fields: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A property is missing, has another type, or holds an unusable value.
    #[error("property `{property}`: {problem}{}", in_row(.row))]
    Property {
        /// The stored property name.
        property: String,
        /// What is wrong with it.
        problem: ValueError,
        /// The row, where known (every typed read names it).
        row: Option<Box<RowContext>>,
    },
    /// Two fields (one of them flattened) are stored under the same name.
    #[error("two fields are stored under the property name `{name}`")]
    NameCollision {
        /// The name.
        name: String,
    },
}

/// What is wrong with one property value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// The property is absent and the field is not optional.
    #[error("missing")]
    Missing,
    /// The property has another type than the field accepts.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// What the field accepts.
        expected: &'static str,
        /// What is stored.
        found: crate::edm::EdmType,
    },
    /// The value does not fit the field's type.
    #[error("{0}")]
    Invalid(String),
}

/// Where a key is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// The PartitionKey.
    PartitionKey,
    /// The RowKey.
    RowKey,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KeyKind::PartitionKey => "PartitionKey",
            KeyKind::RowKey => "RowKey",
        })
    }
}

/// A rule of the store that the input breaks. Each rule is its own variant and
/// names what is at fault. Raised by the shared validator
/// ([`crate::validate`]) before any backend acts, so every backend reports the
/// same bad input the same way.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidInput {
    /// A table name must be 3 to 63 ASCII letters and digits starting with a
    /// letter, and must not be `tables`.
    #[error("invalid table name `{name}`: {reason}")]
    TableName {
        /// The offending name.
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },
    /// A key holds a character the store forbids (`/`, `\`, `#`, `?`, U+0000–U+001F,
    /// U+007F–U+009F).
    #[error("{kind} {key:?} contains the forbidden character {character:?}")]
    KeyForbiddenCharacter {
        /// Which key.
        kind: KeyKind,
        /// The key.
        key: String,
        /// The first forbidden character.
        character: char,
    },
    /// A key is longer than 512 UTF-16 code units (1 KiB).
    #[error("{kind} is {utf16_len} UTF-16 code units long; the limit is {max}")]
    KeyTooLong {
        /// Which key.
        kind: KeyKind,
        /// The key.
        key: String,
        /// Its length in UTF-16 code units.
        utf16_len: usize,
        /// The limit.
        max: usize,
    },
    /// A property name is empty.
    #[error("a property name is empty")]
    PropertyNameEmpty,
    /// A property name is longer than 255 characters.
    #[error("property name `{name}` is {len} characters long; the limit is {max}")]
    PropertyNameTooLong {
        /// The name.
        name: String,
        /// Its length in characters.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A property name is not an identifier (letters, digits and `_`, not
    /// starting with a digit; `-` in particular is refused by the service).
    #[error("property name `{name}` contains the character {character:?}, which the store refuses")]
    PropertyNameInvalid {
        /// The name.
        name: String,
        /// The first offending character.
        character: char,
    },
    /// A property uses one of the names the store keeps for itself
    /// (`PartitionKey`, `RowKey`, `Timestamp`) or an `odata.` name.
    #[error("property name `{name}` is reserved by the store")]
    PropertyNameReserved {
        /// The name.
        name: String,
    },
    /// The same property name appears twice.
    #[error("property `{name}` is given more than once")]
    DuplicateProperty {
        /// The name.
        name: String,
    },
    /// An entity has more than 252 custom properties.
    #[error("entity ({partition_key:?}, {row_key:?}) has {count} properties; the limit is {max}")]
    TooManyProperties {
        /// PartitionKey of the entity.
        partition_key: String,
        /// RowKey of the entity.
        row_key: String,
        /// How many properties it has. When the service refused a merge
        /// for it (the REST backend), the least it can be: one past the
        /// limit, since the service does not say.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A string property is longer than the library's limit of 32,000 UTF-16 code
    /// units (the service's exact cut-off lies between 32,000 and 32,768).
    #[error(
        "string property `{property}` is {utf16_len} UTF-16 code units long; the limit is {max}"
    )]
    StringTooLong {
        /// The property.
        property: String,
        /// Its length in UTF-16 code units.
        utf16_len: usize,
        /// The limit.
        max: usize,
    },
    /// A binary property is longer than the library's limit of 64,000 bytes.
    #[error("binary property `{property}` is {len} bytes long; the limit is {max}")]
    BinaryTooLong {
        /// The property.
        property: String,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The entity is larger than 1 MiB by the service's size formula.
    #[error(
        "entity ({partition_key:?}, {row_key:?}) is {size} bytes by the service's size formula; the limit is {max}"
    )]
    EntityTooLarge {
        /// PartitionKey of the entity.
        partition_key: String,
        /// RowKey of the entity.
        row_key: String,
        /// Its size by the formula. When the service refused it (the REST
        /// backend), the least it can be: one past the limit, since the
        /// service does not say.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A row under a RowKey tablekit keeps for its own rows (outbox records
    /// and fences start with `~tk|`).
    #[error("RowKey {row_key:?} is reserved: RowKeys starting with `~tk|` are tablekit's own")]
    ReservedRowKey {
        /// The RowKey.
        row_key: String,
    },
    /// A batch has no operations.
    #[error("a batch needs at least one operation")]
    BatchEmpty,
    /// A batch has more than 100 operations.
    #[error("a batch has {count} operations; the limit is {max}")]
    BatchTooManyOperations {
        /// How many it has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Operations of one batch name different PartitionKeys.
    #[error(
        "batch operation {index} targets PartitionKey {found:?}, but the batch's partition is {expected:?}"
    )]
    BatchPartitionMismatch {
        /// 0-based index of the first operation with another PartitionKey.
        index: usize,
        /// The PartitionKey of operation 0.
        expected: String,
        /// The PartitionKey of operation `index`.
        found: String,
    },
    /// Two operations of one batch address the same entity.
    #[error("batch operations {first} and {index} both address the entity with RowKey {row_key:?}")]
    BatchDuplicateEntity {
        /// 0-based index of the first operation on that entity.
        first: usize,
        /// 0-based index of the repeated operation.
        index: usize,
        /// The RowKey addressed twice.
        row_key: String,
    },
    /// The batch's payload is larger than 4 MiB.
    #[error("the batch payload is {size} bytes; the limit is {max}")]
    BatchTooLarge {
        /// Estimated payload size in bytes (see [`crate::backend::checks::batch_payload_size`]).
        size: usize,
        /// The limit.
        max: usize,
    },
    /// An index entity (one row listing the entities that share a value)
    /// would outgrow a row: the value is shared by too many entities for a
    /// `list` index.
    #[error(
        "the `list` index `{index}` lists {entries} entities for {value:?}, more than one row holds (at most {max_chars} characters of RowKeys); use an index without `list` for values shared this widely"
    )]
    IndexListFull {
        /// The index's name.
        index: &'static str,
        /// The value, as encoded in the index entity's RowKey.
        value: String,
        /// How many entities the list would hold.
        entries: usize,
        /// How many characters of RowKeys a list holds at most.
        max_chars: usize,
    },
    /// A filter has more than 15 comparisons.
    #[error("the filter has {count} comparisons; the limit is {max}")]
    FilterTooComplex {
        /// How many comparisons it has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A filter nests deeper than [`crate::validate::limits::MAX_FILTER_DEPTH`].
    #[error("the filter nests {depth} levels deep; the limit is {max}")]
    FilterTooDeep {
        /// How deep it nests (at least this deep, when parsing stopped early).
        depth: usize,
        /// The limit.
        max: usize,
    },
    /// A filter names something that is not a property: only valid property
    /// names (and `PartitionKey`, `RowKey`, `Timestamp`) may stand in a filter,
    /// so no name can change the structure of a query.
    #[error("the filter names `{name}`, which is not a property name the store accepts")]
    FilterPropertyName {
        /// The name as given.
        name: String,
        /// Why it is refused.
        #[source]
        reason: Box<InvalidInput>,
    },
    /// A filter string could not be parsed.
    #[error("invalid filter at byte {position}: {reason}")]
    FilterSyntax {
        /// Byte offset of the problem.
        position: usize,
        /// What is wrong.
        reason: String,
    },
    /// `top` must be between 1 and 1,000.
    #[error("top = {top} is out of range; it must be between 1 and {max}")]
    TopOutOfRange {
        /// The value given.
        top: u32,
        /// The limit.
        max: u32,
    },
    /// A continuation token could not be read.
    #[error("invalid continuation token: {reason}")]
    ContinuationToken {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A page cursor could not be read, or belongs to another query.
    #[error("invalid cursor: {reason}")]
    Cursor {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A checkpoint handed to resume a long job (a migration, a copy)
    /// belongs to another job: one of what it names differs.
    #[error(
        "the checkpoint is of another {job}: its {field} is {checkpoint}, this {job}'s is {current}"
    )]
    CheckpointMismatch {
        /// The kind of job (`migration`, `copy`).
        job: &'static str,
        /// What differs (`table`, `filter`, …).
        field: &'static str,
        /// What the checkpoint names.
        checkpoint: Box<str>,
        /// What the job resumed names.
        current: Box<str>,
    },
    /// A DateTime is outside 1601-01-01T00:00:00Z … 9999-12-31T23:59:59.9999999Z or
    /// is not a valid date-time.
    #[error("invalid DateTime {value:?}: {reason}")]
    DateTime {
        /// The offending value as text.
        value: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Text that should be JSON of some shape (an entity's object, a query
    /// response) is not.
    #[error("not {expected}: {reason}")]
    Json {
        /// What the text should be (`a JSON object`, say).
        expected: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A number does not fit the digits of its zero-padded key part
    /// ([`Padded`](crate::key::Padded)).
    #[error("{value} has more than {digits} digits, the width of its zero-padded key part")]
    TooManyDigits {
        /// The number.
        value: u64,
        /// The key part's width.
        digits: u32,
    },
    /// A property value in JSON does not fit the type it is annotated with.
    #[error("property `{property}`: {reason}")]
    PropertyValue {
        /// The property.
        property: String,
        /// What is wrong.
        reason: String,
    },
    /// A blob container name breaks the service's rules (3–63 characters of
    /// lower-case letters, digits and single hyphens, starting and ending with a
    /// letter or digit).
    #[error("invalid blob container name `{name}`: {reason}")]
    ContainerName {
        /// The name.
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },
    /// The encoded key of a typed entity is longer than 512 UTF-16 code units.
    #[error(
        "{kind} built from ({fields}) is {utf16_len} UTF-16 code units long; the limit is {max}"
    )]
    EncodedKeyTooLong {
        /// Which key.
        kind: KeyKind,
        /// The key fields, in order.
        fields: &'static str,
        /// The encoded length.
        utf16_len: usize,
        /// The limit.
        max: usize,
    },
    /// An update changed a key field of the entity it updates.
    #[error(
        "the update changed the keys of entity ({partition_key:?}, {row_key:?}); delete and insert to move it"
    )]
    KeyChanged {
        /// The PartitionKey read.
        partition_key: String,
        /// The RowKey read.
        row_key: String,
    },
    /// A change feed consumer's name breaks its rule (1–63 letters, digits,
    /// `-`, `_` or `.`).
    #[error("invalid change feed consumer name `{name}`: {reason}")]
    ConsumerName {
        /// The name.
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },
    /// A `ChangeBatch` given to another
    /// consumer's `commit` than the one
    /// that read it: it would move that consumer past changes it never
    /// read.
    #[error(
        "the change batch read by {read_by} cannot be committed by {consumer}: commit a batch \
         with the consumer that polled it"
    )]
    ForeignChangeBatch {
        /// The consumer that read the batch, and its table:
        /// "consumer `search` of table `Orders`".
        read_by: String,
        /// The consumer asked to commit it, and its table, in that form.
        consumer: String,
    },
    /// A queue name breaks the service's rules (3–63 characters of
    /// lower-case letters, digits and single hyphens, starting and ending
    /// with a letter or digit).
    #[error("invalid queue name `{name}`: {reason}")]
    QueueName {
        /// The name.
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },
    /// A message's text is longer than a queue message may be.
    #[error("the message is {bytes} bytes of UTF-8; the limit is {max}")]
    MessageTooLarge {
        /// Its length. When the service refused it (the REST backend), the
        /// least it can be: one past the limit, since the service does not
        /// say.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A message's text holds a character that the service's XML cannot
    /// carry (a control character other than tab, line feed and carriage
    /// return, or U+FFFE / U+FFFF).
    #[error(
        "the message holds the character {character:?} at byte {position}, which a queue message cannot carry"
    )]
    MessageCharacter {
        /// The character.
        character: char,
        /// Its byte offset in the text.
        position: usize,
    },
    /// A count of messages to get or peek outside 1–32.
    #[error("{count} messages asked for; a get or peek returns 1 to {max}")]
    MessageCount {
        /// The count asked for.
        count: u32,
        /// The most.
        max: u32,
    },
    /// A visibility timeout, delay or time to live the service does not take.
    #[error("{what} of {duration:?}: {reason}")]
    QueueDuration {
        /// Which duration (`visibility timeout`, `visibility delay`, `time to live`).
        what: &'static str,
        /// The duration given.
        duration: std::time::Duration,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A message id or pop receipt that cannot be one (empty).
    #[error("the {what} is empty")]
    MessageHandle {
        /// `message id` or `pop receipt`.
        what: &'static str,
    },
    /// A blob name is empty or longer than 1,024 characters.
    #[error("invalid blob name `{name}`: {reason}")]
    BlobName {
        /// The name.
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },
}
