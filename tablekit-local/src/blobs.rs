//! The blob store: containers, and each blob's properties and bytes in two
//! engine tables (a listing reads the properties without the bytes).

use std::ops::Bound;

use md5::{Digest, Md5};
use redb::{ReadableTable, TableDefinition};

use crate::logged::{LoggedTable, Txn};
use tablekit_core::{
    Blob, BlobPage, BlobProperties, DateTime, ETag, Error, ListBlobsOptions, PutCondition, Result,
};

use crate::{LocalStorage, META};

/// The key in [`META`](crate::META) of the count of blob writes, which
/// makes each blob's ETag.
pub(crate) const BLOB_VERSION: &str = "blob_version";

/// Container names.
const CONTAINERS: TableDefinition<'static, &str, ()> = TableDefinition::new("containers");
/// Each blob's properties, by `container/name`.
const BLOBS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("blobs");
/// The blobs' properties table, open in a write transaction.
type BlobsTable<'t> = LoggedTable<'t, &'static str, &'static [u8]>;
/// Each blob's bytes, by `container/name`.
const BLOB_DATA: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("blob_data");

/// The names of the engine tables [`create_system_tables`] makes, for the
/// check of the engine's list of its tables.
pub(crate) fn system_tables() -> [String; 3] {
    use redb::TableHandle;
    [
        CONTAINERS.name().to_owned(),
        BLOBS.name().to_owned(),
        BLOB_DATA.name().to_owned(),
    ]
}

pub(crate) fn create_system_tables(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(CONTAINERS)?;
    txn.open_table(BLOBS)?;
    txn.open_table(BLOB_DATA)?;
    Ok(())
}

/// The engine key of a blob. Container names hold no `/`, so the blobs of
/// one container are the keys from `container/` to `container0`.
fn blob_key(container: &str, name: &str) -> String {
    format!("{container}/{name}")
}

/// A blob's properties as stored under `key` (its [`blob_key`]): a
/// checksum, then ETag number, MD5, write time, length. The bytes are
/// checked against the MD5 when they are read.
fn encode_properties(
    key: &str,
    version: i64,
    md5: &[u8; 16],
    written: DateTime,
    len: u64,
) -> Vec<u8> {
    let body = [
        &version.to_le_bytes()[..],
        md5,
        &written.ticks().to_le_bytes(),
        &len.to_le_bytes(),
    ]
    .concat();
    crate::seal::sealed(key.as_bytes(), &body)
}

fn etag_of(version: i64) -> ETag {
    ETag::new(format!("\"0x8DC{version:013X}\""))
}

/// The properties of blob `name` stored under `key`; `None` when they fail
/// their checksum or do not decode.
fn decode_properties(key: &str, name: &str, stored: &[u8]) -> Option<BlobProperties> {
    let bytes = crate::seal::checked(key.as_bytes(), stored)?;
    let [version, md5, written, len]: [&[u8]; 4] = [
        bytes.get(0..8)?,
        bytes.get(8..24)?,
        bytes.get(24..32)?,
        bytes.get(32..40)?,
    ];
    (bytes.len() == 40).then_some(())?;
    Some(BlobProperties {
        name: name.to_owned(),
        etag: etag_of(i64::from_le_bytes(version.try_into().ok()?)),
        content_length: u64::from_le_bytes(len.try_into().ok()?),
        content_md5: md5.try_into().ok()?,
        last_modified: DateTime::from_ticks(i64::from_le_bytes(written.try_into().ok()?)).ok()?,
    })
}

