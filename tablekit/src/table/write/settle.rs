//! Recording a write in its row's history, and settling a write whose
//! answer was lost by reading the row back.
//!
//! **Lost responses.** A conditional write whose answer never came may have
//! been applied or not, and reading the row back is not enough to tell when
//! other writers are busy on it: our write may have landed and been
//! overwritten since, or another writer's identical change may have landed
//! instead of ours. So `update`, inserts and writes through a `Loaded`
//! record themselves in a short history kept in the row's
//! [`WRITES_PROPERTY`] (unless the table was made
//! [`without_write_history`](crate::Table::without_write_history)): a random tag for the write,
//! then the tags of the writes before it, newest first. The version a write
//! is based on is named by the first tag of its history (or, for a row that
//! has none, by a hash of its ETag). Reading the row back, the write landed
//! exactly when its tag stands right before its base's tag; the base's tag
//! first means nothing of this kind was written since. When the base's tag
//! is gone (the row was replaced by another kind of write, deleted, or more
//! than [`WRITES_KEPT`] writes came since), the outcome stays unknown and is
//! returned as [`Error::OutcomeUnknown`].
//!
//! An insert's history is its tag alone: read back, the row is ours when it
//! holds the tag, another writer's when it holds another history.

use crate::entity::{ETag, Entity};
use crate::error::Error;
use crate::schema::TableEntity;
use crate::table::writes_of;
use crate::value::Value;

pub use crate::props::WRITES_PROPERTY;

/// How many writes a row's history remembers: enough for every writer of a
/// busy row to write about twice between a lost write and its read-back.
/// (Tags are 8 characters: the history costs at most 576.)
pub const WRITES_KEPT: usize = 64;

/// The width of the tags tablekit writes.
const TAG_LEN: usize = 8;

/// 48 bits as an 8-character tag.
fn tag_text(bits: u64) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bits.to_be_bytes()[2..])
}
/// What a lost write turned out to be.
pub(super) enum Settled {
    /// It landed; the row as read back (which may be a later version).
    Applied(Entity),
    /// It did not land.
    NotApplied,
    /// The store cannot tell.
    Unknown,
}

/// Whether `error` refuses a write for what the row holds (a 409 to an
/// insert, a 412 to a guarded update), alone or as a transaction's.
pub(super) fn is_refusal(error: &Error) -> bool {
    match error {
        Error::EntityAlreadyExists { .. } | Error::PreconditionFailed { .. } => true,
        Error::BatchFailed { source, .. } => is_refusal(source),
        _ => false,
    }
}

/// Whether the history of `stored` holds `tag`.
pub(in crate::table) fn history_has(stored: &Entity, tag: &str) -> bool {
    tags(writes_of(stored)).contains(&tag)
}

/// A history's tags, newest first.
fn tags(writes: Option<&str>) -> Vec<&str> {
    writes.map_or_else(Vec::new, |text| {
        text.split(' ').filter(|t| !t.is_empty()).collect()
    })
}

/// A row's write history: its tags, newest first.
fn history(entity: &Entity) -> Vec<&str> {
    tags(writes_of(entity))
}

/// The tag that names a version as a base: the newest tag of its history,
/// or for a row without history a hash of its ETag.
fn base_of(writes: Option<&str>, etag: &ETag) -> String {
    let newest = writes.and_then(|text| text.split(' ').find(|t| !t.is_empty()));
    match newest {
        Some(tag) => (*tag).to_owned(),
        None => {
            // FNV-1a, written out: the tag must be the same in every process
            // and release, which std's hasher does not promise.
            let hash = etag
                .as_str()
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
            tag_text(hash)
        }
    }
}

