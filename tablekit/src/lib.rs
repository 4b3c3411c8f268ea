//! # tablekit
//!
//! Typed, correct access to PartitionKey/RowKey table stores: Azure Table
//! Storage, Cosmos DB for Table, and Azurite in development.
//!
//! Write a struct, derive [`TableEntity`], and get order-preserving keys,
//! entity kinds that share a table, and a typed async client, [`Table`]:
//!
//! ```
//! use tablekit::{Table, TableEntity};
//! use tablekit_mem::MemBackend;
//!
//! #[derive(TableEntity, Debug, Clone)]
//! #[tablekit(table = "Staff", kind = "EMP", rename_all = "PascalCase")]
//! struct Employee {
//!     #[tablekit(partition_key)]
//!     department: String,
//!     #[tablekit(row_key)]
//!     id: u32, // stored zero-padded, so ids sort numerically
//!     name: String,
//!     age: Option<i32>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let staff: Table<Employee> = Table::new(MemBackend::new());
//! staff.create_if_missing().await?;
//! for id in [7, 123, 150, 420] {
//!     let e = Employee { department: "Sales".into(), id, name: format!("#{id}"), age: Some(30) };
//!     staff.insert(&e).await?;
//! }
//! // A range over the typed key: RowKey ge 'EMP_0000000100' and le 'EMP_0000000199'.
//! let hundreds = staff.query().partition("Sales").rows(100..=199).collect().await?;
//! assert_eq!(hundreds.iter().map(|e| e.id).collect::<Vec<_>>(), [123, 150]);
//!
//! // Optimistic concurrency: the write is guarded by the ETag read with the
//! // value, and refreshes it, so the same writer may write again.
//! let mut ada = staff.get("Sales", 7).await?.expect("stored");
//! let mut stale = ada.clone();
//! ada.name = "Ada".into();
//! staff.replace(&mut ada).await?;
//! ada.age = Some(36);
//! staff.replace(&mut ada).await?;
//! assert!(staff.replace(&mut stale).await.is_err(), "another writer got there first");
//! # Ok(())
//! # }
//! ```
//!
//! ## The derive
//!
//! `#[derive(TableEntity)]` on a struct with named fields (generics allowed).
//! Its attributes, in `#[tablekit(...)]`, say where the entity lives
//! (`table`, `kind`, `partition_key` and `row_key` fields, a `row_key`
//! template for a table laid out before), how its kinds share a table
//! (`collection`, `parent`, `discriminator`), how it changes over time
//! (`version`, `min_version`, `upgrade_from`, `previous_kinds`, `alias`,
//! `default`), how each field is stored (`rename`, `skip`, `json`, `with`,
//! `flatten`, `series`, `blob`, `offload`), its indexes (`index`, `unique`),
//! and the patterns it takes part in (`wide`, `shards`, `buckets`,
//! `projection_of`). The [`TableEntity`] trait's page is the reference:
//! every attribute, what it does, and its limits.
//!
//! Key fields live only in the keys ([`key`] lists the encodings: zero-padded
//! integers, strings stored as they are but for the characters the store
//! forbids, timestamps, [`InvertedTime`] for newest-first, UUIDs; and for
//! tables laid out before: [`key::Verbatim`] text, [`key::Padded`] numbers of
//! a given width, [`key::Ordered`] strings that keep every order). A type
//! without a `kind` writes no `_Kind` or `_Version` property. Property fields may be any [`schema::PropertyValue`]: strings,
//! integers, floats, `bool`, `Vec<u8>`, UUIDs, [`DateTime`],
//! `time::OffsetDateTime`, `chrono::DateTime<Utc>` (feature `chrono`), unit
//! enums deriving [`TableValue`], and `Option`s of these (absent = `None`).
//! A value the store would give back as another is refused when written,
//! never stored changed: a time with digits finer than the store's 100 ns
//! (`OffsetDateTime::now_utc()` has them; [`DateTime::now`] and
//! [`DateTime::from_unix_nanos`] have not), the `Some(None)` of an
//! `Option<Option<T>>`, a string longer than the store keeps.
//! Mistakes are compile errors on the offending token. The derive also makes
//! `{Name}Columns`, typed filters on the fields: `Employee::columns().age.ge(18)`.
//!
//! [`EntityKinds`] on an enum over entity types reads a partition that holds
//! several kinds as typed variants ([`Table::read_partition`]); types without
//! a `kind` (a RowKey template, a plain layout: a table laid out before
//! tablekit) join it too, each row told apart by its key layout (list a
//! layout that decodes more keys after the ones it would take) or by its
//! `discriminator` property; two such variants that nothing tells apart are
//! a compile error on the enum. A row no variant claims follows the
//! [`UnknownKind`] policy. Or it reads one
//! collection: a row and every row nested under it, with one range query
//! ([`Table::read_collection`]). Kinds in a collection share their RowKey
//! range and are told apart by their `_Kind` property, which their typed
//! queries filter on.
//!
//! A typed entity also goes to and from its row's wire JSON directly:
//! [`schema::to_json`] writes it from the fields (no property map, no copies)
//! and checks what the service checks; [`schema::from_json`] reads it back
//! with the checks of [`schema::from_entity`] (kind, version, keys, types).
//! For entities that travel as text: queues, caches, logs.
//!
//! ## Table designs tablekit builds for you
//!
//! A table store answers two questions fast: one row by its keys, and a
//! range of rows of one partition in key order. Good designs put what is
//! read together into one partition and one range. tablekit makes these
//! designs a matter of attributes:
//!
//! - **Compound keys that sort as their values**: several `row_key` fields,
//!   numbers zero-padded so that `rows(100..=199)` is one range.
//! - **Hierarchical partition keys**: tenant > user > session, with
//!   `partition_prefix("acme")` reading one tenant.
//! - **Several kinds in one partition**: a department and its employees,
//!   told apart by `kind`, read together as an [`EntityKinds`] enum.
//! - **Collections**: a row and the rows that belong to it stored side by
//!   side (`collection`, `parent`), read with one range query.
//! - **Newest first**: [`InvertedTime`] keys for logs and feeds, and
//!   `row_prefix_range` for a tail from a time on.
//! - **Wide rows and series**: entities larger than a row (`wide`), and
//!   collections stored one property per element (`series`) so one element
//!   can be merged alone.
//! - **Large values**: `blob` and `offload` keep them in a blob store, the
//!   row holding a reference.
//! - **Encrypted properties**: `#[tablekit(encrypted)]` fields are sealed
//!   in the process (AES-256-GCM, bound to their row, under a key you
//!   keep) and the store sees ciphertext alone (see [`encryption`]).
//! - **Tables laid out before**: [`key::Verbatim`], [`key::Padded`] and
//!   RowKey templates map existing keys exactly.
//! - **Secondary indexes**: `#[tablekit(unique = "email")]` or
//!   `#[tablekit(index = "last_name")]` on a field keeps a row per value in
//!   the entity's partition, written, moved and deleted with the entity in
//!   one transaction by every write; [`Table::index`] finds entities by
//!   value, prefix or range (see [`index`]). A [`key::CaseInsensitive`]
//!   field is indexed case-folded: an email unique whatever its case. An
//!   `Option` field has an index row only when it holds a value.
//! - **Writes that change together**: a [`Transaction`] runs writes of
//!   entities of any types in one partition as one transaction, index rows
//!   included, so a copy of a department's manager kept in each employee
//!   never disagrees with it; ETags and [`Table::update`] keep concurrent
//!   writers from losing each other's changes.
//! - **Changes across partitions and tables**: no transaction reaches
//!   them, so tablekit records what is left to do in the entity's own
//!   transaction and finishes it at once, with a queue and a worker to
//!   finish what a stopped writer left (see [`outbox`]). An employee moves
//!   to another department with [`Table::move_to`] (copied first, so a
//!   reader always finds it in one of the two); an index declared with
//!   `partition = "…"` or `table = "…"` keeps its rows elsewhere, read with
//!   [`Table::remote_index`] and eventually consistent.
//! - **Volume**: `#[tablekit(buckets = "day")]` keeps a kind in one table
//!   per hour, day or month, read across periods and dropped whole (see
//!   [`bucket`]); `#[tablekit(shards = 8)]` spreads a hot partition over
//!   eight, read back merged in key order (see [`shard`]); logs go to blobs
//!   of JSON lines named by time, never to a table (see [`log`]).
//!
//! ## Changing an entity
//!
//! Rows outlive the code that wrote them. What changes safely, with no
//! migration:
//! - **Adding a field**: give it `#[tablekit(default)]` (or
//!   `default = path`), and rows written before read it as that value.
//! - **Renaming a field**: `#[tablekit(rename = "Color", alias = "Colour")]`
//!   reads either name and writes the new one; rows take the new name as
//!   they are written.
//! - **Dropping a field**: a read ignores properties a type has no field
//!   for, and a write through what was read keeps them (see *Columns a type
//!   does not know*, below).
//! - **Versions**: `version = 2, min_version = 1` writes version 2 and reads
//!   rows of versions 1 and 2; [`Loaded::version`] tells which one a row was
//!   stored with. A row of a version outside the range is an error that names
//!   the row and both versions.
//! - **Typed upgrades**: when the shape changes more than that, keep the old
//!   shape as its own type and declare the new one
//!   `#[tablekit(kind = "ITEM", version = 2, upgrade_from = ItemV1)]` with
//!   `impl From<ItemV1> for Item` (or `upgrade_with = path`). Every typed
//!   read (gets, queries, index reads, collections) reads a version-1 row as
//!   `ItemV1` and converts it; chains (`ItemV3` upgrading `ItemV2`, which
//!   upgrades `ItemV1`) follow; writes write the current version, with index
//!   rows made from the upgraded value. Another table, kind or key layout,
//!   or a version that does not increase, is a compile error on the type
//!   named.
//! - **Rewriting old rows**: [`Table::migrate`] rewrites the rows of older
//!   versions as the current one (a dry run counts them per version), so
//!   the old shapes can leave the code: a page at a time, the rows of a
//!   partition in transactions, a few partitions at once, paced, and
//!   resumable from the checkpoint it hands out after each page.
//! - **Renaming a kind**: `#[tablekit(kind = "PRODUCT", previous_kinds =
//!   ["PRD"])]` reads the rows stored under `PRD_…` RowKeys as well, on every
//!   typed path, and [`Loaded::previous_kind`] says a row still lies there.
//!   A write of such an entity (and [`Table::migrate`], which counts and
//!   rewrites them) moves it to its `PRODUCT_…` RowKey in one transaction
//!   with its index rows, and an insert of its keys is refused as taken.
//!   Each write of the type looks for the entity under the old names first
//!   (a point read more, when it is not under the new one), so once a
//!   migration has run, drop `previous_kinds` again. Until then a query
//!   returns the rows still under an old name apart from the others: all
//!   of them in stored RowKey order, `PRD_…` before `PRODUCT_…`, so a
//!   `limit` or a page is not the first rows in the type's key order. A
//!   type with indexes names their tags (`tag = "PRD.code"`, the tag they
//!   had) so that its index rows stay where they are; indexes kept
//!   elsewhere, kinds in a collection and key templates cannot be renamed.
//!   Programs that still write the old kind must be gone before the first
//!   program with the new name writes: the old one would not find the rows
//!   it moved.
//!
//! During a rolling deploy, old and new programs share the table. An older
//! program never overwrites a newer program's row: its `update` and its
//! `replace` of such a row fail with [`Error::NewerVersion`], and nothing is
//! written. (A merge drops nothing, and is allowed.) Deploy a change of
//! shape in two steps:
//! 1. A release that reads both shapes and still writes the old one: new
//!    fields with `default`; a renamed field keeps its stored name and reads
//!    the new one too (`rename = "Colour", alias = "Color"`); `version`
//!    unchanged.
//! 2. Once every instance runs it, the release that writes the new shape:
//!    `version` one higher, `rename = "Color", alias = "Colour"`.
//!
//! While the second step rolls out, instances of the first cannot read rows
//! the second wrote (a row error that names both versions, under the
//! query's [`RowErrors`](table::RowErrors) policy) and cannot overwrite them
//! ([`Error::NewerVersion`]); nothing is lost either way.
//!
//! ## Columns a type does not know
//!
//! A type may map only part of a table that other clients write, and a row
//! may hold the column of a field a later version dropped. What each write
//! does with the properties the type has no field for:
//! - **Through what was read** ([`Table::replace`], [`Table::update`],
//!   [`Table::move_to`], a transaction's `replace`, [`Table::migrate`]):
//!   they are written back unchanged, values and EDM types alike. A
//!   [`Loaded`] holds them ([`Loaded::unknown_properties`]);
//!   [`Loaded::drop_unknown_properties`] forgets them, so that the next
//!   replace removes them from the row.
//! - **Merges** ([`Table::merge`], [`Table::upsert_merge`],
//!   [`Table::merge_unconditionally`]) touch only the properties they write,
//!   so every other column stays.
//! - **Writes of a value alone** ([`Table::insert`], [`Table::upsert`],
//!   [`Table::replace_unconditionally`]) store exactly the type's
//!   properties: an upsert or unconditional replace of an existing row
//!   removes every column the type does not know. Use a merge, or read and
//!   replace, on tables other clients write.
//!
//! ## The layers
//! - the value model: [`Value`] (every EDM type), [`Entity`], [`DateTime`],
//!   [`ETag`], and the JSON wire form in [`json`];
//! - one validator, [`validate`], that checks every limit of the real service
//!   before anything is sent, with a typed [`InvalidInput`] per rule;
//! - the backend contracts [`TableBackend`], [`BlobStore`] and
//!   [`QueueStore`], one async method per store operation, dyn-compatible,
//!   with the conveniences of [`TableBackendExt`]; a [`clock`] that tests
//!   can move by hand;
//! - typed [`filter`]s that render to OData `$filter` text with correct escaping;
//! - [`layer`]s such as fault injection;
//! - [`telemetry`]: a `tracing` span per operation and per call to a store,
//!   in OpenTelemetry's terms, events for retries and throttles, and
//!   OpenTelemetry metrics with the `metrics` feature;
//! - the test suite every backend must pass is the `tablekit-conformance`
//!   crate; the `conformance` feature opens the few hooks it needs.
//!
//! Backends live in their own crates: `tablekit-mem` (the strict in-memory
//! reference) and `tablekit-azure` (REST, for Azure, Cosmos DB and Azurite).
//! The untyped contract can be used directly:
//!
//! ```
//! use tablekit::{Entity, Query, TableBackend, TableBackendExt, filter::prop};
//! use tablekit_mem::MemBackend;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let backend = MemBackend::new();
//! backend.create_table("people").await?;
//! backend.insert_entity("people", &Entity::new("sales", "000123").with("Age", 36)).await?;
//! let found = backend.query_all("people", Query::new().filter(prop("Age").ge(30))).await?;
//! assert_eq!(found.len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! ## Key order, on every store
//! Reads that promise key order (PartitionKey, then RowKey) keep it on every
//! backend: typed streams and pages, ranges, limits and cursors, merged
//! shards, time-bucketed queries, index reads, collections, and
//! [`TableBackendExt::query_stream`]. (The order is the stored RowKeys':
//! for a renamed kind whose rows are not all migrated, those under an old
//! name come as a run of their own; see "Renaming a kind" above.) Azure
//! Table Storage and Azurite return rows in key order. Cosmos DB for Table does not promise any order; its
//! backend says so ([`TableBackend::query_order`] is
//! [`QueryOrder::Unspecified`]), and there tablekit reads a query's pages to
//! the end and sorts them on the client before handing out the first row.
//! That costs memory for the whole result, and a page read
//! ([`TableQuery::page`]) reads the rest of its query each time, so keep
//! ordered reads on such a store to a partition or a key range. Counts need
//! no order and read the store's pages as they come.

