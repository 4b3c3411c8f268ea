//! The static facts of an entity type, in one value that
//! `#[derive(TableEntity)]` emits: [`EntityDescriptor`].
//!
//! The descriptor holds what every entity has (table, kind, versions, key
//! layout, flags, field names). What a pattern needs to know of a type is
//! a *part* the pattern defines in its own module (an index list, a blob
//! field list, a bucket period, a shard count) and the derive places in
//! [`EntityDescriptor::parts`]; the pattern finds it again with
//! [`EntityDescriptor::part`]. So the contract stays the same size as
//! patterns are added, and this layer knows none of them by name.

use std::any::{Any, TypeId};
use std::fmt;

use futures::future::BoxFuture;

use crate::backend::BatchOperation;
use crate::blob::BlobTarget;
use crate::entity::{Entity, IfMatch};
use crate::error::Error;
use crate::filter::Filter;
use crate::key::RowKeyLayout;
use crate::pending::Step;

/// What `#[derive(TableEntity)]` says of a type, as one constant:
/// [`TableEntity::DESCRIPTOR`](super::TableEntity::DESCRIPTOR).
///
/// Read it to learn the table, kind and versions of a type; its parts are
/// for the patterns that defined them.
#[derive(Clone, Copy)]
pub struct EntityDescriptor {
    /// The table name (`#[tablekit(table = "…")]`, else the type's name).
    pub table: &'static str,
    /// The entity kind: the RowKey starts with `KIND_`, and (with
    /// [`kind_properties`](Self::kind_properties)) the row stores it.
    pub kind: Option<&'static str>,
    /// The names the kind had before (`#[tablekit(previous_kinds = ["…"])]`),
    /// whose rows are read as this type and moved to its own RowKeys when
    /// they are written or migrated; empty for most types.
    pub previous_kinds: &'static [&'static str],
    /// How the RowKey is laid out: kind tags, the tags of a collection's
    /// nesting, or a template's texts.
    pub row_key_layout: RowKeyLayout,
    /// The schema version written.
    pub version: u32,
    /// The oldest schema version read.
    pub min_version: u32,
    /// The PartitionKey fields, for messages.
    pub partition_key_fields: &'static str,
    /// The RowKey fields, for messages.
    pub row_key_fields: &'static str,
    /// How one entity is stored as several rows of its partition, for a
    /// type whose entities may be too wide for one (`#[tablekit(wide)]`);
    /// `None`: one row each.
    pub rows: Option<&'static dyn RowRule>,
    /// Whether a kind's row stores `_Kind` and `_Version` (`true` unless
    /// `#[tablekit(kind_properties = false)]`, where the kind lives in the
    /// RowKey prefix only, as in tables laid out before).
    pub kind_properties: bool,
    /// Whether the property names are fixed and were checked distinct at
    /// compile time (no flattened, series or aliased fields): a write then
    /// skips the run-time check for duplicates, and readers may look fields
    /// up by position in [`field_names`](Self::field_names).
    pub checked_names: bool,
    /// The stored names of the fields held in one property each, in field
    /// order (empty for a projection).
    pub field_names: &'static [&'static str],
    /// Appends the property names the type reads, for `$select`; `false`
    /// when they cannot all be known before reading (a map series).
    pub property_names: fn(&mut Vec<String>) -> bool,
    /// How stored PartitionKeys relate to the type's own, when one logical
    /// partition is stored as several.
    pub partitions: Option<&'static dyn PartitionRule>,
    /// The parts the patterns need, each defined by its pattern.
    pub parts: &'static [Part],
    /// For a projection (`#[tablekit(projection_of = Entity)]`), the
    /// entity's descriptor.
    pub base: Option<&'static EntityDescriptor>,
    /// The property and value that tell this type's rows from other
    /// types' in a table they share when the RowKey does not
    /// (`#[tablekit(discriminator(property = "…", value = "…"))]`).
    pub discriminator: Option<Discriminator>,
}

/// A property and its value that mark the rows of one type, as tables
/// written by other clients often tell kinds apart (`EntityType =
/// "Payment"`). A write of the type stores it; a read refuses a row that
/// holds another value; a query of the type keeps to the rows that hold
/// it; an [`EntityKinds`](super::EntityKinds) enum reads a row as the
/// variant whose value it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discriminator {
    /// The property's name.
    pub property: &'static str,
    /// The value the type's rows hold (a string).
    pub value: &'static str,
}

