//! Declared indexes: `#[tablekit(index = "…")]` and `#[tablekit(unique =
//! "…")]` on fields, `#[tablekit(index(name = "…", …))]` on the struct.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::LitStr;
use syn::spanned::Spanned;

use crate::ast::{Container, Field, Role};
use crate::attr::TemplatePiece;
use crate::ctxt::Ctxt;

/// The most indexes a type may have: its row and, for each index, the
/// delete of the old index row and the write of the new one must fit the
/// 100 operations of one transaction.
const MAX_INDEXES: usize = 49;
/// The most fields of a compound index (the arity of key tuples).
const MAX_INDEX_FIELDS: usize = 4;

/// One index, as declared.
pub(crate) struct IndexModel<'a> {
    pub(crate) name: LitStr,
    pub(crate) unique: bool,
    pub(crate) fields: Vec<&'a Field<'a>>,
    pub(crate) tag: String,
    /// The stored names its rows copy; `None` for every property.
    pub(crate) copy: Option<Vec<String>>,
    /// An index entity per value, listing the entities that hold it.
    pub(crate) list: bool,
    /// Where the rows live when not in the entity's partition.
    pub(crate) remote: Option<Remote>,
}

impl IndexModel<'_> {
    /// An index on an encrypted field: its RowKeys hold a keyed hash of
    /// the value, found by equality alone.
    fn sealed(&self) -> bool {
        self.fields.iter().any(|f| f.encrypted)
    }
}

/// The place of an index kept in another partition or table.
pub(crate) struct Remote {
    /// The rows' partition is this, `_` and the entity's PartitionKey.
    pub(crate) partition: Option<String>,
    /// The rows' table, when not the entity's.
    pub(crate) table: Option<String>,
}

/// Characters an index tag may not hold: those the store forbids in keys,
/// and the separators of encoded keys.
fn bad_tag_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?' | '|' | '%') || c.is_control() || !c.is_ascii()
}

/// Collects and checks the indexes of `cont`.
pub(crate) fn model<'a>(cx: &Ctxt, cont: &'a Container<'a>) -> Vec<IndexModel<'a>> {
    let mut indexes = from_fields(cx, cont);
    apply_options(cx, cont, &mut indexes);
    if cont.attrs.wide {
        // A copy of a wide entity would not fit a row: its index rows
        // point at it unless told to copy some fields.
        for index in &mut indexes {
            index.copy.get_or_insert_with(Vec::new);
        }
    }
    if indexes.is_empty() {
        return indexes;
    }
    let Some(leading) = check_container(cx, cont, &indexes) else {
        return Vec::new();
    };
    let kind = cont.attrs.kind.as_ref().map(LitStr::value);
    for index in &mut indexes {
        if index.fields.len() > MAX_INDEX_FIELDS {
            cx.error_spanned_by(
                &index.name,
                format!("a compound index has at most {MAX_INDEX_FIELDS} fields"),
            );
        }
        if let Some((previous, _)) = &cont.attrs.previous_kinds {
            check_renamed(cx, index, previous);
        }
        if index.tag.is_empty() {
            default_tag(cx, index, kind.as_deref());
        }
        if index.remote.is_none()
            && (format!("{}_", index.tag).starts_with(&leading)
                || leading.starts_with(&format!("{}_", index.tag)))
        {
            cx.error_spanned_by(&index.name, format!("the RowKeys of index tag `{}` would mix with the type's own, which start with `{leading}`: choose another tag", index.tag));
        }
    }
    check_distinct_tags(cx, &indexes);
    check_sealed(cx, cont, &indexes);
    indexes
}

