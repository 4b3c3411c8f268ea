///Typed filters on the fields of [`Employee`], from `Employee::columns()`.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
struct EmployeeColumns {
    ///Typed filters on `name` (stored as `name`).
    pub name: ::tablekit::__private::Column<String>,
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
            field_names: &["name", "tags", "level"],
            property_names: |
                __names: &mut ::tablekit::__private::Vec<::tablekit::__private::String>,
            | -> bool {
                let mut __complete = true;
                __names.push(::tablekit::__private::String::from("name"));
                __names.push(::tablekit::__private::String::from("tags"));
                __names.push(::tablekit::__private::String::from("level"));
                __complete
            },
            partitions: ::tablekit::__private::None,
            parts: &[],
            base: ::tablekit::__private::None,
            discriminator: ::tablekit::__private::None,
        };
        type Indexes = ();
        fn indexes() -> Self::Indexes {}
        fn member_slot(__name: &str) -> ::tablekit::__private::MemberSlot {
            match __name {
                "name" => ::tablekit::__private::MemberSlot::Value(0usize),
                "name@odata.type" => {
                    ::tablekit::__private::MemberSlot::Annotation(0usize)
                }
                "tags" => ::tablekit::__private::MemberSlot::Value(1usize),
                "tags@odata.type" => {
                    ::tablekit::__private::MemberSlot::Annotation(1usize)
                }
                "level" => ::tablekit::__private::MemberSlot::Value(2usize),
                "level@odata.type" => {
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
                name: ::tablekit::__private::Column::new("name"),
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
            >(__props, "name", &self.name)?;
            ::tablekit::__private::write_json::<
                _,
                Vec<String>,
            >(__props, "tags", &self.tags)?;
            ::tablekit::__private::write_with(
                __props,
                "level",
                codec::to_value(&self.level),
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
                name: ::tablekit::__private::take_property_at::<
                    String,
                    _,
                >(__props, 0usize, "name")?,
                tags: ::tablekit::__private::read_json::<
                    Vec<String>,
                    _,
                >(__props, "tags")?,
                level: ::tablekit::__private::read_with(
                    __props,
                    "level",
                    codec::from_value,
                )?,
                cache: <u8 as ::tablekit::__private::Default>::default(),
            })
        }
    }
};
