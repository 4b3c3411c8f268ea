//! Rules that need the whole struct.

use std::collections::HashMap;

use quote::ToTokens;

use crate::ast::{Container, Mode, Role, is_option, option_inner};
use crate::attr::TemplatePiece;
use crate::ctxt::Ctxt;

/// Properties one row holds (255 less PartitionKey, RowKey, Timestamp).
const MAX_PROPERTIES: usize = 252;
/// Properties of a wide entity: 100 parts (one transaction) of 249.
const MAX_WIDE_PROPERTIES: usize = 100 * 249;
/// Levels of a hierarchical partition key (Cosmos DB's limit).
const MAX_PARTITION_LEVELS: usize = 3;
/// Components of a compound RowKey.
const MAX_ROW_KEY_PARTS: usize = 4;
/// Names the store or tablekit keeps for itself.
const RESERVED: &[&str] = &["PartitionKey", "RowKey", "Timestamp", "_Kind", "_Version"];

pub(crate) fn check(cx: &Ctxt, cont: &Container<'_>) {
    check_crate_path(cx, cont);
    check_property_names(cx, cont);
    check_absent_values(cx, cont);
    check_buckets(cx, cont);
    if cont.mode == Mode::Entity {
        check_keys(cx, cont);
        check_table_and_kind(cx, cont);
        check_row_key_template(cx, cont);
        check_projection(cx, cont);
        check_property_count(cx, cont);
        check_shards(cx, cont);
        check_parent(cx, cont);
        check_discriminator(cx, cont);
        check_upgrade(cx, cont);
        check_changes(cx, cont);
    }
}

/// `changes`: on an entity of a kind (its change rows share its
/// partitions, and typed reads keep to the kind's RowKeys).
fn check_changes(cx: &Ctxt, cont: &Container<'_>) {
    let Some(tokens) = &cont.attrs.changes else {
        return;
    };
    if cont.attrs.projection_of.is_some() {
        cx.error_spanned_by(
            tokens,
            "a projection is written as its entity is: give `changes` on the entity",
        );
    } else if cont.attrs.kind.is_none() {
        cx.error_spanned_by(
            tokens,
            "a type with a change feed needs a `kind`: its change rows share its partitions, and its reads keep to the RowKeys of its kind",
        );
    }
}

/// `upgrade_with` converts the rows `upgrade_from` reads: alone it would do
/// nothing. `upgrade_from` names another type: this one reads its own rows.
fn check_upgrade(cx: &Ctxt, cont: &Container<'_>) {
    if let Some((syn::Type::Path(path), tokens)) = &cont.attrs.upgrade_from
        && path.qself.is_none()
        && (path.path.is_ident("Self") || path.path.is_ident(&cont.input.ident))
    {
        cx.error_spanned_by(
            tokens,
            "`upgrade_from` names this type itself: name the older type whose rows this one reads and upgrades",
        );
    }
    if let (Some(function), None) = (&cont.attrs.upgrade_with, &cont.attrs.upgrade_from) {
        cx.error_spanned_by(
            function,
            "`upgrade_with` converts the rows of the type `upgrade_from` names: add `upgrade_from = OlderType`",
        );
    }
}

/// A discriminator's property is written by tablekit: no field is stored
/// under its name, and its name and value are ones the store keeps.
fn check_discriminator(cx: &Ctxt, cont: &Container<'_>) {
    let Some((property, value, _)) = &cont.attrs.discriminator else {
        return;
    };
    let name = property.value();
    if let Some(field) = cont
        .fields
        .iter()
        .find(|f| !f.is_key() && !matches!(f.role, Role::Skip) && f.stored_name == name)
    {
        cx.error_spanned_by(
            &field.name_tokens,
            format!(
                "this field is stored as `{name}`, the discriminator's property, which tablekit writes itself (always {:?}): drop the field",
                value.value()
            ),
        );
    }
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !RESERVED.contains(&name.as_str());
    if !valid {
        cx.error_spanned_by(
            property,
            "the discriminator's property must be a property name (letters, digits and `_`, not starting with a digit) that is not the store's or tablekit's own",
        );
    }
}