impl EntityDescriptor {
    /// A descriptor of `table` with no kind, keys or parts: a start for
    /// hand-written impls and tests, completed with struct update syntax.
    pub const fn new(table: &'static str) -> Self {
        EntityDescriptor {
            table,
            kind: None,
            previous_kinds: &[],
            row_key_layout: RowKeyLayout::NONE,
            version: 1,
            min_version: 1,
            partition_key_fields: "",
            row_key_fields: "",
            rows: None,
            kind_properties: true,
            checked_names: false,
            field_names: &[],
            property_names: no_names,
            partitions: None,
            parts: &[],
            base: None,
            discriminator: None,
        }
    }

    /// The part of type `P` this type declares, if any.
    pub fn part<P: DescriptorPart>(&self) -> Option<&'static P> {
        // The type ids are constants, so for a known type the search
        // settles at compile time; no part is asked for its type.
        let part = self
            .parts
            .iter()
            .find(|part| part.type_id == TypeId::of::<P>())?;
        let any: &'static dyn Any = part.value;
        any.downcast_ref::<P>()
    }

    /// The part of type `P` this type declares, or for a projection, the
    /// one its entity declares.
    pub fn part_or_base<P: DescriptorPart>(&self) -> Option<&'static P> {
        self.part().or_else(|| self.base?.part())
    }

    /// Whether rows may be written through this type: not through a
    /// projection of an entity one of whose parts a partial row would
    /// break (an entity with indexes, whose index rows a write through the
    /// projection could not keep in step).
    pub fn writable(&self) -> bool {
        match self.base {
            None => true,
            Some(base) => {
                base.writable()
                    && !base
                        .parts
                        .iter()
                        .any(|part| part.value.bars_partial_writes())
            }
        }
    }

    /// Whether an entity may span several rows (it has a [`RowRule`]).
    pub fn wide(&self) -> bool {
        self.rows.is_some()
    }

    /// What a write of this type asks beyond writing its row: the needs of
    /// its parts together, and for a `wide` entity, a planned transaction.
    pub fn write_needs(&self) -> WriteNeeds {
        let mut needs = WriteNeeds {
            // A renamed kind's write looks for the row under its previous
            // names, and moves it in the same transaction.
            planned: self.wide() || !self.previous_kinds.is_empty(),
            ..WriteNeeds::NONE
        };
        for part in self.parts {
            let more = part.value.write_needs();
            needs.planned |= more.planned;
            needs.rows += more.rows;
            needs.blobs |= more.blobs;
            needs.follow_up |= more.follow_up;
            needs.changes |= more.changes;
            needs.previous |= more.previous;
        }
        needs.planned |= needs.changes;
        needs
    }

    /// The layouts this type's rows are stored in: its own (`None` beside
    /// it), then each [previous kind](Self::previous_kinds)'s (its name
    /// beside it), where rows no write or migration has moved yet lie.
    pub fn stored_layouts(
        &self,
    ) -> impl Iterator<Item = (RowKeyLayout, Option<&'static str>)> + '_ {
        std::iter::once((self.row_key_layout, None)).chain(
            self.previous_kinds
                .iter()
                .map(|&kind| (self.row_key_layout.renamed(kind), Some(kind))),
        )
    }

    /// The layout of a stored RowKey of this type, as
    /// [`stored_layouts`](Self::stored_layouts) gives it: the first whose
    /// prefix the key starts with. `None` when none lays it out.
    pub fn layout_of(&self, row_key: &str) -> Option<(RowKeyLayout, Option<&'static str>)> {
        self.stored_layouts()
            .find(|(layout, _)| layout.starts(row_key))
    }

    /// Whether a row's stored `_Kind` is this type's kind or one of its
    /// previous kinds.
    pub fn is_kind_name(&self, stored: &str) -> bool {
        self.kind == Some(stored) || self.previous_kinds.contains(&stored)
    }

    /// The RowKeys the entity whose RowKey is `row_key` (laid out for the
    /// current kind) had under each previous kind, in the order declared.
    pub fn previous_row_keys<'a>(&'a self, row_key: &'a str) -> impl Iterator<Item = String> + 'a {
        let rest = self
            .row_key_layout
            .prefix()
            .and_then(|prefix| row_key.strip_prefix(prefix.as_str()).map(str::to_owned));
        self.previous_kinds.iter().filter_map(move |kind| {
            let rest = rest.as_ref()?;
            Some(format!("{kind}{}{rest}", crate::key::TAG_SEPARATOR))
        })
    }

    /// The part that keeps values outside the row, if one does.
    pub fn external_values(&self) -> Option<&'static dyn ExternalValues> {
        self.parts
            .iter()
            .find_map(|part| part.value.external_values())
    }

    /// The part that keeps rows beside each entity, if one does.
    #[inline]
    pub fn companion_rows(&self) -> Option<&'static dyn CompanionRows> {
        self.parts
            .iter()
            .find_map(|part| part.value.companion_rows())
    }

    /// How many stored partitions one logical partition spreads over.
    pub fn stored_partitions(&self) -> u16 {
        self.partitions.map_or(1, |rule| rule.count())
    }
}

