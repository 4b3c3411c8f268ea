//! The one error type every backend maps onto.
//!
//! Variants are grouped by meaning, not by where the failure came from: a missing
//! entity is [`Error::EntityNotFound`] whether the in-memory backend or the REST
//! backend noticed it. Every limit of the store has its own [`InvalidInput`]
//! variant naming the table, key or property at fault, so callers can match on
//! the rule that was broken rather than parse a message.

use std::time::Duration;

/// A `Result` whose error is tablekit's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The future of a call that takes key arguments (`Table::get`,
/// `Table::exists`, an index's `get`, …): await it as the result of an
/// `async fn`. The keys are encoded when the method is called, the store is
/// asked when the future is awaited; a key that does not encode is the
/// future's error.
///
/// Such methods return this boxed future rather than being `async fn`s so
/// that a key argument of the wrong type is one compiler error, on the
/// argument (an `async fn`'s future repeats its arguments' bounds, and the
/// compiler reports the mistake again where the future is made and where it
/// is awaited).
pub type Call<'a, R> = futures::future::BoxFuture<'a, Result<R>>;

/// Everything that can go wrong talking to a table or blob store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input breaks one of the store's rules; nothing was sent or changed.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),

    /// The table does not exist.
    #[error("table `{table}` does not exist")]
    TableNotFound {
        /// The table name as given.
        table: String,
    },
    /// A table of that name (compared case-insensitively) already exists.
    #[error("table `{table}` already exists")]
    TableAlreadyExists {
        /// The table name as given.
        table: String,
    },
    /// The table was deleted a short while ago and the service is still removing it.
    #[error("table `{table}` is being deleted; try again later or use a new name")]
    TableBeingDeleted {
        /// The table name as given.
        table: String,
    },
    /// No entity has this PartitionKey and RowKey.
    #[error("entity ({partition_key:?}, {row_key:?}) does not exist in table `{table}`")]
    EntityNotFound {
        /// Table that was addressed.
        table: String,
        /// PartitionKey that was addressed.
        partition_key: String,
        /// RowKey that was addressed.
        row_key: String,
    },
    /// An insert met an entity with the same PartitionKey and RowKey.
    #[error("entity ({partition_key:?}, {row_key:?}) already exists in table `{table}`")]
    EntityAlreadyExists {
        /// Table that was addressed.
        table: String,
        /// PartitionKey of the existing entity.
        partition_key: String,
        /// RowKey of the existing entity.
        row_key: String,
    },
    /// A write would give a unique index a value another entity of the
    /// partition already holds; nothing was written.
    #[error(
        "unique index `{index}` of table `{table}` already holds {value:?} in partition {partition_key:?} (held by row {held_by:?})"
    )]
    UniqueViolation {
        /// Table that was addressed.
        table: String,
        /// PartitionKey of the entity (and of its index rows).
        partition_key: String,
        /// The index's name, as declared on the type.
        index: &'static str,
        /// The indexed value, as encoded in the index row's RowKey.
        value: String,
        /// The RowKey of the entity that holds the value.
        held_by: String,
    },
    /// An `If-Match` ETag did not match the entity's current ETag: another writer
    /// changed it since it was read.
    #[error(
        "entity ({partition_key:?}, {row_key:?}) in table `{table}` was changed by another writer (ETag mismatch)"
    )]
    PreconditionFailed {
        /// Table that was addressed.
        table: String,
        /// PartitionKey that was addressed.
        partition_key: String,
        /// RowKey that was addressed.
        row_key: String,
    },
    /// A write from an older version of an entity type over a row a newer
    /// version wrote: refused, as it would drop the fields the older type
    /// does not know (during a rolling deploy, while old and new programs
    /// share the table). Nothing was written.
    #[error(
        "entity ({partition_key:?}, {row_key:?}) in table `{table}` is stored as version {stored}; this program writes version {writing} and would drop what it does not know"
    )]
    NewerVersion {
        /// Table that was addressed.
        table: String,
        /// PartitionKey that was addressed.
        partition_key: String,
        /// RowKey that was addressed.
        row_key: String,
        /// The version the row holds.
        stored: i64,
        /// The version this program writes.
        writing: u32,
    },
    /// An operation of an entity group transaction failed; nothing of the
    /// transaction was applied.
    #[error("batch operation {index} failed: {source}")]
    BatchFailed {
        /// 0-based index of the failing operation in the batch.
        index: usize,
        /// Why that operation failed.
        #[source]
        source: Box<Error>,
    },

    /// The blob container does not exist.
    #[error("blob container `{container}` does not exist")]
    ContainerNotFound {
        /// Container name.
        container: String,
    },
    /// The blob container already exists.
    #[error("blob container `{container}` already exists")]
    ContainerAlreadyExists {
        /// Container name.
        container: String,
    },
    /// The blob does not exist.
    #[error("blob `{container}/{name}` does not exist")]
    BlobNotFound {
        /// Container name.
        container: String,
        /// Blob name.
        name: String,
    },
    /// A create-only put (`If-None-Match: *`) met an existing blob.
    #[error("blob `{container}/{name}` already exists")]
    BlobAlreadyExists {
        /// Container name.
        container: String,
        /// Blob name.
        name: String,
    },
    /// A blob's `If-Match` ETag did not match.
    #[error("blob `{container}/{name}` was changed by another writer (ETag mismatch)")]
    BlobConditionNotMet {
        /// Container name.
        container: String,
        /// Blob name.
        name: String,
    },

    /// The queue does not exist.
    #[error("queue `{queue}` does not exist")]
    QueueNotFound {
        /// Queue name.
        queue: String,
    },
    /// A queue of this name was deleted less than about 30 seconds ago and
    /// cannot be created yet.
    #[error("queue `{queue}` is being deleted; try again later")]
    QueueBeingDeleted {
        /// Queue name.
        queue: String,
    },
    /// The message is not in the queue (deleted, or expired).
    #[error("message `{id}` is not in queue `{queue}`")]
    MessageNotFound {
        /// Queue name.
        queue: String,
        /// Message id.
        id: String,
    },
    /// The pop receipt is not the message's latest: it was delivered again
    /// or updated since, and whoever holds the newer receipt owns it now.
    #[error("pop receipt of message `{id}` in queue `{queue}` is no longer valid")]
    PopReceiptMismatch {
        /// Queue name.
        queue: String,
        /// Message id.
        id: String,
    },

    /// A failure that may go away if the same request is sent again: a timeout,
    /// a dropped connection, HTTP 500 or 503.
    #[error("transient failure: {message}")]
    Transient {
        /// What happened.
        message: String,
    },
    /// A write was sent, but its answer never came (a timeout, a dropped
    /// connection, a response lost on the way back, a server error that says
    /// it may or may not have acted): it may have been applied or not.
    /// Unlike [`Error::Transient`], sending the same write again is not safe
    /// in general, as it may apply twice. The typed writes of
    /// [`Table`](crate::Table) settle this themselves where the store can
    /// tell (by reading the row back); they return it only where it cannot.
    #[error("the outcome of the write is unknown (it may have been applied): {message}")]
    OutcomeUnknown {
        /// What happened.
        message: String,
    },
    /// The service is throttling this client (HTTP 503 Server Busy); back off.
    #[error("throttled by the service")]
    Throttled {
        /// How long the service asked the client to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// A store kept on this machine's disk could not do its part: another
    /// process holds it, the disk is full, its file is damaged, or the
    /// operating system refused a read or write. The failed operation was not
    /// applied; every write acknowledged before it is kept.
    #[error("storage at {path}: {failure}: {message}")]
    Storage {
        /// The store's directory or file.
        path: String,
        /// Which kind of failure.
        failure: StorageFailure,
        /// What the storage engine or the operating system said.
        message: String,
    },
    /// A client's configuration is unusable (a connection string that cannot
    /// be read, say); nothing was sent.
    #[error("configuration: {message}")]
    Configuration {
        /// What is wrong.
        message: String,
    },
    /// A write into a period of a time-bucketed table that its
    /// [`Buckets`](crate::bucket::Buckets) dropped: refused for good, since
    /// periods only move forward (a table brought back would hold one row).
    #[error("table `{table}` is a period that was dropped; writes there are refused for good")]
    PeriodDropped {
        /// The dropped period's table.
        table: String,
    },
    /// Sign-in failed: the credential could not give a token (its source
    /// refused, or is not there), or the service refused the token it gave
    /// even after a fresh one was asked for. Nothing was applied.
    #[error("sign-in failed: {message}")]
    Credential {
        /// What the credential or the service said.
        message: String,
    },
    /// An operation that is not offered, by this backend or for this kind
    /// of entity: `operation` names it and says why, or what to use instead.
    #[error("not supported: {operation}")]
    NotSupported {
        /// Which operation.
        operation: &'static str,
    },
    /// A log record could not be written or read as its type (see
    /// [`crate::log`]).
    #[error("log record in {location}: {reason}")]
    LogRecord {
        /// Where: the blob and line, or the record being appended.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A response from the service could not be understood.
    #[error("could not decode the service's response: {message}")]
    Decode {
        /// What was wrong with it.
        message: String,
    },
    /// The service answered with an error this library has no variant for.
    #[error("service error {status} {code}: {message}")]
    Service {
        /// HTTP status code.
        status: u16,
        /// The service's error code (`x-ms-error-code`).
        code: String,
        /// The service's message.
        message: String,
    },
    /// A row of an import that was not written: one the store refuses, or
    /// one the conflict policy stops at (see [`crate::copy::import_table`]).
    #[error("line {line} of the import, row ({partition_key:?}, {row_key:?}): {source}")]
    ImportLine {
        /// The line, counted from 1.
        line: u64,
        /// The row's PartitionKey.
        partition_key: String,
        /// The row's RowKey.
        row_key: String,
        /// Why it was not written.
        source: Box<Error>,
    },
    /// A stored row does not fit the typed entity it was read as.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A row the store returned could not be read as an entity at all (a
    /// value outside the documented range, say, which an emulator accepted).
    /// The query's other rows are not lost: see
    /// [`QueryPage::undecodable`](crate::QueryPage::undecodable).
    #[error("row ({partition_key:?}, {row_key:?}) could not be read: {reason}")]
    UndecodableRow {
        /// Its PartitionKey, as far as it could be read.
        partition_key: String,
        /// Its RowKey, as far as it could be read.
        row_key: String,
        /// What is wrong with it.
        reason: InvalidInput,
    },
}

/// The kinds of [`Error::Storage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StorageFailure {
    /// Another process (or another handle in this one) has the store open.
    Locked,
    /// The disk, or the store's configured size limit, is full. Free space
    /// (or raise the limit): the store takes writes again.
    DiskFull,
    /// The store's file is not what the storage engine wrote: damaged by
    /// something other than a crash, which the engine recovers from.
    Damaged,
    /// The operating system refused a read or a write for another reason.
    Io,
    /// A write to a store opened read-only, or a read-only open of a store
    /// that must first be opened for writing (to recover it after a crash).
    ReadOnly,
}