/// A kind cannot nest under itself (`parent = Self`, or its own name).
fn check_parent(cx: &Ctxt, cont: &Container<'_>) {
    let Some((syn::Type::Path(parent), tokens)) = &cont.attrs.parent else {
        return;
    };
    let itself = parent.qself.is_none()
        && parent.path.segments.len() == 1
        && (parent.path.is_ident("Self") || parent.path.is_ident(&cont.input.ident));
    if itself {
        cx.error_spanned_by(
            tokens,
            "a kind cannot be its own `parent`: name the kind whose rows it nests under (a customer's orders: `parent = Customer` on `Order`)",
        );
    }
}

/// `buckets = "…"` on the struct, and at most one `bucket` field, plain.
fn check_buckets(cx: &Ctxt, cont: &Container<'_>) {
    if let (Some(_), Some((_, tokens))) = (&cont.attrs.projection_of, &cont.attrs.buckets) {
        cx.error_spanned_by(
            tokens,
            "a projection is stored as its entity is: give `buckets` on the entity",
        );
    }
    let mut marked = cont
        .fields
        .iter()
        .filter_map(|f| Some((f, f.bucket.as_ref()?)));
    let first = marked.next();
    for (_, tokens) in marked {
        cx.error_spanned_by(tokens, "one field picks the table: `bucket` is given twice");
    }
    let Some((field, tokens)) = first else {
        return;
    };
    if cont.mode != Mode::Entity {
        cx.error_spanned_by(tokens, "`bucket` applies to a field of the entity itself");
    } else if cont.attrs.buckets.is_none() {
        cx.error_spanned_by(
            tokens,
            "`bucket` picks the table of a kind kept in one table per period: add `buckets = \"day\"` (or hour, month) to the struct",
        );
    } else if !matches!(
        field.role,
        Role::PartitionKey(_) | Role::RowKey(_) | Role::Property
    ) {
        cx.error_spanned_by(
            tokens,
            "`bucket` takes a `DateTime` field stored as a key or as one property (not `skip`, `json`, `with`, `flatten` or `series`)",
        );
    }
}

/// `shards = N`: 2–100, on a kind whose rows all stand alone.
fn check_shards(cx: &Ctxt, cont: &Container<'_>) {
    let Some((count, tokens)) = &cont.attrs.shards else {
        return;
    };
    if !(2..=100).contains(count) {
        cx.error_spanned_by(
            tokens,
            "`shards` takes 2 to 100 (the shard number is two digits)",
        );
    }
    let what = if cont.attrs.parent.is_some() || cont.attrs.collection.is_some() {
        Some(
            "a kind in a collection shares its partition with other kinds, which shards would scatter",
        )
    } else if cont.attrs.projection_of.is_some() {
        Some("a projection is stored as its entity is: give `shards` on the entity")
    } else if !cont.attrs.indexes.is_empty()
        || cont
            .fields
            .iter()
            .any(|f| f.index.is_some() || f.unique.is_some())
    {
        Some(
            "index rows live in their entity's partition, and one transaction cannot cover every shard: a sharded kind has no indexes",
        )
    } else {
        None
    };
    if let Some(what) = what {
        cx.error_spanned_by(tokens, format!("`shards`: {what}"));
    }
}

fn check_crate_path(cx: &Ctxt, cont: &Container<'_>) {
    if let Some(path) = &cont.attrs.crate_path
        && path.leading_colon.is_none()
    {
        cx.error_spanned_by(
            path,
            "`crate` must be an absolute path such as `::tablekit` or `::my_crate::tablekit`",
        );
    }
}

/// Whether the store accepts `name` as a property name.
fn valid_property_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Err("a property name cannot be empty".into()),
        Some(c) if !(c.is_alphabetic() || c == '_') => {
            return Err(format!(
                "property name `{name}` must start with a letter or `_`"
            ));
        }
        _ => {}
    }
    if let Some(c) = chars.find(|c| !(c.is_alphanumeric() || *c == '_')) {
        return Err(format!(
            "property name `{name}` contains {c:?}; the store allows letters, digits and `_`"
        ));
    }
    if name.chars().count() > 255 {
        return Err(format!(
            "property name `{name}` is longer than 255 characters"
        ));
    }
    Ok(())
}

fn check_property_names(cx: &Ctxt, cont: &Container<'_>) {
    check_flatten_prefixes(cx, cont);
    check_series_prefixes(cx, cont);
    let seen = check_stored_names(cx, cont);
    check_aliases(cx, cont, &seen);
}