/// The history a write tagged `tag` records on top of the version whose
/// history is `writes` and whose base tag is `base`.
fn history_after(tag: &str, base: &str, writes: Option<&str>) -> String {
    // The common case, a history as tablekit writes it, is cut by
    // arithmetic: its older tags follow the first, each 9 bytes on.
    if let Some(text) = writes
        && let Some(count) = tablekit_tags(text)
    {
        // Room for WRITES_KEPT - 2 older tags after `tag` and `base`.
        let kept = (count - 1).min(WRITES_KEPT - 2);
        let older = if kept == 0 {
            ""
        } else {
            &text[TAG_LEN + 1..(TAG_LEN + 1) * (kept + 1) - 1]
        };
        return joined(tag, base, older);
    }
    // Tags one space apart, of other widths: cut as text.
    if let Some(text) = writes
        && !text.is_empty()
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.contains("  ")
    {
        let older = text.split_once(' ').map_or("", |(_, older)| older);
        // Room for WRITES_KEPT - 2 older tags after `tag` and `base`.
        let end = older
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b' ')
            .nth(WRITES_KEPT - 3)
            .map_or(older.len(), |(at, _)| at);
        return joined(tag, base, &older[..end]);
    }
    let older = writes
        .into_iter()
        .flat_map(|text| text.split(' ').filter(|t| !t.is_empty()))
        .skip(1);
    let mut history =
        String::with_capacity(writes.map_or(0, str::len) + tag.len() + base.len() + 2);
    for (i, t) in [tag, base]
        .into_iter()
        .chain(older)
        .take(WRITES_KEPT)
        .enumerate()
    {
        if i > 0 {
            history.push(' ');
        }
        history.push_str(t);
    }
    history
}

/// How many 8-byte units `text` holds when it has the shape of a history
/// as tablekit writes it: a space after every eighth byte, none at the end.
/// `None` for any other text. (A unit is a tag unless the text was written
/// by another hand with spaces inside units; cutting it by units then keeps
/// a few more tags, all in order, which is as good.)
fn tablekit_tags(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if !(bytes.len() + 1).is_multiple_of(TAG_LEN + 1) {
        return None;
    }
    let count = (bytes.len() + 1) / (TAG_LEN + 1);
    // Only the separators are looked at: a whole scan of the text costs
    // more than the rest of the cut.
    let separators = bytes
        .chunks_exact(TAG_LEN + 1)
        .all(|unit| unit[TAG_LEN] == b' ');
    (separators && bytes[..TAG_LEN].iter().all(|&b| b != b' ')).then_some(count)
}

/// `tag`, `base` and the older tags `older`, one space apart.
fn joined(tag: &str, base: &str, older: &str) -> String {
    let mut history = String::with_capacity(tag.len() + base.len() + older.len() + 2);
    history.push_str(tag);
    history.push(' ');
    history.push_str(base);
    if !older.is_empty() {
        history.push(' ');
        history.push_str(older);
    }
    history
}

/// A new random tag.
fn new_tag() -> String {
    tag_text(fastrand::u64(..))
}

/// A write that records itself in the row's history, so that a lost answer
/// can be settled: its tag, the tag of the version it is based on (empty for
/// an insert), and the history it writes.
pub(in crate::table) struct Recorded {
    tag: String,
    base: String,
    history: String,
}

impl Recorded {
    /// A write on top of the version with history `writes` and ETag `etag`.
    pub(in crate::table) fn on(writes: Option<&str>, etag: &ETag) -> Recorded {
        let tag = new_tag();
        let base = base_of(writes, etag);
        let history = history_after(&tag, &base, writes);
        Recorded { tag, base, history }
    }

    /// A write that records nothing (a table without write history): no
    /// history to build.
    pub(in crate::table) fn none() -> Recorded {
        Recorded {
            tag: String::new(),
            base: String::new(),
            history: String::new(),
        }
    }

    /// An insert: a history of its own tag alone.
    pub(in crate::table) fn insert() -> Recorded {
        let tag = new_tag();
        Recorded {
            history: tag.clone(),
            tag,
            base: String::new(),
        }
    }

    /// The history this write leaves in the row.
    #[cfg(test)]
    fn history(&self) -> &str {
        &self.history
    }

    /// The history this write left, taken back out of the row it sent
    /// (where [`add_to`](Recorded::add_to) moved it), or as it was kept
    /// when the row had no room for it.
    pub(in crate::table) fn history_in(&mut self, row: &mut Entity) -> String {
        match row.properties.remove(WRITES_PROPERTY) {
            Some(Value::String(text)) => text,
            _ => std::mem::take(&mut self.history),
        }
    }

