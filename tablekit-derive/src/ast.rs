//! The validated model of a struct: each field keeps its `syn::Field`.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Data, DeriveInput, Fields, Ident, Path, Type};

use crate::attr;
use crate::ctxt::Ctxt;

/// Which derive is expanding.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `TableEntity`: keys, kind, table.
    Entity,
    /// `TableFields`: a struct to flatten into entities.
    Fields,
}

/// What a field is.
pub(crate) enum Role {
    /// A PartitionKey component, with its order key.
    PartitionKey(u32),
    /// A RowKey component, with its order key.
    RowKey(u32),
    /// One property through `PropertyValue`.
    Property,
    /// One property holding JSON.
    Json,
    /// One property per element of a collection (`Name_0`, `Name_1`, …).
    Series,
    /// One property through a custom codec module.
    With(Path),
    /// The fields of a `TableFields` struct, each name after the prefix.
    Flatten(String),
    /// Not stored; `Default` on read.
    Skip,
}

pub(crate) struct Field<'a> {
    pub(crate) original: &'a syn::Field,
    pub(crate) ident: &'a Ident,
    pub(crate) ty: &'a Type,
    pub(crate) role: Role,
    /// The property name (or flatten prefix base) the field is stored under.
    pub(crate) stored_name: String,
    /// Where the stored name comes from, for errors.
    pub(crate) name_tokens: TokenStream,
    /// Missing property reads as `Default::default()`.
    pub(crate) default: bool,
    /// ... or as what this function makes (`default = path`).
    pub(crate) default_with: Option<syn::Path>,
    /// Older property names the field is read from (`alias = "…"`); it is
    /// written under its own name.
    pub(crate) aliases: Vec<String>,
    /// Where each alias is given, for errors.
    pub(crate) alias_tokens: Vec<syn::LitStr>,
    /// The key attribute's tokens, for errors.
    pub(crate) key_tokens: Option<TokenStream>,
    /// Whether the key attribute gave its order (`row_key = 1`).
    pub(crate) explicit_order: bool,
    /// Kept in the blob store: always (`true`) or when too large (`false`).
    pub(crate) blob: Option<bool>,
    /// The non-unique index the field is in.
    pub(crate) index: Option<syn::LitStr>,
    /// The unique index the field is in.
    pub(crate) unique: Option<syn::LitStr>,
    /// `bucket`: the field's time picks the entity's table.
    pub(crate) bucket: Option<TokenStream>,
    /// `encrypted`: stored sealed, as ciphertext.
    pub(crate) encrypted: bool,
    /// `expires`: the field's time is when the entity expires.
    pub(crate) expires: Option<TokenStream>,
}

pub(crate) struct Container<'a> {
    pub(crate) input: &'a DeriveInput,
    pub(crate) mode: Mode,
    pub(crate) attrs: attr::Container,
    pub(crate) fields: Vec<Field<'a>>,
}

/// `T` of a type that is syntactically `Option<T>`.
pub(crate) fn option_inner(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            if last.ident != "Option" {
                return None;
            }
            match &last.arguments {
                syn::PathArguments::AngleBracketed(args) if args.args.len() == 1 => {
                    match args.args.first()? {
                        syn::GenericArgument::Type(inner) => Some(inner),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        Type::Group(g) => option_inner(&g.elem),
        _ => None,
    }
}

/// Whether a type is syntactically `Option<…>`.
pub(crate) fn is_option(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            p.path.segments.last().is_some_and(|s| s.ident == "Option")
        }
        Type::Group(g) => is_option(&g.elem),
        _ => false,
    }
}