/// The indexes of a type with encrypted fields live in its partition, where
/// each stored row records the RowKeys of its index rows; one on an
/// encrypted field has a row per entity.
fn check_sealed(cx: &Ctxt, cont: &Container<'_>, indexes: &[IndexModel<'_>]) {
    if !cont.fields.iter().any(|f| f.encrypted) {
        return;
    }
    for index in indexes {
        if index.remote.is_some() {
            cx.error_spanned_by(&index.name, "a type with encrypted fields keeps its indexes in its partition: leave `partition` and `table` out");
        } else if index.list && index.sealed() {
            cx.error_spanned_by(
                &index.name,
                "an index on an encrypted field keeps a row per entity: leave `list` out",
            );
        }
    }
}

/// The indexes the fields' `index = "…"` and `unique = "…"` name, each with
/// its fields in order.
fn from_fields<'a>(cx: &Ctxt, cont: &'a Container<'a>) -> Vec<IndexModel<'a>> {
    let mut indexes: Vec<IndexModel<'a>> = Vec::new();
    for field in &cont.fields {
        for (lit, unique) in [(&field.index, false), (&field.unique, true)] {
            let Some(lit) = lit else { continue };
            match indexes.iter_mut().find(|i| i.name.value() == lit.value()) {
                Some(index) if index.unique != unique => cx.error_spanned_by(
                    lit,
                    format!(
                        "index `{}` is declared both `unique` and not: give its fields the same attribute",
                        lit.value()
                    ),
                ),
                Some(index) => index.fields.push(field),
                None => indexes.push(IndexModel {
                    name: lit.clone(),
                    unique,
                    fields: vec![field],
                    tag: String::new(),
                    copy: None,
                    list: false,
                    remote: None,
                }),
            }
        }
    }
    indexes
}

/// Applies the struct's `index(name = …, …)` options to the indexes they
/// name.
fn apply_options(cx: &Ctxt, cont: &Container<'_>, indexes: &mut [IndexModel<'_>]) {
    let mut seen: Vec<String> = Vec::new();
    for options in &cont.attrs.indexes {
        let name = options.name.value();
        if seen.contains(&name) {
            cx.error_spanned_by(
                &options.name,
                format!("the options of index `{name}` are given twice"),
            );
            continue;
        }
        seen.push(name.clone());
        let Some(index) = indexes.iter_mut().find(|i| i.name.value() == name) else {
            cx.error_spanned_by(
                &options.name,
                format!("no field is in index `{name}`: mark its fields `#[tablekit(index = \"{name}\")]` or `#[tablekit(unique = \"{name}\")]`"),
            );
            continue;
        };
        if let Some(tag) = &options.tag {
            index.tag = tag.value();
            if index.tag.is_empty() || index.tag.chars().any(bad_tag_char) {
                cx.error_spanned_by(
                    tag,
                    "an index tag is ASCII text without `/ \\ # ? | % _` or control characters",
                );
            }
        }
        if let Some(tokens) = &options.list {
            if index.unique {
                cx.error_spanned_by(tokens, "a `list` index lists the entities that share a value: a unique index has one entity per value");
            } else if options.copy.is_some() {
                cx.error_spanned_by(
                    tokens,
                    "a `list` index's rows list RowKeys and copy no field: leave `copy` out",
                );
            }
            index.list = true;
        }
        if options.partition.is_some() || options.table.is_some() {
            index.remote = Some(remote_of(cx, index, options));
        }
        if let Some(copy) = &options.copy {
            index.copy = Some(copied(cx, cont, copy));
        }
    }
}