/// [`check`](LocalStorage::check)'s part for blobs: each blob's
/// properties against their checksum, its bytes against their length and
/// MD5, and no bytes without a blob.
pub(crate) fn check(txn: &redb::ReadTransaction, report: &mut crate::check::CheckReport) {
    crate::check::walk(
        txn,
        CONTAINERS,
        crate::check::Presence::Optional,
        "the catalogue of containers",
        report,
        |r, _, ()| {
            r.containers += 1;
        },
    );
    let data = match txn.open_table(BLOB_DATA) {
        Ok(data) => Some(data),
        Err(e) => {
            report.damage(
                "the blobs' bytes",
                format!("the storage engine could not read them: {e}"),
            );
            None
        }
    };
    let mut named = std::collections::BTreeSet::new();
    crate::check::walk(
        txn,
        BLOBS,
        crate::check::Presence::Optional,
        "the blobs' properties",
        report,
        |report, key, stored| {
            report.blobs += 1;
            named.insert(key.to_owned());
            let (container, name) = key.split_once('/').unwrap_or((key, ""));
            let place = format!("blob `{name}` of container `{container}`");
            let Some(properties) = decode_properties(key, name, stored) else {
                report.damage(place, "its properties do not match their checksum");
                return;
            };
            let Some(data) = &data else { return };
            match data.get(key) {
                Ok(Some(bytes)) => {
                    let bytes = bytes.value();
                    if bytes.len() as u64 != properties.content_length
                        || <[u8; 16]>::from(Md5::digest(bytes)) != properties.content_md5
                    {
                        report.damage(place, "its bytes do not match their length and MD5");
                    }
                }
                Ok(None) => report.damage(place, "its bytes are missing"),
                Err(e) => report.damage(
                    place,
                    format!("the storage engine could not read its bytes: {e}"),
                ),
            }
        },
    );
    crate::check::walk(
        txn,
        BLOB_DATA,
        crate::check::Presence::Optional,
        "the blobs' bytes",
        report,
        |report, key, _| {
            if !named.contains(key) {
                report.damage(format!("the bytes stored as `{key}`"), "no blob has them");
            }
        },
    );
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

impl LocalStorage {
    fn check_container(
        &self,
        containers: &impl ReadableTable<&'static str, ()>,
        container: &str,
    ) -> Result<()> {
        match containers
            .get(container)
            .map_err(|e| self.error(e.into()))?
        {
            Some(_) => Ok(()),
            None => Err(container_missing(container)),
        }
    }

    /// The blobs' engine table in a write, and the stored properties of
    /// blob `name` of `container` (which must exist), if it exists.
    fn blob_in<'t>(
        &self,
        txn: &'t Txn<'t>,
        container: &str,
        name: &str,
    ) -> Result<(BlobsTable<'t>, Option<BlobProperties>)> {
        let containers = txn
            .open_table(CONTAINERS)
            .map_err(|e| self.error(e.into()))?;
        self.check_container(&*containers, container)?;
        let blobs = txn.open_table(BLOBS).map_err(|e| self.error(e.into()))?;
        let existing = self.blob_properties(&*blobs, container, name)?;
        Ok((blobs, existing))
    }

    /// A blob's stored properties, if it exists.
    fn blob_properties(
        &self,
        blobs: &impl ReadableTable<&'static str, &'static [u8]>,
        container: &str,
        name: &str,
    ) -> Result<Option<BlobProperties>> {
        let key = blob_key(container, name);
        let Some(stored) = blobs.get(key.as_str()).map_err(|e| self.error(e.into()))? else {
            return Ok(None);
        };
        decode_properties(&key, name, stored.value())
            .map(Some)
            .ok_or_else(|| self.damaged("a blob's properties"))
    }
}

impl tablekit_core::layer::RawBlobs for LocalStorage {
    async fn create_container(&self, container: &str) -> Result<()> {
        self.guarded(|| {
            // Read-only: a container that exists is answered as one.
            if self.shared.read_only {
                let txn = self.begin_read()?;
                let containers = txn
                    .open_table(CONTAINERS)
                    .map_err(|e| self.error(e.into()))?;
                if self.check_container(&containers, container).is_ok() {
                    return Err(Error::ContainerAlreadyExists {
                        container: container.into(),
                    });
                }
            }
            Ok(())
        })?;
        let container = container.to_owned();
        self.write(move |store, txn| {
            let mut containers = txn
                .open_table(CONTAINERS)
                .map_err(|e| store.error(e.into()))?;
            let existed = containers
                .insert(container.as_str(), ())
                .map_err(|e| store.error(e.into()))?;
            if existed {
                return Err(Error::ContainerAlreadyExists {
                    container: container.clone(),
                });
            }
            Ok(())
        })
        .await
    }

    async fn delete_container(&self, container: &str) -> Result<()> {
        let container = container.to_owned();
        self.write(move |store, txn| {
            let mut containers = txn
                .open_table(CONTAINERS)
                .map_err(|e| store.error(e.into()))?;
            if !containers
                .remove(container.as_str())
                .map_err(|e| store.error(e.into()))?
            {
                return Err(container_missing(&container));
            }
            let (from, to) = (format!("{container}/"), format!("{container}0"));
            for table in [BLOBS, BLOB_DATA] {
                let mut blobs = txn.open_table(table).map_err(|e| store.error(e.into()))?;
                blobs
                    .remove_range(from.as_str(), to.as_str())
                    .map_err(|e| store.error(e.into()))?;
            }
            Ok(())
        })
        .await
    }

    async fn put_blob(
        &self,
        container: &str,
        name: &str,
        data: Vec<u8>,
        condition: &PutCondition,
    ) -> Result<BlobProperties> {
        // Hash before the writer's turn: it is the expensive part of a large put.
        let md5: [u8; 16] = Md5::digest(&data).into();
        let (container, name, condition) =
            (container.to_owned(), name.to_owned(), condition.clone());
        self.write(move |store, txn| {
            let (mut blobs, existing) = store.blob_in(txn, &container, &name)?;
            condition.check(existing.as_ref().map(|b| &b.etag), &container, &name)?;
            let mut meta = txn.open_table(META).map_err(|e| store.error(e.into()))?;
            let version = meta
                .get(BLOB_VERSION)
                .map_err(|e| store.error(e.into()))?
                .map_or(0, |v| v.value())
                + 1;
            meta.insert(BLOB_VERSION, version)
                .map_err(|e| store.error(e.into()))?;
            let written = DateTime::now();
            let key = blob_key(&container, &name);
            let stored = encode_properties(&key, version, &md5, written, data.len() as u64);
            blobs
                .insert(key.as_str(), stored.as_slice())
                .map_err(|e| store.error(e.into()))?;
            let mut bytes = txn
                .open_table(BLOB_DATA)
                .map_err(|e| store.error(e.into()))?;
            bytes
                .insert(key.as_str(), data.as_slice())
                .map_err(|e| store.error(e.into()))?;
            Ok(BlobProperties {
                name: name.clone(),
                etag: etag_of(version),
                content_length: data.len() as u64,
                content_md5: md5,
                last_modified: written,
            })
        })
        .await
    }