    /// Moves the history into `row`, unless the row has no room for it (at
    /// the store's property or size limit); `false` then, and a lost answer
    /// stays unknown. Only the room is looked at: the backend's validator
    /// checks the row itself. A write sent again sends the same row, which
    /// holds the history already.
    pub(in crate::table) fn add_to<T: TableEntity>(
        &mut self,
        row: &mut Entity,
        enabled: bool,
    ) -> bool {
        use crate::validate::limits::{MAX_ENTITY_SIZE, MAX_PROPERTIES};
        if !enabled {
            return false;
        }
        let size = crate::validate::property_size(
            WRITES_PROPERTY,
            crate::value::ValueRef::String(&self.history),
        );
        // A wide entity spreads its properties over parts with room to spare.
        let room = T::DESCRIPTOR.wide()
            || (row.properties.len() < MAX_PROPERTIES
                && row.stored_size() + size <= MAX_ENTITY_SIZE);
        if room {
            let history = std::mem::take(&mut self.history);
            row.properties.insert(WRITES_PROPERTY, history);
        }
        room
    }

    /// Whether this write is the last in `stored`'s history (no write of
    /// tablekit came after it).
    pub(super) fn first_in(&self, stored: &Entity) -> bool {
        history(stored).first() == Some(&self.tag.as_str())
    }

    /// Whether this write is in `stored`'s history.
    pub(super) fn settle(&self, stored: Option<Entity>) -> Settled {
        settled(self.verdict(stored.as_ref()), stored)
    }

    /// [`settle`](Recorded::settle) of a row read by reference: whether
    /// this write landed in it.
    pub(super) fn landed_in(&self, stored: &Entity) -> bool {
        self.verdict(Some(stored)) == Verdict::Applied
    }

    fn verdict(&self, stored: Option<&Entity>) -> Verdict {
        if !self.base.is_empty() {
            return verdict(stored, &self.base, &self.tag);
        }
        let Some(stored) = stored else {
            return Verdict::NotApplied;
        };
        let tags = history(stored);
        if tags.contains(&self.tag.as_str()) {
            Verdict::Applied
        } else if tags.is_empty() || tags.len() >= WRITES_KEPT {
            Verdict::Unknown
        } else {
            Verdict::NotApplied
        }
    }
}

/// What a row's history says of a write, before the row is handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Applied,
    NotApplied,
    Unknown,
}

/// The [`Settled`] of `verdict` on the row `stored`.
fn settled(verdict: Verdict, stored: Option<Entity>) -> Settled {
    match (verdict, stored) {
        (Verdict::Applied, Some(stored)) => Settled::Applied(stored),
        (Verdict::NotApplied, _) => Settled::NotApplied,
        (Verdict::Applied | Verdict::Unknown, _) => Settled::Unknown,
    }
}

/// Whether the write tagged `tag`, based on the version tagged `base`, is
/// in `stored`'s history.
#[cfg(test)]
fn settle(stored: Option<Entity>, base: &str, tag: &str) -> Settled {
    settled(verdict(stored.as_ref(), base, tag), stored)
}

