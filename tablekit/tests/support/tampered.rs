//! A blob store in front of a [`MemBlobStore`] that changes what passes
//! through it, for the tests of what reads and copies make of that. Each
//! test binary that includes it uses one of its tamperings.
#![allow(dead_code)]

use tablekit::{Blob, BlobPage, BlobProperties, BlobStore, ETag, ListBlobsOptions, PutCondition};
use tablekit_mem::MemBlobStore;

/// What [`Tampered`] changes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tampering {
    /// Hands out other bytes than it stored (the last byte flipped), and
    /// reports the stored ones' properties: what a broken proxy or cache
    /// in between does.
    Garble,
    /// Knows no blob's MD5, as the Blob service for a blob written in
    /// blocks without one: its listings say zeros.
    ForgetMd5,
}

/// A [`MemBlobStore`] behind a [`Tampering`].
#[derive(Debug)]
pub(crate) struct Tampered(pub(crate) MemBlobStore, pub(crate) Tampering);

#[async_trait::async_trait]
impl BlobStore for Tampered {
    async fn create_container(&self, container: &str) -> tablekit::Result<()> {
        self.0.create_container(container).await
    }
    async fn delete_container(&self, container: &str) -> tablekit::Result<()> {
        self.0.delete_container(container).await
    }
    async fn put_blob(
        &self,
        container: &str,
        name: &str,
        data: Vec<u8>,
        condition: &PutCondition,
    ) -> tablekit::Result<BlobProperties> {
        self.0.put_blob(container, name, data, condition).await
    }
    async fn get_blob(&self, container: &str, name: &str) -> tablekit::Result<Blob> {
        let mut blob = self.0.get_blob(container, name).await?;
        if let (Tampering::Garble, Some(byte)) = (self.1, blob.data.last_mut()) {
            *byte ^= 1;
        }
        Ok(blob)
    }
    async fn delete_blob(
        &self,
        container: &str,
        name: &str,
        if_match: Option<&ETag>,
    ) -> tablekit::Result<()> {
        self.0.delete_blob(container, name, if_match).await
    }
    async fn list_blobs(
        &self,
        container: &str,
        options: &ListBlobsOptions,
    ) -> tablekit::Result<BlobPage> {
        let mut page = self.0.list_blobs(container, options).await?;
        if let Tampering::ForgetMd5 = self.1 {
            for blob in &mut page.blobs {
                blob.content_md5 = [0; 16];
            }
        }
        Ok(page)
    }
}
