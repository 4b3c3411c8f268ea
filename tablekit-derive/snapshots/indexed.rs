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
        const TABLE: &'static str = "Staff";
        const KIND: ::tablekit::__private::Option<&'static str> = ::tablekit::__private::Some(
            "EMP",
        );
        const ROW_KEY_LAYOUT: ::tablekit::__private::RowKeyLayout = ::tablekit::__private::RowKeyLayout::kind(
            "EMP",
        );
        const VERSION: u32 = 1u32;
        const MIN_VERSION: u32 = 1u32;
        const PARTITION_KEY_FIELDS: &'static str = "department";
        const ROW_KEY_FIELDS: &'static str = "id";
        const WIDE: bool = false;
        const SHARDS: u16 = 1;
        const BUCKETS: ::tablekit::__private::Option<::tablekit::__private::Period> = ::tablekit::__private::None;
        const BUCKET_PROPERTY: ::tablekit::__private::Option<&'static str> = ::tablekit::__private::None;
        const BUCKET_IN_KEY: bool = false;
        const KIND_PROPERTIES: bool = true;
        const WRITABLE: bool = true;
        const CHECKED_NAMES: bool = true;
        const FIELD_NAMES: &'static [&'static str] = &[
            "email",
            "last_name",
            "first_name",
        ];
        const BLOB_FIELDS: &'static [::tablekit::__private::BlobField] = &[];
        type Indexes = EmployeeIndexes;
        fn indexes() -> Self::Indexes {
            EmployeeIndexes {
                email: ::tablekit::__private::Index::new(0usize),
                name: ::tablekit::__private::Index::new(1usize),
            }
        }
        const INDEXES: &'static [::tablekit::__private::IndexDef] = &[
            ::tablekit::__private::IndexDef {
                name: "email",
                layout: ::tablekit::__private::RowKeyLayout::kind("email"),
                unique: true,
                fields: "email",
                copy: ::tablekit::__private::None,
                list: false,
            },
            ::tablekit::__private::IndexDef {
                name: "name",
                layout: ::tablekit::__private::RowKeyLayout::kind("EMP.name").opened(),
                unique: false,
                fields: "last_name, first_name",
                copy: ::tablekit::__private::Some(&["email"]),
                list: false,
            },
        ];
        fn write_index_key(
            &self,
            __index: usize,
            __out: &mut ::tablekit::__private::String,
        ) {
            match __index {
                0usize => {
                    let __v0 = &self.email;
                    ::tablekit::__private::KeyArg::<
                        String,
                    >::write_laid_out(
                        &__v0,
                        &<Self as ::tablekit::__private::TableEntity>::INDEXES[0usize]
                            .layout,
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
                        &<Self as ::tablekit::__private::TableEntity>::INDEXES[1usize]
                            .layout,
                        __out,
                    )
                }
                _ => {}
            }
        }
        const REMOTE_INDEXES: &'static [::tablekit::__private::RemoteIndexDef] = &[];
        fn write_remote_index_key(
            &self,
            __index: usize,
            __out: &mut ::tablekit::__private::String,
        ) {
            match __index {
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
                    "a `CaseInsensitive` field is keyed in lower case and reads back so: it can be an index's value, not an entity's key (use `String`)"
                )
            };
            ::tablekit::__private::write_component::<
                String,
            >(&self.department, __out, true);
        }
        fn write_row_key(&self, __out: &mut ::tablekit::__private::String) {
            let __layout = &<Self as ::tablekit::__private::TableEntity>::ROW_KEY_LAYOUT;
            const {
                ::core::assert!(
                    ! (< u32 as ::tablekit::__private::KeyPart > ::LAST_ONLY && < Self as
                    ::tablekit::__private::TableEntity > ::ROW_KEY_LAYOUT
                    .heads_collection()),
                    "this key field's type has no end of its own, so it cannot end the key of a kind that heads a `collection` (the keys of nested rows go on after it)"
                )
            };
            const {
                ::core::assert!(
                    ! < u32 as ::tablekit::__private::KeyPart > ::FOLDED,
                    "a `CaseInsensitive` field is keyed in lower case and reads back so: it can be an index's value, not an entity's key (use `String`)"
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
        fn property_names(
            __names: &mut ::tablekit::__private::Vec<::tablekit::__private::String>,
        ) -> bool {
            let mut __complete = true;
            __names.push(::tablekit::__private::String::from("email"));
            __names.push(::tablekit::__private::String::from("last_name"));
            __names.push(::tablekit::__private::String::from("first_name"));
            __complete
        }
        fn write_properties<
            __S: ::tablekit::__private::PropertySink + ?::core::marker::Sized,
        >(
            &self,
            __props: &mut __S,
        ) -> ::tablekit::__private::Result<(), ::tablekit::__private::Error> {
            ::tablekit::__private::write_property(__props, "email", &self.email)?;
            ::tablekit::__private::write_property(
                __props,
                "last_name",
                &self.last_name,
            )?;
            ::tablekit::__private::write_property(
                __props,
                "first_name",
                &self.first_name,
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
