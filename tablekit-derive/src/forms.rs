//! The values attributes take (`name = "…"`, `name = 2`, `name = true`,
//! `name = some::path`), read so that a value written in another form is
//! one clear error that says how to write it, pointing at what was written,
//! and never a parser's bare "expected `=`" followed by a second error about
//! the tokens it left behind.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::{Parse, ParseStream};
use syn::{LitBool, LitInt, LitStr, Path, Token};

use crate::ctxt::Ctxt;

/// The form of an attribute's value.
#[derive(Clone, Copy)]
pub(crate) enum Form {
    /// `name = "…"`.
    Str,
    /// `name = 2`.
    Number,
    /// `name = true`.
    Bool,
    /// `name = some::path`.
    Path,
}

impl Form {
    /// What the attribute takes, for its messages.
    fn takes(self) -> &'static str {
        match self {
            Form::Str => "a string",
            Form::Number => "a whole number",
            Form::Bool => "`true` or `false`",
            Form::Path => "a path",
        }
    }

    /// The value to show in `name = …`: `given` as this form takes it
    /// (`Orders` as `"Orders"`, `"2"` as `2`) when it can be, else a
    /// placeholder.
    fn example(self, given: Option<&TokenStream>) -> String {
        let text = given.and_then(plain_text);
        match self {
            Form::Str => format!("\"{}\"", text.unwrap_or_else(|| "…".to_owned())),
            Form::Number => text
                .filter(|t| t.parse::<u32>().is_ok())
                .unwrap_or_else(|| "1".to_owned()),
            Form::Bool => text
                .filter(|t| t == "true" || t == "false")
                .unwrap_or_else(|| "true".to_owned()),
            Form::Path => text
                .filter(|t| syn::parse_str::<Path>(t).is_ok())
                .unwrap_or_else(|| "path::to::it".to_owned()),
        }
    }
}

/// The text of `tokens` when they are one plain word, path, number or
/// string (a string without its quotes); `None` otherwise.
fn plain_text(tokens: &TokenStream) -> Option<String> {
    if let Ok(lit) = syn::parse2::<LitStr>(tokens.clone()) {
        return Some(lit.value());
    }
    if let Ok(path) = syn::parse2::<Path>(tokens.clone()) {
        return Some(path.to_token_stream().to_string().replace(' ', ""));
    }
    if let Ok(lit) = syn::parse2::<syn::Lit>(tokens.clone()) {
        return Some(lit.to_token_stream().to_string());
    }
    None
}

/// The attribute's name as written.
pub(crate) fn name_of(meta: &ParseNestedMeta<'_>) -> String {
    meta.path.to_token_stream().to_string().replace(' ', "")
}

/// The tokens of the rest of one attribute item: up to the next `,` of its
/// list, or its end. Consumed, so that nothing is left to report twice.
pub(crate) fn rest_of_item(input: ParseStream<'_>) -> TokenStream {
    input
        .step(|cursor| {
            let mut rest = *cursor;
            let mut tokens = TokenStream::new();
            while let Some((tree, next)) = rest.token_tree() {
                if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                    break;
                }
                tokens.extend([tree]);
                rest = next;
            }
            Ok((tokens, rest))
        })
        .unwrap_or_default()
}

/// The value of `name = value`, read as `T` of `form`; `None`, with the
/// error recorded in `cx`, when it is written otherwise. `hint`, when
/// given, replaces the generic "`name` takes …" of the message.
pub(crate) fn value<T: Parse>(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    form: Form,
    hint: Option<&str>,
) -> Option<T> {
    let name = name_of(meta);
    let message = |given: Option<&TokenStream>, how: &str| {
        let takes = hint.map_or_else(|| format!("`{name}` takes {}", form.takes()), str::to_owned);
        format!("{takes}: write `{name} = {}`{how}", form.example(given))
    };
    if meta.input.peek(Token![=]) {
        let _ = meta.input.parse::<Token![=]>();
        let given = rest_of_item(meta.input);
        if given.is_empty() {
            cx.error_spanned_by(&meta.path, message(None, ""));
            return None;
        }
        return match syn::parse2::<T>(given.clone()) {
            Ok(value) => Some(value),
            Err(_) => {
                let how = match (form, syn::parse2::<LitStr>(given.clone()).is_ok()) {
                    (Form::Str, _) => "",
                    (_, true) => ", without quotes",
                    (_, false) => "",
                };
                cx.error_spanned_by(&given, message(Some(&given), how));
                None
            }
        };
    }
    // `name` alone, or `name(value)`.
    let inner = match meta.input.fork().parse::<TokenTree>() {
        Ok(TokenTree::Group(group)) => Some(group.stream()),
        _ => None,
    };
    let written = rest_of_item(meta.input);
    let mut span = meta.path.to_token_stream();
    span.extend(written);
    cx.error_spanned_by(span, message(inner.as_ref(), ""));
    None
}

/// [`value`] of a string.
pub(crate) fn string(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<LitStr> {
    value(cx, meta, Form::Str, None)
}

/// [`value`] of a whole number that fits a `u32`, with its tokens; `hint`
/// as [`value`]'s.
pub(crate) fn number(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    hint: Option<&str>,
) -> Option<(u32, TokenStream)> {
    let lit: LitInt = value(cx, meta, Form::Number, hint)?;
    match lit.base10_parse::<u32>() {
        Ok(v) => Some((v, lit.into_token_stream())),
        Err(_) => {
            let name = name_of(meta);
            cx.error_spanned_by(
                &lit,
                format!("`{name}` takes a whole number from 0 to {}", u32::MAX),
            );
            None
        }
    }
}

/// [`value`] of `true` or `false`.
pub(crate) fn boolean(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<LitBool> {
    value(cx, meta, Form::Bool, None)
}

/// [`value`] of a path; `hint` as [`value`]'s.
pub(crate) fn path(cx: &Ctxt, meta: &ParseNestedMeta<'_>, hint: Option<&str>) -> Option<Path> {
    value(cx, meta, Form::Path, hint)
}
