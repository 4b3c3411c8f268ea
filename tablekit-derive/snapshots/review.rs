///Typed filters on the fields of [`Review`], from `Review::columns()`.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
pub struct ReviewColumns {
    ///Typed filters on `score` (stored as `Score`).
    pub score: ::tablekit::__private::Column<f64>,
    ///Typed filters on `comment` (stored as `Text`).
    pub comment: ::tablekit::__private::Column<Option<String>>,
}
const _: () = {
    #[automatically_derived]
    #[allow(clippy::unused_unit, clippy::let_unit_value)]
    impl ::tablekit::__private::TableEntity for Review
    where
        Self: ::core::marker::Send + ::core::marker::Sync + 'static,
    {
        type PartitionKey = String;
        type RowKey = (u32, u16);
        type Columns = ReviewColumns;
        const DESCRIPTOR: ::tablekit::__private::EntityDescriptor = ::tablekit::__private::EntityDescriptor {
            table: "Reviews",
            kind: ::tablekit::__private::Some("REV"),
            previous_kinds: &[],
            row_key_layout: ::tablekit::__private::RowKeyLayout::kind("REV"),
            version: 2u32,
            min_version: 2u32,
            partition_key_fields: "department",
            row_key_fields: "employee, year",
            rows: ::tablekit::__private::None,
            kind_properties: true,
            checked_names: false,
            field_names: &["Score", "Text", "Tags"],
            property_names: |
                __names: &mut ::tablekit::__private::Vec<::tablekit::__private::String>,
            | -> bool {
                let mut __complete = true;
                __names.push(::tablekit::__private::String::from("Score"));
                __names.push(::tablekit::__private::String::from("Text"));
                __names.push(::tablekit::__private::String::from("Tags"));
                __complete
                    &= <Person as ::tablekit::__private::TableFields>::field_names(
                        "By_",
                        __names,
                    );
                __complete
            },
            partitions: ::tablekit::__private::None,
            parts: &[],
            base: ::tablekit::__private::None,
            discriminator: ::tablekit::__private::None,
        };
        type Indexes = ();
        fn indexes() -> Self::Indexes {}
        fn partition_key(&self) -> Self::PartitionKey {
            ::tablekit::__private::Clone::clone(&self.department)
        }
        fn row_key(&self) -> Self::RowKey {
            (
                ::tablekit::__private::Clone::clone(&self.employee),
                ::tablekit::__private::Clone::clone(&self.year),
            )
        }
        fn write_partition_key(&self, __out: &mut ::tablekit::__private::String) {
            const {
                ::core::assert!(
                    ! < String as ::tablekit::__private::KeyPart > ::FOLDED,
                    "a `CaseInsensitive` field is keyed case-folded and reads back so: it can be an index's value, not an entity's key (use `String`)"
                )
            };
            ::tablekit::__private::write_component::<
                String,
            >(&self.department, __out, true);
        }
        fn write_row_key(&self, __out: &mut ::tablekit::__private::String) {
            let __layout: &::tablekit::__private::RowKeyLayout = const {
                &<Self as ::tablekit::__private::TableEntity>::DESCRIPTOR.row_key_layout
            };
            const {
                ::core::assert!(
                    ! < u32 as ::tablekit::__private::KeyPart > ::LAST_ONLY,
                    "this key field's type can only be the last key field (its text has no end of its own)"
                )
            };
            const {
                ::core::assert!(
                    < Self as ::tablekit::__private::TableEntity > ::DESCRIPTOR
                    .row_key_layout.fits:: < u32 > (0usize, 2usize),
                    "in a RowKey template only the last key field may vary in width (a string): put it last, or give the fields before it fixed widths (integers, `Padded`, timestamps, UUIDs)"
                )
            };
            const {
                ::core::assert!(
                    ! < u32 as ::tablekit::__private::KeyPart > ::FOLDED,
                    "a `CaseInsensitive` field is keyed case-folded and reads back so: it can be an index's value, not an entity's key (use `String`)"
                )
            };
            __layout.write_tags(0usize, __out);
            ::tablekit::__private::write_component::<
                u32,
            >(&self.employee, __out, __layout.ends_key::<u32>(0usize, 2usize));
            const {
                ::core::assert!(
                    ! (< u16 as ::tablekit::__private::KeyPart > ::LAST_ONLY && < Self as
                    ::tablekit::__private::TableEntity > ::DESCRIPTOR.row_key_layout
                    .heads_collection()),
                    "this key field's type has no end of its own, so it cannot end the key of a kind that heads a `collection` (the keys of nested rows go on after it)"
                )
            };
            const {
                ::core::assert!(
                    ! (< u16 as ::tablekit::__private::KeyPart > ::LAST_ONLY && < u32 as
                    ::tablekit::__private::KeyPart > ::SEPARATOR ==
                    ::tablekit::__private::ORDERED_SEPARATOR),
                    "a `Verbatim` key field cannot follow an `Ordered` one"
                )
            };
            const {
                ::core::assert!(
                    ! < u16 as ::tablekit::__private::KeyPart > ::FOLDED,
                    "a `CaseInsensitive` field is keyed case-folded and reads back so: it can be an index's value, not an entity's key (use `String`)"
                )
            };
            __layout.write_tags(1usize, __out);
            ::tablekit::__private::write_component::<
                u16,
            >(&self.year, __out, __layout.ends_key::<u16>(1usize, 2usize));
            __layout.write_tags(2usize, __out);
        }
        fn columns() -> Self::Columns {
            ReviewColumns {
                score: ::tablekit::__private::Column::new("Score"),
                comment: ::tablekit::__private::Column::new("Text"),
            }
        }
        fn write_properties<
            __S: ::tablekit::__private::PropertySink + ?::core::marker::Sized,
        >(
            &self,
            __props: &mut __S,
        ) -> ::tablekit::__private::Result<(), ::tablekit::__private::Error> {
            ::tablekit::__private::write_property::<
                _,
                f64,
            >(__props, "Score", &self.score)?;
            ::tablekit::__private::write_property::<
                _,
                Option<String>,
            >(__props, "Text", &self.comment)?;
            ::tablekit::__private::write_json::<
                _,
                Vec<String>,
            >(__props, "Tags", &self.tags)?;
            <Person as ::tablekit::__private::TableFields>::write_fields(
                &self.reviewer,
                "By_",
                __props,
            )?;
            ::tablekit::__private::Ok(())
        }
        fn read_properties<
            __S: ::tablekit::__private::PropertySource + ?::core::marker::Sized,
        >(
            __pk: Self::PartitionKey,
            __rk: Self::RowKey,
            __props: &mut __S,
        ) -> ::tablekit::__private::Result<Self, ::tablekit::__private::Error> {
            let __pk0 = __pk;
            let (__rk0, __rk1) = __rk;
            ::tablekit::__private::Ok(Review {
                department: __pk0,
                employee: __rk0,
                year: __rk1,
                score: ::tablekit::__private::take_property_at::<
                    f64,
                    _,
                >(__props, 0usize, "Score")?,
                comment: match ::tablekit::__private::PropertySource::get(
                    __props,
                    "Text",
                ) {
                    ::tablekit::__private::None => {
                        <Option<String> as ::tablekit::__private::Default>::default()
                    }
                    ::tablekit::__private::Some(_) => {
                        ::tablekit::__private::take_property_at::<
                            Option<String>,
                            _,
                        >(__props, 1usize, "Text")?
                    }
                },
                tags: ::tablekit::__private::read_json::<
                    Vec<String>,
                    _,
                >(__props, "Tags")?,
                reviewer: <Person as ::tablekit::__private::TableFields>::read_fields(
                    "By_",
                    __props,
                )?,
                cache: <u8 as ::tablekit::__private::Default>::default(),
            })
        }
    }
};
