//! Blob offload: values too large for a row live in the blob store; the row
//! keeps a reference.
//!
//! # The reference
//! An offloaded field `F` is stored as the property `F_Blob`, a small JSON
//! object: the blob's name, its length, its MD5 and whether it holds text or
//! bytes. `F` itself is absent from the row. The MD5 is computed here, over
//! the bytes sent; a read computes it again over the bytes it received and
//! compares it and the length with the reference, so a blob replaced,
//! truncated or changed on its way is refused, whatever the blob store
//! reports of it. (MD5 guards integrity here, not against a forger with
//! write access to the container.)
//!
//! # The protocol
//! Every step is ordered so that no row ever points at a missing blob:
//! - write: upload each new blob under a fresh, unique name (create-only),
//!   then write the row; when the row write fails, delete the new blobs;
//! - overwrite: the same, guarded by the ETag of the row being replaced;
//!   after the row is written, delete the blobs that row referenced;
//! - delete: delete the row, then its blobs.
//!
//! A crash between two steps can leave a blob that no row references (never
//! the reverse). [`Table::sweep_orphan_blobs`](super::Table::sweep_orphan_blobs)
//! finds and deletes those. Reads fetch an entity's blobs concurrently and
//! check length and hash: a missing or altered blob is a typed error, never
//! wrong data.

use std::sync::Arc;

use futures::future::try_join_all;
use md5::{Digest, Md5};

use futures::future::BoxFuture;

use crate::backend::TableBackendExt;
use crate::blob::{BlobTarget, PutCondition};
use crate::datetime::DateTime;
use crate::entity::{Entity, PropertyName};
use crate::error::{Error, InvalidInput, Result, SchemaError, ValueError};
use crate::keyorder::utf16_len;
use crate::schema::{self, DescriptorPart, ExternalValues, KeyArg, TableEntity, WriteNeeds};
use crate::table::Table;
use crate::validate::limits::{MAX_BINARY_BYTES, MAX_ENTITY_SIZE, MAX_STRING_UTF16};
use crate::value::Value;

/// A field that may be stored in the blob store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobField {
    /// The property name of the field.
    pub name: &'static str,
    /// `true` for `#[tablekit(blob)]` (always offloaded), `false` for
    /// `#[tablekit(offload)]` (offloaded only when too large for the row).
    pub always: bool,
    /// `true` for an `encrypted` field: its blob holds the value's
    /// ciphertext, sealed before it leaves, never the value.
    pub sealed: bool,
}

/// The blob part of an entity's descriptor: its fields kept in the blob
/// store (`#[tablekit(blob)]`, always) or kept there when too large for a
/// row (`#[tablekit(offload)]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFields {
    /// The fields, in field order.
    pub fields: &'static [BlobField],
}

impl DescriptorPart for BlobFields {
    fn write_needs(&self) -> WriteNeeds {
        WriteNeeds {
            blobs: true,
            ..WriteNeeds::NONE
        }
    }

    fn external_values(&self) -> Option<&dyn ExternalValues> {
        Some(self)
    }
}

/// The blob fields' values live in the blob store, by the protocol above.
impl ExternalValues for BlobFields {
    fn owns_property(&self, name: &str) -> bool {
        self.fields.iter().any(|field| {
            name.strip_prefix(field.name)
                .is_some_and(|rest| rest == REFERENCE_SUFFIX)
        })
    }

    fn needs_store(&self, row: &Entity) -> bool {
        self.fields
            .iter()
            .any(|f| f.always && row.properties.contains(f.name))
    }

    fn move_out<'a>(
        &'a self,
        target: &'a BlobTarget,
        table: &'a str,
        kind: Option<&'a str>,
        row: &'a mut Entity,
    ) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move { offload(target, &blob_prefix(table, kind), row, self.fields).await })
    }

    fn refers_out(&self, row: &Entity) -> Result<bool> {
        Ok(!references(row, self.fields)?.is_empty())
    }

    fn bring_back<'a>(
        &'a self,
        target: &'a BlobTarget,
        row: &'a mut Entity,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(restore(target, row, self.fields))
    }

    fn replaced(&self, stored: &Entity, row: &Entity, merge: bool) -> Result<Vec<String>> {
        Ok(references(stored, self.fields)?
            .into_iter()
            .filter(|(field, _)| {
                !merge
                    || row.properties.contains(field)
                    || row
                        .properties
                        .contains(&format!("{field}{REFERENCE_SUFFIX}"))
            })
            .map(|(_, reference)| reference.name)
            .collect())
    }

    fn discard<'a>(&'a self, target: &'a BlobTarget, names: &'a [String]) -> BoxFuture<'a, ()> {
        Box::pin(delete_quietly(target, names))
    }

    fn blanked(&self, row: &Entity) -> Result<Option<Entity>> {
        let references = references(row, self.fields)?;
        if references.is_empty() {
            return Ok(None);
        }
        let mut row = row.clone();
        for (field, reference) in references {
            let empty = if reference.text {
                crate::value::Value::String(String::new())
            } else {
                crate::value::Value::Binary(Vec::new())
            };
            row.properties.insert(field, empty);
        }
        Ok(Some(row))
    }
}

