//! The pieces of an entity's expansion, one per part of what it generates.

use super::*;

/// What the entity's descriptor is made of besides the container's
/// attributes: its keys, names and index part.
pub(super) struct Descriptor<'a, 'f> {
    pub(super) pk: &'a [&'f Field<'f>],
    pub(super) rk: &'a [&'f Field<'f>],
    pub(super) checked_names: bool,
    pub(super) field_names: &'a [&'f str],
    pub(super) names: &'a [TokenStream],
    pub(super) index_part: Option<TokenStream>,
}

/// The pieces of an entity's expansion, one per part of what it generates.
impl Expansion<'_> {
    /// The columns struct of an entity, and its `columns` method.
    pub(super) fn columns_fn(&self, columns_ident: &Ident) -> (TokenStream, TokenStream) {
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
    pub(super) fn properties_fns(
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
    pub(super) fn projection(&self) -> Option<&syn::Type> {
        self.cont
            .attrs
            .projection_of
            .as_ref()
            .map(|(entity, _)| entity)
    }

    /// A descriptor member taken from the projected entity's descriptor,
    /// or `own` for an entity.
    pub(super) fn entity_const(&self, name: TokenStream, own: TokenStream) -> TokenStream {
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
    pub(super) fn checked_names(&self) -> bool {
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
    pub(super) fn field_names(&self) -> Vec<&str> {
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
    pub(super) fn kind(&self) -> TokenStream {
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
    pub(super) fn row_key_layout(&self) -> TokenStream {
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
    pub(super) fn partitions(&self) -> TokenStream {
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
    pub(super) fn bucket_field(&self) -> Option<&Field<'_>> {
        self.cont.fields.iter().find(|f| f.bucket.is_some())
    }

    /// The change feed's part, when the kind records its changes.
    pub(super) fn changes_part(&self) -> Option<TokenStream> {
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
    pub(super) fn bucket_part(&self) -> Option<TokenStream> {
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

    /// The names of the encrypted fields' properties, as a part.
    pub(super) fn encrypted_part(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        let names: Vec<&String> = self
            .cont
            .fields
            .iter()
            .filter(|f| f.encrypted)
            .map(|f| &f.stored_name)
            .collect();
        (!names.is_empty()).then(|| quote!(&#tk::Encrypted { properties: &[#(#names),*] }))
    }

    /// The expiry part, with the check of the `expires` field's type.
    pub(super) fn expiry_part(&self) -> Option<TokenStream> {
        let tk = &self.tk;
        if let Some((seconds, _)) = &self.cont.attrs.time_to_live {
            return Some(quote!(&#tk::Expiry {
                property: #tk::LAST_WRITE_PROPERTY,
                time_to_live: #tk::Some(::core::time::Duration::from_secs(#seconds)),
            }));
        }
        let field = self.cont.fields.iter().find(|f| f.expires.is_some())?;
        let name = &field.stored_name;
        let ty = field.ty;
        let check = quote_spanned!(ty.span()=> { const fn __expiry_time<__T: #tk::ExpiryTime>() {} __expiry_time::<#ty>(); });
        Some(quote!(&#tk::Expiry { property: { #check #name }, time_to_live: #tk::None }))
    }

    /// The check of each offloaded field's type, and its part.
    pub(super) fn blob_part(&self) -> Option<TokenStream> {
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
                let sealed = f.encrypted;
                Some(quote!(#tk::BlobField { name: { #check #name }, always: #always, sealed: #sealed }))
            })
            .collect();
        (!blob_fields.is_empty()).then(|| quote!(&#tk::BlobFields { fields: &[#(#blob_fields),*] }))
    }

    /// The `EntityDescriptor` constant.
    pub(super) fn descriptor(&self, parts: Descriptor<'_, '_>) -> TokenStream {
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
            self.encrypted_part(),
            self.expiry_part(),
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
    pub(super) fn upgrade_span(tokens: &TokenStream) -> proc_macro2::Span {
        tokens
            .clone()
            .into_iter()
            .next()
            .map_or_else(proc_macro2::Span::call_site, |t| t.span())
    }

    /// A row of an older version is read as the older type, then
    /// converted.
    pub(super) fn upgrade_read(&self) -> Option<TokenStream> {
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
    pub(super) fn upgrade_checks(&self) -> Option<TokenStream> {
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
    pub(super) fn projection_checks(&self) -> Option<TokenStream> {
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
                // An encrypted field is marked so in both types: its column
                // in the entity is a `SealedColumn`.
                let column = if f.encrypted {
                    quote!(#tk::SealedColumn)
                } else {
                    quote!(#tk::Column<#ty>)
                };
                quote_spanned! {span=>
                    let _: #column = <#entity as #tk::TableEntity>::columns().#ident;
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
    pub(super) fn member_slot(&self, field_names: &[&str]) -> TokenStream {
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
    pub(super) fn bucketed_impl(&self, predicates: &[TokenStream]) -> Option<TokenStream> {
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
    pub(super) fn columns(
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
            // An encrypted field's column names it and has no filters: the
            // store cannot compare ciphertext.
            let column = if f.encrypted {
                quote!(#tk::SealedColumn)
            } else if matches!(f.role, Role::Series) {
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
                if f.encrypted {
                    quote_spanned!(span=> #field: #tk::SealedColumn::new(#name))
                } else if matches!(f.role, Role::Series) {
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