    async fn get_blob(&self, container: &str, name: &str) -> Result<Blob> {
        self.guarded(|| {
            let txn = self.begin_read()?;
            let containers = txn
                .open_table(CONTAINERS)
                .map_err(|e| self.error(e.into()))?;
            self.check_container(&containers, container)?;
            let blobs = txn.open_table(BLOBS).map_err(|e| self.error(e.into()))?;
            let properties = self
                .blob_properties(&blobs, container, name)?
                .ok_or_else(|| blob_missing(container, name))?;
            let bytes = txn
                .open_table(BLOB_DATA)
                .map_err(|e| self.error(e.into()))?;
            let data = bytes
                .get(blob_key(container, name).as_str())
                .map_err(|e| self.error(e.into()))?
                .ok_or_else(|| self.damaged("a blob without its bytes"))?
                .value()
                .to_vec();
            // The bytes are checked against the MD5 computed when they were put.
            if data.len() as u64 != properties.content_length
                || <[u8; 16]>::from(Md5::digest(&data)) != properties.content_md5
            {
                return Err(self.damaged("a blob whose bytes do not match their MD5"));
            }
            Ok(Blob { data, properties })
        })
    }

    async fn delete_blob(
        &self,
        container: &str,
        name: &str,
        if_match: Option<&ETag>,
    ) -> Result<()> {
        let (container, name, if_match) =
            (container.to_owned(), name.to_owned(), if_match.cloned());
        self.write(move |store, txn| {
            let (mut blobs, existing) = store.blob_in(txn, &container, &name)?;
            let existing = existing.ok_or_else(|| blob_missing(&container, &name))?;
            if if_match.as_ref().is_some_and(|tag| *tag != existing.etag) {
                return Err(Error::BlobConditionNotMet {
                    container: container.clone(),
                    name: name.clone(),
                });
            }
            let key = blob_key(&container, &name);
            blobs
                .remove(key.as_str())
                .map_err(|e| store.error(e.into()))?;
            let mut bytes = txn
                .open_table(BLOB_DATA)
                .map_err(|e| store.error(e.into()))?;
            bytes
                .remove(key.as_str())
                .map_err(|e| store.error(e.into()))?;
            Ok(())
        })
        .await
    }

    async fn list_blobs(&self, container: &str, options: &ListBlobsOptions) -> Result<BlobPage> {
        self.guarded(|| {
            let limit = options.page_size() as usize;
            let txn = self.begin_read()?;
            let containers = txn
                .open_table(CONTAINERS)
                .map_err(|e| self.error(e.into()))?;
            self.check_container(&containers, container)?;
            let blobs = txn.open_table(BLOBS).map_err(|e| self.error(e.into()))?;
            let prefix = options.prefix.as_deref().unwrap_or("");
            let start = options.marker.as_deref().unwrap_or(prefix).max(prefix);
            let from = blob_key(container, start);
            let range = blobs
                .range::<&str>((Bound::Included(from.as_str()), Bound::Unbounded))
                .map_err(|e| self.error(e.into()))?;
            let within = format!("{container}/{prefix}");
            let mut page = BlobPage::default();
            for item in range {
                let (key, stored) = item.map_err(|e| self.error(e.into()))?;
                let Some(name) = key.value().strip_prefix(within.as_str()) else {
                    break;
                };
                let name = format!("{prefix}{name}");
                if page.blobs.len() == limit {
                    page.next_marker = Some(name);
                    break;
                }
                page.blobs.push(
                    decode_properties(key.value(), &name, stored.value())
                        .ok_or_else(|| self.damaged("a blob's properties"))?,
                );
            }
            Ok(page)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_and_damage_is_refused() {
        let written = DateTime::from_ticks(638_000_000_000_000_000).unwrap();
        let key = blob_key("c", "a/b");
        let stored = encode_properties(&key, 7, &[9; 16], written, 42);
        let read = decode_properties(&key, "a/b", &stored).unwrap();
        assert_eq!(
            (
                read.etag,
                read.content_md5,
                read.last_modified,
                read.content_length
            ),
            (etag_of(7), [9; 16], written, 42)
        );
        // Any byte changed, or the properties read under another key, is
        // caught by the checksum.
        for at in 0..stored.len() {
            let mut damaged = stored.clone();
            damaged[at] ^= 0x10;
            assert!(
                decode_properties(&key, "a/b", &damaged).is_none(),
                "byte {at}"
            );
        }
        assert!(decode_properties(&blob_key("c", "a/c"), "a/c", &stored).is_none());
        assert!(decode_properties(&key, "a/b", &stored[..40]).is_none());
    }
}
