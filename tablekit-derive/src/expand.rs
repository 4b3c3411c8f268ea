//! Generates the impls from the validated model, and nothing else.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident, Type};

use crate::ast::{Container, Field, Mode, Role};
use crate::attr::TemplatePiece;
use crate::check;
use crate::ctxt::Ctxt;

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

/// Whether `tokens` name one of `params`.
fn mentions(tokens: TokenStream, params: &[&Ident]) -> bool {
    tokens.into_iter().any(|tree| match tree {
        proc_macro2::TokenTree::Ident(ident) => params.iter().any(|p| **p == ident),
        proc_macro2::TokenTree::Group(group) => mentions(group.stream(), params),
        _ => false,
    })
}

/// The checks a key field's type must pass where it stands: a part with no
/// end of its own ends the key; in a RowKey (`row_key`), one that ends a
/// template may vary in width and one that heads a collection may not be
/// verbatim.
fn key_part_checks(
    tk: &TokenStream,
    fields: &[&Field<'_>],
    i: usize,
    row_key: bool,
) -> TokenStream {
    let ty = fields[i].ty;
    let arity = fields.len();
    let last = i + 1 == arity;
    let layout = quote!(<Self as #tk::TableEntity>::DESCRIPTOR.row_key_layout);
    let only_last = if !last {
        quote_spanned! {ty.span()=>
            const { ::core::assert!(!<#ty as #tk::KeyPart>::LAST_ONLY, "this key field's type can only be the last key field (its text has no end of its own)") };
        }
    } else if row_key {
        quote_spanned! {ty.span()=>
            const { ::core::assert!(!(<#ty as #tk::KeyPart>::LAST_ONLY && #layout.heads_collection()), "this key field's type has no end of its own, so it cannot end the key of a kind that heads a `collection` (the keys of nested rows go on after it)") };
        }
    } else {
        TokenStream::new()
    };
    let template = (row_key && !last).then(|| {
        quote_spanned! {ty.span()=>
            const { ::core::assert!(#layout.fits::<#ty>(#i, #arity), "in a RowKey template only the last key field may vary in width (a string): put it last, or give the fields before it fixed widths (integers, `Padded`, timestamps, UUIDs)") };
        }
    });
    // Verbatim text may start with the escape mark, which after the space
    // that ends an `Ordered` part reads as an escape of that part.
    let after_ordered = (last && i > 0).then(|| {
        let before = fields[i - 1].ty;
        quote_spanned! {ty.span()=>
            const { ::core::assert!(!(<#ty as #tk::KeyPart>::LAST_ONLY && <#before as #tk::KeyPart>::SEPARATOR == #tk::ORDERED_SEPARATOR), "a `Verbatim` key field cannot follow an `Ordered` one") };
        }
    });
    // A folded part reads back other than it was: never an entity's key.
    let folded = quote_spanned! {ty.span()=>
        const { ::core::assert!(!<#ty as #tk::KeyPart>::FOLDED, "a `CaseInsensitive` field is keyed case-folded and reads back so: it can be an index's value, not an entity's key (use `String`)") };
    };
    quote!(#only_last #template #after_ordered #folded)
}

/// The body of `write_row_key`: the key fields with the kind tags (or the
/// template's texts) of the descriptor's `row_key_layout` around them, and the checks that a
/// `parent` fits.
fn write_row_key(tk: &TokenStream, cont: &Container<'_>, fields: &[&Field<'_>]) -> TokenStream {
    let arity = fields.len();
    let parts = fields.iter().enumerate().map(|(i, f)| {
        let ident = f.ident;
        let ty = f.ty;
        let checks = key_part_checks(tk, fields, i, true);
        quote_spanned! {ty.span()=>
            #checks
            __layout.write_tags(#i, __out);
            #tk::write_component::<#ty>(&self.#ident, __out, __layout.ends_key::<#ty>(#i, #arity));
        }
    });
    let parent_checks = cont.attrs.parent.as_ref().map(|(parent, _)| {
        let span = parent.span();
        quote_spanned! {span=>
            const {
                ::core::assert!(
                    <#parent as #tk::TableEntity>::DESCRIPTOR.row_key_layout.heads_collection(),
                    "`parent` names a kind that heads no collection: add `collection` to its #[tablekit(...)]"
                );
                ::core::assert!(
                    #tk::str_eq(<#parent as #tk::TableEntity>::DESCRIPTOR.table, <Self as #tk::TableEntity>::DESCRIPTOR.table),
                    "a kind lives in the same `table` as its `parent`"
                );
            };
            let _: fn(<#parent as #tk::TableEntity>::PartitionKey) -> <Self as #tk::TableEntity>::PartitionKey = |__pk| __pk;
            #tk::key_starts_with::<<Self as #tk::TableEntity>::RowKey, <#parent as #tk::TableEntity>::RowKey>();
        }
    });
    quote! {
        #parent_checks
        let __layout: &#tk::RowKeyLayout = const { &<Self as #tk::TableEntity>::DESCRIPTOR.row_key_layout };
        #(#parts)*
        __layout.write_tags(#arity, __out);
    }
}

/// The body of `write_partition_key`: the key fields, joined by their
/// separators.
fn write_key(tk: &TokenStream, fields: &[&Field<'_>]) -> TokenStream {
    let parts = fields.iter().enumerate().map(|(i, f)| {
        let ident = f.ident;
        let ty = f.ty;
        let last = i + 1 == fields.len();
        let checks = key_part_checks(tk, fields, i, false);
        quote_spanned! {ty.span()=>
            #checks
            #tk::write_component::<#ty>(&self.#ident, __out, #last);
        }
    });
    quote!(#(#parts)*)
}

fn key_value(tk: &TokenStream, fields: &[&Field<'_>]) -> TokenStream {
    let clones = fields.iter().map(|f| {
        let ident = f.ident;
        quote!(#tk::Clone::clone(&self.#ident))
    });
    match fields.len() {
        1 => quote!(#(#clones)*),
        _ => quote!((#(#clones),*)),
    }
}

fn key_bindings(fields: &[&Field<'_>], prefix: &str) -> (Vec<Ident>, TokenStream) {
    let vars: Vec<Ident> = (0..fields.len())
        .map(|i| format_ident!("__{}{}", prefix, i))
        .collect();
    let pattern = match vars.as_slice() {
        [] => quote!(()),
        [one] => quote!(#one),
        many => quote!((#(#many),*)),
    };
    (vars, pattern)
}

fn field_list(fields: &[&Field<'_>]) -> String {
    fields
        .iter()
        .map(|f| f.ident.to_string())
        .collect::<Vec<_>>()
        .join(", ")
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

/// What the entity's descriptor is made of besides the container's
/// attributes: its keys, names and index part.
struct Descriptor<'a, 'f> {
    pk: &'a [&'f Field<'f>],
    rk: &'a [&'f Field<'f>],
    checked_names: bool,
    field_names: &'a [&'f str],
    names: &'a [TokenStream],
    index_part: Option<TokenStream>,
}

/// The pieces of an entity's expansion, one per part of what it generates.
impl Expansion<'_> {
    /// The columns struct of an entity, and its `columns` method.
    fn columns_fn(&self, columns_ident: &Ident) -> (TokenStream, TokenStream) {
        let projection_checks = self.projection_checks();
        let upgrade_checks = self.upgrade_checks();
        let (columns_struct, column_inits, marker_init) = self.columns(columns_ident);
        let method = quote! {
            fn columns() -> Self::Columns {
                #projection_checks
                #upgrade_checks
                #columns_ident {
                    #(#column_inits,)*
                    #marker_init
                }
            }
        };
        (columns_struct, method)
    }

    /// An entity's `write_properties` and `read_properties` methods, from
    /// each field's write and read, and its keys' binding (`bind`, `inits`).
    fn properties_fns(
        &self,
        writes: &[TokenStream],
        reads: &[TokenStream],
        bind: &TokenStream,
        inits: &[TokenStream],
    ) -> TokenStream {
        let tk = &self.tk;
        let ident = &self.cont.input.ident;
        let upgrade = self.upgrade_read();
        quote! {
            fn write_properties<__S: #tk::PropertySink + ?::core::marker::Sized>(&self, __props: &mut __S) -> #tk::Result<(), #tk::Error> {
                #(#writes)*
                #tk::Ok(())
            }
            fn read_properties<__S: #tk::PropertySource + ?::core::marker::Sized>(
                __pk: Self::PartitionKey,
                __rk: Self::RowKey,
                __props: &mut __S,
            ) -> #tk::Result<Self, #tk::Error> {
                #upgrade
                #bind
                #tk::Ok(#ident {
                    #(#inits,)*
                    #(#reads,)*
                })
            }
        }
    }

    /// The entity a projection reads (`projection_of`), if it is one.
    fn projection(&self) -> Option<&syn::Type> {
        self.cont
            .attrs
            .projection_of
            .as_ref()
            .map(|(entity, _)| entity)
    }

    /// A descriptor member taken from the projected entity's descriptor,
    /// or `own` for an entity.
    fn entity_const(&self, name: TokenStream, own: TokenStream) -> TokenStream {
        let tk = &self.tk;
        match self.projection() {
            Some(entity) => quote!(<#entity as #tk::TableEntity>::DESCRIPTOR.#name),
            None => own,
        }
    }

    /// Whether every property name is a literal, checked valid and
    /// distinct at compile time. A flattened or series field makes its
    /// names at run time; a projection's names are its entity's; a field
    /// with older names (`alias`) is read by name (the typed JSON reader's
    /// slots are for the current names only); a discriminator is a property
    /// no field holds, which a reader of fields by position would not see.
    fn checked_names(&self) -> bool {
        let cont = self.cont;
        self.projection().is_none()
            && cont.attrs.upgrade_from.is_none()
            && cont.attrs.discriminator.is_none()
            && !cont
                .fields
                .iter()
                .any(|f| matches!(f.role, Role::Flatten(_) | Role::Series) || !f.aliases.is_empty())
    }

    /// The stored names of the fields held in one property each, in order,
    /// for readers that look fields up by position.
    fn field_names(&self) -> Vec<&str> {
        let projection = self.projection();
        self.cont
            .fields
            .iter()
            .filter(|_| projection.is_none())
            .filter(|f| matches!(f.role, Role::Property | Role::Json | Role::With(_)))
            .map(|f| f.stored_name.as_str())
            .collect()
    }

    /// The `kind`, as an `Option` expression.
    fn kind(&self) -> TokenStream {
        let tk = &self.tk;
        match &self.cont.attrs.kind {
            Some(k) => {
                let k = k.value();
                quote!(#tk::Some(#k))
            }
            None => quote!(#tk::None),
        }
    }

    /// The RowKey layout: the kind's (nested in a parent's), a template's
    /// literals, and whether it heads a collection.
    fn row_key_layout(&self) -> TokenStream {
        let tk = &self.tk;
        let attrs = &self.cont.attrs;
        let layout = match (&attrs.kind, &attrs.parent) {
            (Some(kind), Some((parent, _))) => {
                let kind = kind.value();
                quote!(<#parent as #tk::TableEntity>::DESCRIPTOR.row_key_layout.nested(#kind, <<#parent as #tk::TableEntity>::RowKey as #tk::KeyTuple>::ARITY))
            }
            (Some(kind), None) => {
                let kind = kind.value();
                quote!(#tk::RowKeyLayout::kind(#kind))
            }
            (None, _) => quote!(#tk::RowKeyLayout::NONE),
        };
        let layout = match &attrs.row_key_template {
            Some((_, pieces)) => {
                let mut index = 0usize;
                let literals = pieces.iter().filter_map(|piece| match piece {
                    TemplatePiece::Literal(text) => Some(quote!(.literal(#text, #index))),
                    TemplatePiece::Field(_) => {
                        index += 1;
                        None
                    }
                });
                let literals: Vec<TokenStream> = literals.collect();
                quote!(#tk::RowKeyLayout::template() #(#literals)*)
            }
            None => layout,
        };
        if attrs.collection.is_some() {
            quote!(#layout.heading_collection())
        } else {
            layout
        }
    }

    /// How the entity's rows spread over partitions: its projected
    /// entity's rule, its own shards, or none.
    fn partitions(&self) -> TokenStream {
        let tk = &self.tk;
        match (&self.cont.attrs.projection_of, &self.cont.attrs.shards) {
            (Some((entity, _)), _) => {
                quote!(<#entity as #tk::TableEntity>::DESCRIPTOR.partitions)
            }
            (None, Some((n, _))) => {
                let n = u16::try_from(*n).unwrap_or(u16::MAX);
                quote!(#tk::Some(&#tk::ShardRule { shards: #n }))
            }
            (None, None) => quote!(#tk::None),
        }
    }

    /// The field whose time picks the period's table (`bucket`).
    fn bucket_field(&self) -> Option<&Field<'_>> {
        self.cont.fields.iter().find(|f| f.bucket.is_some())
    }

    /// The change feed's part, when the kind records its changes.
    fn changes_part(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let attrs = &self.cont.attrs;
        if attrs.changes.is_none() || attrs.projection_of.is_some() {
            return None;
        }
        Some(if attrs.changes_previous {
            quote!(&#tk::ChangeFeedWithPrevious)
        } else {
            quote!(&#tk::ChangeFeed)
        })
    }

    /// The bucket part: its own for a kind with `buckets`; a projection
    /// finds its entity's through the descriptor's `base`.
    fn bucket_part(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let (None, Some((period, _))) = (&self.cont.attrs.projection_of, &self.cont.attrs.buckets)
        else {
            return None;
        };
        let variant = format_ident!(
            "{}",
            match period.as_str() {
                "hour" => "Hour",
                "month" => "Month",
                _ => "Day",
            }
        );
        let bucket_field = self.bucket_field();
        let property = match bucket_field {
            Some(f) if matches!(f.role, Role::Property) => {
                let name = &f.stored_name;
                quote!(#tk::Some(#name))
            }
            _ => quote!(#tk::None),
        };
        let in_key =
            bucket_field.is_some_and(|f| matches!(f.role, Role::PartitionKey(_) | Role::RowKey(_)));
        Some(
            quote!(&#tk::BucketPart { period: #tk::Period::#variant, property: #property, in_key: #in_key }),
        )
    }

    /// The check of each offloaded field's type, and its part.
    fn blob_part(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let blob_fields: Vec<TokenStream> = self
            .cont
            .fields
            .iter()
            .filter_map(|f| {
                let always = f.blob?;
                let name = &f.stored_name;
                // An unsupported type is reported on the field by this check.
                let ty = f.ty;
                let span = ty.span();
                let check = quote_spanned!(span=> { const fn __blob_value<__T: #tk::BlobValue>() {} __blob_value::<#ty>(); });
                Some(quote!(#tk::BlobField { name: { #check #name }, always: #always }))
            })
            .collect();
        (!blob_fields.is_empty()).then(|| quote!(&#tk::BlobFields { fields: &[#(#blob_fields),*] }))
    }

    /// The `EntityDescriptor` constant.
    fn descriptor(&self, parts: Descriptor<'_, '_>) -> TokenStream {
        let tk = &self.tk;
        let cont = self.cont;
        let ident = &cont.input.ident;
        let table = cont
            .attrs
            .table
            .as_ref()
            .map_or_else(|| ident.to_string(), |t| t.value());
        let previous_kinds = cont
            .attrs
            .previous_kinds
            .iter()
            .flat_map(|(kinds, _)| kinds.iter().map(syn::LitStr::value));
        let previous_kinds = quote!(&[#(#previous_kinds),*]);
        let version = cont.attrs.version.as_ref().map_or(1, |(v, _)| *v);
        let min_version = cont.attrs.min_version.as_ref().map_or(version, |(v, _)| *v);
        let rows = if cont.attrs.wide {
            quote!(#tk::Some(&#tk::WideRows))
        } else {
            quote!(#tk::None)
        };
        let kind_properties = !matches!(cont.attrs.kind_properties, Some((false, _)));
        let table = self.entity_const(quote!(table), quote!(#table));
        let kind = self.entity_const(quote!(kind), self.kind());
        let previous_kinds = self.entity_const(quote!(previous_kinds), previous_kinds);
        let layout = self.entity_const(quote!(row_key_layout), self.row_key_layout());
        let version = self.entity_const(quote!(version), quote!(#version));
        // A type that upgrades an older one reads that one's versions too.
        let min_version = match (&cont.attrs.upgrade_from, &cont.attrs.min_version) {
            (Some((old, _)), None) => quote!(<#old as #tk::TableEntity>::DESCRIPTOR.min_version),
            _ => quote!(#min_version),
        };
        let min_version = self.entity_const(quote!(min_version), min_version);
        let kind_properties = self.entity_const(quote!(kind_properties), quote!(#kind_properties));
        let discriminator = self.entity_const(quote!(discriminator), discriminator_of(cont, tk));
        let base = match self.projection() {
            Some(entity) => quote!(#tk::Some(&<#entity as #tk::TableEntity>::DESCRIPTOR)),
            None => quote!(#tk::None),
        };
        let partitions = self.partitions();
        let pk_fields = field_list(parts.pk);
        let rk_fields = field_list(parts.rk);
        let checked_names = parts.checked_names;
        let field_names = parts.field_names;
        let names = parts.names;
        // The parts the patterns need, each only when declared.
        let parts: Vec<TokenStream> = [
            self.blob_part(),
            parts.index_part,
            self.bucket_part(),
            self.changes_part(),
        ]
        .into_iter()
        .flatten()
        .map(|part| quote!(#tk::Part::new(#part)))
        .collect();
        quote! {
            #tk::EntityDescriptor {
                table: #table,
                kind: #kind,
                previous_kinds: #previous_kinds,
                row_key_layout: #layout,
                version: #version,
                min_version: #min_version,
                partition_key_fields: #pk_fields,
                row_key_fields: #rk_fields,
                rows: #rows,
                kind_properties: #kind_properties,
                checked_names: #checked_names,
                field_names: &[#(#field_names),*],
                property_names: |__names: &mut #tk::Vec<#tk::String>| -> bool {
                    let mut __complete = true;
                    #(#names)*
                    __complete
                },
                partitions: #partitions,
                parts: &[#(#parts),*],
                base: #base,
                discriminator: #discriminator,
            }
        }
    }

    /// The first span of `upgrade_from`'s tokens.
    fn upgrade_span(tokens: &TokenStream) -> proc_macro2::Span {
        tokens
            .clone()
            .into_iter()
            .next()
            .map_or_else(proc_macro2::Span::call_site, |t| t.span())
    }

    /// A row of an older version is read as the older type, then
    /// converted.
    fn upgrade_read(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let (old, tokens) = self.cont.attrs.upgrade_from.as_ref()?;
        let convert = match &self.cont.attrs.upgrade_with {
            Some(function) => quote_spanned!(function.span()=> #function(__old)),
            None => quote_spanned!(old.span()=> <Self as ::core::convert::From<#old>>::from(__old)),
        };
        let span = Self::upgrade_span(tokens);
        Some(quote_spanned! {span=>
            if #tk::stored_version(__props).is_some_and(|__v| __v <= i64::from(<#old as #tk::TableEntity>::DESCRIPTOR.version)) {
                let (__old_pk, __old_rk) = <Self as #tk::SameKeys<#old>>::old_keys(__pk, __rk);
                let __old = <#old as #tk::TableEntity>::read_properties(__old_pk, __old_rk, __props)?;
                return #tk::Ok(#convert);
            }
        })
    }

    /// The checks that an upgrade's two types describe the same rows, each
    /// on the token; checked where no generic parameter defers them, at
    /// every compile.
    fn upgrade_checks(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let (old, tokens) = self.cont.attrs.upgrade_from.as_ref()?;
        let span = Self::upgrade_span(tokens);
        Some(quote_spanned! {span=>
            const { ::core::assert!(#tk::str_eq(<#old as #tk::TableEntity>::DESCRIPTOR.table, <Self as #tk::TableEntity>::DESCRIPTOR.table), "`upgrade_from` names a type of another table: an upgrade reads rows of this table") };
            const { ::core::assert!(match (<#old as #tk::TableEntity>::DESCRIPTOR.kind, <Self as #tk::TableEntity>::DESCRIPTOR.kind) { (#tk::Some(__a), #tk::Some(__b)) => #tk::str_eq(__a, __b) || #tk::kind_listed(__a, <Self as #tk::TableEntity>::DESCRIPTOR.previous_kinds), _ => false }, "`upgrade_from` names a type of another kind: an upgrade reads rows of the same kind (or of one of its `previous_kinds`)") };
            const { ::core::assert!(<#old as #tk::TableEntity>::DESCRIPTOR.version < <Self as #tk::TableEntity>::DESCRIPTOR.version, "`upgrade_from` names a type whose version is not lower: versions increase along an upgrade") };
            const { ::core::assert!(<#old as #tk::TableEntity>::DESCRIPTOR.version >= <Self as #tk::TableEntity>::DESCRIPTOR.min_version, "`min_version` is above the version of the type `upgrade_from` names: its rows would be refused, and the upgrade never run (lower `min_version`, or leave it out to read every version the older type reads)") };
        })
    }

    /// The checks that a projection's fields and keys are its entity's.
    fn projection_checks(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let entity = self.projection()?;
        let fields = self
            .cont
            .fields
            .iter()
            .filter(|f| matches!(f.role, Role::Property))
            .map(|f| {
                let (ident, ty) = (f.ident, f.ty);
                let span = ident.span();
                quote_spanned! {span=>
                    let _: #tk::Column<#ty> = <#entity as #tk::TableEntity>::columns().#ident;
                }
            });
        let span = entity.span();
        Some(quote_spanned! {span=>
            #(#fields)*
            let _: fn(<#entity as #tk::TableEntity>::PartitionKey) -> <Self as #tk::TableEntity>::PartitionKey = |__key| __key;
            let _: fn(<#entity as #tk::TableEntity>::RowKey) -> <Self as #tk::TableEntity>::RowKey = |__key| __key;
        })
    }

    /// A `match` over the literal names and their annotations (with names
    /// made at run time, the default search stands).
    fn member_slot(&self, field_names: &[&str]) -> TokenStream {
        let tk = &self.tk;
        let arms = field_names.iter().enumerate().map(|(i, name)| {
            // The wire format's annotation suffix; the runtime's own search
            // (`MemberSlot::search`) is checked to agree in tests/typed_json.rs.
            let annotation = format!("{name}@odata.type");
            quote! {
                #name => #tk::MemberSlot::Value(#i),
                #annotation => #tk::MemberSlot::Annotation(#i),
            }
        });
        quote! {
            fn member_slot(__name: &str) -> #tk::MemberSlot {
                match __name {
                    #(#arms)*
                    _ => #tk::MemberSlot::Other,
                }
            }
        }
    }

    /// `Buckets<T>` takes a kind with `buckets`, and a projection (which
    /// `Buckets::new` refuses when its entity has none).
    fn bucketed_impl(&self, predicates: &[TokenStream]) -> Option<TokenStream> {
        let tk = &self.tk;
        let cont = self.cont;
        if cont.attrs.buckets.is_none() && self.projection().is_none() {
            return None;
        }
        let ident = &cont.input.ident;
        let (impl_generics, ty_generics, _) = cont.input.generics.split_for_impl();
        let bucket_time = self.bucket_field().map(|f| {
            let (ident, span) = (f.ident, f.ty.span());
            quote_spanned! {span=>
                fn bucket_time(&self) -> #tk::Option<#tk::DateTime> {
                    #tk::Some(#tk::BucketTime::bucket_time(&self.#ident))
                }
            }
        });
        Some(quote! {
            #[automatically_derived]
            impl #impl_generics #tk::Bucketed for #ident #ty_generics
            where
                Self: ::core::marker::Send + ::core::marker::Sync + 'static,
                #(#predicates,)*
            {
                #bucket_time
            }
        })
    }

    /// The `{Entity}Columns` struct of typed filters, each field's
    /// initializer, and the marker field's for a generic entity.
    fn columns(
        &self,
        columns_ident: &Ident,
    ) -> (TokenStream, Vec<TokenStream>, Option<TokenStream>) {
        let tk = &self.tk;
        let input = self.cont.input;
        let (ident, vis, generics) = (&input.ident, &input.vis, &input.generics);
        let (_, ty_generics, where_clause) = generics.split_for_impl();
        let columns: Vec<&Field<'_>> = self
            .cont
            .fields
            .iter()
            .filter(|f| matches!(f.role, Role::Property | Role::Series))
            .collect();
        let column_decls = columns.iter().map(|f| {
            let field = f.ident;
            let ty: &Type = f.ty;
            // The field's own documentation, or a generated line.
            let docs: Vec<_> = f
                .original
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("doc"))
                .collect();
            let doc = if docs.is_empty() {
                let text = format!(
                    "Typed filters on `{}` (stored as `{}`).",
                    f.ident, f.stored_name
                );
                quote!(#[doc = #text])
            } else {
                quote!(#(#docs)*)
            };
            // Spanned on the field's type, so an unsupported type is reported there.
            let column = if matches!(f.role, Role::Series) {
                quote_spanned!(ty.span()=> #tk::SeriesColumn<#ty>)
            } else {
                quote_spanned!(ty.span()=> #tk::Column<#ty>)
            };
            quote! {
                #doc
                pub #field: #column
            }
        });
        let column_inits = columns
            .iter()
            .map(|f| {
                let field = f.ident;
                let name = self.name(f);
                let span = f.ty.span();
                if matches!(f.role, Role::Series) {
                    quote_spanned!(span=> #field: #tk::SeriesColumn::new(#name))
                } else {
                    quote_spanned!(span=> #field: #tk::Column::new(#name))
                }
            })
            .collect();
        let columns_doc =
            format!("Typed filters on the fields of [`{ident}`], from `{ident}::columns()`.");
        // Only a generic entity needs a field that uses its parameters;
        // without one, messages about the columns list the entity's own
        // fields alone.
        let generic = !generics.params.is_empty();
        let marker_decl =
            generic.then(|| quote!(__marker: #tk::PhantomData<fn() -> #ident #ty_generics>,));
        let marker_init = generic.then(|| quote!(__marker: #tk::PhantomData,));
        let decl = quote! {
            #[doc = #columns_doc]
            #[derive(Clone, Copy, Debug)]
            #[allow(dead_code)]
            #vis struct #columns_ident #generics #where_clause {
                #(#column_decls,)*
                #marker_decl
            }
        };
        (decl, column_inits, marker_init)
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