/// Field types with a value the store cannot keep apart from another: an
/// `Option` of an `Option` (its `Some(None)` is stored as no property, as
/// `None` is), and a `Vec` or map series of `Option`s (a `None` element
/// would read back missing). The writers refuse such values too, for the
/// types this cannot see through (an alias of `Option`).
fn check_absent_values(cx: &Ctxt, cont: &Container<'_>) {
    for field in &cont.fields {
        let nested = match field.role {
            Role::Property => option_inner(field.ty).is_some_and(is_option),
            Role::Series => series_element(field.ty).is_some_and(is_option),
            _ => false,
        };
        if !nested {
            continue;
        }
        let message = if matches!(field.role, Role::Series) {
            "a `None` element of a `Vec` or map series would be stored as no property and read back missing: use an array (`[Option<T>; N]`), whose length says where its elements are, or `#[tablekit(json)]`"
        } else {
            "a property is absent or holds one value: the `Some(None)` of an `Option<Option<T>>` would be stored as no property and read back as `None`; use one `Option`"
        };
        cx.error_spanned_by(field.ty, message);
    }
}

/// The element type of a type that is syntactically a `Vec`, or the value
/// type of a `BTreeMap` or `HashMap`.
fn series_element(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let at = match last.ident.to_string().as_str() {
        "Vec" => 0,
        "BTreeMap" | "HashMap" => 1,
        _ => return None,
    };
    match args.args.iter().nth(at)? {
        syn::GenericArgument::Type(element) => Some(element),
        _ => None,
    }
}

/// Two flattened fields under one prefix.
fn check_flatten_prefixes(cx: &Ctxt, cont: &Container<'_>) {
    // Two flattened fields with one prefix store the same names whenever
    // their types share a field name (always, for one type twice).
    let mut prefixes: HashMap<&str, &crate::ast::Field<'_>> = HashMap::new();
    for field in &cont.fields {
        if let Role::Flatten(prefix) = &field.role {
            if let Some(first) = prefixes.get(prefix.as_str()) {
                cx.error_spanned_by(
                    &field.name_tokens,
                    format!("two flattened fields store their fields under the same prefix `{prefix}`: give one a `flatten(prefix = \"…\")` of its own"),
                );
                cx.error_spanned_by(&first.name_tokens, format!("`{prefix}` is first used here"));
            } else {
                prefixes.insert(prefix, field);
            }
        }
    }
}

/// Properties that a series would read as its elements.
fn check_series_prefixes(cx: &Ctxt, cont: &Container<'_>) {
    // A series owns every name `{series}_…`: no other property may start so.
    for series in cont
        .fields
        .iter()
        .filter(|f| matches!(f.role, Role::Series))
    {
        let prefix = format!("{}_", series.stored_name);
        for field in &cont.fields {
            if matches!(
                field.role,
                Role::Property | Role::Json | Role::With(_) | Role::Series
            ) && !std::ptr::eq(field, series)
                && field.stored_name.starts_with(&prefix)
            {
                cx.error_spanned_by(
                    &field.name_tokens,
                    format!(
                        "`{}` would be read as an element of the series `{}`",
                        field.stored_name, series.stored_name
                    ),
                );
            }
        }
    }
}

/// Each property's stored name: valid, not reserved, not taken twice.
/// Returns the names taken, with their fields.
fn check_stored_names<'c>(
    cx: &Ctxt,
    cont: &'c Container<'_>,
) -> HashMap<&'c str, &'c crate::ast::Field<'c>> {
    let mut seen: HashMap<&str, &crate::ast::Field<'_>> = HashMap::new();
    for field in &cont.fields {
        if !matches!(
            field.role,
            Role::Property | Role::Json | Role::With(_) | Role::Series
        ) {
            continue;
        }
        let name = field.stored_name.as_str();
        if let Err(message) = valid_property_name(name) {
            cx.error_spanned_by(&field.name_tokens, message);
            continue;
        }
        if RESERVED.contains(&name) {
            cx.error_spanned_by(
                &field.name_tokens,
                format!("property name `{name}` is reserved by the store or tablekit"),
            );
            continue;
        }
        match seen.get(name) {
            Some(first) => {
                cx.error_spanned_by(
                    &field.name_tokens,
                    format!("two fields are stored under the property name `{name}`"),
                );
                cx.error_spanned_by(&first.name_tokens, format!("`{name}` is first used here"));
            }
            None => {
                seen.insert(name, field);
            }
        }
    }
    seen
}

