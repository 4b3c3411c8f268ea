//! [`Operation`]: the operations of the three contracts, by name: what
//! the fault layer aims at and the telemetry names a call by.

#[cfg(doc)]
use super::{EntityWrite, TableBackend};
#[cfg(doc)]
use crate::blob::BlobStore;
#[cfg(doc)]
use crate::queue::QueueStore;

/// The operations of the table, blob and queue contracts, to aim faults at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// [`TableBackend::create_table`]
    CreateTable,
    /// [`TableBackend::delete_table`]
    DeleteTable,
    /// [`TableBackend::list_tables`]
    ListTables,
    /// [`TableBackend::get_entity`]
    GetEntity,
    /// [`TableBackend::query_entities`]
    QueryEntities,
    /// [`TableBackend::write_entity`] of an [`EntityWrite::Insert`](EntityWrite::Insert)
    InsertEntity,
    /// [`TableBackend::write_entity`] of an [`EntityWrite::Update`](EntityWrite::Update)
    UpdateEntity,
    /// [`TableBackend::write_entity`] of an [`EntityWrite::Upsert`](EntityWrite::Upsert)
    UpsertEntity,
    /// [`TableBackend::write_entity`] of an [`EntityWrite::Delete`](EntityWrite::Delete)
    DeleteEntity,
    /// [`TableBackend::submit_transaction`]
    SubmitTransaction,
    /// [`BlobStore::create_container`]
    CreateContainer,
    /// [`BlobStore::delete_container`]
    DeleteContainer,
    /// [`BlobStore::put_blob`]
    PutBlob,
    /// [`BlobStore::get_blob`]
    GetBlob,
    /// [`BlobStore::delete_blob`]
    DeleteBlob,
    /// [`BlobStore::list_blobs`]
    ListBlobs,
    /// [`QueueStore::create_queue`]
    CreateQueue,
    /// [`QueueStore::delete_queue`]
    DeleteQueue,
    /// [`QueueStore::list_queues`]
    ListQueues,
    /// [`QueueStore::put_message`]
    PutMessage,
    /// [`QueueStore::get_messages`] (a write: it hides what it delivers)
    GetMessages,
    /// [`QueueStore::peek_messages`]
    PeekMessages,
    /// [`QueueStore::update_message`]
    UpdateMessage,
    /// [`QueueStore::delete_message`]
    DeleteMessage,
    /// [`QueueStore::clear_messages`]
    ClearMessages,
}

impl Operation {
    /// The table contract's operations on entities: reads, writes and
    /// transactions (what a count of a table store's requests sums).
    pub const ENTITY_OPERATIONS: [Operation; 7] = [
        Operation::GetEntity,
        Operation::QueryEntities,
        Operation::InsertEntity,
        Operation::UpdateEntity,
        Operation::UpsertEntity,
        Operation::DeleteEntity,
        Operation::SubmitTransaction,
    ];

    /// The name of the contract's method: what the telemetry of a call
    /// names its operation (`insert_entity`, `put_blob`, …).
    pub fn name(self) -> &'static str {
        match self {
            Operation::CreateTable => "create_table",
            Operation::DeleteTable => "delete_table",
            Operation::ListTables => "list_tables",
            Operation::GetEntity => "get_entity",
            Operation::QueryEntities => "query_entities",
            Operation::InsertEntity => "insert_entity",
            Operation::UpdateEntity => "update_entity",
            Operation::UpsertEntity => "upsert_entity",
            Operation::DeleteEntity => "delete_entity",
            Operation::SubmitTransaction => "submit_transaction",
            Operation::CreateContainer => "create_container",
            Operation::DeleteContainer => "delete_container",
            Operation::PutBlob => "put_blob",
            Operation::GetBlob => "get_blob",
            Operation::DeleteBlob => "delete_blob",
            Operation::ListBlobs => "list_blobs",
            Operation::CreateQueue => "create_queue",
            Operation::DeleteQueue => "delete_queue",
            Operation::ListQueues => "list_queues",
            Operation::PutMessage => "put_message",
            Operation::GetMessages => "get_messages",
            Operation::PeekMessages => "peek_messages",
            Operation::UpdateMessage => "update_message",
            Operation::DeleteMessage => "delete_message",
            Operation::ClearMessages => "clear_messages",
        }
    }

    /// Whether the operation changes the store (everything but reads,
    /// peeks and listings; a get of messages changes their visibility).
    pub fn is_write(self) -> bool {
        !matches!(
            self,
            Operation::ListTables
                | Operation::GetEntity
                | Operation::QueryEntities
                | Operation::GetBlob
                | Operation::ListBlobs
                | Operation::ListQueues
                | Operation::PeekMessages
        )
    }
}
