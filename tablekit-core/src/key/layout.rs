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
    /// A key template: `tags` are literal texts written as they are, and
    /// the key components are written with nothing between them but those.
    template: bool,
}

impl RowKeyLayout {
    /// No kind: the key fields alone.
    pub const NONE: RowKeyLayout = RowKeyLayout {
        tags: [""; MAX_KIND_DEPTH],
        before: [0; MAX_KIND_DEPTH],
        depth: 0,
        heads_collection: false,
        open: false,
        template: false,
    };

    /// A kind of its own: `TAG_` before the key fields.
    pub const fn kind(tag: &'static str) -> RowKeyLayout {
        RowKeyLayout::NONE.nested(tag, 0)
    }

    /// A key template, laid out exactly as a table written by other clients
    /// has it: the literal texts added with [`literal`](RowKeyLayout::literal)
    /// and the key components, with nothing between them. Every component
    /// but the last is fixed-width, so nothing more is needed to split them
    /// again: `empid_{id}` with a `Padded<6>` id is `empid_000223`,
    /// `{id}-{year}` is `000123-2012`.
    ///
    /// ```
    /// use tablekit::key::{KeyTuple, Padded, RowKeyLayout};
    /// const REVIEW: RowKeyLayout = RowKeyLayout::template().literal("rev:", 0).literal("-", 1);
    /// let key = (Padded::<6>::new(123)?, Padded::<4>::new(2012)?);
    /// assert_eq!(REVIEW.encode(&key), "rev:000123-2012");
    /// assert_eq!(<(Padded<6>, Padded<4>)>::decode_laid_out("rev:000123-2012", &REVIEW).unwrap(), key);
    /// # Ok::<(), tablekit::InvalidInput>(())
    /// ```
    pub const fn template() -> RowKeyLayout {
        let mut layout = RowKeyLayout::NONE;
        layout.template = true;
        layout
    }

    /// The same template with `text` written before key component `before`
    /// (or after the last one, when `before` is the number of components).
    ///
    /// # Panics
    /// At compile time (where the derive uses it) when the layout is no
    /// template, holds more than [`MAX_KIND_DEPTH`] texts, or `before` is
    /// not more than the position of the text before.
    pub const fn literal(self, text: &'static str, before: usize) -> RowKeyLayout {
        assert!(self.template, "literal texts belong to a key template");
        assert!(
            self.depth < MAX_KIND_DEPTH,
            "a key template holds at most 8 literal texts"
        );
        assert!(
            self.depth == 0 || before > self.before[self.depth - 1],
            "one literal text between two key components"
        );
        let mut layout = self;
        layout.tags[layout.depth] = text;
        layout.before[layout.depth] = before;
        layout.depth += 1;
        layout
    }

    /// Whether two layouts lay keys out alike (at compile time: the check
    /// that the variants of an `EntityKinds` enum can be told apart).
    pub const fn same_as(&self, other: &RowKeyLayout) -> bool {
        if self.depth != other.depth
            || self.heads_collection != other.heads_collection
            || self.open != other.open
            || self.template != other.template
        {
            return false;
        }
        let mut i = 0;
        while i < self.depth {
            if self.before[i] != other.before[i]
                || !crate::keyorder::same_text(self.tags[i], other.tags[i])
            {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Whether this is a key template.
    pub const fn is_template(&self) -> bool {
        self.template
    }

    /// The text every key of this layout starts with: `KIND_` for a kind,
    /// the leading literal of a template; `None` when there is none.
    pub fn prefix(&self) -> Option<String> {
        self.leading().map(|(text, tagged)| match tagged {
            true => format!("{text}{TAG_SEPARATOR}"),
            false => text.to_owned(),
        })
    }

    /// Whether `key` starts with [`prefix`](RowKeyLayout::prefix) (without
    /// building it: every typed read checks it).
    pub fn starts(&self, key: &str) -> bool {
        match self.leading() {
            None => true,
            Some((text, false)) => key.starts_with(text),
            Some((text, true)) => key
                .strip_prefix(text)
                .is_some_and(|rest| rest.starts_with(TAG_SEPARATOR)),
        }
    }

    /// The text every key starts with, and whether a [`TAG_SEPARATOR`]
    /// follows it (a kind tag) or not (a template's leading text).
    fn leading(&self) -> Option<(&'static str, bool)> {
        if self.depth == 0 || self.before[0] != 0 {
            return None;
        }
        let text = self.tags[0];
        (!text.is_empty() || !self.template).then_some((text, !self.template))
    }

    /// The text after the last key component of a template (empty
    /// otherwise).
    fn suffix(&self, arity: usize) -> &'static str {
        if self.template && self.depth > 0 && self.before[self.depth - 1] == arity {
            self.tags[self.depth - 1]
        } else {
            ""
        }
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

    /// The same layout with the kind's own tag (its innermost) replaced by
    /// `tag`: where the rows of a kind renamed from `tag` lie.
    pub const fn renamed(self, tag: &'static str) -> RowKeyLayout {
        let mut layout = self;
        if layout.depth > 0 && !layout.template {
            layout.tags[layout.depth - 1] = tag;
        }
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
        // A template writes nothing between components but its own texts.
        if self.template {
            return true;
        }
        index + 1 == arity
            && !self.has_tag_before(arity)
            && !((self.open || (self.heads_collection && P::WIDTH == 0)) && !P::LAST_ONLY)
    }

    /// Whether a key under this layout is its key components alone, with
    /// nothing before, between or after them.
    pub(crate) const fn is_bare(&self) -> bool {
        self.depth == 0 && !self.open && !self.heads_collection && !self.template
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

    /// Whether a part of type `P` may be key component `index` (of `arity`):
    /// in a template, only the last component may vary in width, as nothing
    /// but the texts of the template marks where a component ends.
    pub const fn fits<P: KeyPart>(&self, index: usize, arity: usize) -> bool {
        !self.template || index + 1 == arity || P::WIDTH != 0
    }

    /// Appends the tags that stand before component `index`, each followed by
    /// [`TAG_SEPARATOR`].
    pub fn write_tags(&self, index: usize, out: &mut String) {
        for i in 0..self.depth {
            if self.before[i] == index {
                out.push_str(self.tags[i]);
                if !self.template {
                    out.push(TAG_SEPARATOR);
                }
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
                if self.template {
                    reader.expect_literal(self.tags[i])?;
                } else {
                    reader.expect_tag(self.tags[i])?;
                }
            }
        }
        Ok(())
    }

    /// Reads key component `index` (of `arity`), a part of type `P`, with
    /// the tags before it.
    pub fn read_part<P: KeyPart>(
        &self,
        index: usize,
        arity: usize,
        reader: &mut KeyReader<'_>,
    ) -> Result<P, KeyDecodeError> {
        self.read_tags(index, reader)?;
        if !self.template {
            return reader.read(self.ends_key::<P>(index, arity));
        }
        if index + 1 < arity {
            reader.read_fixed()
        } else {
            reader.read_before_suffix(self.suffix(arity))
        }
    }

    /// The stored RowKey of `key` under this layout.
    pub fn encode<K: super::KeyTuple>(&self, key: &K) -> String {
        let mut out = String::new();
        key.write_laid_out(self, &mut out);
        out
    }
}