/// Each field's older names (`alias`).
fn check_aliases(cx: &Ctxt, cont: &Container<'_>, seen: &HashMap<&str, &crate::ast::Field<'_>>) {
    // An older name (`alias`) is read as its field: it must be a name the
    // store takes, and no other field's, current or older.
    let mut aliases: HashMap<String, &syn::LitStr> = HashMap::new();
    for field in &cont.fields {
        for lit in &field.alias_tokens {
            let alias = lit.value();
            if let Err(message) = valid_property_name(&alias) {
                cx.error_spanned_by(lit, message);
            } else if RESERVED.contains(&alias.as_str()) {
                cx.error_spanned_by(
                    lit,
                    format!("property name `{alias}` is reserved by the store or tablekit"),
                );
            } else if seen.contains_key(alias.as_str()) {
                cx.error_spanned_by(
                    lit,
                    format!("`{alias}` is a field's current name: an alias names an older one no field is stored under now"),
                );
            } else if aliases.insert(alias.clone(), lit).is_some() {
                cx.error_spanned_by(lit, format!("the alias `{alias}` is given twice"));
            }
        }
    }
}

fn check_keys(cx: &Ctxt, cont: &Container<'_>) {
    let mut pk: Vec<_> = cont
        .fields
        .iter()
        .filter_map(|f| match f.role {
            Role::PartitionKey(order) => Some((order, f)),
            _ => None,
        })
        .collect();
    let mut rk: Vec<_> = cont
        .fields
        .iter()
        .filter_map(|f| match f.role {
            Role::RowKey(order) => Some((order, f)),
            _ => None,
        })
        .collect();
    if pk.is_empty() {
        cx.error_spanned_by(
            &cont.input.ident,
            "missing partition key: mark one or more fields with `#[tablekit(partition_key)]`",
        );
    }
    for (keys, what, max, message) in [
        (
            &mut pk,
            "partition key",
            MAX_PARTITION_LEVELS,
            "a hierarchical partition key has at most three levels",
        ),
        (
            &mut rk,
            "row key",
            MAX_ROW_KEY_PARTS,
            "a compound row key has at most four fields",
        ),
    ] {
        check_key_orders(cx, keys, what, max, message);
    }
}