impl<'a> Container<'a> {
    /// Builds the model; `None` when the input is not a struct with named fields.
    pub(crate) fn from_ast(cx: &Ctxt, input: &'a DeriveInput, mode: Mode) -> Option<Container<'a>> {
        let attrs = attr::Container::parse(cx, &input.attrs, mode == Mode::Entity);
        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => named,
                _ => {
                    cx.error_spanned_by(
                        &input.ident,
                        "tablekit derives need a struct with named fields",
                    );
                    return None;
                }
            },
            _ => {
                cx.error_spanned_by(
                    &input.ident,
                    "tablekit derives need a struct with named fields",
                );
                return None;
            }
        };
        let fields: Vec<Field<'a>> = named
            .named
            .iter()
            .enumerate()
            .filter_map(|(position, field)| {
                Field::from_ast(cx, field, position as u32, &attrs, mode)
            })
            .collect();
        check_expiring(cx, &attrs, &fields);
        Some(Container {
            input,
            mode,
            attrs,
            fields,
        })
    }
}

/// At most one `expires` field, or a `time_to_live` alone, and none on a
/// projection.
fn check_expiring(cx: &Ctxt, attrs: &attr::Container, fields: &[Field<'_>]) {
    let ttl = attrs.time_to_live.as_ref().map(|(_, tokens)| tokens);
    let mut expiring = ttl
        .into_iter()
        .chain(fields.iter().filter_map(|f| f.expires.as_ref()));
    if expiring.next().is_none() {
        return;
    }
    for other in expiring {
        let problem = match ttl {
            Some(_) => {
                "an entity with `time_to_live` expires after its last write: leave `expires` out, or `time_to_live`"
            }
            None => "only one field says when the entity expires",
        };
        cx.error_spanned_by(other, problem);
    }
    if let (Some(ttl), Some(_)) = (ttl, &attrs.projection_of) {
        cx.error_spanned_by(
            ttl,
            "a projection expires as its entity does: give `time_to_live` to the entity",
        );
    }
}

impl<'a> Field<'a> {
    fn from_ast(
        cx: &Ctxt,
        field: &'a syn::Field,
        position: u32,
        container: &attr::Container,
        mode: Mode,
    ) -> Option<Field<'a>> {
        let ident = field.ident.as_ref()?;
        let mut attrs = attr::Field::parse(cx, &field.attrs);
        let (stored_name, name_tokens) = stored_name(&attrs, container, ident);
        let (role, key_tokens, explicit_order) =
            role_of(cx, &mut attrs, position, mode, &stored_name);
        check_role(cx, &attrs, &role, &field.ty);
        let blob = blob_of(cx, &attrs, &role, mode);
        check_indexed(cx, &attrs, &role, blob, mode);
        let encrypted = check_encrypted(cx, &attrs, &role, mode);
        check_expires(cx, &attrs, &role, mode);
        Some(Field {
            encrypted,
            expires: attrs.expires.clone(),
            index: attrs.index,
            unique: attrs.unique,
            bucket: attrs.bucket,
            blob,
            original: field,
            ident,
            ty: &field.ty,
            role,
            stored_name,
            name_tokens,
            default: attrs.default.is_some(),
            default_with: attrs.default.as_ref().and_then(|(path, _)| path.clone()),
            aliases: attrs.aliases.iter().map(syn::LitStr::value).collect(),
            alias_tokens: attrs.aliases.clone(),
            key_tokens,
            explicit_order,
        })
    }

    pub(crate) fn is_key(&self) -> bool {
        matches!(self.role, Role::PartitionKey(_) | Role::RowKey(_))
    }
}

/// The name a field is stored under (`rename`, else `rename_all` applied
/// to its own), and the tokens that give it.
fn stored_name(
    attrs: &attr::Field,
    container: &attr::Container,
    ident: &syn::Ident,
) -> (String, TokenStream) {
    let field_name = ident.to_string();
    let field_name = field_name
        .strip_prefix("r#")
        .unwrap_or(&field_name)
        .to_owned();
    match &attrs.rename {
        Some(lit) => (lit.value(), lit.to_token_stream()),
        None => (
            container
                .rename_all
                .map_or(field_name.clone(), |rule| rule.apply(&field_name)),
            ident.to_token_stream(),
        ),
    }
}

