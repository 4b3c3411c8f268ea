//! Parses `#[tablekit(...)]` attributes into typed values.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::{Attribute, Ident, LitStr, Path, Token};

use crate::case::RenameRule;
use crate::ctxt::Ctxt;
use crate::forms;

mod field;
pub(crate) use field::*;

/// The attribute's name.
pub(crate) const TABLEKIT: &str = "tablekit";

// Container keywords.
pub(crate) const TABLE: &str = "table";
pub(crate) const KIND: &str = "kind";
pub(crate) const VERSION: &str = "version";
pub(crate) const MIN_VERSION: &str = "min_version";
pub(crate) const CRATE: &str = "crate";
pub(crate) const RENAME_ALL: &str = "rename_all";
pub(crate) const WIDE: &str = "wide";
pub(crate) const CHANGES: &str = "changes";
pub(crate) const SHARDS: &str = "shards";
pub(crate) const BUCKETS: &str = "buckets";
pub(crate) const TIME_TO_LIVE: &str = "time_to_live";
pub(crate) const BUCKET: &str = "bucket";
pub(crate) const KIND_PROPERTIES: &str = "kind_properties";
pub(crate) const PARENT: &str = "parent";
pub(crate) const COLLECTION: &str = "collection";
pub(crate) const PROJECTION_OF: &str = "projection_of";
pub(crate) const UPGRADE_FROM: &str = "upgrade_from";
pub(crate) const UPGRADE_WITH: &str = "upgrade_with";
pub(crate) const PREVIOUS_KINDS: &str = "previous_kinds";
pub(crate) const DISCRIMINATOR: &str = "discriminator";
pub(crate) const PROPERTY: &str = "property";
pub(crate) const VALUE: &str = "value";
pub(crate) const INDEX: &str = "index";
pub(crate) const NAME: &str = "name";
pub(crate) const TAG: &str = "tag";
pub(crate) const COPY: &str = "copy";
pub(crate) const LIST: &str = "list";
pub(crate) const PARTITION: &str = "partition";

// Field keywords.
pub(crate) const PARTITION_KEY: &str = "partition_key";
pub(crate) const ROW_KEY: &str = "row_key";
pub(crate) const RENAME: &str = "rename";
pub(crate) const ALIAS: &str = "alias";
pub(crate) const SKIP: &str = "skip";
pub(crate) const DEFAULT: &str = "default";
pub(crate) const WITH: &str = "with";
pub(crate) const FLATTEN: &str = "flatten";
pub(crate) const JSON: &str = "json";
pub(crate) const SERIES: &str = "series";
pub(crate) const BLOB: &str = "blob";
pub(crate) const OFFLOAD: &str = "offload";
pub(crate) const ENCRYPTED: &str = "encrypted";
pub(crate) const EXPIRES: &str = "expires";
pub(crate) const PREFIX: &str = "prefix";
pub(crate) const DELIMITER: &str = "delimiter";
pub(crate) const UNIQUE: &str = "unique";

/// One attribute value, remembering where it was first given so a duplicate
/// can point at both places.
pub(crate) struct Attr<T> {
    name: &'static str,
    first: Option<TokenStream>,
    value: Option<T>,
}

impl<T> Attr<T> {
    pub(crate) fn none(name: &'static str) -> Attr<T> {
        Attr {
            name,
            first: None,
            value: None,
        }
    }

    pub(crate) fn set(&mut self, cx: &Ctxt, tokens: impl ToTokens, value: T) {
        let tokens = tokens.into_token_stream();
        if let Some(first) = &self.first {
            cx.error_spanned_by(
                &tokens,
                format!("duplicate tablekit attribute `{}`", self.name),
            );
            cx.error_spanned_by(first, format!("first `{}` here", self.name));
        } else {
            self.first = Some(tokens);
            self.value = Some(value);
        }
    }

    pub(crate) fn get(self) -> Option<T> {
        self.value
    }

    /// The value and the tokens it was given with.
    pub(crate) fn get_with_tokens(self) -> Option<(T, TokenStream)> {
        Some((self.value?, self.first?))
    }
}