/// One key's fields: orders unique, numbered from 0 with no gap when
/// given, and at most `max` of them.
fn check_key_orders(
    cx: &Ctxt,
    keys: &mut [(u32, &crate::ast::Field<'_>)],
    what: &str,
    max: usize,
    message: &str,
) {
    keys.sort_by_key(|(order, f)| (*order, f.ident.to_string()));
    for pair in keys.windows(2) {
        if pair[0].0 == pair[1].0 {
            let tokens = pair[1]
                .1
                .key_tokens
                .clone()
                .unwrap_or_else(|| pair[1].1.ident.to_token_stream());
            cx.error_spanned_by(
                tokens,
                format!("two {what} fields have the order {}", pair[0].0),
            );
        }
    }
    // Explicit orders number the fields 0, 1, 2, … with no gap, on every
    // field of the key or on none.
    let explicit = keys.iter().filter(|(_, f)| f.explicit_order).count();
    if explicit > 0 {
        let tokens = |f: &crate::ast::Field<'_>| {
            f.key_tokens
                .clone()
                .unwrap_or_else(|| f.ident.to_token_stream())
        };
        if explicit < keys.len() {
            if let Some((_, field)) = keys.iter().find(|(_, f)| !f.explicit_order) {
                cx.error_spanned_by(
                    tokens(field),
                    format!("give every {what} field its order (`= N`), or none"),
                );
            }
        } else if let Some((i, (order, field))) = keys
            .iter()
            .enumerate()
            .find(|(i, (order, _))| *order as usize != *i)
            && keys
                .get(i.wrapping_sub(1))
                .is_none_or(|(previous, _)| previous != order)
        {
            cx.error_spanned_by(
                tokens(field),
                format!("{what} fields are numbered from 0 with no gap: expected `= {i}`, found `= {order}`"),
            );
        }
    }
    for (_, field) in keys.iter().skip(max) {
        let tokens = field
            .key_tokens
            .clone()
            .unwrap_or_else(|| field.ident.to_token_stream());
        cx.error_spanned_by(tokens, message);
    }
}

/// A projection takes its table, kind, layout and property names from its
/// entity, and holds key fields and plain property fields only.
fn check_projection(cx: &Ctxt, cont: &Container<'_>) {
    if cont.attrs.projection_of.is_none() {
        return;
    }
    let a = &cont.attrs;
    let own = [
        a.table.as_ref().map(|t| (t.to_token_stream(), "table")),
        a.kind.as_ref().map(|k| (k.to_token_stream(), "kind")),
        a.version.as_ref().map(|(_, t)| (t.clone(), "version")),
        a.min_version
            .as_ref()
            .map(|(_, t)| (t.clone(), "min_version")),
        a.kind_properties
            .as_ref()
            .map(|(_, t)| (t.clone(), "kind_properties")),
        a.row_key_template
            .as_ref()
            .map(|(l, _)| (l.to_token_stream(), "row_key")),
        a.collection.clone().map(|t| (t, "collection")),
        a.parent.as_ref().map(|(_, t)| (t.clone(), "parent")),
        a.rename_all
            .as_ref()
            .map(|_| (cont.input.ident.to_token_stream(), "rename_all")),
    ];
    for (tokens, what) in own.into_iter().flatten() {
        cx.error_spanned_by(
            tokens,
            format!("a projection takes `{what}` from the entity it projects"),
        );
    }
    if a.wide {
        cx.error_spanned_by(
            &cont.input.ident,
            "a projection of a wide entity is not offered: read the entity",
        );
    }
    for field in &cont.fields {
        let plain = matches!(
            field.role,
            Role::PartitionKey(_) | Role::RowKey(_) | Role::Property
        );
        if !plain || field.blob.is_some() {
            cx.error_spanned_by(
                field.ident,
                "a projection holds key fields and plain property fields of its entity, under the entity's field names",
            );
        } else if field.name_tokens.to_string() != field.ident.to_token_stream().to_string() {
            // A `rename` gave the name: its tokens are the literal's.
            cx.error_spanned_by(
                &field.name_tokens,
                "a projection's fields are stored under the entity's names: leave out `rename`",
            );
        }
    }
}

/// A RowKey template names every row key field once, in key order, and
/// its texts hold no character the store refuses in a key.
fn check_row_key_template(cx: &Ctxt, cont: &Container<'_>) {
    let Some((lit, pieces)) = &cont.attrs.row_key_template else {
        return;
    };
    let named: Vec<&str> = pieces
        .iter()
        .filter_map(|p| match p {
            TemplatePiece::Field(name) => Some(name.as_str()),
            TemplatePiece::Literal(_) => None,
        })
        .collect();
    let mut fields: Vec<_> = cont
        .fields
        .iter()
        .enumerate()
        .filter_map(|(position, f)| match f.role {
            Role::RowKey(order) => Some((order, position, f.ident.to_string())),
            _ => None,
        })
        .collect();
    fields.sort();
    let fields: Vec<&str> = fields.iter().map(|(_, _, name)| name.as_str()).collect();
    if named != fields {
        let expected: String = fields.iter().map(|f| format!("{{{f}}}")).collect();
        cx.error_spanned_by(
            lit,
            format!("a RowKey template names the `row_key` fields once each, in key order: {expected} with the texts between them"),
        );
    }
    for piece in pieces {
        if let TemplatePiece::Literal(text) = piece
            && let Some(c) = text
                .chars()
                .find(|c| matches!(c, '/' | '\\' | '#' | '?') || c.is_control())
        {
            cx.error_spanned_by(
                lit,
                format!("{c:?} cannot be part of a key: the store refuses `/`, `\\`, `#`, `?` and control characters"),
            );
        }
    }
    for tokens in cont
        .attrs
        .parent
        .iter()
        .map(|(_, tokens)| tokens)
        .chain(&cont.attrs.collection)
    {
        cx.error_spanned_by(
            tokens,
            "a kind laid out by a RowKey template is not part of a collection",
        );
    }
}

fn check_table_and_kind(cx: &Ctxt, cont: &Container<'_>) {
    check_table_name(cx, cont);
    check_kind(cx, cont);
    check_versions(cx, cont);
}

/// The table's name, given or the struct's, and its room for a bucket's digits.
fn check_table_name(cx: &Ctxt, cont: &Container<'_>) {
    let table_ok = |name: &str| {
        (3..=63).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric())
            && name.as_bytes()[0].is_ascii_alphabetic()
            && !name.eq_ignore_ascii_case("tables")
    };
    const TABLE_RULE: &str =
        "3 to 63 ASCII letters and digits, starting with a letter, not `tables`";
    // A bucketed kind's table name is a prefix the period's digits follow
    // (`Events` + `20261124`): it must end with a letter, and leave them room.
    let stamp_len = cont
        .attrs
        .buckets
        .as_ref()
        .map(|(period, _)| match period.as_str() {
            "hour" => 10,
            "month" => 6,
            _ => 8,
        });
    let bucketed_ok = |name: &str| {
        stamp_len.is_none_or(|len| {
            name.ends_with(|c: char| c.is_ascii_alphabetic()) && name.len() + len <= 63
        })
    };
    const BUCKETED_RULE: &str = "a kind with `buckets` keeps one table per period, named by this name and the period's digits (`Events20261124`): the name must end with a letter and leave room for the digits in 63 characters";
    match &cont.attrs.table {
        Some(lit) if !table_ok(&lit.value()) => {
            cx.error_spanned_by(lit, format!("invalid table name: a table name is {TABLE_RULE}"));
        }
        Some(lit) if cont.attrs.projection_of.is_none() && !bucketed_ok(&lit.value()) => {
            cx.error_spanned_by(lit, BUCKETED_RULE);
        }
        Some(_) => {}
        None if !table_ok(&cont.input.ident.to_string()) => cx.error_spanned_by(
            &cont.input.ident,
            format!("the struct's name is not a valid table name ({TABLE_RULE}); set `#[tablekit(table = \"…\")]`"),
        ),
        None => {}
    }
}