impl fmt::Debug for EntityDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntityDescriptor")
            .field("table", &self.table)
            .field("kind", &self.kind)
            .field("previous_kinds", &self.previous_kinds)
            .field("row_key_layout", &self.row_key_layout)
            .field("version", &self.version)
            .field("min_version", &self.min_version)
            .field("partition_key_fields", &self.partition_key_fields)
            .field("row_key_fields", &self.row_key_fields)
            .field("rows", &self.rows)
            .field("kind_properties", &self.kind_properties)
            .field("checked_names", &self.checked_names)
            .field("field_names", &self.field_names)
            .field("partitions", &self.partitions)
            .field("parts", &self.parts)
            .field("base", &self.base.map(|base| base.table))
            .finish_non_exhaustive()
    }
}

fn no_names(_: &mut Vec<String>) -> bool {
    true
}

/// One entry of [`EntityDescriptor::parts`]: a part and its type, known
/// when the descriptor is built.
#[derive(Clone, Copy)]
pub struct Part {
    type_id: TypeId,
    value: &'static dyn DescriptorPart,
}

impl Part {
    /// The entry of `part`.
    pub const fn new<P: DescriptorPart>(part: &'static P) -> Part {
        Part {
            type_id: TypeId::of::<P>(),
            value: part,
        }
    }

    /// The part.
    pub fn value(&self) -> &'static dyn DescriptorPart {
        self.value
    }
}

impl fmt::Debug for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

/// A part of an [`EntityDescriptor`], defined by the pattern that needs it.
pub trait DescriptorPart: Any + Send + Sync + fmt::Debug {
    /// Whether writing a projection of the entity (a row holding only some
    /// of its fields) would leave this pattern's rows out of step; such a
    /// projection reads, and never writes.
    fn bars_partial_writes(&self) -> bool {
        false
    }

    /// What this part asks of every write of its entity.
    fn write_needs(&self) -> WriteNeeds {
        WriteNeeds::NONE
    }

    /// The values this part keeps outside the entity's row (blob offload),
    /// which the typed client moves out before a write and back after a
    /// read; `None` for most parts.
    fn external_values(&self) -> Option<&dyn ExternalValues> {
        None
    }

    /// The rows this part keeps beside each entity (indexes), which the
    /// typed client plans into every write; `None` for most parts.
    fn companion_rows(&self) -> Option<&dyn CompanionRows> {
        None
    }
}

/// How the entities of a partition share the companion rows of one slot
/// (see [`CompanionRows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Each entity has a row of its own: its RowKey ends with the
    /// entity's.
    Own,
    /// One row per key, held by one entity at a time: a write that finds
    /// the row held by another entity with the same key is refused.
    Exclusive,
    /// One row per key that lists every entity with that key, changed under
    /// its ETag.
    Listed,
}

