//! [`Loaded`]: a value read from the store, with its ETag and Timestamp.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::datetime::DateTime;
use crate::entity::ETag;
#[cfg(doc)]
use crate::table::{Table, TableBatch};

/// A value read from the store, with the ETag and Timestamp of the version
/// read. Writes through [`Table::replace`], [`Table::merge`] and
/// [`Table::delete`] are guarded by that ETag, and `replace` and `merge`
/// refresh it, so the same writer can write again.
///
/// `Loaded<T>` derefs to `T`, so `loaded.name` is the entity's own field.
/// Its ETag and Timestamp are read with associated functions, in the style of
/// [`Arc::strong_count`](std::sync::Arc::strong_count), so they can never
/// shadow a field or method of `T` (an entity may well have a `timestamp`):
///
/// ```
/// # use tablekit::{Loaded, ETag};
/// let loaded = Loaded::new("value", ETag::new("W/\"datetime'2024-01-02T03%3A04%3A05.0000000Z'\""), None);
/// assert_eq!(Loaded::etag(&loaded).as_str(), "W/\"datetime'2024-01-02T03%3A04%3A05.0000000Z'\"");
/// assert_eq!(Loaded::into_inner(loaded), "value");
/// ```
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    pub(super) value: T,
    pub(super) etag: ETag,
    pub(super) timestamp: Option<DateTime>,
    /// The Timestamp is the time the ETag names (falling back on
    /// `timestamp`), read from it when asked for: a write through this
    /// value then costs no parsing.
    pub(super) stamp_in_etag: bool,
    /// The write history of the row read (see [`update::WRITES_PROPERTY`]),
    /// which a write through this value carries on.
    pub(super) writes: Option<String>,
    /// The RowKeys of the version's index rows, so that a write through this
    /// value knows which to move without reading them again.
    pub(super) index_keys: IndexKeys<T>,
    /// The schema version the row records (`_Version`), as read or as last
    /// written through this value.
    pub(super) version: Option<u32>,
    /// The previous kind whose RowKey the row was read under (a renamed
    /// kind's row not moved yet), until a write through this value moves it.
    pub(super) previous_kind: Option<&'static str>,
    /// The properties of the row read that the type has no field for, which
    /// a replace through this value writes back (see [`Loaded::unknown_properties`]).
    pub(super) unknown: crate::entity::Properties,
    /// The id of the key the row's encrypted values were sealed under, when
    /// a read that keeps it opened them (a migration seals again the rows
    /// of keys other than the current one).
    pub(super) sealed_under: Option<Box<str>>,
    /// Set by a migration, whose write is not the entity's own: a time to
    /// live keeps counting from the last write the row records.
    pub(super) keeps_last_write: bool,
}

impl<T> Loaded<T> {
    /// A value with the ETag and Timestamp of the version it was read as.
    pub fn new(value: T, etag: ETag, timestamp: Option<DateTime>) -> Loaded<T> {
        Loaded {
            value,
            etag,
            timestamp,
            stamp_in_etag: false,
            writes: None,
            index_keys: IndexKeys::Unknown,
            version: None,
            previous_kind: None,
            unknown: crate::entity::Properties::new(),
            sealed_under: None,
            keeps_last_write: false,
        }
    }

    /// A value just written as the version `etag`: its Timestamp is the
    /// time the ETag names.
    pub(crate) fn written(value: T, etag: ETag) -> Loaded<T> {
        Loaded {
            stamp_in_etag: true,
            ..Loaded::new(value, etag, None)
        }
    }

    /// The ETag of the version read (or last written through this value).
    pub fn etag(this: &Loaded<T>) -> &ETag {
        &this.etag
    }

    /// When that version was written, as the store recorded it.
    pub fn timestamp(this: &Loaded<T>) -> Option<DateTime> {
        if this.stamp_in_etag {
            this.etag.timestamp().or(this.timestamp)
        } else {
            this.timestamp
        }
    }

    /// The schema version the row was stored with (its `_Version`): as
    /// read, so a row an older version of the type wrote (within its
    /// `min_version`) says so, or as last written through this value (the
    /// type's current version). `None` when the row records none: a type
    /// without a kind, or one with `kind_properties = false`.
    pub fn version(this: &Loaded<T>) -> Option<u32> {
        this.version
    }