impl std::fmt::Display for StorageFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StorageFailure::Locked => {
                "in use: another handle, in this process or another, has it open"
            }
            StorageFailure::DiskFull => "the disk is full",
            StorageFailure::Damaged => "the file is damaged",
            StorageFailure::Io => "an I/O error",
            StorageFailure::ReadOnly => "the store is read-only",
        })
    }
}

impl Error {
    /// True when sending the same request again may succeed (transient failures
    /// and throttling): the request was not applied. A write whose outcome is
    /// unknown is not transient ([`Error::is_outcome_unknown`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transient { .. } | Error::Throttled { .. })
    }

    /// True when a write may or may not have been applied
    /// ([`Error::OutcomeUnknown`]); read the store to know.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }

    /// The invalid-input rule this error reports, looking through a failed batch
    /// operation.
    pub fn invalid_input(&self) -> Option<&InvalidInput> {
        match self {
            Error::Invalid(invalid) => Some(invalid),
            Error::BatchFailed { source, .. } => source.invalid_input(),
            _ => None,
        }
    }

    /// Whether the error is about one row that could not be read (as an
    /// entity, or as the typed value asked for), not about the request.
    pub fn is_row_error(&self) -> bool {
        matches!(self, Error::UndecodableRow { .. } | Error::Schema(_))
    }

    /// The keys of the row this error is about, as far as it names them:
    /// (PartitionKey, RowKey).
    pub fn row_keys(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Error::UndecodableRow {
                partition_key,
                row_key,
                ..
            } => (Some(partition_key), Some(row_key)),
            Error::Schema(
                SchemaError::Property { row: Some(row), .. }
                | SchemaError::UnsupportedVersion { row: Some(row), .. },
            ) => (Some(&row.partition_key), Some(&row.row_key)),
            Error::Schema(
                SchemaError::WrongKind { row_key, .. } | SchemaError::UnknownKind { row_key, .. },
            ) => (None, Some(row_key)),
            Error::Schema(SchemaError::KeyDecode { kind, key, .. }) => match kind {
                KeyKind::PartitionKey => (Some(key), None),
                KeyKind::RowKey => (None, Some(key)),
            },
            Error::BatchFailed { source, .. } => source.row_keys(),
            Error::EntityNotFound {
                partition_key,
                row_key,
                ..
            }
            | Error::ImportLine {
                partition_key,
                row_key,
                ..
            }
            | Error::EntityAlreadyExists {
                partition_key,
                row_key,
                ..
            } => (Some(partition_key), Some(row_key)),
            _ => (None, None),
        }
    }

    /// The error's kind, as its variant's name (`EntityNotFound`,
    /// `PreconditionFailed`, …); for a failed transaction, the failed
    /// operation's. It names no key or value: spans and metrics record it
    /// as `error.type`.
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "InvalidInput",
            Error::TableNotFound { .. } => "TableNotFound",
            Error::TableAlreadyExists { .. } => "TableAlreadyExists",
            Error::TableBeingDeleted { .. } => "TableBeingDeleted",
            Error::EntityNotFound { .. } => "EntityNotFound",
            Error::EntityAlreadyExists { .. } => "EntityAlreadyExists",
            Error::UniqueViolation { .. } => "UniqueViolation",
            Error::PreconditionFailed { .. } => "PreconditionFailed",
            Error::NewerVersion { .. } => "NewerVersion",
            Error::BatchFailed { source, .. } => source.error_type(),
            Error::ContainerNotFound { .. } => "ContainerNotFound",
            Error::ContainerAlreadyExists { .. } => "ContainerAlreadyExists",
            Error::BlobNotFound { .. } => "BlobNotFound",
            Error::BlobAlreadyExists { .. } => "BlobAlreadyExists",
            Error::BlobConditionNotMet { .. } => "BlobConditionNotMet",
            Error::QueueNotFound { .. } => "QueueNotFound",
            Error::QueueBeingDeleted { .. } => "QueueBeingDeleted",
            Error::MessageNotFound { .. } => "MessageNotFound",
            Error::PopReceiptMismatch { .. } => "PopReceiptMismatch",
            Error::Transient { .. } => "Transient",
            Error::OutcomeUnknown { .. } => "OutcomeUnknown",
            Error::Throttled { .. } => "Throttled",
            Error::Storage { .. } => "Storage",
            Error::Configuration { .. } => "Configuration",
            Error::PeriodDropped { .. } => "PeriodDropped",
            Error::Credential { .. } => "Credential",
            Error::NotSupported { .. } => "NotSupported",
            Error::LogRecord { .. } => "LogRecord",
            Error::Decode { .. } => "Decode",
            Error::Service { .. } => "Service",
            Error::ImportLine { .. } => "ImportLine",
            Error::Schema(_) => "Schema",
            Error::UndecodableRow { .. } => "UndecodableRow",
        }
    }

    /// The HTTP status the service answers with for this error, where it
    /// is one of the service's answers (404 for a missing entity, 412 for a
    /// failed condition, …); `None` for errors of the client or the
    /// connection.
    pub fn status_code(&self) -> Option<u16> {
        Some(match self {
            Error::Invalid(_) => 400,
            Error::TableNotFound { .. }
            | Error::EntityNotFound { .. }
            | Error::ContainerNotFound { .. }
            | Error::BlobNotFound { .. }
            | Error::QueueNotFound { .. }
            | Error::MessageNotFound { .. } => 404,
            Error::TableAlreadyExists { .. }
            | Error::TableBeingDeleted { .. }
            | Error::EntityAlreadyExists { .. }
            | Error::ContainerAlreadyExists { .. }
            | Error::BlobAlreadyExists { .. }
            | Error::QueueBeingDeleted { .. } => 409,
            Error::PreconditionFailed { .. }
            | Error::BlobConditionNotMet { .. }
            | Error::PopReceiptMismatch { .. } => 412,
            Error::Throttled { .. } => 503,
            Error::BatchFailed { source, .. } => return source.status_code(),
            Error::Service { status, .. } => *status,
            _ => return None,
        })
    }

    /// Wraps this error as the failure of batch operation `index`.
    pub fn in_batch(self, index: usize) -> Error {
        Error::BatchFailed {
            index,
            source: Box::new(self),
        }
    }
}

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
    pub(crate) fn first_mismatch(
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
        /// How many properties it has.
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
        /// Its size by the formula.
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
        /// Its length.
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