#![cfg_attr(docsrs, feature(doc_cfg))]

// The core every backend stands on, at the paths it always had here.
#[doc(inline)]
pub use tablekit_core::{
    backend, blob, clock, filter, json, key, keyorder, layer, pacing, queue, telemetry, validate,
};
use tablekit_core::{datetime, entity, error, order, props, value};

pub mod bucket;
pub mod changes;
pub mod copy;
pub mod encryption;
mod exec;
mod hex;
pub mod index;
pub mod log;
pub mod outbox;
mod pending;
pub mod schema;
pub mod shard;
pub mod table;
pub mod upkeep;

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
    Call, Error, InvalidInput, KeyKind, Result, RowContext, SchemaError, StorageFailure, ValueError,
};
pub use index::{IndexPage, IndexReader, RemoteAudit, RemotePass};
pub use key::InvertedTime;
pub use queue::QueueStore;
pub use schema::{EntityKinds, TableEntity, TableFields, UnknownKind};
pub use table::{
    BulkFailure, BulkReport, BulkWriter, Cursor, CursorPage, Loaded, Table, TableBatch, TableQuery,
    Transaction, UpdateOptions,
};
pub use value::{EdmType, Value, ValueRef};

/// Re-exported so users and generated code name one version of these crates.
pub use uuid;

pub use tablekit_derive::{EntityKinds, TableEntity, TableFields, TableValue};

// The derives name `::tablekit`: this crate's own unit tests derive too.
#[cfg(test)]
extern crate self as tablekit;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[cfg(feature = "conformance")]
#[doc(hidden)]
#[path = "hooks.rs"]
pub mod __conformance;