/// [`settle`]'s verdict, on a row read by reference.
fn verdict(stored: Option<&Entity>, base: &str, tag: &str) -> Verdict {
    let Some(stored) = stored else {
        return Verdict::Unknown;
    };
    let tags = history(stored);
    match tags.iter().position(|t| *t == base) {
        Some(0) => Verdict::NotApplied,
        Some(at) if tags[at - 1] == tag => Verdict::Applied,
        Some(_) => Verdict::NotApplied,
        None => Verdict::Unknown,
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn row(history: Option<&str>, etag: &str) -> Entity {
        let mut e = Entity::new("p", "r");
        e.etag = Some(ETag::new(etag));
        if let Some(h) = history {
            e.insert(WRITES_PROPERTY, h);
        }
        e
    }

    #[test]
    fn histories_name_their_base_and_stay_short() {
        let etag = ETag::new("W/\"a\"");
        let base = base_of(None, &etag);
        assert_eq!(base, base_of(None, &ETag::new("W/\"a\"")), "stable");
        assert_ne!(base, base_of(None, &ETag::new("W/\"b\"")));
        assert_eq!(base.len(), 8);
        let first = Recorded::on(None, &etag);
        assert_eq!(first.history(), format!("{} {base}", first.tag));
        let second = Recorded::on(Some(first.history()), &ETag::new("W/\"c\""));
        assert_eq!(second.base, first.tag, "a row's newest tag names it");
        assert_eq!(
            second.history(),
            format!("{} {} {base}", second.tag, first.tag)
        );
        let long: String = (0..WRITES_KEPT + 10)
            .map(|i| format!("x{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let next = history_after("new", "x0", Some(&long));
        assert_eq!(next.split(' ').count(), WRITES_KEPT);
        assert!(next.starts_with("new x0 x1 "));
        // Text cut and tags counted agree, for every length of history and
        // for histories with stray spaces.
        for n in 0..WRITES_KEPT + 3 {
            let tags: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
            let canonical = tags.join(" ");
            let loose = format!(" {}  ", tags.join("  "));
            for writes in [canonical.as_str(), loose.as_str()] {
                let expected: Vec<&str> = ["new", "b"]
                    .into_iter()
                    .chain(tags.iter().skip(1).map(String::as_str))
                    .take(WRITES_KEPT)
                    .collect();
                assert_eq!(history_after("new", "b", Some(writes)), expected.join(" "));
            }
        }
        assert_eq!(history_after("new", "b", None), "new b");
        // Histories as tablekit writes them (8-character tags) are cut by
        // arithmetic; the cut agrees with the tags counted, at every length.
        for n in 1..WRITES_KEPT + 3 {
            let tags: Vec<String> = (0..n).map(|i| format!("tag{i:05}")).collect();
            let writes = tags.join(" ");
            assert_eq!(tablekit_tags(&writes), Some(n));
            let expected: Vec<&str> = ["newtag00", "basetag0"]
                .into_iter()
                .chain(tags.iter().skip(1).map(String::as_str))
                .take(WRITES_KEPT)
                .collect();
            assert_eq!(
                history_after("newtag00", "basetag0", Some(&writes)),
                expected.join(" ")
            );
        }
        // Not tablekit's form: a space out of place, a wider tag, a stray
        // space, an empty text.
        for text in [
            "abcdefg  abcdefgh",
            "abcdefghi",
            "abcdefgh ",
            " abcdefgh",
            "",
        ] {
            assert_eq!(tablekit_tags(text), None, "{text:?}");
        }
        assert_eq!(tablekit_tags("abcdefgh abcdefgh"), Some(2));
        // Spaces inside the units of another hand's text: cut by units, the
        // tags stay in order and the history stays bounded.
        let loose = "abcdefgh ab efgh1 x bcdefg";
        assert_eq!(tablekit_tags(loose), Some(3));
        let cut = history_after("newtag00", "abcdefgh", Some(loose));
        assert_eq!(cut, "newtag00 abcdefgh ab efgh1 x bcdefg");
        // The newest unit must be one tag: it names the base.
        assert_eq!(tablekit_tags("ab efgh1 abcdefgh"), None);
        let insert = Recorded::insert();
        assert_eq!(insert.history(), insert.tag);
    }

    #[test]
    fn inserts_settle_by_their_tag() {
        let insert = Recorded::insert();
        let mine = row(Some(&format!("later {}", insert.tag)), "e");
        assert!(matches!(insert.settle(Some(mine)), Settled::Applied(_)));
        assert!(matches!(insert.settle(None), Settled::NotApplied));
        assert!(matches!(
            insert.settle(Some(row(Some("other"), "e"))),
            Settled::NotApplied
        ));
        assert!(matches!(
            insert.settle(Some(row(None, "e"))),
            Settled::Unknown
        ));
    }

    #[test]
    fn settling_reads_the_history() {
        // Ours landed and is the newest.
        assert!(matches!(
            settle(Some(row(Some("me b0 b1"), "e")), "b0", "me"),
            Settled::Applied(_)
        ));
        // Ours landed; two writes came after it.
        assert!(matches!(
            settle(Some(row(Some("y x me b0"), "e")), "b0", "me"),
            Settled::Applied(_)
        ));
        // Another writer won our base.
        assert!(matches!(
            settle(Some(row(Some("y x b0"), "e")), "b0", "me"),
            Settled::NotApplied
        ));
        // Nothing of this kind written since our base.
        assert!(matches!(
            settle(Some(row(Some("b0 b1"), "e")), "b0", "me"),
            Settled::NotApplied
        ));
        // The base is gone from the history, or the row is gone.
        assert!(matches!(
            settle(Some(row(Some("y x"), "e")), "b0", "me"),
            Settled::Unknown
        ));
        assert!(matches!(
            settle(Some(row(None, "e")), "b0", "me"),
            Settled::Unknown
        ));
        assert!(matches!(settle(None, "b0", "me"), Settled::Unknown));
    }
}