/// The blob fields of `T`: none unless it declares some.
pub fn blob_fields<T: TableEntity>() -> &'static [BlobField] {
    T::DESCRIPTOR
        .part::<BlobFields>()
        .map_or(&[], |part| part.fields)
}

/// A field type that can be kept in the blob store: text or bytes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be kept in the blob store",
    label = "not text or bytes",
    note = "`blob` and `offload` fields are `String`, `Vec<u8>`, or an `Option` of one"
)]
pub trait BlobValue {}

impl BlobValue for String {}
impl BlobValue for Vec<u8> {}
impl BlobValue for Option<String> {}
impl BlobValue for Option<Vec<u8>> {}

/// The suffix of the property that holds a field's blob reference.
pub const REFERENCE_SUFFIX: &str = "_Blob";

/// A stored reference to an offloaded value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlobReference {
    /// The blob's name in the table's container.
    #[serde(rename = "n")]
    pub name: String,
    /// Its length in bytes.
    #[serde(rename = "l")]
    pub length: u64,
    /// The MD5 of its bytes, lower-case hex.
    #[serde(rename = "h")]
    pub md5: String,
    /// Whether the value is text (else bytes).
    #[serde(rename = "t")]
    pub text: bool,
    /// Whether the blob holds an encrypted field's ciphertext, which opens
    /// only with its row (read the entity for the value).
    #[serde(rename = "e", default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
}

/// The blob names of one kind in one table start with this prefix
/// (`staff/emp/`), so a sweep lists only its own.
pub fn blob_prefix(table: &str, kind: Option<&str>) -> String {
    format!(
        "{}/{}/",
        table.to_ascii_lowercase(),
        kind.unwrap_or("_").to_ascii_lowercase()
    )
}

fn fresh_name(prefix: &str) -> String {
    format!("{prefix}{:032x}", fastrand::u128(..))
}

/// The references a row holds, by field.
pub(crate) fn references(
    entity: &Entity,
    fields: &[BlobField],
) -> Result<Vec<(&'static str, BlobReference)>> {
    let mut found = Vec::new();
    for field in fields {
        let property = format!("{}{REFERENCE_SUFFIX}", field.name);
        if let Some(value) = entity.get(&property) {
            found.push((field.name, parse_reference(&property, value)?));
        }
    }
    Ok(found)
}

fn parse_reference(property: &str, value: &Value) -> Result<BlobReference> {
    let bad = |reason: String| -> Error {
        SchemaError::Property {
            property: property.to_owned(),
            problem: ValueError::Invalid(reason),
            row: None,
        }
        .into()
    };
    match value {
        Value::String(text) => {
            serde_json::from_str(text).map_err(|e| bad(format!("not a blob reference: {e}")))
        }
        other => Err(bad(format!(
            "a blob reference is a String, found {}",
            other.edm_type()
        ))),
    }
}

fn too_large_for_a_row(value: &Value) -> bool {
    match value {
        Value::String(s) => s.len() > MAX_STRING_UTF16 && utf16_len(s) > MAX_STRING_UTF16,
        Value::Binary(b) => b.len() > MAX_BINARY_BYTES,
        _ => false,
    }
}

