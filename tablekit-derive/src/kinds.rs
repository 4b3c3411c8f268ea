//! `#[derive(EntityKinds)]`: an enum whose variants each hold one entity type.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

use crate::attr;
use crate::ctxt::Ctxt;

pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let container = attr::Container::parse(&cx, &input.attrs, false);
    let variants = variants_of(&cx, input);
    if let Err(error) = cx.check() {
        return error.to_compile_error();
    }
    let tk = container.private_path();
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let Some((_, first_ty)) = variants.first() else {
        return TokenStream::new();
    };
    let checks = variant_checks(&variants, first_ty, &tk);
    let pairs = pair_checks(&variants, &tk);
    let kinds = variants.iter().map(|(_, ty)| {
        quote! {
            match <#ty as #tk::TableEntity>::DESCRIPTOR.kind {
                #tk::Some(__kind) => __kind,
                #tk::None => "",
            }
        }
    });
    // A claim of a row held as an entity (`&Entity` or `Entity`), of one
    // passed by reference (`RowRef`), and of a reference to that.
    let claims = |ty: &syn::Type| quote!(#tk::claims::<#ty>(&__entity));
    let claims_row = |ty: &syn::Type| quote!(#tk::claims_row::<#ty>(#tk::RowView::from(&__row)));
    let claims_row_ref = |ty: &syn::Type| quote!(#tk::claims_row::<#ty>(#tk::RowView::from(__row)));
    // The value read by `read`, wrapped in `wrap`, as the answer of an arm.
    let answer = |wrap: &TokenStream, value: TokenStream, variant: &syn::Ident| quote!(#wrap(#value.map(#ident::#variant)));
    let (some, ok) = (quote!(#tk::Some), quote!(#tk::Ok));
    let arms = read_arms(&variants, &tk, &claims, &|ty, variant| {
        answer(&some, quote!(#tk::from_entity::<#ty>(__entity)), variant)
    });
    let owned_arms = read_arms(&variants, &tk, &claims, &|ty, variant| {
        answer(
            &ok,
            quote!(#tk::from_entity_owned::<#ty>(__entity)),
            variant,
        )
    });
    let row_arms = read_arms(&variants, &tk, &claims_row, &|ty, variant| {
        answer(&some, quote!(#tk::from_row::<#ty>(__row)), variant)
    });
    // Whether a row has expired, asked of the variant that claims it.
    let expired_arms = read_arms(
        &variants,
        &tk,
        &claims,
        &|ty, _| quote!(#tk::expired::<#ty, _>(&__entity.properties, __now)),
    );
    let row_expired_arms = read_arms(
        &variants,
        &tk,
        &claims_row_ref,
        &|ty, _| quote!(#tk::expired::<#ty, _>(&*__row.properties, __now)),
    );
    quote! {
        const _: () = {
            #(#checks)*
            #(#pairs)*
            #[automatically_derived]
            impl #impl_generics #tk::EntityKinds for #ident #ty_generics #where_clause {
                type PartitionKey = <#first_ty as #tk::TableEntity>::PartitionKey;
                const KINDS: &'static [&'static str] = &[#(#kinds),*];
                fn from_entity(__entity: &#tk::Entity) -> #tk::Option<#tk::Result<Self, #tk::Error>> {
                    #(#arms)*
                    #tk::None
                }
                fn from_entity_owned(__entity: #tk::Entity) -> #tk::Result<#tk::Result<Self, #tk::Error>, #tk::Entity> {
                    #(#owned_arms)*
                    #tk::Err(__entity)
                }
                fn expired(__entity: &#tk::Entity, __now: #tk::DateTime) -> bool {
                    #(#expired_arms)*
                    false
                }
                fn from_row(__row: #tk::RowRef<'_>) -> #tk::Option<#tk::Result<Self, #tk::Error>> {
                    #(#row_arms)*
                    #tk::None
                }
                fn row_expired(__row: &#tk::RowRef<'_>, __now: #tk::DateTime) -> bool {
                    #(#row_expired_arms)*
                    false
                }
            }
        };
    }
}

/// The enum's variants and the entity type each holds; what is not an enum
/// of one-type variants is reported to `cx`.
fn variants_of<'a>(cx: &Ctxt, input: &'a DeriveInput) -> Vec<(&'a syn::Ident, &'a syn::Type)> {
    let mut variants = Vec::new();
    match &input.data {
        Data::Enum(data) => {
            for variant in &data.variants {
                match &variant.fields {
                    Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
                        variants.push((&variant.ident, &fields.unnamed[0].ty));
                    }
                    _ => cx.error_spanned_by(variant, "each variant of an EntityKinds enum holds one entity type: `Employee(Employee)`"),
                }
            }
            if data.variants.is_empty() {
                cx.error_spanned_by(
                    &input.ident,
                    "an EntityKinds enum needs at least one variant",
                );
            }
        }
        _ => cx.error_spanned_by(
            &input.ident,
            "EntityKinds is derived on an enum over entity types",
        ),
    }
    variants
}

/// The compile-time checks of each variant: not sharded, and keyed by the
/// first variant's partition key.
fn variant_checks(
    variants: &[(&syn::Ident, &syn::Type)],
    first_ty: &syn::Type,
    tk: &TokenStream,
) -> Vec<TokenStream> {
    variants
        .iter()
        .map(|(_, ty)| {
            let span = ty.span();
            quote_spanned! {span=>
                const _: () = ::core::assert!(
                    <#ty as #tk::TableEntity>::DESCRIPTOR.partitions.is_none(),
                    "a sharded kind spreads over several stored partitions: it cannot be read with other kinds as one partition"
                );
                const _: fn(<#first_ty as #tk::TableEntity>::PartitionKey) -> <#ty as #tk::TableEntity>::PartitionKey = |__pk| __pk;
            }
        })
        .collect()
}

/// Each variant's arm of a read of a row: `claims` asks whether the
/// variant's type claims the row, and `answer` is what is returned when it
/// does. Types with a kind come first (a row names its kind), then those
/// told apart by their key layout alone, in the order of the variants:
/// list a layout that decodes more keys after the ones it would take.
fn read_arms(
    variants: &[(&syn::Ident, &syn::Type)],
    tk: &TokenStream,
    claims: &dyn Fn(&syn::Type) -> TokenStream,
    answer: &dyn Fn(&syn::Type, &syn::Ident) -> TokenStream,
) -> Vec<TokenStream> {
    [true, false]
        .into_iter()
        .flat_map(|kinded| {
            variants.iter().map(move |(variant, ty)| {
                let (claimed, answer) = (claims(ty), answer(ty, variant));
                quote! {
                    if <#ty as #tk::TableEntity>::DESCRIPTOR.kind.is_some() == #kinded && #claimed {
                        return #answer;
                    }
                }
            })
        })
        .collect()
}

/// The compile-time checks of each pair of variants: two variants of one
/// kind would read every row of that kind into the first of them; types of
/// different tables never share a partition; kind-less types must be told
/// apart by their layouts or discriminators.
fn pair_checks(variants: &[(&syn::Ident, &syn::Type)], tk: &TokenStream) -> Vec<TokenStream> {
    variants
        .iter()
        .enumerate()
        .flat_map(|(i, (_, a))| {
            variants[i + 1..].iter().map(move |(_, b)| {
                let span = b.span();
                quote_spanned! {span=>
                    const _: () = ::core::assert!(
                        !#tk::same_kind(<#a as #tk::TableEntity>::DESCRIPTOR.kind, <#b as #tk::TableEntity>::DESCRIPTOR.kind),
                        "two variants of this EntityKinds enum hold entity types of the same `kind`: rows of that kind would be read into the first one"
                    );
                    const _: () = ::core::assert!(
                        #tk::str_eq(<#a as #tk::TableEntity>::DESCRIPTOR.table, <#b as #tk::TableEntity>::DESCRIPTOR.table),
                        "the entity types of an EntityKinds enum must live in the same `table`"
                    );
                    const _: () = ::core::assert!(
                        #tk::distinguishable(&<#a as #tk::TableEntity>::DESCRIPTOR, &<#b as #tk::TableEntity>::DESCRIPTOR),
                        "two variants of this EntityKinds enum have no `kind` and the same RowKey layout: a row would be read as the first of them. Give both `#[tablekit(discriminator(property = \"…\", value = \"…\"))]` with one property and two values, or a `kind` each"
                    );
                }
            })
        })
        .collect()
}
