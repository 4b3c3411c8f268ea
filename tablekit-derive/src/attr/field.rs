//! The attributes of a field: its name, its key role, how it is stored and indexed.

use super::*;

/// `flatten` options.
pub(crate) struct Flatten {
    pub(crate) prefix: Option<LitStr>,
    pub(crate) delimiter: Option<LitStr>,
}

/// A key role with its optional explicit order.
pub(crate) struct KeyRole {
    pub(crate) order: Option<(u32, TokenStream)>,
}

/// Field attributes.
pub(crate) struct Field {
    pub(crate) partition_key: Option<(KeyRole, TokenStream)>,
    pub(crate) row_key: Option<(KeyRole, TokenStream)>,
    pub(crate) rename: Option<LitStr>,
    pub(crate) skip: Option<TokenStream>,
    pub(crate) default: Option<(Option<Path>, TokenStream)>,
    /// `alias = "…"` (any number): older names the field is read from.
    pub(crate) aliases: Vec<LitStr>,
    pub(crate) with: Option<Path>,
    pub(crate) flatten: Option<(Flatten, TokenStream)>,
    pub(crate) json: Option<TokenStream>,
    pub(crate) series: Option<TokenStream>,
    /// `blob` (always, `true`) or `offload` (when too large, `false`).
    pub(crate) blob: Option<(bool, TokenStream)>,
    /// `index = "NAME"`: in the non-unique index `NAME`.
    pub(crate) index: Option<LitStr>,
    /// `unique = "NAME"`: in the unique index `NAME`.
    pub(crate) unique: Option<LitStr>,
    /// `bucket`: the time that picks the entity's table.
    pub(crate) bucket: Option<TokenStream>,
    /// `encrypted`: stored sealed, as ciphertext.
    pub(crate) encrypted: Option<TokenStream>,
    /// `expires`: the field's time is when the entity expires.
    pub(crate) expires: Option<TokenStream>,
}

pub(super) const FIELD_KEYWORDS: &[&str] = &[
    PARTITION_KEY,
    ROW_KEY,
    RENAME,
    ALIAS,
    SKIP,
    DEFAULT,
    WITH,
    FLATTEN,
    JSON,
    SERIES,
    BLOB,
    OFFLOAD,
    INDEX,
    UNIQUE,
    BUCKET,
    ENCRYPTED,
    EXPIRES,
];

/// A field's attributes as they are read, each at most once (`alias` any
/// number of times).
pub(super) struct FieldParts {
    partition_key: Attr<KeyRole>,
    row_key: Attr<KeyRole>,
    rename: Attr<LitStr>,
    skip: Attr<()>,
    default: Attr<Option<Path>>,
    with: Attr<Path>,
    flatten: Attr<Flatten>,
    json: Attr<()>,
    series: Attr<()>,
    blob: Attr<()>,
    offload: Attr<()>,
    bucket: Attr<()>,
    encrypted: Attr<()>,
    expires: Attr<()>,
    index: Attr<LitStr>,
    unique: Attr<LitStr>,
    aliases: Vec<LitStr>,
}

impl FieldParts {
    fn new() -> FieldParts {
        FieldParts {
            partition_key: Attr::none(PARTITION_KEY),
            row_key: Attr::none(ROW_KEY),
            rename: Attr::none(RENAME),
            skip: Attr::none(SKIP),
            default: Attr::none(DEFAULT),
            with: Attr::none(WITH),
            flatten: Attr::none(FLATTEN),
            json: Attr::none(JSON),
            series: Attr::none(SERIES),
            blob: Attr::none(BLOB),
            offload: Attr::none(OFFLOAD),
            bucket: Attr::none(BUCKET),
            encrypted: Attr::none(ENCRYPTED),
            expires: Attr::none(EXPIRES),
            index: Attr::none(INDEX),
            unique: Attr::none(UNIQUE),
            aliases: Vec::new(),
        }
    }