/// Container attributes.
pub(crate) struct Container {
    pub(crate) table: Option<LitStr>,
    pub(crate) kind: Option<LitStr>,
    pub(crate) version: Option<(u32, TokenStream)>,
    pub(crate) min_version: Option<(u32, TokenStream)>,
    pub(crate) crate_path: Option<Path>,
    pub(crate) rename_all: Option<RenameRule>,
    pub(crate) wide: bool,
    /// `changes`: every write records its change (its tokens, for errors);
    /// `changes(previous)` with the value before it.
    pub(crate) changes: Option<TokenStream>,
    /// `changes(previous)`.
    pub(crate) changes_previous: bool,
    /// `shards = N`: the PartitionKey gets a shard suffix from the RowKey.
    pub(crate) shards: Option<(u32, TokenStream)>,
    /// `buckets = "day"`: one table per hour, day or month.
    pub(crate) buckets: Option<(String, TokenStream)>,
    /// `time_to_live = "30m"`: each entity expires this long after its
    /// last write, in seconds, with the attribute's tokens.
    pub(crate) time_to_live: Option<(u64, TokenStream)>,
    /// `kind_properties = false`: the kind lives in the RowKey only.
    pub(crate) kind_properties: Option<(bool, TokenStream)>,
    /// `parent = Type`: the kind nests under `Type`'s rows in a collection.
    pub(crate) parent: Option<(syn::Type, TokenStream)>,
    /// `upgrade_from = Type`: rows of `Type`'s versions are read as `Type`
    /// and converted (`From`, or the `upgrade_with` function).
    pub(crate) upgrade_from: Option<(syn::Type, TokenStream)>,
    /// `upgrade_with = path`: the function that converts them.
    pub(crate) upgrade_with: Option<Path>,
    /// `previous_kinds = ["…", …]`: names the kind had before, with the
    /// attribute's tokens.
    pub(crate) previous_kinds: Option<(Vec<LitStr>, TokenStream)>,
    /// `collection`: other kinds may nest under this kind's rows.
    pub(crate) collection: Option<TokenStream>,
    /// `row_key = "empid_{id}"`: the RowKey laid out by a template.
    pub(crate) row_key_template: Option<(LitStr, Vec<TemplatePiece>)>,
    /// `projection_of = Type`: a subset of `Type`'s fields, read through
    /// `Type`'s names, table, kind and keys.
    pub(crate) projection_of: Option<(syn::Type, TokenStream)>,
    /// `index(name = "…", tag = "…", copy(…))`: options of declared indexes.
    pub(crate) indexes: Vec<IndexOptions>,
    /// `discriminator(property = "…", value = "…")`: the property and value
    /// that tell this type's rows from other types' in a shared table.
    pub(crate) discriminator: Option<(LitStr, LitStr, TokenStream)>,
}

/// The options of one index, given on the struct.
pub(crate) struct IndexOptions {
    pub(crate) name: LitStr,
    pub(crate) tag: Option<LitStr>,
    /// The fields its rows copy, when given.
    pub(crate) copy: Option<Vec<Ident>>,
    /// `list`: one row per value listing the entities that hold it.
    pub(crate) list: Option<TokenStream>,
    /// `partition = "…"`: the rows live in partition `…_{the entity's}`.
    pub(crate) partition: Option<LitStr>,
    /// `table = "…"`: the rows live in that table.
    pub(crate) table: Option<LitStr>,
}

/// One piece of a key template.
#[derive(Debug, PartialEq)]
pub(crate) enum TemplatePiece {
    /// Text written as it is.
    Literal(String),
    /// `{field}`: a key field.
    Field(String),
}

/// Splits a key template into literal texts and `{field}` placeholders.
pub(crate) fn parse_template(text: &str) -> Result<Vec<TemplatePiece>, String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['{', '}']) {
            Some(0) if rest.starts_with('{') => {
                let end = rest
                    .find('}')
                    .ok_or("a `{` that no `}` closes; a key template names fields as `{field}`")?;
                let name = &rest[1..end];
                let ident = !name.is_empty()
                    && name.chars().all(|c| c == '_' || c.is_alphanumeric())
                    && !name.starts_with(|c: char| c.is_ascii_digit());
                if !ident {
                    return Err(format!(
                        "`{{{name}}}` names no field; a key template names fields as `{{field}}`"
                    ));
                }
                pieces.push(TemplatePiece::Field(name.to_owned()));
                rest = &rest[end + 1..];
            }
            Some(0) => return Err("a `}` that no `{` opens".to_owned()),
            found => {
                let end = found.unwrap_or(rest.len());
                pieces.push(TemplatePiece::Literal(rest[..end].to_owned()));
                rest = &rest[end..];
            }
        }
    }
    Ok(pieces)
}

