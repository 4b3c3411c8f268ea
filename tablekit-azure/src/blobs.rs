//! `BlobStore` over the Blob service's REST API.

use std::sync::Arc;

use crate::transport::Method;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use md5::{Digest, Md5};
use tablekit_core::{
    Blob, BlobPage, BlobProperties, DateTime, ETag, Error, ListBlobsOptions, PutCondition, Result,
};

use crate::config::{Account, ClientOptions, ConfigError};
use crate::errors::Target;
use crate::policy::Idempotence;
use crate::storage::{Call, Reply, Service};
use crate::url;

/// The Blob service version spoken.
pub const BLOB_VERSION: &str = "2021-08-06";

/// A Blob service account as a [`BlobStore`](tablekit_core::BlobStore). Clones share one connection pool.
#[derive(Clone, Debug)]
pub struct AzureBlobs {
    service: Arc<Service>,
}

fn blob_path(container: &str, name: &str) -> String {
    // A blob name keeps its `/` separators; everything else is encoded.
    let encoded: Vec<String> = name.split('/').map(url::encode).collect();
    format!("/{container}/{}", encoded.join("/"))
}

/// A property of a blob the service always gives, missing or unreadable:
/// never a value made up in its place.
fn unreadable(property: &str, text: Option<&str>) -> Error {
    Error::Decode {
        message: match text {
            None => format!("a blob without its {property}"),
            Some(text) => format!("a blob's {property} {text:?} cannot be read"),
        },
    }
}

fn http_date(text: Option<&str>) -> Result<DateTime> {
    text.and_then(|t| httpdate::parse_http_date(t).ok())
        .map(DateTime::from)
        .ok_or_else(|| unreadable("Last-Modified", text))
}

/// The blob's MD5; zeros when the service keeps none (a blob written in
/// blocks without one).
fn md5_of(header: Option<&str>) -> Result<[u8; 16]> {
    match header {
        None => Ok([0; 16]),
        Some(text) => BASE64
            .decode(text)
            .ok()
            .and_then(|bytes| <[u8; 16]>::try_from(bytes).ok())
            .ok_or_else(|| unreadable("Content-MD5", header)),
    }
}

/// Unescapes the five XML entities.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The text of the first `<name>…</name>` in `xml`.
fn element<'x>(xml: &'x str, name: &str) -> Option<&'x str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let (_, rest) = xml.split_once(&open)?;
    rest.split_once(&close).map(|(text, _)| text)
}

/// Reads a List Blobs response. Hand-read: the document is flat and fixed
/// (`<Blob><Name>…</Name><Properties>…</Properties></Blob>` and `<NextMarker>`).
fn parse_listing(xml: &str) -> Result<BlobPage> {
    let mut page = BlobPage::default();
    for block in xml.split("<Blob>").skip(1) {
        let block = block.split("</Blob>").next().unwrap_or_default();
        let name = element(block, "Name").ok_or_else(|| Error::Decode {
            message: "a listed blob without a name".into(),
        })?;
        let etag = element(block, "Etag").ok_or_else(|| unreadable("Etag", None))?;
        let length = element(block, "Content-Length");
        page.blobs.push(BlobProperties {
            name: unescape(name),
            etag: ETag::new(unescape(etag)),
            content_length: length
                .and_then(|l| l.parse().ok())
                .ok_or_else(|| unreadable("Content-Length", length))?,
            content_md5: md5_of(element(block, "Content-MD5").filter(|m| !m.is_empty()))?,
            last_modified: http_date(element(block, "Last-Modified"))?,
        });
    }
    page.next_marker = element(xml, "NextMarker")
        .filter(|m| !m.is_empty())
        .map(unescape);
    Ok(page)
}

impl AzureBlobs {
    /// A client for `account` with the default [`ClientOptions::blobs`].
    pub fn new(account: Account) -> Result<AzureBlobs, ConfigError> {
        AzureBlobs::with_options(account, ClientOptions::blobs())
    }

