//! # tablekit-core
//!
//! The part of [tablekit](https://docs.rs/tablekit) every backend stands on:
//! the value model ([`Value`], [`Entity`], [`DateTime`], [`ETag`]), the keys
//! and their order ([`key`], [`keyorder`]), the wire JSON ([`json`]), the
//! service's limits and their checks ([`validate`]), filters ([`filter`]),
//! the errors ([`Error`]), the clock ([`clock`]), and the three contracts a
//! store implements: [`TableBackend`], [`BlobStore`] and [`QueueStore`], with
//! the layers around them ([`layer`], [`telemetry`], [`pacing`]).
//!
//! A program uses this crate through `tablekit`, which re-exports all of it
//! at the same paths (`tablekit::Entity`, `tablekit::backend::…`). A backend
//! crate depends on this crate alone.
//!
//! ```
//! use tablekit_core::{Entity, Value, validate};
//!
//! let mut row = Entity::new("Sales", "EMP_0000000007");
//! row.insert("Name", Value::String("Ada".into()));
//! // The checks the service makes, made before a request is sent.
//! validate::entity(&row).expect("a valid entity");
//! assert_eq!(row.get("Name"), Some(&Value::String("Ada".into())));
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
pub mod blob;
pub mod clock;
#[doc(hidden)]
pub mod datetime;
#[doc(hidden)]
pub mod edm;
#[doc(hidden)]
pub mod entity;
#[doc(hidden)]
pub mod error;
pub mod filter;
pub mod json;
pub mod key;
pub mod keyorder;
pub mod layer;
#[doc(hidden)]
pub mod order;
pub mod pacing;
#[doc(hidden)]
pub mod props;
pub mod queue;
pub mod telemetry;
pub mod validate;
#[doc(hidden)]
pub mod value;

pub use backend::{
    BatchOperation, ContinuationToken, EntityWrite, GetOptions, ListTablesOptions, Query,
    QueryOrder, QueryPage, RowRef, RowVisitor, TableBackend, TableBackendExt, TablePage,
    UndecodableRow, UpdateMode,
};
pub use blob::{
    Blob, BlobPage, BlobProperties, BlobStore, BlobStoreExt, BlobTarget, ListBlobsOptions,
    PutCondition,
};
pub use datetime::DateTime;
pub use entity::{ETag, Entity, IfMatch, Properties, PropertyName};
pub use error::{
    Call, EncryptionError, Error, InvalidInput, KeyKind, Result, RowContext, SchemaError,
    StorageFailure, ValueError,
};
pub use key::InvertedTime;
pub use queue::QueueStore;
pub use value::{EdmType, Value, ValueRef};

/// Re-exported so backends and users name one version of this crate.
pub use uuid;

#[doc(hidden)]
pub use async_trait::async_trait as __async_trait;

/// The contracts, for [`serve!`] to name from another crate.
#[doc(hidden)]
pub mod __contracts {
    pub use crate::backend::TableBackend;
    pub use crate::blob::BlobStore;
    pub use crate::queue::QueueStore;
}
