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
mod forms;
mod indexes;
mod kinds;
mod value_enum;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// `#[derive(TableEntity)]` on a struct with named fields: a typed entity,
/// its keys from the fields marked `partition_key` and `row_key`, its other
/// fields stored as properties.
///
/// The page of the `tablekit::TableEntity` trait lists every attribute:
/// on the struct `table`, `kind`, `kind_properties`, `version`,
/// `min_version`, `row_key = "template"`, `collection`, `parent`, `wide`,
/// `projection_of`, `upgrade_from`, `upgrade_with`, `previous_kinds`,
/// `discriminator(property, value)`, `index(name, tag, copy, list,
/// partition, table)`, `shards`, `buckets`, `rename_all`, `crate`; on a
/// field `partition_key`, `row_key`, `rename`, `alias`, `skip`, `default`,
/// `json`, `with`, `flatten`, `series`, `blob`, `offload`, `index`,
/// `unique`, `bucket`, `encrypted`.
#[proc_macro_derive(TableEntity, attributes(tablekit))]
pub fn derive_table_entity(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input, ast::Mode::Entity).into()
}

/// `#[derive(TableFields)]`: a struct that can be flattened into an entity
/// (`#[tablekit(flatten)]` on a field of that type), each of its fields
/// stored as a property named after the field's prefix.
///
/// Attributes: on the struct `rename_all = "PascalCase"` and `crate =
/// ::path`; on a field `rename = "Name"`, `skip`, `default`, `json`, `with =
/// module`, `flatten` (nested structs) and `series`, meaning what they mean
/// on an entity. Keys, `blob` and `offload` belong to the entity.
#[proc_macro_derive(TableFields, attributes(tablekit))]
pub fn derive_table_fields(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input, ast::Mode::Fields).into()
}

/// `#[derive(TableValue)]`: a unit enum stored as the text of its variant,
/// usable as a property field and in typed filters.
///
/// Attributes: on the enum `rename_all = "snake_case"` (or any other rule of
/// `TableEntity`) and `crate = ::path`; on a variant `rename = "text"`.
/// Text that names no variant reads as a typed error, never a default.
#[proc_macro_derive(TableValue, attributes(tablekit))]
pub fn derive_table_value(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    value_enum::derive(&input).into()
}

/// `#[derive(EntityKinds)]`: an enum over entity kinds that share a table,
/// each variant holding one entity type with a `kind`, for reading a
/// partition or a collection as typed variants.
///
/// Attributes: on the enum `crate = ::path`. Two variants of one kind, types
/// of different tables or different PartitionKey types are compile errors.
#[proc_macro_derive(EntityKinds, attributes(tablekit))]
pub fn derive_entity_kinds(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    kinds::derive(&input).into()
}

/// Expansion snapshots: what the derives generate for representative inputs.
/// Refresh with `UPDATE_EXPECT=1 cargo test -p tablekit-derive`.
#[cfg(test)]
mod snapshots {
    use expect_test::{ExpectFile, expect_file};
    use quote::quote;

    fn check(tokens: proc_macro2::TokenStream, mode: crate::ast::Mode, expected: ExpectFile) {
        let input: syn::DeriveInput = syn::parse2(tokens).expect("valid input");
        let output = crate::expand::derive(&input, mode);
        let file: syn::File = syn::parse2(output).expect("the expansion parses");
        expected.assert_eq(&prettyplease::unparse(&file));
    }

    #[test]
    fn entity_with_kind_compound_key_and_every_role() {
        check(
            quote! {
                #[tablekit(table = "Reviews", kind = "REV", version = 2, rename_all = "PascalCase")]
                pub struct Review {
                    #[tablekit(partition_key)]
                    department: String,
                    #[tablekit(row_key = 0)]
                    employee: u32,
                    #[tablekit(row_key = 1)]
                    year: u16,
                    score: f64,
                    #[tablekit(rename = "Text", default)]
                    comment: Option<String>,
                    #[tablekit(json)]
                    tags: Vec<String>,
                    #[tablekit(flatten(prefix = "By"))]
                    reviewer: Person,
                    #[tablekit(skip)]
                    cache: u8,
                }
            },
            crate::ast::Mode::Entity,
            expect_file!["../snapshots/review.rs"],
        );
    }

    #[test]
    fn entity_with_unique_and_compound_indexes() {
        check(
            quote! {
                #[tablekit(table = "Staff", kind = "EMP")]
                #[tablekit(index(name = "email", tag = "email"))]
                #[tablekit(index(name = "name", copy(email)))]
                pub struct Employee {
                    #[tablekit(partition_key)]
                    department: String,
                    #[tablekit(row_key)]
                    id: u32,
                    #[tablekit(unique = "email")]
                    email: String,
                    #[tablekit(index = "name")]
                    last_name: String,
                    #[tablekit(index = "name")]
                    first_name: String,
                }
            },
            crate::ast::Mode::Entity,
            expect_file!["../snapshots/indexed.rs"],
        );
    }

    #[test]
    fn entity_whose_names_are_checked_at_compile_time() {
        check(
            quote! {
                #[tablekit(table = "Staff", kind = "EMP")]
                struct Employee {
                    #[tablekit(partition_key)]
                    department: String,
                    #[tablekit(row_key)]
                    id: u32,
                    name: String,
                    #[tablekit(json)]
                    tags: Vec<String>,
                    #[tablekit(with = codec)]
                    level: Level,
                    #[tablekit(skip)]
                    cache: u8,
                }
            },
            crate::ast::Mode::Entity,
            expect_file!["../snapshots/employee.rs"],
        );
    }

    #[test]
    fn flattenable_fields() {
        check(
            quote! {
                struct Person {
                    name: String,
                    #[tablekit(with = codec)]
                    level: Level,
                }
            },
            crate::ast::Mode::Fields,
            expect_file!["../snapshots/person.rs"],
        );
    }

    #[test]
    fn invalid_input_gives_errors_and_a_stub() {
        check(
            quote! {
                struct Broken {
                    #[tablekit(unknown)]
                    name: String,
                }
            },
            crate::ast::Mode::Entity,
            expect_file!["../snapshots/broken.rs"],
        );
    }
}
