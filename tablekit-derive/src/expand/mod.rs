//! Generates the impls from the validated model, and nothing else.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident, Type};

use crate::ast::{Container, Field, Mode, Role};
use crate::attr::TemplatePiece;
use crate::check;
use crate::ctxt::Ctxt;

mod keys;
use keys::*;
mod pieces;
use pieces::*;

pub(crate) fn derive(input: &DeriveInput, mode: Mode) -> TokenStream {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input, mode);
    let mut indexes = Vec::new();
    if let Some(cont) = &cont {
        check::check(&cx, cont);
        if mode == Mode::Entity {
            indexes = crate::indexes::model(&cx, cont);
        }
    }
    match (cx.check(), &cont) {
        (Ok(()), Some(cont)) => expand(cont, &indexes),
        (Err(error), cont) => fallback(input, mode, cont.as_ref(), error),
        (Ok(()), None) => TokenStream::new(),
    }
}

/// The errors, plus an impl that compiles, so that one mistake does not
/// cascade into errors at every use of the type: it keeps the key types
/// the struct declares, so `get`, ranges and prefixes still type-check.
fn fallback(
    input: &DeriveInput,
    mode: Mode,
    cont: Option<&Container<'_>>,
    error: syn::Error,
) -> TokenStream {
    let errors = error.to_compile_error();
    let krate = cont
        .and_then(|c| c.attrs.crate_path.as_ref())
        .map_or_else(|| quote!(::tablekit), |p| quote!(#p));
    let tk = quote!(#krate::__private);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    // A key the mistake left without fields (a misspelt `row_key`), or
    // with a field refused for its type (an `Option`), would only add an
    // error at each use of it: that key takes any argument.
    let stub_key = |partition: bool| match cont {
        Some(cont) => {
            let fields = key_fields(cont, partition);
            if fields.is_empty() || fields.iter().any(|f| crate::ast::is_option(f.ty)) {
                quote!(#tk::UnknownKey)
            } else {
                key_type(&fields)
            }
        }
        None => quote!(#tk::UnknownKey),
    };
    let (pk_type, rk_type) = (stub_key(true), stub_key(false));
    let records_changes = cont
        .filter(|c| c.attrs.changes.is_some() && c.attrs.projection_of.is_none())
        .map(|_| {
            quote! {
                #[automatically_derived]
                impl #impl_generics #tk::RecordsChanges for #ident #ty_generics #where_clause {}
            }
        });
    let stub = match mode {
        Mode::Entity => quote! {
            #records_changes
            #[automatically_derived]
            impl #impl_generics #tk::TableEntity for #ident #ty_generics #where_clause {
                type PartitionKey = #pk_type;
                type RowKey = #rk_type;
                type Columns = ();
                type Indexes = ();
                const DESCRIPTOR: #tk::EntityDescriptor = #tk::EntityDescriptor::new("");
                fn partition_key(&self) -> Self::PartitionKey {
                    ::core::unreachable!()
                }
                fn row_key(&self) -> Self::RowKey {
                    ::core::unreachable!()
                }
                fn write_partition_key(&self, _: &mut #tk::String) {}
                fn write_row_key(&self, _: &mut #tk::String) {}
                fn columns() {}
                fn indexes() {}
                fn write_properties<__S: #tk::PropertySink + ?::core::marker::Sized>(&self, _: &mut __S) -> #tk::Result<(), #tk::Error> {
                    ::core::unreachable!()
                }
                fn read_properties<__S: #tk::PropertySource + ?::core::marker::Sized>(_: Self::PartitionKey, _: Self::RowKey, _: &mut __S) -> #tk::Result<Self, #tk::Error> {
                    ::core::unreachable!()
                }
            }
        },
        Mode::Fields => quote! {
            #[automatically_derived]
            impl #impl_generics #tk::TableFields for #ident #ty_generics #where_clause {
                fn field_names(_: &str, _: &mut #tk::Vec<#tk::String>) -> bool {
                    true
                }
                fn write_fields<__S: #tk::PropertySink + ?::core::marker::Sized>(&self, _: &str, _: &mut __S) -> #tk::Result<(), #tk::Error> {
                    ::core::unreachable!()
                }
                fn read_fields<__S: #tk::PropertySource + ?::core::marker::Sized>(_: &str, _: &mut __S) -> #tk::Result<Self, #tk::Error> {
                    ::core::unreachable!()
                }
            }
        },
    };
    quote! {
        #errors
        const _: () = { #stub };
    }
}

/// The fields of one key, in key order.
fn key_fields<'a>(cont: &'a Container<'a>, partition: bool) -> Vec<&'a Field<'a>> {
    let mut keys: Vec<(u32, usize, &Field<'_>)> = cont
        .fields
        .iter()
        .enumerate()
        .filter_map(|(position, f)| match f.role {
            Role::PartitionKey(order) if partition => Some((order, position, f)),
            Role::RowKey(order) if !partition => Some((order, position, f)),
            _ => None,
        })
        .collect();
    keys.sort_by_key(|(order, position, _)| (*order, *position));
    keys.into_iter().map(|(_, _, f)| f).collect()
}

/// The key's Rust type: `()`, the field's type, or a tuple.
fn key_type(fields: &[&Field<'_>]) -> TokenStream {
    match fields {
        [] => quote!(()),
        [one] => {
            let ty = one.ty;
            quote!(#ty)
        }
        many => {
            let tys = many.iter().map(|f| f.ty);
            quote!((#(#tys),*))
        }
    }
}

struct Expansion<'a> {
    cont: &'a Container<'a>,
    tk: TokenStream,
}

impl Expansion<'_> {
    /// The expression of a field's stored name: a literal for an entity, the
    /// prefix joined with it for a flattenable struct.
    fn name(&self, field: &Field<'_>) -> TokenStream {
        let tk = &self.tk;
        let name = &field.stored_name;
        if let Some(name) = self.projected_name(field) {
            return name;
        }
        match self.cont.mode {
            Mode::Entity => quote!(#name),
            Mode::Fields => quote!(&#tk::join(__prefix, #name)),
        }
    }

    /// The stored name as a write takes it: a `&'static str` literal for an
    /// entity (no allocation), an owned joined name for a flattenable struct.
    fn write_name(&self, field: &Field<'_>) -> TokenStream {
        let tk = &self.tk;
        let name = &field.stored_name;
        if let Some(name) = self.projected_name(field) {
            return name;
        }
        match self.cont.mode {
            Mode::Entity => quote!(#name),
            Mode::Fields => quote!(#tk::join(__prefix, #name)),
        }
    }

    /// A projection's field is stored under the name its entity gives the
    /// field of the same name (`&'static str`), so the two cannot differ.
    fn projected_name(&self, field: &Field<'_>) -> Option<TokenStream> {
        let (entity, _) = self.cont.attrs.projection_of.as_ref()?;
        let tk = &self.tk;
        let ident = field.ident;
        let span = ident.span();
        Some(quote_spanned!(span=> <#entity as #tk::TableEntity>::columns().#ident.name()))
    }

    fn flatten_prefix(&self, prefix: &str) -> TokenStream {
        let tk = &self.tk;
        match self.cont.mode {
            Mode::Entity => quote!(#prefix),
            Mode::Fields => quote!(&#tk::join(__prefix, #prefix)),
        }
    }

    /// Where-clause predicates for field types that use the struct's type
    /// parameters. Other field types need none: the expressions that use them
    /// are spanned on the type, so an unsupported type is reported on the field
    /// (a false bound on a concrete type would be reported on the derive).
    fn bounds(&self) -> Vec<TokenStream> {
        let tk = &self.tk;
        let params: Vec<&Ident> = self
            .cont
            .input
            .generics
            .type_params()
            .map(|p| &p.ident)
            .collect();
        let mut bounds = Vec::new();
        for field in &self.cont.fields {
            let ty = field.ty;
            if !mentions(ty.to_token_stream(), &params) {
                continue;
            }
            let span = ty.span();
            bounds.push(match &field.role {
                Role::PartitionKey(_) | Role::RowKey(_) => quote_spanned!(span=> #ty: #tk::KeyPart),
                Role::Property if field.blob.is_some() => {
                    quote_spanned!(span=> #ty: #tk::PropertyValue + #tk::BlobValue)
                }
                Role::Property => quote_spanned!(span=> #ty: #tk::PropertyValue),
                Role::Json => quote_spanned!(span=> #ty: #tk::JsonField + #tk::JsonFieldRead),
                Role::Flatten(_) => quote_spanned!(span=> #ty: #tk::TableFields),
                Role::Series => quote_spanned!(span=> #ty: #tk::Series),
                Role::Skip => quote_spanned!(span=> #ty: #tk::Default),
                Role::With(_) => continue,
            });
            if field.default && field.default_with.is_none() {
                bounds.push(quote_spanned!(span=> #ty: #tk::Default));
            }
        }
        bounds
    }

    fn write_statements(&self) -> Vec<TokenStream> {
        let tk = &self.tk;
        self.cont
            .fields
            .iter()
            .filter_map(|field| {
                let ident = field.ident;
                let name = self.write_name(field);
                let span = field.ty.span();
                Some(match &field.role {
                    // The field's type named, so that a type the role
                    // cannot hold is the one error the reader reports too.
                    Role::Property => {
                        let ty = field.ty;
                        quote_spanned!(span=> #tk::write_property::<_, #ty>(__props, #name, &self.#ident)?;)
                    }
                    Role::Json => {
                        let ty = field.ty;
                        quote_spanned!(span=> #tk::write_json::<_, #ty>(__props, #name, &self.#ident)?;)
                    }
                    Role::With(path) => {
                        // Spanned on the codec's path, where a wrong signature is.
                        let span = path.span();
                        quote_spanned!(span=> #tk::write_with(__props, #name, #path::to_value(&self.#ident))?;)
                    }
                    Role::Series => {
                        let ty = field.ty;
                        let name = self.name(field);
                        quote_spanned!(span=> <#ty as #tk::Series>::write_series(&self.#ident, #name, __props)?;)
                    }
                    Role::Flatten(prefix) => {
                        let ty = field.ty;
                        let prefix = self.flatten_prefix(prefix);
                        quote_spanned!(span=> <#ty as #tk::TableFields>::write_fields(&self.#ident, #prefix, __props)?;)
                    }
                    Role::PartitionKey(_) | Role::RowKey(_) | Role::Skip => return None,
                })
            })
            .collect()
    }

    /// The initializer of each non-key field when reading.
    fn read_initializers(&self) -> Vec<TokenStream> {
        let tk = &self.tk;
        // Each single-property field's position in the descriptor's `field_names`: an
        // entity's reader passes it as a hint to the source.
        let mut index = 0usize;
        self.cont
            .fields
            .iter()
            .filter(|f| !f.is_key())
            .map(|field| {
                let ident = field.ident;
                let ty = field.ty;
                let name = self.name(field);
                let span = ty.span();
                let at = index;
                // A field with older names reads the one the row holds.
                let name = if field.aliases.is_empty() {
                    name
                } else {
                    let aliases = field.aliases.iter().map(|alias| match self.cont.mode {
                        Mode::Entity => quote!(#alias),
                        Mode::Fields => quote!(&#tk::join(__prefix, #alias)),
                    });
                    quote!(#tk::present_name(__props, #name, &[#(#aliases),*]))
                };
                if matches!(field.role, Role::Property | Role::Json | Role::With(_)) {
                    index += 1;
                }
                let read = match &field.role {
                    Role::Property if self.cont.mode == Mode::Entity => {
                        quote_spanned!(span=> #tk::take_property_at::<#ty, _>(__props, #at, #name)?)
                    }
                    Role::Property => quote_spanned!(span=> #tk::take_property::<#ty, _>(__props, #name)?),
                    Role::Json => quote_spanned!(span=> #tk::read_json::<#ty, _>(__props, #name)?),
                    Role::With(path) => {
                        let span = path.span();
                        quote_spanned!(span=> #tk::read_with(__props, #name, #path::from_value)?)
                    }
                    Role::Series => quote_spanned!(span=> <#ty as #tk::Series>::read_series(#name, __props)?),
                    Role::Flatten(prefix) => {
                        let prefix = self.flatten_prefix(prefix);
                        quote_spanned!(span=> <#ty as #tk::TableFields>::read_fields(#prefix, __props)?)
                    }
                    Role::Skip => quote_spanned!(span=> <#ty as #tk::Default>::default()),
                    Role::PartitionKey(_) | Role::RowKey(_) => unreachable!("filtered out"),
                };
                if field.default && !matches!(field.role, Role::Skip | Role::Flatten(_) | Role::Series) {
                    let made = match &field.default_with {
                        Some(path) => quote_spanned!(path.span()=> #path()),
                        None => quote_spanned!(span=> <#ty as #tk::Default>::default()),
                    };
                    quote_spanned!(span=> #ident: match #tk::PropertySource::get(__props, #name) {
                        #tk::None => #made,
                        #tk::Some(_) => #read,
                    })
                } else {
                    quote!(#ident: #read)
                }
            })
            .collect()
    }

    fn name_pushes(&self) -> Vec<TokenStream> {
        let tk = &self.tk;
        self.cont
            .fields
            .iter()
            .filter_map(|field| {
                let name = self.name(field);
                Some(match &field.role {
                    Role::Property | Role::Json | Role::With(_) => {
                        // A projection reads the older names too.
                        let aliases = field.aliases.iter().map(|alias| match self.cont.mode {
                            Mode::Entity => quote!(#tk::String::from(#alias)),
                            Mode::Fields => quote!(#tk::join(__prefix, #alias)),
                        });
                        quote!(
                            __names.push(#tk::String::from(#name));
                            #(__names.push(#aliases);)*
                        )
                    }
                    Role::Flatten(prefix) => {
                        let ty = field.ty;
                        let prefix = self.flatten_prefix(prefix);
                        quote_spanned!(ty.span()=> __complete &= <#ty as #tk::TableFields>::field_names(#prefix, __names);)
                    }
                    Role::Series => {
                        let ty = field.ty;
                        quote_spanned! {ty.span()=>
                            match <#ty as #tk::Series>::FIXED_LEN {
                                #tk::Some(__len) => __names.extend((0..__len).map(|__i| #tk::element_name(#name, __i))),
                                #tk::None => __complete = false,
                            }
                        }
                    }
                    _ => return None,
                })
            })
            .collect()
    }
}

fn expand(cont: &Container<'_>, indexes: &[crate::indexes::IndexModel<'_>]) -> TokenStream {
    let tk = cont.attrs.private_path();
    let ex = Expansion {
        cont,
        tk: tk.clone(),
    };
    let input = cont.input;
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut predicates = ex.bounds();
    if let Some(where_clause) = where_clause {
        predicates.extend(where_clause.predicates.iter().map(|p| quote!(#p)));
    }
    let mut writes = ex.write_statements();
    if let Some((property, value, _)) = &cont.attrs.discriminator {
        // Written first, as any other property; readers take it out.
        writes.insert(
            0,
            quote!(#tk::write_property(__props, #property, &#tk::String::from(#value))?;),
        );
    }
    let reads = ex.read_initializers();
    let names = ex.name_pushes();

    match cont.mode {
        Mode::Fields => quote! {
            const _: () = {
                #[automatically_derived]
                impl #impl_generics #tk::TableFields for #ident #ty_generics where #(#predicates,)* {
                    fn field_names(__prefix: &str, __names: &mut #tk::Vec<#tk::String>) -> bool {
                        let mut __complete = true;
                        #(#names)*
                        __complete
                    }
                    fn write_fields<__S: #tk::PropertySink + ?::core::marker::Sized>(&self, __prefix: &str, __props: &mut __S) -> #tk::Result<(), #tk::Error> {
                        #(#writes)*
                        #tk::Ok(())
                    }
                    fn read_fields<__S: #tk::PropertySource + ?::core::marker::Sized>(__prefix: &str, __props: &mut __S) -> #tk::Result<Self, #tk::Error> {
                        #tk::Ok(#ident { #(#reads,)* })
                    }
                }
            };
        },
        Mode::Entity => expand_entity(&ex, predicates, writes, reads, names, indexes),
    }
}

fn expand_entity(
    ex: &Expansion<'_>,
    predicates: Vec<TokenStream>,
    writes: Vec<TokenStream>,
    reads: Vec<TokenStream>,
    names: Vec<TokenStream>,
    indexes: &[crate::indexes::IndexModel<'_>],
) -> TokenStream {
    let tk = &ex.tk;
    let cont = ex.cont;
    let input = cont.input;
    let ident = &input.ident;
    let (impl_generics, ty_generics, _) = input.generics.split_for_impl();
    let pk = key_fields(cont, true);
    let rk = key_fields(cont, false);
    let EntityKeys {
        types,
        methods,
        bind,
        inits,
    } = entity_keys(tk, cont, &pk, &rk);
    let checked_names = ex.checked_names();
    let field_names = ex.field_names();
    let crate::indexes::Expanded {
        handles: index_handles,
        items: index_items,
        part: index_part,
    } = crate::indexes::expand(tk, cont, indexes);
    let descriptor = ex.descriptor(Descriptor {
        pk: &pk,
        rk: &rk,
        checked_names,
        field_names: &field_names,
        names: &names,
        index_part,
    });
    let member_slot = checked_names.then(|| ex.member_slot(&field_names));
    let bucketed = ex.bucketed_impl(&predicates);
    let columns_ident = format_ident!("{}Columns", ident);
    let (columns_struct, columns_fn) = ex.columns_fn(&columns_ident);
    let properties = ex.properties_fns(&writes, &reads, &bind, &inits);
    let records_changes = ex.changes_part().map(|_| {
        quote! {
            #[automatically_derived]
            impl #impl_generics #tk::RecordsChanges for #ident #ty_generics
            where
                Self: #tk::TableEntity,
            {}
        }
    });

    quote! {
        #columns_struct

        #index_handles

        const _: () = {
            #[automatically_derived]
            #[allow(clippy::unused_unit, clippy::let_unit_value)]
            impl #impl_generics #tk::TableEntity for #ident #ty_generics
            where
                Self: ::core::marker::Send + ::core::marker::Sync + 'static,
                #(#predicates,)*
            {
                #types
                type Columns = #columns_ident #ty_generics;
                const DESCRIPTOR: #tk::EntityDescriptor = #descriptor;
                #index_items
                #member_slot
                #methods
                #columns_fn
                #properties
            }
            #records_changes
            #bucketed
        };
    }
}

/// The key items of an entity's impl: its key types, how a value's keys are
/// made and written, and how they are read back into its fields.
struct EntityKeys {
    /// `type PartitionKey = …; type RowKey = …;`
    types: TokenStream,
    /// `partition_key`, `row_key`, `write_partition_key`, `write_row_key`.
    methods: TokenStream,
    /// Binds the key fields' variables from `__pk` and `__rk`.
    bind: TokenStream,
    /// The key fields' initializers, from those variables.
    inits: Vec<TokenStream>,
}

fn entity_keys(
    tk: &TokenStream,
    cont: &Container<'_>,
    pk: &[&Field<'_>],
    rk: &[&Field<'_>],
) -> EntityKeys {
    let (pk_type, rk_type) = (key_type(pk), key_type(rk));
    let pk_value = key_value(tk, pk);
    let rk_value = if rk.is_empty() {
        quote!(())
    } else {
        key_value(tk, rk)
    };
    let write_pk = write_key(tk, pk);
    let write_rk = write_row_key(tk, cont, rk);
    let (pk_vars, pk_pattern) = key_bindings(pk, "pk");
    let (rk_vars, rk_pattern) = key_bindings(rk, "rk");
    let rk_binding = (!rk.is_empty()).then(|| quote!(let #rk_pattern = __rk;));
    let inits = pk
        .iter()
        .zip(&pk_vars)
        .chain(rk.iter().zip(&rk_vars))
        .map(|(f, var)| {
            let field = f.ident;
            quote!(#field: #var)
        })
        .collect();
    EntityKeys {
        types: quote! {
            type PartitionKey = #pk_type;
            type RowKey = #rk_type;
        },
        methods: quote! {
            fn partition_key(&self) -> Self::PartitionKey {
                #pk_value
            }
            fn row_key(&self) -> Self::RowKey {
                #rk_value
            }
            fn write_partition_key(&self, __out: &mut #tk::String) {
                #write_pk
            }
            fn write_row_key(&self, __out: &mut #tk::String) {
                #write_rk
            }
        },
        bind: quote! {
            let #pk_pattern = __pk;
            #rk_binding
        },
        inits,
    }
}

/// The descriptor's `discriminator`, as the type declares it.
fn discriminator_of(cont: &Container<'_>, tk: &TokenStream) -> TokenStream {
    match &cont.attrs.discriminator {
        Some((property, value, _)) => quote! {
            #tk::Some(#tk::Discriminator { property: #property, value: #value })
        },
        None => quote!(#tk::None),
    }
}