/// A part that keeps rows beside each entity (indexes): rows in the
/// entity's partition, written in the same transaction as the entity, and
/// rows elsewhere, brought in step after the write by the steps of a
/// record written with it. The typed client plans both through this,
/// knowing no pattern.
///
/// An entity has one row (or none) in each *slot*. Slots are numbered as
/// [`TableEntity::write_index_key`](super::TableEntity::write_index_key)
/// numbers them: those in the entity's partition first, then those
/// elsewhere. A slot's RowKey starts with what `write_index_key` writes for
/// it; nothing written means no row.
pub trait CompanionRows: Send + Sync {
    /// How many slots are kept in the entity's partition.
    fn local(&self) -> usize;
    /// How many slots are kept in other partitions or tables.
    fn remote(&self) -> usize;
    /// How entities share the rows of local slot `slot`.
    fn sharing(&self, slot: usize) -> Sharing;
    /// The name of local slot `slot`, for messages and markers.
    fn name(&self, slot: usize) -> &'static str;
    /// Whether the RowKeys of local slot `slot` hold a keyed hash of the
    /// value (an index on an encrypted field), not the value.
    fn sealed(&self, _slot: usize) -> bool {
        false
    }
    /// The RowKey of an entity's row in local slot `slot`, from what
    /// `write_index_key` wrote (`encoded`, not empty) and the entity's
    /// stored RowKey; refused when it would not fit.
    fn local_key(&self, slot: usize, encoded: String, row_key: &str) -> Result<String, Error>;
    /// The RowKey of an entity's row in remote slot `slot` (numbered from
    /// 0 among the remote ones), as [`local_key`](Self::local_key).
    fn remote_key(&self, slot: usize, encoded: String, row_key: &str) -> Result<String, Error>;
    /// The value a row of local slot `slot` stands for: its RowKey without
    /// the slot's own prefix.
    fn value_of<'a>(&self, slot: usize, key: &'a str) -> &'a str;
    /// The row `key` of local slot `slot` for the entity stored as `row`
    /// (its logical row). `kind_properties`: the entity's rows record their
    /// kind.
    fn local_row(&self, slot: usize, key: String, row: &Entity, kind_properties: bool) -> Entity;
    /// The row `key` of a [`Listed`](Sharing::Listed) slot listing
    /// `members` (sorted, each once); refused when it would outgrow a row.
    fn list_row(
        &self,
        slot: usize,
        partition_key: &str,
        key: &str,
        members: &[String],
        kind_properties: bool,
    ) -> Result<Entity, Error>;
    /// Where the row `key` of remote slot `slot` of the entity `(partition_key,
    /// row_key)` of table `table` lies, and the fence that orders the steps
    /// on it: `(table, partition, fence)`.
    fn remote_place(
        &self,
        slot: usize,
        table: &str,
        partition_key: &str,
        key: &str,
        row_key: &str,
    ) -> (String, String, String);
    /// What the record of the steps on remote rows is called (its
    /// operation, as the outbox shows it).
    fn record_kind(&self) -> &'static str;
    /// The steps that bring the entity's remote rows from the RowKeys `old`
    /// to `new` (one per remote slot, `None` for no row), for the entity
    /// `(partition_key, row_key)` of table `table` at sequence number `seq`;
    /// `new_row` is the entity's row after the write.
    #[allow(clippy::too_many_arguments)]
    fn remote_steps(
        &self,
        table: &str,
        keys: (&str, &str),
        seq: i64,
        old: &[Option<String>],
        new: &[Option<String>],
        new_row: Option<&Entity>,
        kind_properties: bool,
    ) -> Vec<Step>;
}

/// A part that keeps some of an entity's values outside its row, in a
/// [`BlobTarget`]: the row holds a reference to each. The typed client
/// follows one protocol around it, knowing no pattern: values go out before
/// the row that refers to them is written (and are discarded when that
/// write is refused), come back after a read, and the values a write
/// replaces are discarded after it. So no row ever refers to a missing
/// value; a crash leaves at most a value no row refers to.
pub trait ExternalValues: Send + Sync {
    /// Whether `row` must go out to a store even when the table has none
    /// (a value that never stays in the row): then the write is refused.
    fn needs_store(&self, row: &Entity) -> bool;
    /// Moves the values of `row` that go out to `target`, under names of
    /// `table` and `kind`, leaving references; the names written.
    fn move_out<'a>(
        &'a self,
        target: &'a BlobTarget,
        table: &'a str,
        kind: Option<&'a str>,
        row: &'a mut Entity,
    ) -> BoxFuture<'a, Result<Vec<String>, Error>>;
    /// Whether `row` refers to any value outside it.
    fn refers_out(&self, row: &Entity) -> Result<bool, Error>;
    /// Fetches the values `row` refers to back into it, checked.
    fn bring_back<'a>(
        &'a self,
        target: &'a BlobTarget,
        row: &'a mut Entity,
    ) -> BoxFuture<'a, Result<(), Error>>;
    /// The names of the values `stored` refers to that a write of `row`
    /// replaces: all of them, or for a `merge`, those of the fields `row`
    /// sends.
    fn replaced(&self, stored: &Entity, row: &Entity, merge: bool) -> Result<Vec<String>, Error>;
    /// Deletes values by name, ignoring failures (a later sweep removes
    /// what is left).
    fn discard<'a>(&'a self, target: &'a BlobTarget, names: &'a [String]) -> BoxFuture<'a, ()>;
    /// `row` with each reference in place of a value replaced by an empty
    /// value of the value's type, for readers that need the other fields
    /// only; `None` when it refers to nothing.
    fn blanked(&self, row: &Entity) -> Result<Option<Entity>, Error>;
    /// Whether the property `name` is this pattern's own (a reference it
    /// keeps in the row), which a write sets itself and never carries over
    /// from the row it replaces.
    fn owns_property(&self, name: &str) -> bool {
        let _ = name;
        false
    }
}

