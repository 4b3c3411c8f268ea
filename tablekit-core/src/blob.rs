//! The blob store contract, for values too large for a table row.
//!
//! One method per Blob service request, like [`crate::TableBackend`]. Blobs live
//! in containers; names are free-form paths (`tbl/pk/rk/prop`).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::datetime::DateTime;
use crate::entity::ETag;
use crate::error::Result;

/// The condition of a blob put.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PutCondition {
    /// Create or overwrite.
    #[default]
    None,
    /// Create only: fail with [`BlobAlreadyExists`](crate::Error::BlobAlreadyExists)
    /// if the blob exists (`If-None-Match: *`).
    IfNotExists,
    /// Overwrite only this version: fail with
    /// [`BlobConditionNotMet`](crate::Error::BlobConditionNotMet) otherwise
    /// (`If-Match`).
    IfMatch(ETag),
}

impl PutCondition {
    /// Whether a put under this condition may write the blob
    /// `container/name`, whose stored ETag is `existing` (`None`: no such
    /// blob); the Blob service's error when it may not. For stores that
    /// keep blobs themselves.
    ///
    /// # Errors
    /// [`BlobAlreadyExists`](crate::Error::BlobAlreadyExists) for
    /// `IfNotExists` over a blob, [`BlobConditionNotMet`](crate::Error::BlobConditionNotMet)
    /// for an `IfMatch` of another ETag or of no blob.
    pub fn check(&self, existing: Option<&ETag>, container: &str, name: &str) -> Result<()> {
        match self {
            PutCondition::IfNotExists if existing.is_some() => {
                Err(crate::error::Error::BlobAlreadyExists {
                    container: container.into(),
                    name: name.into(),
                })
            }
            PutCondition::IfMatch(tag) if existing != Some(tag) => {
                Err(crate::error::Error::BlobConditionNotMet {
                    container: container.into(),
                    name: name.into(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// What the store knows of a blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobProperties {
    /// The blob's name within its container.
    pub name: String,
    /// The version tag; a new one on every write.
    pub etag: ETag,
    /// Length in bytes.
    pub content_length: u64,
    /// MD5 of the content, as the service computes and checks it; all
    /// zeros when the store does not say (the Blob service keeps none for a
    /// blob written in blocks without one).
    pub content_md5: [u8; 16],
    /// Time of the last write.
    pub last_modified: DateTime,
}

/// A blob's content and properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// The bytes.
    pub data: Vec<u8>,
    /// The properties.
    pub properties: BlobProperties,
}

/// Options of a blob listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListBlobsOptions {
    /// Only names starting with this.
    pub prefix: Option<String>,
    /// At most this many in one page (1–5,000).
    pub max_results: Option<u32>,
    /// Where to resume, from a previous page's `next_marker`.
    pub marker: Option<String>,
}

impl ListBlobsOptions {
    /// The page size asked for: `max_results`, or 5,000 (at most 5,000).
    pub fn page_size(&self) -> u32 {
        let max = crate::validate::limits::MAX_LIST_RESULTS;
        self.max_results.unwrap_or(max).min(max)
    }

    /// Lists names starting with `prefix`.
    pub fn prefix(prefix: impl Into<String>) -> ListBlobsOptions {
        ListBlobsOptions {
            prefix: Some(prefix.into()),
            ..ListBlobsOptions::default()
        }
    }
}

/// One page of a blob listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlobPage {
    /// The blobs, sorted by name.
    pub blobs: Vec<BlobProperties>,
    /// Where the next page starts; `None` when this was the last page.
    pub next_marker: Option<String>,
}

/// The blob store, one method per REST operation.
///
/// # Contract
/// Run [`crate::validate::container_name`] and [`crate::validate::blob_name`]
/// first; map failures onto [`crate::Error`]'s blob variants.
#[async_trait]
pub trait BlobStore: Send + Sync + fmt::Debug {
    /// Creates a container. REST: `PUT /c?restype=container`.
    ///
    /// Errors: [`ContainerAlreadyExists`](crate::Error::ContainerAlreadyExists).
    async fn create_container(&self, container: &str) -> Result<()>;

    /// Deletes a container and its blobs. REST: `DELETE /c?restype=container`.
    async fn delete_container(&self, container: &str) -> Result<()>;

    /// Writes a block blob. REST: `PUT /c/b` with `x-ms-blob-type: BlockBlob`,
    /// `Content-MD5` and the condition's header.
    async fn put_blob(
        &self,
        container: &str,
        name: &str,
        data: Vec<u8>,
        condition: &PutCondition,
    ) -> Result<BlobProperties>;

    /// Reads a blob. REST: `GET /c/b`.
    ///
    /// Errors: [`BlobNotFound`](crate::Error::BlobNotFound),
    /// [`ContainerNotFound`](crate::Error::ContainerNotFound).
    async fn get_blob(&self, container: &str, name: &str) -> Result<Blob>;

    /// Deletes a blob, if `if_match` is `None` or names its current ETag.
    /// REST: `DELETE /c/b` with optional `If-Match`.
    async fn delete_blob(&self, container: &str, name: &str, if_match: Option<&ETag>)
    -> Result<()>;

    /// Lists blobs by name prefix, one page at a time. REST:
    /// `GET /c?restype=container&comp=list&prefix=…&maxresults=…&marker=…`.
    async fn list_blobs(&self, container: &str, options: &ListBlobsOptions) -> Result<BlobPage>;
}

/// Conveniences over every [`BlobStore`].
pub trait BlobStoreExt: BlobStore {
    /// Creates the container unless it exists; `true` if it was created.
    fn create_container_if_not_exists<'a>(
        &'a self,
        container: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            match self.create_container(container).await {
                Ok(()) => Ok(true),
                Err(crate::error::Error::ContainerAlreadyExists { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }
}

impl<T: BlobStore + ?Sized> BlobStoreExt for T {}

/// The methods of [`BlobStore`], listed once, as
/// [`table_methods`](crate::backend) lists those of `TableBackend`.
#[doc(hidden)]
#[macro_export]
macro_rules! blob_methods {
    ($($generate:tt)::+ ! ($($args:tt)*)) => {
        $($generate)::+! { $($args)*
            async create_container(container: &str) -> $crate::error::Result<()>, [$crate::backend::Operation::CreateContainer], [false];
            async delete_container(container: &str) -> $crate::error::Result<()>, [$crate::backend::Operation::DeleteContainer], [false];
            async put_blob(
                container: &str,
                name: &str,
                data: Vec<u8>,
                condition: &$crate::blob::PutCondition
            ) -> $crate::error::Result<$crate::blob::BlobProperties>, [$crate::backend::Operation::PutBlob], [false];
            async get_blob(container: &str, name: &str)
                -> $crate::error::Result<$crate::blob::Blob>, [$crate::backend::Operation::GetBlob], [false];
            async delete_blob(container: &str, name: &str, if_match: Option<&$crate::entity::ETag>)
                -> $crate::error::Result<()>, [$crate::backend::Operation::DeleteBlob], [false];
            async list_blobs(container: &str, options: &$crate::blob::ListBlobsOptions)
                -> $crate::error::Result<$crate::blob::BlobPage>, [$crate::backend::Operation::ListBlobs], [false];
        }
    };
}
pub(crate) use crate::blob_methods;

blob_methods!(crate::backend::forward_impls!(BlobStore));

/// The door checks of the blob contract: one function per method of
/// [`BlobStore`], named as the method and taking its arguments (a put's
/// data by reference), holding every check its input must pass on every
/// backend, as [`backend::door`](crate::backend::door) does for tables.
/// The [`Served`](crate::layer::Served) layer calls them; no backend does.
pub mod door {
    use super::{ListBlobsOptions, PutCondition};
    use crate::entity::ETag;
    use crate::error::InvalidInput;
    use crate::validate::{blob_name, container_name, list_page_size};

    /// [`create_container`](super::BlobStore::create_container): the
    /// container's name.
    pub fn create_container(container: &str) -> Result<(), InvalidInput> {
        container_name(container)
    }

    /// [`delete_container`](super::BlobStore::delete_container): the
    /// container's name.
    pub fn delete_container(container: &str) -> Result<(), InvalidInput> {
        container_name(container)
    }

    /// [`put_blob`](super::BlobStore::put_blob): the container's name and
    /// the blob's.
    pub fn put_blob(
        container: &str,
        name: &str,
        data: &[u8],
        condition: &PutCondition,
    ) -> Result<(), InvalidInput> {
        let _ = (data, condition);
        blob(container, name)
    }

    /// [`get_blob`](super::BlobStore::get_blob): the container's name and
    /// the blob's.
    pub fn get_blob(container: &str, name: &str) -> Result<(), InvalidInput> {
        blob(container, name)
    }

    /// [`delete_blob`](super::BlobStore::delete_blob): the container's name
    /// and the blob's.
    pub fn delete_blob(
        container: &str,
        name: &str,
        if_match: Option<&ETag>,
    ) -> Result<(), InvalidInput> {
        let _ = if_match;
        blob(container, name)
    }

    /// [`list_blobs`](super::BlobStore::list_blobs): the container's name
    /// and the page size (1–5,000).
    pub fn list_blobs(container: &str, options: &ListBlobsOptions) -> Result<(), InvalidInput> {
        container_name(container)?;
        list_page_size(options.max_results).map(drop)
    }

    fn blob(container: &str, name: &str) -> Result<(), InvalidInput> {
        container_name(container)?;
        blob_name(name)
    }
}

/// Where a table keeps the values its entities store outside their rows
/// (see `Table::with_blob_store`): a container of a blob store.
#[derive(Clone, Debug)]
pub struct BlobTarget {
    #[doc(hidden)]
    pub store: Arc<dyn BlobStore>,
    #[doc(hidden)]
    pub container: Arc<str>,
}

impl BlobTarget {
    /// Values go to `container` of `store`.
    pub fn new(store: Arc<dyn BlobStore>, container: &str) -> BlobTarget {
        BlobTarget {
            store,
            container: container.into(),
        }
    }

    /// The blob store.
    pub fn store(&self) -> &Arc<dyn BlobStore> {
        &self.store
    }

    /// The container.
    pub fn container(&self) -> &str {
        &self.container
    }
}