/// Where an index kept elsewhere lives (`partition = …`, `table = …`),
/// each checked.
fn remote_of(cx: &Ctxt, index: &IndexModel<'_>, options: &crate::attr::IndexOptions) -> Remote {
    let at = options.partition.as_ref().or(options.table.as_ref());
    if index.unique {
        cx.error_spanned_by(at, "a unique index lives in the entity's partition, where its transaction can refuse a value that is taken: leave `partition` and `table` out, or make it non-unique");
    }
    let partition = options.partition.as_ref().map(LitStr::value);
    if let (Some(lit), Some(text)) = (&options.partition, &partition)
        && (text.is_empty() || text.chars().any(bad_tag_char))
    {
        cx.error_spanned_by(
            lit,
            "a `partition` is ASCII text without `/ \\ # ? | %` or control characters",
        );
    }
    let table = options.table.as_ref().map(LitStr::value);
    if let (Some(lit), Some(text)) = (&options.table, &table) {
        let alnum = text.chars().all(|c| c.is_ascii_alphanumeric());
        let starts = text.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        if !(3..=63).contains(&text.len()) || !alnum || !starts {
            cx.error_spanned_by(
                lit,
                "a table name is 3 to 63 ASCII letters and digits, starting with a letter",
            );
        }
    }
    Remote { partition, table }
}

/// The stored names of the fields `copy(…)` lists, each checked.
fn copied(cx: &Ctxt, cont: &Container<'_>, copy: &[syn::Ident]) -> Vec<String> {
    let mut names = Vec::new();
    for ident in copy {
        match cont.fields.iter().find(|f| f.ident == ident) {
            Some(f) if matches!(f.role, Role::Property) => names.push(f.stored_name.clone()),
            Some(_) => cx.error_spanned_by(ident, "`copy` lists fields stored as one property each (not key fields, and not `json`, `with`, `flatten`, `series` or `skip`)"),
            None => cx.error_spanned_by(ident, format!("`{ident}` is no field of this struct")),
        }
    }
    names
}

/// The checks of a type that declares indexes; the start of its own
/// RowKeys, which index tags must stay out of, or `None` when its indexes
/// cannot be kept.
fn check_container(cx: &Ctxt, cont: &Container<'_>, indexes: &[IndexModel<'_>]) -> Option<String> {
    let first = indexes[0].name.clone();
    let leading = match (&cont.attrs.kind, &cont.attrs.row_key_template) {
        (_, Some((_, pieces))) => match pieces.first() {
            Some(TemplatePiece::Literal(text)) => Some(text.clone()),
            _ => None,
        },
        (Some(kind), None) if cont.attrs.parent.is_none() && cont.attrs.collection.is_none() => {
            Some(format!("{}_", kind.value()))
        }
        (Some(_), None) => None,
        (None, None) => None,
    };
    let in_collection = cont.attrs.parent.is_some() || cont.attrs.collection.is_some();
    if in_collection {
        cx.error_spanned_by(&first, "indexes on kinds of a collection are not supported yet: their rows share a RowKey range with other kinds");
        return None;
    }
    let Some(leading) = leading else {
        cx.error_spanned_by(&first, "a type with indexes needs a `kind` (or a `row_key` template that starts with a text): its rows and its index rows are told apart by the start of their RowKeys");
        return None;
    };
    if cont.attrs.projection_of.is_some() {
        cx.error_spanned_by(
            &first,
            "a projection reads its entity's rows: declare indexes on the entity",
        );
    }
    if indexes.len() > MAX_INDEXES {
        cx.error_spanned_by(&indexes[MAX_INDEXES].name, format!("at most {MAX_INDEXES} indexes: a write of the entity, the deletes of its old index rows and the writes of its new ones must fit the 100 operations of one transaction"));
    }
    Some(leading)
}

/// The checks of an index of a renamed kind (`previous_kinds`): its rows
/// stay where they are, under a tag of their own.
fn check_renamed(cx: &Ctxt, index: &IndexModel<'_>, previous: &[LitStr]) {
    if index.remote.is_some() {
        cx.error_spanned_by(&index.name, "an index kept elsewhere on a renamed kind (`previous_kinds`) is not supported: a row moved to its new RowKey could not take its index rows along in one transaction");
    } else if index.tag.is_empty() {
        let was = previous.first().map(LitStr::value).unwrap_or_default();
        cx.error_spanned_by(&index.name, format!("a renamed kind (`previous_kinds`) keeps its index rows where they are: give the index its tag, as in `index(name = \"{0}\", tag = \"{was}.{0}\")` for the tag it had under `{was}`", index.name.value()));
    }
    for earlier in previous {
        let leading = format!("{}_", earlier.value());
        if format!("{}_", index.tag).starts_with(&leading)
            || leading.starts_with(&format!("{}_", index.tag))
        {
            cx.error_spanned_by(&index.name, format!("the RowKeys of index tag `{}` would mix with the rows of the previous kind, which start with `{leading}`: choose another tag", index.tag));
        }
    }
}