    /// The previous kind the row was stored under, for a type that lists
    /// `previous_kinds` and a row that no write or migration has moved to
    /// the kind's own RowKey yet; `None` for a row under the current kind.
    /// A write through this value moves the row.
    pub fn previous_kind(this: &Loaded<T>) -> Option<&'static str> {
        this.previous_kind
    }

    /// The properties of the row read that the type has no field for:
    /// columns another client writes, or fields a later version of the type
    /// dropped. A replace through this value (and [`Table::update`]) writes
    /// them back unchanged, values and types alike, unless the type now
    /// has a field of that name; tablekit's own bookkeeping is not among
    /// them. Empty for a value made with [`Loaded::new`].
    pub fn unknown_properties(this: &Loaded<T>) -> &crate::entity::Properties {
        &this.unknown
    }

    /// Forgets the [unknown properties](Loaded::unknown_properties), so that
    /// a replace through this value removes them from the row (to clear out
    /// the column of a field the type dropped, say).
    pub fn drop_unknown_properties(this: &mut Loaded<T>) {
        this.unknown = crate::entity::Properties::new();
    }

    /// The value, without the ETag.
    pub fn into_inner(this: Loaded<T>) -> T {
        this.value
    }

    /// The value, the ETag and the Timestamp.
    pub fn into_parts(this: Loaded<T>) -> (T, ETag, Option<DateTime>) {
        let timestamp = Loaded::timestamp(&this);
        (this.value, this.etag, timestamp)
    }

    /// Records that the value was written as the version `etag` (for writes
    /// made outside [`Table::replace`] and [`Table::merge`], such as a
    /// [`TableBatch`], whose `submit` returns each operation's ETag). The
    /// Timestamp is the time the ETag names (for an ETag that names none,
    /// the Timestamp last read).
    pub fn set_etag(this: &mut Loaded<T>, etag: ETag) {
        // Read from the ETag when asked for. An ETag of another form falls
        // back on the Timestamp last read.
        this.stamp_in_etag = true;
        this.etag = etag;
        // The version written elsewhere may have moved index values: the
        // next write through this value reads them again.
        this.index_keys = IndexKeys::Unknown;
        // A write of a renamed kind's row moves it to the kind's RowKey.
        this.previous_kind = None;
    }
}

/// Equal when the values, the ETags and the Timestamps are (what a write
/// through either remembers of the row is no part of it).
impl<T: PartialEq> PartialEq for Loaded<T> {
    fn eq(&self, other: &Loaded<T>) -> bool {
        self.value == other.value
            && self.etag == other.etag
            && Loaded::timestamp(self) == Loaded::timestamp(other)
    }
}

impl<T> Deref for Loaded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Loaded<T> {
    fn deref_mut(&mut self) -> &mut T {
        // The value may change from here on: the keys of the version read
        // are taken from it while it is still that version.
        if matches!(self.index_keys, IndexKeys::AsRead { .. }) {
            self.index_keys = IndexKeys::Known(self.index_keys());
        }
        &mut self.value
    }
}

/// What a [`Loaded`] knows of the RowKeys of its version's index rows.
///
/// A read does not compute them: most values read are never written back.
/// They are computed from the value when a write through it needs them, or
/// when the value is first borrowed mutably (while it is still the version
/// read), whichever comes first.
#[derive(Debug, Clone)]
pub(super) enum IndexKeys<T> {
    /// Not known (a value made by [`Loaded::new`], or written elsewhere):
    /// a write through the value reads the stored row's.
    Unknown,
    /// The value is the version read, under `row_key`: its keys are
    /// `keys(value, row_key)`.
    AsRead {
        row_key: String,
        keys: fn(&T, &str) -> Option<Vec<String>>,
    },
    /// Known (`None`: unknown, as for [`IndexKeys::Unknown`]).
    Known(Option<Arc<[String]>>),
}

impl<T> IndexKeys<T> {
    /// Keys computed for a value just written (`None`: unknown).
    pub(super) fn known(keys: Option<Vec<String>>) -> IndexKeys<T> {
        IndexKeys::Known(keys.map(Arc::from))
    }
}

impl<T> Loaded<T> {
    /// The RowKeys of the index rows of the version held; `None` when they
    /// are not known (a write then reads them from the store).
    pub(super) fn index_keys(&self) -> Option<Arc<[String]>> {
        match &self.index_keys {
            IndexKeys::Unknown => None,
            IndexKeys::AsRead { row_key, keys } => keys(&self.value, row_key).map(Arc::from),
            IndexKeys::Known(keys) => keys.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    static COMPUTED: AtomicUsize = AtomicUsize::new(0);

    /// Index keys of a value: one, made of the value and the RowKey.
    fn keys(value: &String, row_key: &str) -> Option<Vec<String>> {
        COMPUTED.fetch_add(1, Ordering::SeqCst);
        Some(vec![format!("{value}|{row_key}")])
    }

    fn as_read(value: &str) -> Loaded<String> {
        let mut loaded = Loaded::new(value.to_owned(), ETag::new("e"), None);
        loaded.index_keys = IndexKeys::AsRead {
            row_key: "rk".into(),
            keys,
        };
        loaded
    }

    #[test]
    fn index_keys_are_those_of_the_version_read_and_computed_only_when_needed() {
        COMPUTED.store(0, Ordering::SeqCst);
        // Read only: nothing is computed.
        let read = as_read("old");
        assert_eq!(read.len(), 3);
        let cloned = read.clone();
        assert_eq!(COMPUTED.load(Ordering::SeqCst), 0);
        // Asked for by a write of the unchanged value: the value's own.
        assert_eq!(
            cloned.index_keys().as_deref(),
            Some(&["old|rk".to_owned()][..])
        );
        assert_eq!(COMPUTED.load(Ordering::SeqCst), 1);

        // Changed: the keys stay those of the version read, computed once,
        // before the change.
        let mut changed = as_read("old");
        changed.push_str(" and new");
        changed.push('!');
        assert_eq!(COMPUTED.load(Ordering::SeqCst), 2);
        assert_eq!(&*changed, "old and new!");
        assert_eq!(
            changed.index_keys().as_deref(),
            Some(&["old|rk".to_owned()][..])
        );
        assert_eq!(COMPUTED.load(Ordering::SeqCst), 2);

        // Written elsewhere: unknown again.
        Loaded::set_etag(&mut changed, ETag::new("f"));
        assert_eq!(changed.index_keys(), None);
    }
}
