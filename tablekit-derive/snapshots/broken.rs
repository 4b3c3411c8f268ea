::core::compile_error! {
    "unknown tablekit field attribute `unknown`; expected one of `partition_key`, `row_key`, `rename`, `alias`, `skip`, `default`, `with`, `flatten`, `json`, `series`, `blob`, `offload`, `index`, `unique`, `bucket`, `encrypted`, `expires`"
}
::core::compile_error! {
    "missing partition key: mark one or more fields with `#[tablekit(partition_key)]`"
}
const _: () = {
    #[automatically_derived]
    impl ::tablekit::__private::TableEntity for Broken {
        type PartitionKey = ::tablekit::__private::UnknownKey;
        type RowKey = ::tablekit::__private::UnknownKey;
        type Columns = ();
        type Indexes = ();
        const DESCRIPTOR: ::tablekit::__private::EntityDescriptor = ::tablekit::__private::EntityDescriptor::new(
            "",
        );
        fn partition_key(&self) -> Self::PartitionKey {
            ::core::unreachable!()
        }
        fn row_key(&self) -> Self::RowKey {
            ::core::unreachable!()
        }
        fn write_partition_key(&self, _: &mut ::tablekit::__private::String) {}
        fn write_row_key(&self, _: &mut ::tablekit::__private::String) {}
        fn columns() {}
        fn indexes() {}
        fn write_properties<
            __S: ::tablekit::__private::PropertySink + ?::core::marker::Sized,
        >(
            &self,
            _: &mut __S,
        ) -> ::tablekit::__private::Result<(), ::tablekit::__private::Error> {
            ::core::unreachable!()
        }
        fn read_properties<
            __S: ::tablekit::__private::PropertySource + ?::core::marker::Sized,
        >(
            _: Self::PartitionKey,
            _: Self::RowKey,
            _: &mut __S,
        ) -> ::tablekit::__private::Result<Self, ::tablekit::__private::Error> {
            ::core::unreachable!()
        }
    }
};
