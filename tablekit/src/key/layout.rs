//! Where kind tags stand in a stored RowKey: before the key fields of a
//! kind (`EMP_0000000007`), and, for kinds nested in a collection, after
//! the key fields of the kinds they nest under
//! (`C_0000000042_ORD_0000000007_LINE_00001`).

use super::{KeyDecodeError, KeyPart, KeyReader};

/// How deep kinds may nest (a kind, its child, its grandchild, …).
pub const MAX_KIND_DEPTH: usize = 8;

/// What a kind tag is followed by in a stored RowKey.
pub const TAG_SEPARATOR: char = '_';

/// The layout of a kind's stored RowKey: which kind tags stand before which
/// key component, and whether the key ends with a separator so that rows
/// of nested kinds can sort right after it.
///
/// `#[derive(TableEntity)]` builds it from `kind`, `parent` and `collection`;
/// a kind that is no collection and has no parent is laid out as
/// `KIND_` and its key fields, a type without a kind as its key fields alone.
///
/// ```
/// use tablekit::key::{KeyTuple, RowKeyLayout};
/// const CUSTOMER: RowKeyLayout = RowKeyLayout::kind("C").heading_collection();
/// const ORDER: RowKeyLayout = CUSTOMER.nested("ORD", 1);
/// assert_eq!(CUSTOMER.encode(&"acme".to_string()), "C_acme|");
/// assert_eq!(ORDER.encode(&("acme".to_string(), 7u32)), "C_acme|ORD_0000000007");
/// assert_eq!(
///     <(String, u32)>::decode_laid_out("C_acme|ORD_0000000007", &ORDER)?,
///     ("acme".to_string(), 7)
/// );
/// # Ok::<(), tablekit::key::KeyDecodeError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowKeyLayout {
    tags: [&'static str; MAX_KIND_DEPTH],
    /// The index of the key component each tag stands before.
    before: [usize; MAX_KIND_DEPTH],
    depth: usize,
    heads_collection: bool,
    /// Whether a separator follows the last key component in any case: the
    /// form of a key that the keys of a collection start with.
    open: bool,
}

impl RowKeyLayout {
    /// No kind: the key fields alone.
    pub const NONE: RowKeyLayout = RowKeyLayout {
        tags: [""; MAX_KIND_DEPTH],
        before: [0; MAX_KIND_DEPTH],
        depth: 0,
        heads_collection: false,
        open: false,
    };

    /// A kind of its own: `TAG_` before the key fields.
    pub const fn kind(tag: &'static str) -> RowKeyLayout {
        RowKeyLayout::NONE.nested(tag, 0)
    }

    /// The layout of a kind nested under this one: its tag stands before the
    /// key component `before` (the number of this kind's key components).
    ///
    /// # Panics
    /// At compile time (where the derive uses it) when kinds nest deeper
    /// than [`MAX_KIND_DEPTH`], or `before` is less than where this kind's
    /// own tag stands.
    pub const fn nested(self, tag: &'static str, before: usize) -> RowKeyLayout {
        assert!(
            self.depth < MAX_KIND_DEPTH,
            "kinds nest at most 8 deep in a collection"
        );
        assert!(
            self.depth == 0 || before >= self.before[self.depth - 1],
            "a nested kind's key starts with the key of the kind it nests under"
        );
        let mut layout = self;
        layout.tags[layout.depth] = tag;
        layout.before[layout.depth] = before;
        layout.depth += 1;
        layout.heads_collection = false;
        layout
    }

    /// The same layout, for a kind that heads a collection: when its last key
    /// component is a string, its separator follows it, so that the rows of
    /// kinds nested under it (whose keys go on after that separator) sort
    /// right after it and no key of its own can look like one of theirs.
    pub const fn heading_collection(self) -> RowKeyLayout {
        let mut layout = self;
        layout.heads_collection = true;
        layout
    }

    /// The layout of the leading part every key of a collection headed by
    /// this kind starts with: the kind's own key, followed by a separator
    /// where another tag would follow it.
    pub const fn opened(self) -> RowKeyLayout {
        let mut layout = self;
        layout.open = true;
        layout
    }

    /// Whether other kinds may nest under this one.
    pub const fn heads_collection(&self) -> bool {
        self.heads_collection
    }

    /// Whether this kind nests under another.
    pub const fn is_nested(&self) -> bool {
        self.depth > 1
    }

    /// Whether the kind belongs to a collection (heads one or nests in one):
    /// its rows share a RowKey range with rows of other kinds.
    pub const fn in_collection(&self) -> bool {
        self.heads_collection || self.is_nested()
    }

    /// The tag of the outermost kind, the one every stored key starts with.
    pub const fn root(&self) -> Option<&'static str> {
        if self.depth == 0 {
            None
        } else {
            Some(self.tags[0])
        }
    }

    /// The tags, outermost first, with the index of the key component each
    /// stands before.
    pub fn tags(&self) -> impl Iterator<Item = (&'static str, usize)> + '_ {
        (0..self.depth).map(|i| (self.tags[i], self.before[i]))
    }

    /// Whether component `index` (of a key of `arity` components, a part of
    /// type `P`) is written as the end of the key: it is the last component,
    /// no tag follows it, and it needs no separator to head a collection.
    /// (A part with no end of its own, as [`Verbatim`](super::Verbatim)'s,
    /// always ends the key; the derive refuses it at the end of a kind that
    /// heads a collection.)
    pub const fn ends_key<P: KeyPart>(&self, index: usize, arity: usize) -> bool {
        index + 1 == arity
            && !self.has_tag_before(arity)
            && !((self.open || (self.heads_collection && P::WIDTH == 0)) && !P::LAST_ONLY)
    }

    const fn has_tag_before(&self, index: usize) -> bool {
        let mut i = 0;
        while i < self.depth {
            if self.before[i] == index {
                return true;
            }
            i += 1;
        }
        false
    }

    /// Appends the tags that stand before component `index`, each followed by
    /// [`TAG_SEPARATOR`].
    pub fn write_tags(&self, index: usize, out: &mut String) {
        for i in 0..self.depth {
            if self.before[i] == index {
                out.push_str(self.tags[i]);
                out.push(TAG_SEPARATOR);
            }
        }
    }

    /// Reads the tags that stand before component `index`.
    pub fn read_tags(
        &self,
        index: usize,
        reader: &mut KeyReader<'_>,
    ) -> Result<(), KeyDecodeError> {
        for i in 0..self.depth {
            if self.before[i] == index {
                reader.expect_tag(self.tags[i])?;
            }
        }
        Ok(())
    }

    /// The stored RowKey of `key` under this layout.
    pub fn encode<K: super::KeyTuple>(&self, key: &K) -> String {
        let mut out = String::new();
        key.write_laid_out(self, &mut out);
        out
    }
}