    /// Reads one attribute of a field; `false` when `meta` is none.
    fn attribute(&mut self, cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
        let path = &meta.path;
        let Some(name) = path.get_ident().map(ToString::to_string) else {
            return Ok(false);
        };
        match name.as_str() {
            PARTITION_KEY => self.partition_key.set(cx, path, key_role(cx, meta)),
            ROW_KEY => self.row_key.set(cx, path, key_role(cx, meta)),
            RENAME => {
                if let Some(lit) = parse_str(cx, meta) {
                    self.rename.set(cx, path, lit);
                }
            }
            SKIP => set_flag(cx, meta, &mut self.skip)?,
            DEFAULT => {
                // `default`, or `default = path` to a function that makes
                // the value.
                if meta.input.peek(Token![=]) {
                    let hint = "`default = …` names a function that makes the value (and `default` alone takes `Default::default()`)";
                    if let Some(function) = forms::path(cx, meta, Some(hint)) {
                        self.default.set(cx, path, Some(function));
                    }
                } else {
                    flag(meta, DEFAULT)?;
                    self.default.set(cx, path, None);
                }
            }
            ALIAS => {
                if let Some(lit) = parse_str(cx, meta) {
                    self.aliases.push(lit);
                }
            }
            JSON => set_flag(cx, meta, &mut self.json)?,
            SERIES => set_flag(cx, meta, &mut self.series)?,
            BLOB => set_flag(cx, meta, &mut self.blob)?,
            OFFLOAD => set_flag(cx, meta, &mut self.offload)?,
            BUCKET => set_flag(cx, meta, &mut self.bucket)?,
            ENCRYPTED => set_flag(cx, meta, &mut self.encrypted)?,
            EXPIRES => set_flag(cx, meta, &mut self.expires)?,
            INDEX => {
                if let Some(lit) = parse_index_name(cx, meta) {
                    self.index.set(cx, path, lit);
                }
            }
            UNIQUE => {
                if let Some(lit) = parse_index_name(cx, meta) {
                    self.unique.set(cx, path, lit);
                }
            }
            WITH => {
                if let Some(value) = forms::path(cx, meta, None) {
                    self.with.set(cx, path, value);
                }
            }
            FLATTEN => {
                let mut options = Flatten {
                    prefix: None,
                    delimiter: None,
                };
                if meta.input.peek(syn::token::Paren) {
                    let [prefix, delimiter] =
                        parse_strings(cx, meta, "flatten", [PREFIX, DELIMITER])?;
                    options.prefix = prefix;
                    options.delimiter = delimiter;
                } else if meta.input.peek(Token![=]) {
                    return Err(meta.error(
                        "`flatten` takes no value, or its options: `flatten(prefix = \"…\", delimiter = \"…\")`",
                    ));
                }
                self.flatten.set(cx, path, options);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn finish(self, cx: &Ctxt) -> Field {
        let flag = |attr: Attr<()>| attr.get_with_tokens().map(|(_, t)| t);
        Field {
            partition_key: self.partition_key.get_with_tokens(),
            row_key: self.row_key.get_with_tokens(),
            rename: self.rename.get(),
            skip: flag(self.skip),
            default: self.default.get_with_tokens(),
            aliases: self.aliases,
            with: self.with.get(),
            flatten: self.flatten.get_with_tokens(),
            json: flag(self.json),
            series: flag(self.series),
            index: self.index.get(),
            unique: self.unique.get(),
            bucket: flag(self.bucket),
            encrypted: flag(self.encrypted),
            expires: flag(self.expires),
            blob: match (self.blob.get_with_tokens(), self.offload.get_with_tokens()) {
                (Some(_), Some((_, tokens))) => {
                    cx.error_spanned_by(
                        tokens,
                        "`blob` and `offload` exclude each other: `blob` keeps the value in the blob store always, `offload` only when it is too large for the row",
                    );
                    None
                }
                (Some(((), tokens)), None) => Some((true, tokens)),
                (None, Some(((), tokens))) => Some((false, tokens)),
                (None, None) => None,
            },
        }
    }
}

/// Reads a flag attribute (`json`, `skip`, …) into `attr`.
pub(super) fn set_flag(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attr: &mut Attr<()>,
) -> syn::Result<()> {
    flag(meta, attr.name)?;
    attr.set(cx, &meta.path, ());
    Ok(())
}

/// `partition_key` or `row_key`, with its order when given (`row_key = 1`).
pub(super) fn key_role(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> KeyRole {
    KeyRole {
        order: if meta.input.peek(Token![=]) {
            let name = forms::name_of(meta);
            let hint = format!(
                "`{name}` takes no value, or the field's place in a compound key (0, 1, …)"
            );
            forms::number(cx, meta, Some(&hint))
        } else {
            None
        },
    }
}

impl Field {
    pub(crate) fn parse(cx: &Ctxt, attrs: &[Attribute]) -> Field {
        let mut parts = FieldParts::new();
        for attr in tablekit_attrs(attrs) {
            let result = attr.parse_nested_meta(|meta| {
                if parts.attribute(cx, &meta)? {
                    Ok(())
                } else {
                    Err(unknown(&meta, "field", FIELD_KEYWORDS))
                }
            });
            if let Err(e) = result {
                cx.syn_error(e);
            }
        }
        parts.finish(cx)
    }
}