/// The field's role, at most one (the others are errors), with the tokens
/// of its key attribute and whether it gave its key order.
fn role_of(
    cx: &Ctxt,
    attrs: &mut attr::Field,
    position: u32,
    mode: Mode,
    stored_name: &str,
) -> (Role, Option<TokenStream>, bool) {
    let mut roles: Vec<(Role, TokenStream)> = Vec::new();
    let mut key_tokens = None;
    let mut explicit_order = false;
    let keys = [
        (attrs.partition_key.take(), "partition_key", true),
        (attrs.row_key.take(), "row_key", false),
    ];
    for (key, name, partition) in keys {
        let Some((role, tokens)) = key else { continue };
        if mode == Mode::Fields {
            cx.error_spanned_by(
                &tokens,
                format!("keys belong to the entity: `{name}` is not allowed in TableFields"),
            );
        }
        key_tokens = Some(tokens.clone());
        explicit_order |= role.order.is_some();
        let order = role.order.map_or(position, |(o, _)| o);
        let role = if partition {
            Role::PartitionKey(order)
        } else {
            Role::RowKey(order)
        };
        roles.push((role, tokens));
    }
    if let Some(tokens) = attrs.skip.take() {
        roles.push((Role::Skip, tokens));
    }
    if let Some(tokens) = attrs.json.take() {
        roles.push((Role::Json, tokens));
    }
    if let Some(tokens) = attrs.series.take() {
        roles.push((Role::Series, tokens));
    }
    if let Some(path) = attrs.with.take() {
        let tokens = path.to_token_stream();
        roles.push((Role::With(path), tokens));
    }
    if let Some((options, tokens)) = attrs.flatten.take() {
        let delimiter = options
            .delimiter
            .map_or_else(|| "_".to_owned(), |d| d.value());
        let base = options
            .prefix
            .map_or_else(|| stored_name.to_owned(), |p| p.value());
        roles.push((Role::Flatten(format!("{base}{delimiter}")), tokens));
    }
    if roles.len() > 1 {
        for (_, tokens) in &roles[1..] {
            cx.error_spanned_by(tokens, "a field takes at most one of `partition_key`, `row_key`, `skip`, `json`, `with`, `flatten`, `series`");
        }
    }
    let role = roles
        .into_iter()
        .next()
        .map_or(Role::Property, |(role, _)| role);
    (role, key_tokens, explicit_order)
}

/// The attributes a field's role does not take: `default` and `rename` on
/// a key, `alias` on a field not stored in one property, an `Option` key.
fn check_role(cx: &Ctxt, attrs: &attr::Field, role: &Role, ty: &syn::Type) {
    let key = matches!(role, Role::PartitionKey(_) | Role::RowKey(_));
    if let Some((_, tokens)) = &attrs.default
        && key
    {
        cx.error_spanned_by(
            tokens,
            "a key field always has a value: `default` is not allowed on it",
        );
    }
    if !matches!(role, Role::Property | Role::Json | Role::With(_)) {
        for lit in &attrs.aliases {
            cx.error_spanned_by(
                lit,
                "`alias` names an older property name of a field stored in one property (not a key, `skip`, `flatten` or `series` field)",
            );
        }
    }
    if let Some(lit) = &attrs.rename
        && key
    {
        cx.error_spanned_by(
            lit,
            "key fields are stored in the keys, not as properties: `rename` has no effect on them",
        );
    }
    if key && is_option(ty) {
        cx.error_spanned_by(
            ty,
            "a key field cannot be an `Option`: every entity has both keys",
        );
    }
}