/// Moves the values of blob fields out of `entity` into new blobs, leaving
/// references; returns the names of the blobs written. Uploads run
/// concurrently; if one fails, the others are deleted again.
pub(crate) async fn offload(
    target: &BlobTarget,
    prefix: &str,
    entity: &mut Entity,
    fields: &[BlobField],
) -> Result<Vec<String>> {
    // First what must go (always-blob fields, values too large for a row),
    // then, while the row is still over 1 MiB, the largest `offload` fields.
    let mut chosen: Vec<&BlobField> = fields
        .iter()
        .filter(|f| {
            entity
                .properties
                .get(f.name)
                .is_some_and(|v| f.always || too_large_for_a_row(v))
        })
        .collect();
    let mut remaining_size = entity.stored_size()
        - chosen
            .iter()
            .filter_map(|f| entity.properties.get(f.name))
            .map(Value::stored_size)
            .sum::<usize>();
    let mut optional: Vec<&BlobField> = fields
        .iter()
        .filter(|f| !chosen.contains(f) && entity.properties.contains(f.name))
        .collect();
    optional.sort_by_key(|f| {
        std::cmp::Reverse(entity.properties.get(f.name).map_or(0, Value::stored_size))
    });
    for field in optional {
        if remaining_size <= MAX_ENTITY_SIZE {
            break;
        }
        remaining_size -= entity
            .properties
            .get(field.name)
            .map_or(0, Value::stored_size);
        chosen.push(field);
    }
    let mut uploads = Vec::new();
    for field in chosen {
        let (data, text) = match entity.properties.take(field.name) {
            Some(Value::String(s)) => (s.into_bytes(), true),
            Some(Value::Binary(b)) => (b, false),
            Some(other) => {
                return Err(InvalidInput::PropertyValue {
                    property: field.name.to_owned(),
                    reason: format!("a blob field holds text or bytes, not {}", other.edm_type()),
                }
                .into());
            }
            None => continue,
        };
        uploads.push((field, fresh_name(prefix), data, text));
    }
    let names: Vec<String> = uploads.iter().map(|(_, name, _, _)| name.clone()).collect();
    let puts = uploads.into_iter().map(|(field, name, data, text)| {
        let store = Arc::clone(&target.store);
        let container = Arc::clone(&target.container);
        async move {
            let length = data.len() as u64;
            let md5 = crate::hex::hex(&Md5::digest(&data));
            store
                .put_blob(&container, &name, data, &PutCondition::IfNotExists)
                .await?;
            let reference = BlobReference {
                name,
                length,
                md5,
                text,
                sealed: field.sealed,
            };
            Ok::<_, Error>((field.name, reference))
        }
    });
    let references = match try_join_all(puts).await {
        Ok(references) => references,
        Err(e) => {
            delete_quietly(target, &names).await;
            return Err(e);
        }
    };
    for (field, reference) in references {
        let text = serde_json::to_string(&reference).map_err(|e| Error::Decode {
            message: e.to_string(),
        })?;
        entity.properties.insert(
            PropertyName::Owned(format!("{field}{REFERENCE_SUFFIX}")),
            text,
        );
    }
    Ok(names)
}

/// Deletes blobs, ignoring failures: what is left is an orphan for the sweep.
pub(crate) async fn delete_quietly(target: &BlobTarget, names: &[String]) {
    let deletes = names
        .iter()
        .map(|name| target.store.delete_blob(&target.container, name, None));
    for result in futures::future::join_all(deletes).await {
        // A blob already gone, or a failure: the sweep finds what remains.
        let _ = result;
    }
}

/// Fetches one blob and checks it against its reference: a missing blob, or
/// one whose length or MD5 differ, is an error naming `field`.
pub(crate) async fn fetch(
    target: &BlobTarget,
    field: &str,
    reference: &BlobReference,
) -> Result<Vec<u8>> {
    let problem = |reason: String| -> Error {
        SchemaError::Property {
            property: field.to_owned(),
            problem: ValueError::Invalid(reason),
            row: None,
        }
        .into()
    };
    let blob = target
        .store
        .get_blob(&target.container, &reference.name)
        .await
        .map_err(|e| match e {
            Error::BlobNotFound { .. } => {
                problem(format!("its blob {:?} is missing", reference.name))
            }
            other => other,
        })?;
    // The bytes received are hashed: what the store reports of them is
    // not what this row's reader gets.
    if blob.data.len() as u64 != reference.length
        || crate::hex::hex(&Md5::digest(&blob.data)) != reference.md5
    {
        return Err(problem(format!(
            "blob {:?} does not match its length and hash",
            reference.name
        )));
    }
    Ok(blob.data)
}

/// Fetches the blobs a row references (concurrently), checks them, and puts
/// the values back as the fields' properties.
pub(crate) async fn restore(
    target: &BlobTarget,
    entity: &mut Entity,
    fields: &[BlobField],
) -> Result<()> {
    let refs = references(entity, fields)?;
    let gets = refs.iter().map(|(field, reference)| async move {
        let data = fetch(target, field, reference).await?;
        let value = if reference.text {
            Value::String(String::from_utf8(data).map_err(|_| {
                Error::from(SchemaError::Property {
                    property: (*field).to_owned(),
                    problem: ValueError::Invalid("blob text is not UTF-8".into()),
                    row: None,
                })
            })?)
        } else {
            Value::Binary(data)
        };
        Ok::<_, Error>((*field, value))
    });
    for (field, value) in try_join_all(gets).await? {
        entity
            .properties
            .remove(&format!("{field}{REFERENCE_SUFFIX}"));
        entity.properties.insert(field, value);
    }
    Ok(())
}

