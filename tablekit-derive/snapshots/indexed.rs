///Typed filters on the fields of [`Employee`], from `Employee::columns()`.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
pub struct EmployeeColumns {
    ///Typed filters on `email` (stored as `email`).
    pub email: ::tablekit::__private::Column<String>,
    ///Typed filters on `last_name` (stored as `last_name`).
    pub last_name: ::tablekit::__private::Column<String>,
    ///Typed filters on `first_name` (stored as `first_name`).
    pub first_name: ::tablekit::__private::Column<String>,
}
///Typed handles on the indexes of [`Employee`], from `Employee::indexes()`.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
pub struct EmployeeIndexes {
    ///The unique index `email` on `email`.
    pub email: ::tablekit::__private::Index<
        Employee,
        String,
        ::tablekit::__private::Unique,
    >,
    ///The non-unique index `name` on `last_name`, `first_name`.
    pub name: ::tablekit::__private::Index<
        Employee,
        (String, String),
        ::tablekit::__private::NonUnique,
    >,
}
const _: () = {
    #[automatically_derived]
    #[allow(clippy::unused_unit, clippy::let_unit_value)]
    impl ::tablekit::__private::TableEntity for Employee
    where
        Self: ::core::marker::Send + ::core::marker::Sync + 'static,
    {
        type PartitionKey = String;
        type RowKey = u32;
        type Columns = EmployeeColumns;
        const DESCRIPTOR: ::tablekit::__private::EntityDescriptor = ::tablekit::__private::EntityDescriptor {
            table: "Staff",
            kind: ::tablekit::__private::Some("EMP"),
            previous_kinds: &[],
            row_key_layout: ::tablekit::__private::RowKeyLayout::kind("EMP"),
            version: 1u32,
            min_version: 1u32,
            partition_key_fields: "department",
            row_key_fields: "id",
            rows: ::tablekit::__private::None,
            kind_properties: true,
            checked_names: true,
            field_names: &["email", "last_name", "first_name"],
            property_names: |
                __names: &mut ::tablekit::__private::Vec<::tablekit::__private::String>,
            | -> bool {
                let mut __complete = true;
                __names.push(::tablekit::__private::String::from("email"));
                __names.push(::tablekit::__private::String::from("last_name"));
                __names.push(::tablekit::__private::String::from("first_name"));
                __complete
            },
            partitions: ::tablekit::__private::None,
            parts: &[
                ::tablekit::__private::Part::new(
                    &::tablekit::__private::IndexPart {
                        local: &[
                            ::tablekit::__private::IndexDef {
                                name: "email",
                                layout: ::tablekit::__private::RowKeyLayout::kind("email"),
                                unique: true,
                                fields: "email",
                                copy: ::tablekit::__private::None,
                                list: false,
                                sealed: false,
                            },
                            ::tablekit::__private::IndexDef {
                                name: "name",
                                layout: ::tablekit::__private::RowKeyLayout::kind(
                                        "EMP.name",
                                    )
                                    .opened(),
                                unique: false,
                                fields: "last_name, first_name",
                                copy: ::tablekit::__private::Some(&["email"]),
                                list: false,
                                sealed: false,
                            },
                        ],
                        remote: &[],
                    },
                ),
            ],
            base: ::tablekit::__private::None,
            discriminator: ::tablekit::__private::None,
        };
        type Indexes = EmployeeIndexes;
        fn indexes() -> Self::Indexes {
            EmployeeIndexes {
                email: ::tablekit::__private::Index::new(0usize),
                name: ::tablekit::__private::Index::new(1usize),
            }
        }
        fn write_index_key(
            &self,
            __index: usize,
            __out: &mut ::tablekit::__private::String,
        ) {
            match __index {
                0usize => {
                    let __v0 = &self.email;
                    ::tablekit::__private::write_index_value::<
                        String,
                    >(
                        __v0,
                        &const { ::tablekit::__private::RowKeyLayout::kind("email") },
                        __out,
                    )
                }
                1usize => {
                    const {
                        ::core::assert!(
                            ! < String as ::tablekit::__private::KeyPart > ::LAST_ONLY,
                            "the last field of a non-unique index cannot be a `Verbatim`: the entity's RowKey follows it"
                        )
                    };
                    let __v0 = &self.last_name;
                    let __v1 = &self.first_name;
                    ::tablekit::__private::KeyArg::<
                        (String, String),
                    >::write_laid_out(
                        &(__v0, __v1),
                        &const {
                            ::tablekit::__private::RowKeyLayout::kind("EMP.name")
                                .opened()
                        },
                        __out,
                    )
                }
                _ => {}
            }
        }
        fn member_slot(__name: &str) -> ::tablekit::__private::MemberSlot {
            match __name {
                "email" => ::tablekit::__private::MemberSlot::Value(0usize),
                "email@odata.type" => {
                    ::tablekit::__private::MemberSlot::Annotation(0usize)
                }
                "last_name" => ::tablekit::__private::MemberSlot::Value(1usize),
                "last_name@odata.type" => {
                    ::tablekit::__private::MemberSlot::Annotation(1usize)
                }
                "first_name" => ::tablekit::__private::MemberSlot::Value(2usize),
                "first_name@odata.type" => {
                    ::tablekit::__private::MemberSlot::Annotation(2usize)
                }
                _ => ::tablekit::__private::MemberSlot::Other,
            }
        }
        fn partition_key(&self) -> Self::PartitionKey {
            ::tablekit::__private::Clone::clone(&self.department)
        }
        fn row_key(&self) -> Self::RowKey {
            ::tablekit::__private::Clone::clone(&self.id)
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
                    ! (< u32 as ::tablekit::__private::KeyPart > ::LAST_ONLY && < Self as
                    ::tablekit::__private::TableEntity > ::DESCRIPTOR.row_key_layout
                    .heads_collection()),
                    "this key field's type has no end of its own, so it cannot end the key of a kind that heads a `collection` (the keys of nested rows go on after it)"
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
            >(&self.id, __out, __layout.ends_key::<u32>(0usize, 1usize));
            __layout.write_tags(1usize, __out);
        }
        fn columns() -> Self::Columns {
            EmployeeColumns {
                email: ::tablekit::__private::Column::new("email"),
                last_name: ::tablekit::__private::Column::new("last_name"),
                first_name: ::tablekit::__private::Column::new("first_name"),
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
                String,
            >(__props, "email", &self.email)?;
            ::tablekit::__private::write_property::<
                _,
                String,
            >(__props, "last_name", &self.last_name)?;
            ::tablekit::__private::write_property::<
                _,
                String,
            >(__props, "first_name", &self.first_name)?;
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
            let __rk0 = __rk;
            ::tablekit::__private::Ok(Employee {
                department: __pk0,
                id: __rk0,
                email: ::tablekit::__private::take_property_at::<
                    String,
                    _,
                >(__props, 0usize, "email")?,
                last_name: ::tablekit::__private::take_property_at::<
                    String,
                    _,
                >(__props, 1usize, "last_name")?,
                first_name: ::tablekit::__private::take_property_at::<
                    String,
                    _,
                >(__props, 2usize, "first_name")?,
            })
        }
    }
};