/// `blob` or `offload` (whether always offloaded), where the role takes it.
fn blob_of(cx: &Ctxt, attrs: &attr::Field, role: &Role, mode: Mode) -> Option<bool> {
    let (always, tokens) = attrs.blob.as_ref()?;
    if matches!(role, Role::PartitionKey(_) | Role::RowKey(_)) {
        cx.error_spanned_by(
            tokens,
            "a key field lives in the PartitionKey or RowKey, which stay in the table: `blob` and `offload` apply to property fields",
        );
    } else if !matches!(role, Role::Property) {
        cx.error_spanned_by(
            tokens,
            "`blob` and `offload` apply to a field stored as one property of text or bytes (not `json`, `with`, `flatten`, `series` or `skip`)",
        );
    } else if mode == Mode::Fields {
        cx.error_spanned_by(
            tokens,
            "`blob` and `offload` apply to fields of the entity itself, not of a flattened struct",
        );
    }
    Some(*always)
}

/// `encrypted` on a field that can be sealed: one property of the entity
/// itself, read under its own name alone.
fn check_encrypted(cx: &Ctxt, attrs: &attr::Field, role: &Role, mode: Mode) -> bool {
    let Some(tokens) = &attrs.encrypted else {
        return false;
    };
    let problem = if matches!(role, Role::PartitionKey(_) | Role::RowKey(_)) {
        Some(
            "a key field is stored in the PartitionKey or RowKey, which the store reads: it cannot be `encrypted`",
        )
    } else if !matches!(role, Role::Property | Role::Json | Role::With(_)) {
        Some(
            "`encrypted` applies to a field stored as one property (not `flatten`, `series` or `skip`)",
        )
    } else if mode == Mode::Fields {
        Some("`encrypted` applies to fields of the entity itself, not of a flattened struct")
    } else if !attrs.aliases.is_empty() {
        Some(
            "`encrypted` excludes `alias`: a value under an older name would be read without being decrypted",
        )
    } else {
        None
    };
    if let Some(problem) = problem {
        cx.error_spanned_by(tokens, problem);
    }
    true
}

/// `expires` on a field stored as one property of the entity itself, in
/// plain text (the store compares it).
fn check_expires(cx: &Ctxt, attrs: &attr::Field, role: &Role, mode: Mode) {
    let Some(tokens) = &attrs.expires else {
        return;
    };
    let problem = if !matches!(role, Role::Property) {
        Some(
            "`expires` applies to a field stored as one property (a `DateTime` or an `Option` of one; not a key, `flatten`, `series`, `json`, `with` or `skip`)",
        )
    } else if mode == Mode::Fields {
        Some("`expires` applies to fields of the entity itself, not of a flattened struct")
    } else if attrs.encrypted.is_some() {
        Some("`expires` excludes `encrypted`: the store compares the expiry time")
    } else if attrs.blob.is_some() {
        Some("`expires` excludes `blob` and `offload`")
    } else if !attrs.aliases.is_empty() {
        Some("`expires` excludes `alias`: the store reads the expiry under one name")
    } else {
        None
    };
    if let Some(problem) = problem {
        cx.error_spanned_by(tokens, problem);
    }
}

/// `index` and `unique` on a field that can be indexed.
fn check_indexed(cx: &Ctxt, attrs: &attr::Field, role: &Role, blob: Option<bool>, mode: Mode) {
    for lit in attrs.index.iter().chain(&attrs.unique) {
        if mode == Mode::Fields {
            cx.error_spanned_by(
                lit,
                "indexes belong to the entity: `index` and `unique` are not allowed in TableFields",
            );
        } else if !matches!(role, Role::Property) {
            cx.error_spanned_by(lit, "an indexed field is stored as one property (not a key field, and not `json`, `with`, `flatten`, `series` or `skip`)");
        } else if blob.is_some() {
            cx.error_spanned_by(
                lit,
                "an indexed field is a key type, which is never kept in the blob store",
            );
        }
    }
    if let (Some(a), Some(b)) = (&attrs.index, &attrs.unique)
        && a.value() == b.value()
    {
        cx.error_spanned_by(
            b,
            "an index is either unique or not: the same name is given to `index` and `unique`",
        );
    }
}
