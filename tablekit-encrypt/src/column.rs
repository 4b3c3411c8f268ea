//! An encrypted field's column in its entity's typed columns: it names
//! the property, and every filter on it is a compile error.

/// An encrypted field in its entity's columns: its stored name, and no
/// filters (the store cannot compare ciphertext, so `.eq(…)` does not
/// compile).
#[derive(Clone, Copy, Debug)]
pub struct SealedColumn {
    name: &'static str,
}

impl SealedColumn {
    /// The column of the encrypted property stored as `name`.
    pub const fn new(name: &'static str) -> SealedColumn {
        SealedColumn { name }
    }

    /// The stored property name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Implemented by nothing: the filters of a [`SealedColumn`] take it, so a
/// filter on an encrypted field is a compile error that says why.
#[diagnostic::on_unimplemented(
    message = "an encrypted field cannot be filtered: the store holds only its ciphertext",
    label = "a filter on an encrypted field",
    note = "read the entities and compare in the process"
)]
pub trait NoFilterOnCiphertext: never::Never {
    /// Never called: no value has this trait.
    fn never(self) -> std::convert::Infallible;
}

mod never {
    /// Keeps [`NoFilterOnCiphertext`](super::NoFilterOnCiphertext) unimplemented.
    pub trait Never {}
}

macro_rules! refused_filters {
    ($($method:ident)*) => {
        impl SealedColumn {
            $(
                /// Does not compile: an encrypted field has no filters.
                #[allow(unreachable_code)] // `never` returns no value.
                pub fn $method<V: NoFilterOnCiphertext>(&self, value: V) -> tablekit_core::filter::Filter {
                    match value.never() {}
                }
            )*
        }
    };
}

refused_filters!(eq ne gt ge lt le);
