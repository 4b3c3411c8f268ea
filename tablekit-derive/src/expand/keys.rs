//! How the generated code writes and reads keys: the checks on key parts, and the bodies of the key writers.

use super::*;

/// Whether `tokens` name one of `params`.
pub(super) fn mentions(tokens: TokenStream, params: &[&Ident]) -> bool {
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
pub(super) fn key_part_checks(
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
pub(super) fn write_row_key(
    tk: &TokenStream,
    cont: &Container<'_>,
    fields: &[&Field<'_>],
) -> TokenStream {
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
pub(super) fn write_key(tk: &TokenStream, fields: &[&Field<'_>]) -> TokenStream {
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

pub(super) fn key_value(tk: &TokenStream, fields: &[&Field<'_>]) -> TokenStream {
    let clones = fields.iter().map(|f| {
        let ident = f.ident;
        quote!(#tk::Clone::clone(&self.#ident))
    });
    match fields.len() {
        1 => quote!(#(#clones)*),
        _ => quote!((#(#clones),*)),
    }
}

pub(super) fn key_bindings(fields: &[&Field<'_>], prefix: &str) -> (Vec<Ident>, TokenStream) {
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

pub(super) fn field_list(fields: &[&Field<'_>]) -> String {
    fields
        .iter()
        .map(|f| f.ident.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