    /// A client from a connection string (its `BlobEndpoint`, or the one
    /// the account name implies), as [`AzureTables::from_connection_string`](crate::AzureTables::from_connection_string).
    ///
    /// ```
    /// let blobs = tablekit_azure::AzureBlobs::from_connection_string("UseDevelopmentStorage=true")?;
    /// # Ok::<(), tablekit_azure::ConfigError>(())
    /// ```
    pub fn from_connection_string(text: &str) -> Result<AzureBlobs, ConfigError> {
        AzureBlobs::with_options(
            Account::from_connection_string(text)?,
            ClientOptions::blobs().with_connection_string(text)?,
        )
    }

    /// A client for `account` with the given timeouts and retry policy.
    pub fn with_options(
        account: Account,
        options: ClientOptions,
    ) -> Result<AzureBlobs, ConfigError> {
        let endpoint = account.blob_endpoint.clone();
        let secondary = account.blob_secondary_endpoint.clone();
        Ok(AzureBlobs {
            service: Arc::new(Service::new(
                account,
                endpoint,
                secondary,
                &options,
                BLOB_VERSION,
                "azure.blobs",
            )?),
        })
    }

    async fn send(&self, call: Call<'_>) -> Result<Reply> {
        self.service.send(call).await
    }

    fn properties(name: &str, reply: &Reply, length: u64) -> Result<BlobProperties> {
        let etag = reply
            .header("etag")
            .ok_or_else(|| unreadable("ETag", None))?;
        Ok(BlobProperties {
            name: name.to_owned(),
            etag: ETag::new(etag),
            content_length: length,
            content_md5: md5_of(
                reply
                    .header("content-md5")
                    .or_else(|| reply.header("x-ms-blob-content-md5")),
            )?,
            last_modified: http_date(reply.header("last-modified"))?,
        })
    }
}

/// A request on a container itself (`?restype=container`), its name
/// checked by the method's door.
fn container_call(method: Method, container: &str, idempotence: Idempotence) -> Result<Call<'_>> {
    let mut call = Call::new(
        method,
        format!("/{container}"),
        Target::container(container),
        idempotence,
    );
    call.query.push(("restype", "container".into()));
    Ok(call)
}

tablekit_core::serve!(AzureBlobs, info: |this| this.service.store.clone(), contracts: [BlobStore]);

impl tablekit_core::layer::RawBlobs for AzureBlobs {
    async fn create_container(&self, container: &str) -> Result<()> {
        let call = container_call(Method::PUT, container, Idempotence::NotIdempotent)?;
        self.send(call).await.map(drop)
    }

    async fn delete_container(&self, container: &str) -> Result<()> {
        let call = container_call(Method::DELETE, container, Idempotence::NotIdempotent)?;
        self.send(call).await.map(drop)
    }

    async fn put_blob(
        &self,
        container: &str,
        name: &str,
        data: Vec<u8>,
        condition: &PutCondition,
    ) -> Result<BlobProperties> {
        let target = Target::blob(container, name);
        let idempotence = match condition {
            PutCondition::None => Idempotence::Idempotent,
            _ => Idempotence::NotIdempotent,
        };
        let mut call = Call::new(Method::PUT, blob_path(container, name), target, idempotence);
        call.headers.push(("x-ms-blob-type", "BlockBlob".into()));
        // Sent so the service checks what it received (400 Md5Mismatch otherwise).
        call.content_md5 = BASE64.encode(Md5::digest(&data));
        match condition {
            PutCondition::None => {}
            PutCondition::IfNotExists => call.if_none_match = "*".into(),
            PutCondition::IfMatch(tag) => call.if_match = tag.as_str().to_owned(),
        }
        let length = data.len() as u64;
        call.body = Bytes::from(data);
        let reply = self.send(call).await?;
        AzureBlobs::properties(name, &reply, length)
    }

    async fn get_blob(&self, container: &str, name: &str) -> Result<Blob> {
        let target = Target::blob(container, name);
        let reply = self
            .send(Call::new(
                Method::GET,
                blob_path(container, name),
                target,
                Idempotence::Idempotent,
            ))
            .await?;
        let properties = AzureBlobs::properties(name, &reply, reply.body.len() as u64)?;
        Ok(Blob {
            data: reply.body,
            properties,
        })
    }