/// The kind's tag, its earlier tags, and what a kind in a collection needs.
fn check_kind(cx: &Ctxt, cont: &Container<'_>) {
    if let Some(kind) = &cont.attrs.kind {
        let value = kind.value();
        if value.is_empty() || value.len() > 64 || !value.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            cx.error_spanned_by(kind, "an entity kind is 1 to 64 ASCII letters and digits (it starts every RowKey, followed by `_`)");
        }
    }
    if let Some((previous, tokens)) = &cont.attrs.previous_kinds {
        check_previous_kinds(cx, cont, previous, tokens);
    }
    if let (None, Some((_, tokens))) = (&cont.attrs.kind, &cont.attrs.kind_properties) {
        cx.error_spanned_by(
            tokens,
            "`kind_properties` says where a kind is kept: set `kind` too",
        );
    }
    // A kind in a collection shares its RowKey range with other kinds.
    let in_collection = cont
        .attrs
        .parent
        .iter()
        .map(|(_, tokens)| (tokens, "`parent`"))
        .chain(
            cont.attrs
                .collection
                .iter()
                .map(|tokens| (tokens, "`collection`")),
        );
    for (tokens, what) in in_collection {
        if cont.attrs.kind.is_none() {
            cx.error_spanned_by(
                tokens,
                format!("{what} places the kind's tag in the RowKey: set `kind` too"),
            );
        }
        if let Some((false, _)) = cont.attrs.kind_properties {
            cx.error_spanned_by(tokens, format!("{what}: kinds in a collection share a RowKey range and are told apart by their `_Kind` property, which `kind_properties = false` leaves out"));
        }
        if cont.attrs.wide {
            cx.error_spanned_by(
                tokens,
                format!("{what}: a wide entity cannot be part of a collection"),
            );
        }
    }
}