impl Container {
    /// `<crate>::__private`, the path generated code reaches the runtime
    /// through: `::tablekit` unless `crate = …` names another.
    pub(crate) fn private_path(&self) -> TokenStream {
        let krate = self
            .crate_path
            .as_ref()
            .map_or_else(|| quote::quote!(::tablekit), |p| quote::quote!(#p));
        quote::quote!(#krate::__private)
    }
}

fn tablekit_attrs(attrs: &[Attribute]) -> impl Iterator<Item = &Attribute> {
    attrs.iter().filter(|a| a.path().is_ident(TABLEKIT))
}

fn parse_u32(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<(u32, TokenStream)> {
    forms::number(cx, meta, None)
}

fn parse_str(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<LitStr> {
    forms::string(cx, meta)
}

/// An index's name (`index = "…"`, `unique = "…"`, `index(name = "…")`):
/// a string that is not empty.
fn parse_index_name(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<LitStr> {
    let name = forms::name_of(meta);
    if !meta.input.peek(Token![=]) && name != NAME {
        // `unique`, `index(unique)`, `index(name = …)` on a field.
        let mut written = meta.path.to_token_stream();
        written.extend(forms::rest_of_item(meta.input));
        cx.error_spanned_by(
            written,
            format!(
                "`{name}` on a field names the index the field is in: write `#[tablekit({name} = \"email\")]` (the fields that share the name form one index); the index's options go on the struct: `#[tablekit(index(name = \"email\", tag = …, copy(…)))]`"
            ),
        );
        return None;
    }
    let lit = parse_str(cx, meta)?;
    if lit.value().trim().is_empty() {
        cx.error_spanned_by(
            &lit,
            "an index needs a name (`unique = \"email\"`): the fields that share it form the index, and `Type::indexes()` names it",
        );
        return None;
    }
    Some(lit)
}

/// A flag attribute (`skip`, `json`, …): refuses a value given to it.
fn flag(meta: &ParseNestedMeta<'_>, name: &str) -> syn::Result<()> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        return Err(meta.error(format!(
            "`{name}` takes no value: write `#[tablekit({name})]`, and leave it out to turn it off"
        )));
    }
    Ok(())
}

fn unknown(meta: &ParseNestedMeta<'_>, what: &str, known: &[&str]) -> syn::Error {
    let name = meta.path.to_token_stream().to_string().replace(' ', "");
    let list = known
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let hint = match closest(&name, known) {
        Some(near) => format!("did you mean `{near}`? "),
        None => String::new(),
    };
    meta.error(format!(
        "unknown tablekit {what} attribute `{name}`; {hint}expected one of {list}"
    ))
}

/// The known name closest to `name`, when it is a likely misspelling: at
/// most two edits away (a third of the name's length, at least one).
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let most = (name.chars().count() / 3).clamp(1, 2);
    known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The Damerau–Levenshtein distance (with adjacent swaps), for the few short
/// names of an attribute list: written here, as a crate would cost more than
/// these lines.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The container attributes an entity takes.
const ENTITY_ATTRIBUTES: &[&str] = &[
    TABLE,
    KIND,
    VERSION,
    MIN_VERSION,
    CRATE,
    RENAME_ALL,
    WIDE,
    CHANGES,
    SHARDS,
    BUCKETS,
    TIME_TO_LIVE,
    KIND_PROPERTIES,
    PARENT,
    COLLECTION,
    ROW_KEY,
    PROJECTION_OF,
    UPGRADE_FROM,
    UPGRADE_WITH,
    PREVIOUS_KINDS,
    INDEX,
    DISCRIMINATOR,
];

/// The container attributes a `TableFields` struct takes.
const FIELDS_ATTRIBUTES: &[&str] = &[CRATE, RENAME_ALL];

/// The container's attributes as they are read, each at most once.
struct ContainerParts {
    table: Attr<LitStr>,
    kind: Attr<LitStr>,
    version: Attr<(u32, TokenStream)>,
    min_version: Attr<(u32, TokenStream)>,
    crate_path: Attr<Path>,
    rename_all: Attr<RenameRule>,
    wide: Attr<()>,
    changes: Attr<(TokenStream, bool)>,
    shards: Attr<(u32, TokenStream)>,
    buckets: Attr<(String, TokenStream)>,
    time_to_live: Attr<(u64, TokenStream)>,
    kind_properties: Attr<(bool, TokenStream)>,
    parent: Attr<(syn::Type, TokenStream)>,
    collection: Attr<TokenStream>,
    row_key_template: Attr<(LitStr, Vec<TemplatePiece>)>,
    projection_of: Attr<(syn::Type, TokenStream)>,
    upgrade_from: Attr<(syn::Type, TokenStream)>,
    upgrade_with: Attr<Path>,
    previous_kinds: Attr<(Vec<LitStr>, TokenStream)>,
    discriminator: Attr<(LitStr, LitStr, TokenStream)>,
    indexes: Vec<IndexOptions>,
}

impl ContainerParts {
    fn new() -> ContainerParts {
        ContainerParts {
            table: Attr::none(TABLE),
            kind: Attr::none(KIND),
            version: Attr::none(VERSION),
            min_version: Attr::none(MIN_VERSION),
            crate_path: Attr::none(CRATE),
            rename_all: Attr::none(RENAME_ALL),
            wide: Attr::none(WIDE),
            changes: Attr::none(CHANGES),
            shards: Attr::none(SHARDS),
            buckets: Attr::none(BUCKETS),
            time_to_live: Attr::none(TIME_TO_LIVE),
            kind_properties: Attr::none(KIND_PROPERTIES),
            parent: Attr::none(PARENT),
            collection: Attr::none(COLLECTION),
            row_key_template: Attr::none(ROW_KEY),
            projection_of: Attr::none(PROJECTION_OF),
            upgrade_from: Attr::none(UPGRADE_FROM),
            upgrade_with: Attr::none(UPGRADE_WITH),
            previous_kinds: Attr::none(PREVIOUS_KINDS),
            discriminator: Attr::none(DISCRIMINATOR),
            indexes: Vec::new(),
        }
    }

    /// Reads one of an entity's own attributes; `false` when `meta` is
    /// none of them.
    fn entity_attribute(&mut self, cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
        let path = &meta.path;
        let Some(name) = path.get_ident().map(ToString::to_string) else {
            return Ok(false);
        };
        match name.as_str() {
            KIND_PROPERTIES => {
                if let Some(lit) = forms::boolean(cx, meta) {
                    self.kind_properties
                        .set(cx, path, (lit.value, lit.into_token_stream()));
                }
            }
            COLLECTION => {
                flag(meta, COLLECTION)?;
                self.collection.set(cx, path, path.to_token_stream());
            }
            TABLE => {
                if let Some(lit) = parse_str(cx, meta) {
                    self.table.set(cx, path, lit);
                }
            }
            KIND => {
                if let Some(lit) = parse_str(cx, meta) {
                    self.kind.set(cx, path, lit);
                }
            }
            VERSION => {
                if let Some(v) = parse_u32(cx, meta) {
                    self.version.set(cx, path, v);
                }
            }
            MIN_VERSION => {
                if let Some(v) = parse_u32(cx, meta) {
                    self.min_version.set(cx, path, v);
                }
            }
            WIDE => {
                flag(meta, WIDE)?;
                self.wide.set(cx, path, ());
            }
            CHANGES => {
                let mut previous = false;
                if meta.input.peek(syn::token::Paren) {
                    meta.parse_nested_meta(|inner| {
                        if inner.path.is_ident("previous") {
                            previous = true;
                            return Ok(());
                        }
                        Err(inner.error(
                            "`changes(...)` takes `previous`: each change then records the entity's value before it",
                        ))
                    })?;
                } else {
                    flag(meta, CHANGES)?;
                }
                self.changes
                    .set(cx, path, (path.to_token_stream(), previous));
            }
            SHARDS => {
                if let Some(v) = parse_u32(cx, meta) {
                    self.shards.set(cx, path, v);
                }
            }
            BUCKETS => {
                if let Some(period) = parse_buckets(cx, meta) {
                    self.buckets.set(cx, path, period);
                }
            }
            TIME_TO_LIVE => {
                if let Some(seconds) = parse_time_to_live(cx, meta) {
                    self.time_to_live.set(cx, path, seconds);
                }
            }
            _ => return self.entity_type_attribute(cx, meta, &name),
        }
        Ok(true)
    }

    /// Reads one of an entity's attributes that name types, functions or
    /// layouts; `false` when `meta` is none of them.
    fn entity_type_attribute(
        &mut self,
        cx: &Ctxt,
        meta: &ParseNestedMeta<'_>,
        name: &str,
    ) -> syn::Result<bool> {
        let path = &meta.path;
        match name {
            PARENT => {
                let parent = parse_type(meta, "`parent` names the type itself")?;
                self.parent.set(cx, path, parent);
            }
            PROJECTION_OF => {
                let full = parse_type(meta, "`projection_of` names the full type itself")?;
                self.projection_of.set(cx, path, full);
            }
            UPGRADE_FROM => {
                let old = parse_type(meta, "`upgrade_from` names the older type itself")?;
                self.upgrade_from.set(cx, path, old);
            }
            PREVIOUS_KINDS => {
                let kinds = parse_previous_kinds(meta)?;
                self.previous_kinds.set(cx, path, kinds);
            }
            UPGRADE_WITH => {
                if let Some(function) = forms::path(cx, meta, None) {
                    self.upgrade_with.set(cx, path, function);
                }
            }
            ROW_KEY => {
                if let Some(lit) = parse_str(cx, meta) {
                    match parse_template(&lit.value()) {
                        Ok(pieces) => self.row_key_template.set(cx, path, (lit, pieces)),
                        Err(message) => cx.error_spanned_by(&lit, message),
                    }
                }
            }
            INDEX => self.indexes.push(parse_index_options(cx, meta)?),
            DISCRIMINATOR => {
                let (property, value) = parse_discriminator(cx, meta)?;
                self.discriminator
                    .set(cx, path, (property, value, path.to_token_stream()));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads an attribute every container takes; `false` when `meta` is
    /// none of them.
    fn shared_attribute(&mut self, cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
        let path = &meta.path;
        if path.is_ident(CRATE) {
            if let Some(value) = forms::path(cx, meta, None) {
                self.crate_path.set(cx, path, value);
            }
        } else if path.is_ident(RENAME_ALL) {
            if let Some(lit) = parse_str(cx, meta) {
                match RenameRule::from_name(&lit.value()) {
                    Some(rule) => self.rename_all.set(cx, path, rule),
                    None => cx.error_spanned_by(
                        &lit,
                        format!(
                            "unknown rename_all rule; expected one of {}",
                            RenameRule::NAMES.join(", ")
                        ),
                    ),
                }
            }
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn finish(self) -> Container {
        let changes = self.changes.get();
        Container {
            table: self.table.get(),
            kind: self.kind.get(),
            version: self.version.get(),
            min_version: self.min_version.get(),
            crate_path: self.crate_path.get(),
            rename_all: self.rename_all.get(),
            wide: self.wide.get().is_some(),
            changes_previous: changes.as_ref().is_some_and(|(_, previous)| *previous),
            changes: changes.map(|(tokens, _)| tokens),
            shards: self.shards.get(),
            buckets: self.buckets.get(),
            time_to_live: self.time_to_live.get(),
            kind_properties: self.kind_properties.get(),
            parent: self.parent.get(),
            upgrade_from: self.upgrade_from.get(),
            upgrade_with: self.upgrade_with.get(),
            previous_kinds: self.previous_kinds.get(),
            collection: self.collection.get(),
            row_key_template: self.row_key_template.get(),
            projection_of: self.projection_of.get(),
            indexes: self.indexes,
            discriminator: self.discriminator.get(),
        }
    }
}

impl Container {
    pub(crate) fn parse(cx: &Ctxt, attrs: &[Attribute], is_entity: bool) -> Container {
        let mut parts = ContainerParts::new();
        let known = if is_entity {
            ENTITY_ATTRIBUTES
        } else {
            FIELDS_ATTRIBUTES
        };
        for attr in tablekit_attrs(attrs) {
            let result = attr.parse_nested_meta(|meta| {
                let read = (is_entity && parts.entity_attribute(cx, &meta)?)
                    || parts.shared_attribute(cx, &meta)?;
                if read {
                    Ok(())
                } else {
                    Err(unknown(&meta, "container", known))
                }
            });
            if let Err(e) = result {
                cx.syn_error(e);
            }
        }
        parts.finish()
    }
}

/// `buckets = "day"`: the period, with its tokens; `None` (and an error)
/// for a period there is none of.
fn parse_buckets(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<(String, TokenStream)> {
    let lit = parse_str(cx, meta)?;
    let period = lit.value();
    if ["hour", "day", "month"].contains(&period.as_str()) {
        Some((period, lit.to_token_stream()))
    } else {
        cx.error_spanned_by(&lit, "`buckets` takes \"hour\", \"day\" or \"month\"");
        None
    }
}

/// `time_to_live = "30m"`: a duration as `humantime` reads it ("90s",
/// "30m", "12h", "7days", "1h 30m"), in whole seconds, at least one.
fn parse_time_to_live(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> Option<(u64, TokenStream)> {
    let lit = parse_str(cx, meta)?;
    match humantime::parse_duration(&lit.value()) {
        Ok(duration) if duration.as_secs() >= 1 && duration.subsec_nanos() == 0 => {
            Some((duration.as_secs(), lit.to_token_stream()))
        }
        Ok(_) => {
            cx.error_spanned_by(
                &lit,
                "`time_to_live` is a whole number of seconds, at least one",
            );
            None
        }
        Err(e) => {
            cx.error_spanned_by(
                &lit,
                format!(
                    "`time_to_live` takes a duration such as \"30m\", \"12h\" or \"7days\": {e}"
                ),
            );
            None
        }
    }
}

/// `name = Type`, with its tokens. A string is refused with `what` (`` `parent`
/// names the type itself ``) and the fix.
fn parse_type(meta: &ParseNestedMeta<'_>, what: &str) -> syn::Result<(syn::Type, TokenStream)> {
    if !meta.input.peek(Token![=]) {
        let name = forms::name_of(meta);
        return Err(meta.error(format!("{what}: write `{name} = Type`")));
    }
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        let name = meta.path.to_token_stream();
        return Err(syn::Error::new_spanned(
            &lit,
            format!("{what}, not a string: write `{name} = {}`", lit.value()),
        ));
    }
    let ty: syn::Type = value.parse()?;
    let tokens = ty.to_token_stream();
    Ok((ty, tokens))
}

/// `previous_kinds = ["OLD", …]`: the kind's earlier names, at least one,
/// with the list's tokens.
fn parse_previous_kinds(meta: &ParseNestedMeta<'_>) -> syn::Result<(Vec<LitStr>, TokenStream)> {
    if !meta.input.peek(Token![=]) {
        return Err(meta.error(
            "`previous_kinds` lists the kind's earlier names: write `previous_kinds = [\"OLD\"]`",
        ));
    }
    let value = meta.value()?;
    if value.peek(LitStr) {
        let lit: LitStr = value.parse()?;
        return Err(syn::Error::new_spanned(
            &lit,
            format!(
                "`previous_kinds` is a list: write `previous_kinds = [{:?}]`",
                lit.value()
            ),
        ));
    }
    let list: syn::ExprArray = value.parse()?;
    let mut kinds = Vec::new();
    for element in &list.elems {
        match element {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(lit),
                ..
            }) => kinds.push(lit.clone()),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "`previous_kinds` lists the kind's earlier names as strings",
                ));
            }
        }
    }
    if kinds.is_empty() {
        return Err(syn::Error::new_spanned(
            &list,
            "`previous_kinds` lists at least one earlier name of the kind",
        ));
    }
    Ok((kinds, list.to_token_stream()))
}

/// `discriminator(property = "EntityType", value = "Payment")`.
fn parse_discriminator(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<(LitStr, LitStr)> {
    const FORM: &str = "write `discriminator(property = \"EntityType\", value = \"Payment\")`: the property other clients tell this kind by, and its value";
    if !meta.input.peek(syn::token::Paren) {
        return Err(meta.error(FORM));
    }
    match parse_strings(cx, meta, "discriminator", [PROPERTY, VALUE])? {
        [Some(property), Some(value)] => Ok((property, value)),
        _ => Err(meta.error(FORM)),
    }
}

/// `what(a = "…", b = "…")`: the string options `names` of `what`, each
/// given at most once; any other is an error naming them.
fn parse_strings<const N: usize>(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    what: &str,
    names: [&'static str; N],
) -> syn::Result<[Option<LitStr>; N]> {
    let mut values = names.map(Attr::none);
    meta.parse_nested_meta(|inner| {
        let Some(i) = names.iter().position(|name| inner.path.is_ident(name)) else {
            return Err(unknown(&inner, what, &names));
        };
        if let Some(lit) = parse_str(cx, &inner) {
            values[i].set(cx, &inner.path, lit);
        }
        Ok(())
    })?;
    Ok(values.map(Attr::get))
}

/// `index(name = "…", tag = "…", copy(field, …))`.
fn parse_index_options(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<IndexOptions> {
    if !meta.input.peek(syn::token::Paren) {
        return Err(meta.error(
            "write `index(name = \"NAME\", tag = \"TAG\", copy(field, …))` on the struct, and `#[tablekit(index = \"NAME\")]` or `#[tablekit(unique = \"NAME\")]` on the indexed fields",
        ));
    }
    let mut name = Attr::none(NAME);
    let mut tag = Attr::none(TAG);
    let mut copy = Attr::none(COPY);
    let mut list = Attr::none(LIST);
    let mut partition = Attr::none(PARTITION);
    let mut table = Attr::none(TABLE);
    meta.parse_nested_meta(|inner| {
        if inner.path.is_ident(LIST) {
            flag(&inner, LIST)?;
            list.set(cx, &inner.path, inner.path.to_token_stream());
            return Ok(());
        }
        if inner.path.is_ident(NAME) {
            if let Some(lit) = parse_index_name(cx, &inner) {
                name.set(cx, &inner.path, lit);
            }
        } else if inner.path.is_ident(TAG) {
            if let Some(lit) = parse_str(cx, &inner) {
                tag.set(cx, &inner.path, lit);
            }
        } else if inner.path.is_ident(PARTITION) {
            if let Some(lit) = parse_str(cx, &inner) {
                partition.set(cx, &inner.path, lit);
            }
        } else if inner.path.is_ident(TABLE) {
            if let Some(lit) = parse_str(cx, &inner) {
                table.set(cx, &inner.path, lit);
            }
        } else if inner.path.is_ident(COPY) {
            let mut fields = Vec::new();
            if inner.input.peek(syn::token::Paren) {
                // `copy()` (no field) is read by hand: nested meta needs
                // at least one item.
                let content;
                syn::parenthesized!(content in inner.input);
                let names =
                    syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated(
                        &content,
                    )?;
                for path in names {
                    match path.get_ident() {
                        Some(ident) => fields.push(ident.clone()),
                        None => {
                            return Err(syn::Error::new_spanned(path, "`copy` lists field names"));
                        }
                    }
                }
            } else {
                return Err(inner.error(
                    "write `copy(field, …)`, or `copy()` for an index whose rows copy no field",
                ));
            }
            copy.set(cx, &inner.path, fields);
        } else {
            return Err(unknown(
                &inner,
                "index",
                &[NAME, TAG, COPY, LIST, PARTITION, TABLE],
            ));
        }
        Ok(())
    })?;
    let Some(name) = name.get() else {
        return Err(meta.error("an `index(…)` needs `name = \"…\"`, the name the fields' `index`/`unique` attributes give"));
    };
    Ok(IndexOptions {
        name,
        tag: tag.get(),
        copy: copy.get(),
        list: list.get(),
        partition: partition.get(),
        table: table.get(),
    })
}

#[cfg(test)]
mod tests;