/// The tag of an index that gives none: the kind, a dot and its name.
fn default_tag(cx: &Ctxt, index: &mut IndexModel<'_>, kind: Option<&str>) {
    let name = index.name.value();
    index.tag = match kind {
        Some(kind) => format!("{kind}.{name}"),
        None => name,
    };
    if index.tag.chars().any(bad_tag_char) {
        cx.error_spanned_by(&index.name, "the index's tag, the kind, a dot and the index name, would hold one of `/ \\ # ? | % _`, a control or a non-ASCII character: give a `tag` in `#[tablekit(index(name = \"…\", tag = \"…\"))]`");
    }
}

/// No two indexes kept in the same place share a tag (or one's is the
/// start of the other's).
fn check_distinct_tags(cx: &Ctxt, indexes: &[IndexModel<'_>]) {
    for (i, a) in indexes.iter().enumerate() {
        for b in &indexes[i + 1..] {
            if a.remote.is_some() != b.remote.is_some() {
                continue;
            }
            if format!("{}_", a.tag).starts_with(&format!("{}_", b.tag))
                || format!("{}_", b.tag).starts_with(&format!("{}_", a.tag))
            {
                cx.error_spanned_by(
                    &b.name,
                    format!(
                        "indexes `{}` and `{}` would share the tag `{}`",
                        a.name.value(),
                        b.name.value(),
                        b.tag
                    ),
                );
            }
        }
    }
}

/// The items of the `TableEntity` impl for the indexes, and the handles
/// struct they need.
pub(crate) struct Expanded {
    pub(crate) handles: TokenStream,
    pub(crate) items: TokenStream,
    /// The descriptor's index part, when the entity declares indexes.
    pub(crate) part: Option<TokenStream>,
}

/// Each index's position among the indexes of the entity's partition, or
/// among those kept elsewhere.
fn positions(indexes: &[IndexModel<'_>]) -> Vec<usize> {
    indexes
        .iter()
        .scan((0usize, 0usize), |(local, remote), index| {
            let counter = if index.remote.is_some() {
                remote
            } else {
                local
            };
            *counter += 1;
            Some(*counter - 1)
        })
        .collect()
}

/// The arms of `write_index_key`, which numbers the indexes of the
/// entity's partition first, then those kept elsewhere, as the index part
/// lists them.
fn key_arms(tk: &TokenStream, indexes: &[IndexModel<'_>], positions: &[usize]) -> Vec<TokenStream> {
    let local_count = indexes.iter().filter(|i| i.remote.is_none()).count();
    indexes
        .iter()
        .zip(positions)
        .map(|(index, &position)| {
            let slot = if index.remote.is_some() {
                local_count + position
            } else {
                position
            };
            let layout = layout_of(tk, index);
            key_arm(tk, index, slot, quote!(const { #layout }))
        })
        .collect()
}

pub(crate) fn expand(
    tk: &TokenStream,
    cont: &Container<'_>,
    indexes: &[IndexModel<'_>],
) -> Expanded {
    let ident = &cont.input.ident;
    let vis = &cont.input.vis;
    let (_, ty_generics, where_clause) = cont.input.generics.split_for_impl();
    if indexes.is_empty() {
        return Expanded {
            handles: TokenStream::new(),
            items: quote! {
                type Indexes = ();
                fn indexes() -> Self::Indexes {}
            },
            part: None,
        };
    }
    let generics = &cont.input.generics;
    let handles_ident = format_ident!("{}Indexes", ident);
    let handle_fields = indexes.iter().map(|index| handle_field(tk, cont, index));
    let positions = positions(indexes);
    let handle_inits = indexes.iter().zip(&positions).map(|(index, &position)| {
        let field = handle_name(index);
        if index.remote.is_some() {
            quote!(#field: #tk::RemoteIndex::new(#position))
        } else {
            quote!(#field: #tk::Index::new(#position))
        }
    });
    let defs = indexes
        .iter()
        .filter(|i| i.remote.is_none())
        .map(|index| index_def(tk, index));
    let remote_defs = indexes.iter().filter_map(|index| remote_def(tk, index));
    let arms = key_arms(tk, indexes, &positions);
    let doc = format!("Typed handles on the indexes of [`{ident}`], from `{ident}::indexes()`.");
    Expanded {
        handles: quote! {
            #[doc = #doc]
            #[derive(Clone, Copy, Debug)]
            #[allow(dead_code)]
            #vis struct #handles_ident #generics #where_clause {
                #(#handle_fields,)*
            }
        },
        items: quote! {
            type Indexes = #handles_ident #ty_generics;
            fn indexes() -> Self::Indexes {
                #handles_ident { #(#handle_inits,)* }
            }
            fn write_index_key(&self, __index: usize, __out: &mut #tk::String) {
                match __index {
                    #(#arms)*
                    _ => {}
                }
            }
        },
        part: Some(quote!(&#tk::IndexPart { local: &[#(#defs),*], remote: &[#(#remote_defs),*] })),
    }
}

/// The type of an index's values. An optional field is indexed by its
/// value when it has one: the index's values are of the inner type, and
/// `None` writes no index row.
fn value_type(index: &IndexModel<'_>) -> TokenStream {
    let types: Vec<_> = index
        .fields
        .iter()
        .map(|f| {
            crate::ast::option_inner(f.ty)
                .unwrap_or(f.ty)
                .to_token_stream()
        })
        .collect();
    match types.as_slice() {
        [one] => one.clone(),
        many => quote!((#(#many,)*)),
    }
}

/// The name of an index's handle in the handles struct.
fn handle_name(index: &IndexModel<'_>) -> syn::Ident {
    format_ident!(
        "{}",
        sanitize(&index.name.value()),
        span = index.name.span()
    )
}

/// An index's field in the handles struct, with its documentation.
fn handle_field(tk: &TokenStream, cont: &Container<'_>, index: &IndexModel<'_>) -> TokenStream {
    let ident = &cont.input.ident;
    let (_, ty_generics, _) = cont.input.generics.split_for_impl();
    let field = handle_name(index);
    let value = value_type(index);
    let value = if index.sealed() {
        quote!(#tk::Sealed<#value>)
    } else {
        value
    };
    let marker = if index.unique {
        quote!(#tk::Unique)
    } else {
        quote!(#tk::NonUnique)
    };
    let handle = if index.remote.is_some() {
        quote!(#tk::RemoteIndex<#ident #ty_generics, #value>)
    } else {
        quote!(#tk::Index<#ident #ty_generics, #value, #marker>)
    };
    let doc = format!(
        "The {}{} index `{}` on {}.",
        if index.sealed() { "encrypted " } else { "" },
        match (index.unique, &index.remote) {
            (_, Some(_)) => "eventually consistent",
            (true, None) => "unique",
            (false, None) => "non-unique",
        },
        index.name.value(),
        index
            .fields
            .iter()
            .map(|f| format!("`{}`", f.ident))
            .collect::<Vec<_>>()
            .join(", ")
    );
    quote! {
        #[doc = #doc]
        pub #field: #handle
    }
}

/// An index's RowKey layout. A non-unique index's RowKeys go on with the
/// entity's RowKey; those of a unique one and of an index entity end with
/// the value.
fn layout_of(tk: &TokenStream, index: &IndexModel<'_>) -> TokenStream {
    let tag = &index.tag;
    if index.unique || index.list {
        quote!(#tk::RowKeyLayout::kind(#tag))
    } else {
        quote!(#tk::RowKeyLayout::kind(#tag).opened())
    }
}

/// An index's `IndexDef`.
fn index_def(tk: &TokenStream, index: &IndexModel<'_>) -> TokenStream {
    let name = index.name.value();
    let unique = index.unique;
    let list = index.list;
    let sealed = index.sealed();
    let layout = layout_of(tk, index);
    let fields = index
        .fields
        .iter()
        .map(|f| f.ident.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let copy = match &index.copy {
        None => quote!(#tk::None),
        Some(names) => quote!(#tk::Some(&[#(#names),*])),
    };
    quote!(#tk::IndexDef { name: #name, layout: #layout, unique: #unique, fields: #fields, copy: #copy, list: #list, sealed: #sealed })
}

/// The `RemoteIndexDef` of an index kept elsewhere; `None` for one in the
/// entity's partition.
fn remote_def(tk: &TokenStream, index: &IndexModel<'_>) -> Option<TokenStream> {
    let remote = index.remote.as_ref()?;
    let def = index_def(tk, index);
    let option = |text: &Option<String>| match text {
        Some(text) => quote!(#tk::Some(#text)),
        None => quote!(#tk::None),
    };
    let (partition, table) = (option(&remote.partition), option(&remote.table));
    Some(quote!(#tk::RemoteIndexDef { index: #def, partition: #partition, table: #table }))
}

/// The arm of `write_index_key` that writes the index key of `index` at
/// `position`, laid out by `layout`.
fn key_arm(
    tk: &TokenStream,
    index: &IndexModel<'_>,
    position: usize,
    layout: TokenStream,
) -> TokenStream {
    let value = value_type(index);
    // Each field by reference; an optional one that is `None` leaves
    // the key unwritten (the entity has no row in this index).
    let bindings = index.fields.iter().enumerate().map(|(i, f)| {
        let (field, name) = (f.ident, format_ident!("__v{i}"));
        if crate::ast::option_inner(f.ty).is_some() {
            quote!(let #tk::Some(#name) = &self.#field else { return; };)
        } else {
            quote!(let #name = &self.#field;)
        }
    });
    let refs = (0..index.fields.len()).map(|i| format_ident!("__v{i}"));
    let args = if index.fields.len() == 1 {
        quote!(#(#refs)*)
    } else {
        quote!((#(#refs,)*))
    };
    // The last value of a non-unique index is followed by the entity's
    // RowKey, so it must have an end of its own.
    let last_ty = index
        .fields
        .last()
        .map(|f| crate::ast::option_inner(f.ty).unwrap_or(f.ty));
    let open_check = (!index.unique && !index.list).then(|| {
        quote!(const { ::core::assert!(!<#last_ty as #tk::KeyPart>::LAST_ONLY, "the last field of a non-unique index cannot be a `Verbatim`: the entity's RowKey follows it") };)
    });
    // Spanned on the first field, so a type that is no key type is
    // reported there.
    let span = index
        .fields
        .first()
        .map_or_else(proc_macro2::Span::call_site, |f| f.ty.span());
    // One field is written through its type's `KeyPart` alone, so a type
    // that is no key type is one error, on the field's type (the same one
    // the check above reports there).
    let write = if index.fields.len() == 1 {
        quote_spanned!(span=> #tk::write_index_value::<#value>(#args, &#layout, __out))
    } else {
        quote_spanned!(span=> #tk::KeyArg::<#value>::write_laid_out(&#args, &#layout, __out))
    };
    quote!(#position => {
        #open_check
        #(#bindings)*
        #write
    })
}

/// An index name as a field name of the handles struct.
fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}
