//! The in-memory blob store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use md5::{Digest, Md5};
use parking_lot::RwLock;
use tablekit_core::{
    Blob, BlobPage, BlobProperties, DateTime, ETag, Error, ListBlobsOptions, PutCondition, Result,
};

#[derive(Debug)]
struct StoredBlob {
    data: Arc<[u8]>,
    properties: BlobProperties,
}

#[derive(Debug, Default)]
struct State {
    containers: HashMap<String, BTreeMap<String, StoredBlob>>,
    /// Source of ETags: a counter, formatted like the service's `"0x…"` tags.
    version: u64,
}

/// An in-memory [`BlobStore`](tablekit_core::BlobStore) with the Blob service's conditional-write
/// semantics. Clones share the same blobs.
///
/// ```
/// use tablekit::{BlobStore, PutCondition};
/// use tablekit_mem::MemBlobStore;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tablekit::Result<()> {
/// let blobs = MemBlobStore::new();
/// blobs.create_container("offload").await?;
/// let props = blobs.put_blob("offload", "t/p/r/photo", b"hello".to_vec(), &PutCondition::IfNotExists).await?;
/// assert_eq!(props.content_length, 5);
/// assert_eq!(blobs.get_blob("offload", "t/p/r/photo").await?.data, b"hello");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemBlobStore {
    state: Arc<RwLock<State>>,
}

impl MemBlobStore {
    /// A store with no containers.
    pub fn new() -> MemBlobStore {
        MemBlobStore::default()
    }
}

fn container_missing(container: &str) -> Error {
    Error::ContainerNotFound {
        container: container.into(),
    }
}

fn blob_missing(container: &str, name: &str) -> Error {
    Error::BlobNotFound {
        container: container.into(),
        name: name.into(),
    }
}

tablekit_core::serve!(MemBlobStore, info: |_this| crate::store_info(), contracts: [BlobStore]);

impl tablekit_core::layer::RawBlobs for MemBlobStore {
    async fn create_container(&self, container: &str) -> Result<()> {
        let mut state = self.state.write();
        if state.containers.contains_key(container) {
            return Err(Error::ContainerAlreadyExists {
                container: container.into(),
            });
        }
        state.containers.insert(container.into(), BTreeMap::new());
        Ok(())
    }

    async fn delete_container(&self, container: &str) -> Result<()> {
        let mut state = self.state.write();
        state
            .containers
            .remove(container)
            .map(drop)
            .ok_or_else(|| container_missing(container))
    }

    async fn put_blob(
        &self,
        container: &str,
        name: &str,
        data: Vec<u8>,
        condition: &PutCondition,
    ) -> Result<BlobProperties> {
        // Hash outside the lock: it is the expensive part of a large put.
        let md5: [u8; 16] = Md5::digest(&data).into();
        let mut state = self.state.write();
        state.version += 1;
        let etag = ETag::new(format!("\"0x8DC{:013X}\"", state.version));
        let blobs = state
            .containers
            .get_mut(container)
            .ok_or_else(|| container_missing(container))?;
        condition.check(blobs.get(name).map(|b| &b.properties.etag), container, name)?;
        let properties = BlobProperties {
            name: name.into(),
            etag,
            content_length: data.len() as u64,
            content_md5: md5,
            last_modified: DateTime::now(),
        };
        blobs.insert(
            name.into(),
            StoredBlob {
                data: data.into(),
                properties: properties.clone(),
            },
        );
        Ok(properties)
    }

    async fn get_blob(&self, container: &str, name: &str) -> Result<Blob> {
        // Copy the shared handle under the lock, the bytes after it.
        let (data, properties) = {
            let state = self.state.read();
            let blobs = state
                .containers
                .get(container)
                .ok_or_else(|| container_missing(container))?;
            let blob = blobs
                .get(name)
                .ok_or_else(|| blob_missing(container, name))?;
            (Arc::clone(&blob.data), blob.properties.clone())
        };
        Ok(Blob {
            data: data.to_vec(),
            properties,
        })
    }

    async fn delete_blob(
        &self,
        container: &str,
        name: &str,
        if_match: Option<&ETag>,
    ) -> Result<()> {
        let mut state = self.state.write();
        let blobs = state
            .containers
            .get_mut(container)
            .ok_or_else(|| container_missing(container))?;
        let blob = blobs
            .get(name)
            .ok_or_else(|| blob_missing(container, name))?;
        if if_match.is_some_and(|tag| *tag != blob.properties.etag) {
            return Err(Error::BlobConditionNotMet {
                container: container.into(),
                name: name.into(),
            });
        }
        blobs.remove(name);
        Ok(())
    }

    async fn list_blobs(&self, container: &str, options: &ListBlobsOptions) -> Result<BlobPage> {
        let limit = options.page_size();
        let state = self.state.read();
        let blobs = state
            .containers
            .get(container)
            .ok_or_else(|| container_missing(container))?;
        let (entries, next_marker) = crate::listing::page(
            blobs,
            options.prefix.as_deref(),
            options.marker.as_deref(),
            limit,
        );
        Ok(BlobPage {
            blobs: entries
                .into_iter()
                .map(|(_, blob)| blob.properties.clone())
                .collect(),
            next_marker,
        })
    }
}
