//! The derives of tablekit: `TableEntity`, `TableFields`, `EntityKinds`. Use
//! them through the `tablekit` crate, whose documentation describes them.
//!
//! One stage per file: `attr` parses attributes, `ast` builds the validated
//! model, `check` holds the rules that need the whole struct, `expand`
//! generates code; `ctxt` collects every error of one input.

mod ast;
mod attr;
mod case;
mod check;
mod ctxt;
mod expand;
mod kinds;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// `#[derive(TableEntity)]`: see `tablekit::TableEntity`.
#[proc_macro_derive(TableEntity, attributes(tablekit))]
pub fn derive_table_entity(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input, ast::Mode::Entity).into()
}

/// `#[derive(TableFields)]`: a struct that can be flattened into an entity.
#[proc_macro_derive(TableFields, attributes(tablekit))]
pub fn derive_table_fields(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input, ast::Mode::Fields).into()
}

/// `#[derive(EntityKinds)]`: an enum over entity kinds sharing a partition.
#[proc_macro_derive(EntityKinds, attributes(tablekit))]
pub fn derive_entity_kinds(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    kinds::derive(&input).into()
}