/// What a write of an entity asks beyond writing its row, as its
/// descriptor's parts declare it ([`EntityDescriptor::write_needs`]). The
/// typed client picks its way of writing from this, knowing no pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteNeeds {
    /// Other rows change with the entity's, in one planned transaction
    /// (index rows, a wide entity's parts).
    pub planned: bool,
    /// At most how many rows beside the entity's own one write changes in
    /// its transaction, apart from a wide entity's parts.
    pub rows: usize,
    /// Values go to the blob store before the row that refers to them, so
    /// the write cannot join a batch of rows.
    pub blobs: bool,
    /// Work recorded with the write is finished after it commits (an
    /// outbox record: rows kept in another partition or table).
    pub follow_up: bool,
    /// The write records its change in the entity's partition, in its
    /// transaction (the change feed; implies `planned`).
    pub changes: bool,
    /// Each change also records the entity's value before it (the
    /// write reads it first, and is guarded by its ETag).
    pub previous: bool,
}

impl WriteNeeds {
    /// A write of the row alone.
    pub const NONE: WriteNeeds = WriteNeeds {
        planned: false,
        rows: 0,
        blobs: false,
        follow_up: false,
        changes: false,
        previous: false,
    };

    /// Whether the write is more than one row written on its own.
    pub fn any(&self) -> bool {
        self.planned || self.blobs || self.follow_up || self.changes
    }
}

/// How one entity is stored as several rows of its partition: the rows an
/// entity's RowKey names, how they join into the entity, and the operations
/// that write or delete them in one transaction. The typed client reads and
/// writes through it without knowing the layout.
pub trait RowRule: Send + Sync + fmt::Debug {
    /// The filter that reads every row of the entity `(partition_key,
    /// row_key)`, and nothing else.
    fn rows_filter(&self, partition_key: &str, row_key: &str) -> Filter;

    /// The first RowKey after every row of the entity `row_key`.
    fn rows_end(&self, row_key: &str) -> String;

    /// Whether the property `name` of a joined entity is this rule's own
    /// bookkeeping, which a write sets itself and never carries over from
    /// the entity it replaces.
    fn owns_property(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// The entity RowKey a stored row belongs to, if it is one of an
    /// entity's rows.
    fn entity_of<'a>(&self, stored_row_key: &'a str) -> Option<&'a str>;

    /// Joins the stored rows of the entity `row_key` into the entity, with
    /// how many rows it had; `None` when there are none. A set of rows that
    /// is not whole is an error.
    fn join(&self, row_key: &str, rows: Vec<Entity>) -> Result<Option<(Entity, usize)>, Error>;

    /// The operations that write `entity` over its `stored` rows: the first
    /// row under `guard` (an insert when `None`), the rest to match, surplus
    /// rows deleted. `bookkeeping` names properties that stay in the first
    /// row.
    fn write(
        &self,
        entity: Entity,
        bookkeeping: &[&str],
        stored: usize,
        guard: Option<IfMatch>,
    ) -> Result<Vec<BatchOperation>, Error>;

    /// The operations that delete the entity's `stored` rows, the first
    /// under `guard`.
    fn delete(
        &self,
        partition_key: &str,
        row_key: &str,
        stored: usize,
        guard: IfMatch,
    ) -> Vec<BatchOperation>;
}

/// How one logical partition of a type is stored as several: the stored
/// PartitionKey is the logical one and a suffix the RowKey picks.
pub trait PartitionRule: Send + Sync + fmt::Debug {
    /// How many stored partitions a logical one spreads over (at least 1).
    fn count(&self) -> u16;

    /// Appends to `partition_key` (the logical one, encoded) the suffix of
    /// the stored partition of the row whose stored RowKey is `row_key`.
    fn push_suffix(&self, partition_key: &mut String, row_key: &str);

    /// The logical PartitionKey of a stored row, or why the stored key
    /// does not belong to this rule.
    fn logical<'a>(&self, partition_key: &'a str, row_key: &str) -> Result<&'a str, String>;

    /// Every stored PartitionKey of a logical one (encoded).
    fn stored(&self, partition_key: &str) -> Vec<String>;
}
