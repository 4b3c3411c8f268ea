const _: () = {
    #[automatically_derived]
    impl ::tablekit::__private::TableFields for Person {
        fn field_names(
            __prefix: &str,
            __names: &mut ::tablekit::__private::Vec<::tablekit::__private::String>,
        ) -> bool {
            let mut __complete = true;
            __names
                .push(
                    ::tablekit::__private::String::from(
                        &::tablekit::__private::join(__prefix, "name"),
                    ),
                );
            __names
                .push(
                    ::tablekit::__private::String::from(
                        &::tablekit::__private::join(__prefix, "level"),
                    ),
                );
            __complete
        }
        fn write_fields<
            __S: ::tablekit::__private::PropertySink + ?::core::marker::Sized,
        >(
            &self,
            __prefix: &str,
            __props: &mut __S,
        ) -> ::tablekit::__private::Result<(), ::tablekit::__private::Error> {
            ::tablekit::__private::write_property::<
                _,
                String,
            >(__props, ::tablekit::__private::join(__prefix, "name"), &self.name)?;
            ::tablekit::__private::write_with(
                __props,
                ::tablekit::__private::join(__prefix, "level"),
                codec::to_value(&self.level),
            )?;
            ::tablekit::__private::Ok(())
        }
        fn read_fields<
            __S: ::tablekit::__private::PropertySource + ?::core::marker::Sized,
        >(
            __prefix: &str,
            __props: &mut __S,
        ) -> ::tablekit::__private::Result<Self, ::tablekit::__private::Error> {
            ::tablekit::__private::Ok(Person {
                name: ::tablekit::__private::take_property::<
                    String,
                    _,
                >(__props, &::tablekit::__private::join(__prefix, "name"))?,
                level: ::tablekit::__private::read_with(
                    __props,
                    &::tablekit::__private::join(__prefix, "level"),
                    codec::from_value,
                )?,
            })
        }
    }
};
