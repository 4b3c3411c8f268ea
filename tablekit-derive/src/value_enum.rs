//! `#[derive(TableValue)]`: a unit enum stored as the text of its variant.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr};

use crate::attr::{self, Attr};
use crate::ctxt::Ctxt;

pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let container = attr::Container::parse(&cx, &input.attrs, false);
    let variants = variants(&cx, input, &container);
    if let Err(error) = cx.check() {
        return error.to_compile_error();
    }
    let tk = container.private_path();
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let to_text = variants.iter().map(|(v, s)| quote!(#ident::#v => #s));
    let from_text = variants
        .iter()
        .map(|(v, s)| quote!(#s => #tk::Ok(#ident::#v)));
    let expected = variants
        .iter()
        .map(|(_, s)| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    quote! {
        const _: () = {
            #[automatically_derived]
            impl #impl_generics #ident #ty_generics #where_clause {
                fn __tablekit_text(&self) -> &'static str {
                    match self { #(#to_text,)* }
                }
                fn __tablekit_parse(text: &str) -> #tk::Result<Self, #tk::String> {
                    match text {
                        #(#from_text,)*
                        other => #tk::Err(::std::format!("{:?} is none of {}", other, #expected)),
                    }
                }
            }
            #[automatically_derived]
            impl #impl_generics #tk::PropertyValue for #ident #ty_generics #where_clause {
                fn to_value(&self) -> #tk::Result<#tk::Option<#tk::Value>, #tk::ValueError> {
                    #tk::Ok(#tk::Some(#tk::Value::String(#tk::String::from(self.__tablekit_text()))))
                }
                fn write_to<__S: #tk::PropertySink + ?::core::marker::Sized>(
                    &self,
                    __name: #tk::PropertyName,
                    __sink: &mut __S,
                ) -> #tk::Result<(), #tk::Error> {
                    __sink.push(__name, #tk::ValueRef::String(self.__tablekit_text()))
                }
                fn from_value(__value: #tk::Option<&#tk::Value>) -> #tk::Result<Self, #tk::ValueError> {
                    let __text: #tk::String = #tk::PropertyValue::from_value(__value)?;
                    Self::__tablekit_parse(&__text).map_err(#tk::ValueError::Invalid)
                }
            }
            #[automatically_derived]
            impl #impl_generics #tk::FilterValue for #ident #ty_generics #where_clause {
                fn filter_value(&self) -> #tk::Value {
                    #tk::Value::String(#tk::String::from(self.__tablekit_text()))
                }
            }
            #[automatically_derived]
            impl #impl_generics #tk::KeyPart for #ident #ty_generics #where_clause {
                const WIDTH: usize = 0;
                fn write_key(&self, __out: &mut #tk::String) {
                    #tk::write_escaped(self.__tablekit_text(), __out);
                }
                fn read_key(__text: &str) -> #tk::Result<Self, #tk::String> {
                    let __text: #tk::String = <#tk::String as #tk::KeyPart>::read_key(__text)?;
                    Self::__tablekit_parse(&__text)
                }
            }
        };
    }
}

/// Each unit variant with the text it is stored as; errors for the rest.
fn variants<'a>(
    cx: &Ctxt,
    input: &'a DeriveInput,
    container: &attr::Container,
) -> Vec<(&'a syn::Ident, String)> {
    let mut variants = Vec::new();
    match &input.data {
        Data::Enum(data) => {
            for variant in &data.variants {
                if !matches!(variant.fields, Fields::Unit) {
                    cx.error_spanned_by(
                        variant,
                        "TableValue stores unit variants only: `Active`, not `Active(u8)`",
                    );
                    continue;
                }
                let name = variant.ident.to_string();
                let stored = match variant_rename(cx, variant) {
                    Some(lit) => lit.value(),
                    None => container
                        .rename_all
                        .map_or(name.clone(), |rule| rule.apply(&to_snake(&name))),
                };
                variants.push((&variant.ident, stored));
            }
            if data.variants.is_empty() {
                cx.error_spanned_by(&input.ident, "a TableValue enum needs at least one variant");
            }
        }
        _ => cx.error_spanned_by(
            &input.ident,
            "TableValue is derived on an enum of unit variants",
        ),
    }
    let mut seen = std::collections::HashSet::new();
    for (ident, stored) in &variants {
        if !seen.insert(stored.clone()) {
            cx.error_spanned_by(ident, format!("two variants are stored as `{stored}`"));
        }
    }
    variants
}

/// A variant's `#[tablekit(rename = "…")]`, if it has one.
fn variant_rename(cx: &Ctxt, variant: &syn::Variant) -> Option<LitStr> {
    let mut rename = Attr::none(attr::RENAME);
    for a in variant
        .attrs
        .iter()
        .filter(|a| a.path().is_ident(attr::TABLEKIT))
    {
        let result = a.parse_nested_meta(|meta| {
            if meta.path.is_ident(attr::RENAME) {
                if let Some(lit) = crate::forms::string(cx, &meta) {
                    rename.set(cx, &meta.path, lit);
                }
                Ok(())
            } else {
                Err(meta.error("unknown tablekit variant attribute; expected `rename`"))
            }
        });
        if let Err(e) = result {
            cx.syn_error(e);
        }
    }
    rename.get()
}

/// `InProgress` → `in_progress`, so `rename_all` rules apply to variant names.
fn to_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}
