//! Key arguments: what a typed key read or range takes for a key of type
//! `K` (the key itself, a reference to it, or borrowed text for its `String`
//! parts). Here, beside [`KeyPart`], so that the blanket impls over the
//! parts stay coherent.

use super::{KeyDecodeError, KeyPart, KeyPartArg, KeyTuple, RowKeyLayout};

/// A key argument: the typed key itself, a reference to it, or the same with
/// borrowed text for its `String` parts: `get("acme", 7)`,
/// `get(("acme", "alice"), 1)`, `get(&key, 1)`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a key of type `{K}`",
    label = "not a key of type `{K}`",
    note = "key fields may be integers, bool, String, tablekit::DateTime, uuid::Uuid, or the types of `tablekit::key` (InvertedTime, Padded, Verbatim, Ordered); a key argument is the key itself, a reference to it, or `&str` for a `String` part, and a compound key is a tuple of its parts, in order"
)]
pub trait KeyArg<K> {
    /// Appends the encoding with the kind tags of `layout` (a RowKey).
    fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String);
    /// Appends the encoding.
    fn write_key_arg(&self, out: &mut String) {
        self.write_laid_out(&RowKeyLayout::NONE, out);
    }
}

impl<P: KeyPart, A: KeyPartArg<P>> KeyArg<P> for A {
    fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
        layout.write_tags(0, out);
        self.write_part_arg(out, layout.ends_key::<P>(0, 1));
        layout.write_tags(1, out);
    }
}

/// The key type the derive gives a key it could not make out, beside the
/// error that says why (a misspelt `row_key`, say): every argument is one,
/// so that the one mistake is not reported again at each use of the key.
/// Never part of a type that compiles. (A range of it is not: ranges of
/// another type as ranges of this one would leave other crates' ranges
/// without an inferred type.)
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct UnknownKey;

impl KeyTuple for UnknownKey {
    const ARITY: usize = 0;
    fn write_laid_out(&self, _: &RowKeyLayout, _: &mut String) {}
    fn decode_laid_out(_: &str, _: &RowKeyLayout) -> Result<Self, KeyDecodeError> {
        Ok(UnknownKey)
    }
}

impl<A: ?Sized> KeyArg<UnknownKey> for A {
    fn write_laid_out(&self, _: &RowKeyLayout, _: &mut String) {}
}

impl KeyArg<()> for () {
    fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
        layout.write_tags(0, out);
    }
}

macro_rules! tuple_key_args {
    ($($arity:literal => ($($p:ident $a:ident $i:tt),+; $lp:ident $la:ident $li:tt)),* $(,)?) => {$(
        impl<$($p: KeyPart, $a: KeyPartArg<$p>,)+ $lp: KeyPart, $la: KeyPartArg<$lp>>
            KeyArg<($($p,)+ $lp)> for ($($a,)+ $la)
        {
            fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
                $(
                    layout.write_tags($i, out);
                    self.$i.write_part_arg(out, layout.ends_key::<$p>($i, $arity));
                )+
                layout.write_tags($li, out);
                self.$li.write_part_arg(out, layout.ends_key::<$lp>($li, $arity));
                layout.write_tags($arity, out);
            }
        }
        impl<$($p: KeyPart,)+ $lp: KeyPart> KeyArg<($($p,)+ $lp)> for &($($p,)+ $lp) {
            fn write_laid_out(&self, layout: &RowKeyLayout, out: &mut String) {
                KeyTuple::write_laid_out(*self, layout, out);
            }
        }
    )*};
}

tuple_key_args! {
    2 => (PA AA 0; PB AB 1),
    3 => (PA AA 0, PB AB 1; PC AC 2),
    4 => (PA AA 0, PB AB 1, PC AC 2; PD AD 3),
}
