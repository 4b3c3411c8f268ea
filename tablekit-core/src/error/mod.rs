//! The one error type every backend maps onto.
//!
//! Variants are grouped by meaning, not by where the failure came from: a missing
//! entity is [`Error::EntityNotFound`] whether the in-memory backend or the REST
//! backend noticed it. Every limit of the store has its own [`InvalidInput`]
//! variant naming the table, key or property at fault, so callers can match on
//! the rule that was broken rather than parse a message.

use std::time::Duration;

mod encryption;
mod input;

pub use encryption::EncryptionError;
pub use input::{InvalidInput, KeyKind, RowContext, SchemaError, ValueError};

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
    /// `Table` settle this themselves where the store can
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
    /// `Buckets` dropped: refused for good, since
    /// periods only move forward (a table brought back would hold one row).
    #[error("table `{table}` is a period that was dropped; writes there are refused for good")]
    PeriodDropped {
        /// The dropped period's table.
        table: String,
    },
    /// A change feed consumer is behind what the feed keeps: changes after
    /// its checkpoint in this partition were trimmed (see
    /// `tablekit::changes::Changes::trim`). Nothing is
    /// skipped silently: start the consumer again from the oldest change
    /// kept or from now, and rebuild what it feeds if it must see every
    /// change.
    #[error(
        "change feed consumer `{consumer}` is behind partition {partition_key:?} of table `{table}`: \
         its checkpoint is change {checkpoint}, and the changes up to {trimmed} were trimmed"
    )]
    ChangesTrimmed {
        /// The table.
        table: String,
        /// The stored PartitionKey.
        partition_key: String,
        /// The consumer.
        consumer: String,
        /// The consumer's checkpoint in the partition.
        checkpoint: u64,
        /// The last change number trimmed.
        trimmed: u64,
    },
    /// This handle of a change feed consumer without leases was taken over
    /// by a newer one of the same name (another process, or another task,
    /// reading the same consumer), so that a change is not delivered to
    /// both: this handle reads no more. Give each instance its share with
    /// `tablekit::changes::Consumer::leased`, or let one
    /// handle read.
    #[error(
        "change feed consumer `{consumer}` of table `{table}` was taken over by a newer handle of the \
         same name: this one reads no more (give instances their share with `Consumer::leased`, or \
         let one handle read)"
    )]
    ConsumerReplaced {
        /// The table.
        table: String,
        /// The consumer.
        consumer: String,
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
    /// `tablekit::log`).
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
    /// one the conflict policy stops at (see `tablekit::copy::import_table`).
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
    /// A line of an import that is not a row at all (not a JSON object,
    /// or a value its annotation does not fit), or that cannot be read
    /// (not UTF-8, say); see `tablekit::copy::import_table`.
    #[error("line {line} of the import into `{table}` {problem}")]
    ImportText {
        /// The table imported into.
        table: String,
        /// The line, counted from 1.
        line: u64,
        /// What is wrong with it: `is not a row: …` or `cannot be read: …`.
        problem: String,
    },
    /// A stored row does not fit the typed entity it was read as.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// An encrypted property could not be sealed or opened: a key missing
    /// or wrong, or a stored value that does not decrypt. Nothing was
    /// stored or returned.
    #[error(transparent)]
    Encryption(#[from] EncryptionError),
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
    /// The store was made by a version of the library that stores its data
    /// in another format, which this version does not read.
    Format,
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
            StorageFailure::Format => "the store's format is not this version's",
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
            Error::ChangesTrimmed { .. } => "ChangesTrimmed",
            Error::ConsumerReplaced { .. } => "ConsumerReplaced",
            Error::Credential { .. } => "Credential",
            Error::NotSupported { .. } => "NotSupported",
            Error::LogRecord { .. } => "LogRecord",
            Error::Decode { .. } => "Decode",
            Error::Service { .. } => "Service",
            Error::ImportLine { .. } => "ImportLine",
            Error::ImportText { .. } => "ImportText",
            Error::Schema(_) => "Schema",
            Error::Encryption(_) => "Encryption",
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
