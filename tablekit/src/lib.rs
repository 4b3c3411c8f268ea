//! # tablekit
//!
//! Typed, correct access to PartitionKey/RowKey table stores: Azure Table
//! Storage, Cosmos DB for Table, and Azurite in development.
//!
//! This crate holds the parts every backend shares:
//! - the value model: [`Value`] (every EDM type), [`Entity`], [`DateTime`],
//!   [`ETag`], and the JSON wire form in [`json`];
//! - one validator, [`validate`], that checks every limit of the real service
//!   before anything is sent, with a typed [`InvalidInput`] per rule;
//! - the backend contracts [`TableBackend`] and [`BlobStore`], one async method
//!   per store operation, dyn-compatible, with the conveniences of
//!   [`TableBackendExt`];
//! - typed [`filter`]s that render to OData `$filter` text with correct escaping;
//! - [`layer`]s such as fault injection;
//! - with the `conformance` feature, the test suite every backend must pass.
//!
//! Backends live in their own crates: `tablekit-mem` (the strict in-memory
//! reference) and, later, `tablekit-azure` (REST).
//!
//! ```
//! use tablekit::{Entity, IfMatch, Query, TableBackend, TableBackendExt, UpdateMode, filter::prop};
//! use tablekit_mem::MemBackend;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let backend = MemBackend::new();
//! backend.create_table("people").await?;
//!
//! let ada = Entity::new("sales", "000123").with("Name", "Ada").with("Age", 36);
//! let etag = backend.insert_entity("people", &ada).await?;
//!
//! // Optimistic concurrency: the write is guarded by the ETag we hold.
//! let older = ada.clone().with("Age", 37);
//! backend.update_entity("people", &older, UpdateMode::Merge, &IfMatch::ETag(etag.clone())).await?;
//! let stale = backend.update_entity("people", &older, UpdateMode::Merge, &IfMatch::ETag(etag)).await;
//! assert!(matches!(stale, Err(tablekit::Error::PreconditionFailed { .. })));
//!
//! let query = Query::new().filter(prop("Age").ge(30));
//! let found = backend.query_all("people", query).await?;
//! assert_eq!(found.len(), 1);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
pub mod blob;
mod datetime;
mod entity;
mod error;
mod ext;
pub mod filter;
pub mod json;
pub mod key;
pub mod keyorder;
pub mod layer;
pub mod schema;
mod table;
pub mod validate;
mod value;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use backend::{
    BatchOperation, ContinuationToken, GetOptions, ListTablesOptions, Query, QueryPage,
    TableBackend, TablePage, UpdateMode,
};
pub use blob::{Blob, BlobPage, BlobProperties, BlobStore, ListBlobsOptions, PutCondition};
pub use datetime::DateTime;
pub use entity::{ETag, Entity, IfMatch, Properties};
pub use error::{Error, InvalidInput, KeyKind, Result, SchemaError, ValueError};
pub use ext::TableBackendExt;
pub use key::InvertedTime;
pub use schema::{EntityKinds, TableEntity, TableFields, UnknownKind};
pub use table::{
    BulkFailure, BulkReport, BulkWriter, Loaded, Table, TableBatch, TableQuery, UPDATE_ATTEMPTS,
};
pub use value::{EdmType, Value};

/// Re-exported so users and generated code name one version of these crates.
pub use uuid;

pub use tablekit_derive::{EntityKinds, TableEntity, TableFields};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