/// The kind's version and the oldest version it reads.
fn check_versions(cx: &Ctxt, cont: &Container<'_>) {
    let version = cont.attrs.version.as_ref();
    let min_version = cont.attrs.min_version.as_ref();
    if let (Some((false, _)), Some((_, tokens))) = (&cont.attrs.kind_properties, version) {
        cx.error_spanned_by(
            tokens,
            "a version is kept in the `_Version` property, which `kind_properties = false` leaves out",
        );
    }
    if cont.attrs.kind.is_none() {
        for (_, tokens) in version.into_iter().chain(min_version) {
            cx.error_spanned_by(
                tokens,
                "a version belongs to an entity kind: set `kind` too",
            );
        }
    }
    if let Some((0, tokens)) = version {
        cx.error_spanned_by(tokens, "versions start at 1");
    }
    if let (Some((min, tokens)), max) = (min_version, version.map_or(1, |(v, _)| *v))
        && (*min > max || *min == 0)
    {
        cx.error_spanned_by(
            tokens,
            format!("`min_version` must be between 1 and the version ({max})"),
        );
    }
}

fn check_property_count(cx: &Ctxt, cont: &Container<'_>) {
    let array_len = |ty: &syn::Type| match ty {
        syn::Type::Array(array) => match &array.len {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(n),
                ..
            }) => n.base10_parse::<usize>().ok(),
            _ => None,
        },
        _ => None,
    };
    let stored: usize = cont
        .fields
        .iter()
        .map(|f| match f.role {
            Role::Property | Role::Json | Role::With(_) => 1,
            // An array's length is known here; a `Vec` or map is checked when written.
            Role::Series => array_len(f.ty).unwrap_or(0),
            _ => 0,
        })
        .sum();
    let kind_properties = !matches!(cont.attrs.kind_properties, Some((false, _)));
    let kind = if cont.attrs.kind.is_some() && kind_properties {
        2
    } else {
        0
    };
    if cont.attrs.wide {
        // A wide entity spans up to 100 rows (one transaction), 249 properties each.
        if stored > MAX_WIDE_PROPERTIES {
            cx.error_spanned_by(
                &cont.input.ident,
                format!(
                    "this wide entity stores {stored} properties; one transaction writes at most 100 rows of 249 ({MAX_WIDE_PROPERTIES})"
                ),
            );
        }
        return;
    }
    if stored + kind > MAX_PROPERTIES {
        cx.error_spanned_by(
            &cont.input.ident,
            format!(
                "this entity stores {} properties{}; one row holds at most {MAX_PROPERTIES} (`#[tablekit(wide)]` spreads an entity over several rows)",
                stored + kind,
                if kind > 0 {
                    " (kind and version included)"
                } else {
                    ""
                }
            ),
        );
    }
}

/// `previous_kinds`: earlier names of a kind of its own (not in a
/// collection, not laid out by a template), each a valid kind, none the
/// kind itself or twice.
fn check_previous_kinds(
    cx: &Ctxt,
    cont: &Container<'_>,
    previous: &[syn::LitStr],
    tokens: &proc_macro2::TokenStream,
) {
    let Some(kind) = &cont.attrs.kind else {
        cx.error_spanned_by(
            tokens,
            "`previous_kinds` names earlier names of the `kind`: set `kind` too",
        );
        return;
    };
    let refusals = [
        (
            cont.attrs.parent.is_some() || cont.attrs.collection.is_some(),
            "`previous_kinds` on a kind in a collection is not supported: the kinds nested under it carry its tag too",
        ),
        (
            cont.attrs.row_key_template.is_some(),
            "`previous_kinds`: a `row_key` template lays the RowKey out without a kind tag, so a rename leaves the keys as they are (change `kind` alone)",
        ),
        (
            cont.attrs.projection_of.is_some(),
            "`previous_kinds`: a projection reads its entity's rows under the entity's previous kinds: declare them on the entity",
        ),
    ];
    for (refused, message) in refusals {
        if refused {
            cx.error_spanned_by(tokens, message);
            return;
        }
    }
    for (i, lit) in previous.iter().enumerate() {
        let value = lit.value();
        if value.is_empty() || value.len() > 64 || !value.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            cx.error_spanned_by(lit, "an entity kind is 1 to 64 ASCII letters and digits (it starts every RowKey, followed by `_`)");
        } else if value == kind.value() {
            cx.error_spanned_by(
                lit,
                "a previous kind is another name than the `kind` itself",
            );
        } else if previous[..i].iter().any(|earlier| earlier.value() == value) {
            cx.error_spanned_by(
                lit,
                format!("`{value}` is listed twice in `previous_kinds`"),
            );
        }
    }
}