impl<T> Table<T> {
    /// Keeps this table's offloaded values (`#[tablekit(blob)]` and
    /// `#[tablekit(offload)]` fields) in `container` of `store`.
    pub fn with_blob_store(
        mut self,
        store: Arc<dyn crate::blob::BlobStore>,
        container: &str,
    ) -> Table<T> {
        self.blobs = Some(BlobTarget::new(store, container));
        self
    }
}

impl<T: TableEntity> Table<T> {
    /// The blob references of the stored entity, without fetching any blob:
    /// the lazy way to read blob fields (fetch them with
    /// [`fetch_blob`](Table::fetch_blob) when needed). A projection without
    /// the blob fields ([`TableQuery::project`](crate::table::TableQuery::project)) reads no blob either.
    pub fn blob_references(
        &self,
        pk: impl KeyArg<T::PartitionKey>,
        rk: impl KeyArg<T::RowKey>,
    ) -> crate::error::Call<'_, Option<Vec<(&'static str, BlobReference)>>> {
        let keys = schema::encode_keys::<T>(&pk, &rk);
        Box::pin(async move {
            let (pk, rk) = keys?;
            match self.read_stored(&pk, &rk).await? {
                Some(row) => references(&row, blob_fields::<T>()).map(Some),
                None => Ok(None),
            }
        })
    }

    /// Fetches one referenced blob, checked against the reference's length and MD5.
    ///
    /// The blob of an encrypted field holds its ciphertext, which opens
    /// only with its row: it is refused here
    /// ([`NotSupported`](Error::NotSupported)), and read with the entity.
    pub async fn fetch_blob(&self, reference: &BlobReference) -> Result<Vec<u8>> {
        if reference.sealed {
            return Err(Error::NotSupported {
                operation: "fetching an encrypted field's blob alone (read the entity, which opens it)",
            });
        }
        fetch(self.blob_target()?, &reference.name, reference).await
    }

    /// The prefix of this table's and kind's blob names.
    pub(crate) fn blob_prefix(&self) -> String {
        blob_prefix(&self.name, T::DESCRIPTOR.kind)
    }

    /// The blobs of this table and kind that no row references and that are
    /// older than `min_age`: what a crash between two steps of the offload
    /// protocol leaves behind. `min_age` must exceed the longest write, since
    /// a blob is uploaded before its row is written.
    pub async fn orphan_blobs(
        &self,
        min_age: std::time::Duration,
    ) -> Result<Vec<crate::blob::BlobProperties>> {
        let target = self.blob_target()?;
        let prefix = self.blob_prefix();
        // The blobs first, then the rows: a blob uploaded after the listing
        // cannot be mistaken for an orphan.
        let mut blobs = Vec::new();
        let mut options = crate::blob::ListBlobsOptions::prefix(prefix);
        loop {
            let page = target.store.list_blobs(&target.container, &options).await?;
            blobs.extend(page.blobs);
            match page.next_marker {
                Some(marker) => options.marker = Some(marker),
                None => break,
            }
        }
        let mut query = crate::backend::Query::new();
        query.filter = schema::kind_filter::<T>();
        let mut referenced = std::collections::HashSet::new();
        let rows = self.backend.query_all(&self.name, query).await?;
        for row in &rows {
            for (_, reference) in references(row, blob_fields::<T>())? {
                referenced.insert(reference.name);
            }
        }
        let cutoff =
            DateTime::now().ticks() - i64::try_from(min_age.as_nanos() / 100).unwrap_or(i64::MAX);
        blobs.retain(|b| !referenced.contains(&b.name) && b.last_modified.ticks() <= cutoff);
        Ok(blobs)
    }

    /// Deletes the [orphan blobs](Table::orphan_blobs) older than `min_age`;
    /// returns how many were deleted.
    pub async fn sweep_orphan_blobs(&self, min_age: std::time::Duration) -> Result<usize> {
        let orphans = self.orphan_blobs(min_age).await?;
        let target = self.blob_target()?;
        let mut deleted = 0;
        for blob in &orphans {
            match target
                .store
                .delete_blob(&target.container, &blob.name, Some(&blob.etag))
                .await
            {
                Ok(()) => deleted += 1,
                // Gone or rewritten meanwhile: not ours to delete.
                Err(Error::BlobNotFound { .. } | Error::BlobConditionNotMet { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }
}