    async fn delete_blob(
        &self,
        container: &str,
        name: &str,
        if_match: Option<&ETag>,
    ) -> Result<()> {
        let target = Target::blob(container, name);
        let mut call = Call::new(
            Method::DELETE,
            blob_path(container, name),
            target,
            Idempotence::NotIdempotent,
        );
        if let Some(tag) = if_match {
            call.if_match = tag.as_str().to_owned();
        }
        self.send(call).await.map(drop)
    }

    async fn list_blobs(&self, container: &str, options: &ListBlobsOptions) -> Result<BlobPage> {
        let mut call = container_call(Method::GET, container, Idempotence::Idempotent)?;
        call.list(
            options.prefix.as_ref(),
            options.max_results,
            options.marker.as_ref(),
        );
        let reply = self.send(call).await?;
        parse_listing(&String::from_utf8_lossy(&reply.body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A List Blobs page (captured from Azurite).
    #[test]
    fn reads_a_listing() {
        let xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults ServiceEndpoint=\"x\" ContainerName=\"offload\"><Prefix>tbl/pk/</Prefix><MaxResults>1</MaxResults><Blobs><Blob><Name>tbl/pk/rk/a&amp;b</Name><Properties><Last-Modified>Sat, 21 Nov 2026 22:42:42 GMT</Last-Modified><Etag>0x24BC00B994BB4C0</Etag><Content-Length>13</Content-Length><Content-MD5>jULQnei8n0FvLn/fg5RVrg==</Content-MD5></Properties></Blob></Blobs><NextMarker>tbl/pk/rk/prop1</NextMarker></EnumerationResults>";
        let page = parse_listing(xml).unwrap();
        assert_eq!(page.blobs.len(), 1);
        assert_eq!(page.blobs[0].name, "tbl/pk/rk/a&b");
        assert_eq!(page.blobs[0].content_length, 13);
        assert_eq!(page.blobs[0].etag.as_str(), "0x24BC00B994BB4C0");
        assert_eq!(
            BASE64.encode(page.blobs[0].content_md5),
            "jULQnei8n0FvLn/fg5RVrg=="
        );
        assert_eq!(page.next_marker.as_deref(), Some("tbl/pk/rk/prop1"));
        let last =
            parse_listing("<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>")
                .unwrap();
        assert!(last.blobs.is_empty() && last.next_marker.is_none());
    }

    /// A property the service always gives, missing or unreadable, is an
    /// error, never a length of 0, an empty ETag or the time of reading;
    /// an MD5 the service keeps none of (an empty element, or none) is
    /// zeros.
    #[test]
    fn a_listing_with_unreadable_properties_is_refused() {
        let listing = |properties: &str| {
            parse_listing(&format!(
                "<EnumerationResults><Blobs><Blob><Name>a</Name><Properties>{properties}</Properties></Blob></Blobs><NextMarker /></EnumerationResults>"
            ))
        };
        let date = "<Last-Modified>Sat, 21 Nov 2026 22:42:42 GMT</Last-Modified>";
        let (etag, length) = ("<Etag>0x1</Etag>", "<Content-Length>13</Content-Length>");
        for md5 in ["", "<Content-MD5></Content-MD5>", "<Content-MD5 />"] {
            let page = listing(&format!("{date}{etag}{length}{md5}")).unwrap();
            assert_eq!(page.blobs[0].content_md5, [0; 16], "{md5}");
        }
        for (properties, says) in [
            (format!("{date}{length}"), "Etag"),
            (format!("{date}{etag}"), "Content-Length"),
            (
                format!("{date}{etag}<Content-Length>-1</Content-Length>"),
                "Content-Length",
            ),
            (format!("{etag}{length}"), "Last-Modified"),
            (
                format!("<Last-Modified>yesterday</Last-Modified>{etag}{length}"),
                "Last-Modified",
            ),
            (
                format!("{date}{etag}{length}<Content-MD5>AAAA</Content-MD5>"),
                "Content-MD5",
            ),
        ] {
            match listing(&properties) {
                Err(Error::Decode { message }) => assert!(message.contains(says), "{message}"),
                other => panic!("{properties}: expected a decode error, got {other:?}"),
            }
        }
    }

    #[test]
    fn blob_paths_keep_slashes() {
        assert_eq!(blob_path("c", "t/p k/r#1"), "/c/t/p%20k/r%231");
    }
}
