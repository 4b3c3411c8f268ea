//! Generated code names only `::tablekit::__private` and `::core`: it must
//! compile when the prelude's names mean something else.
#![allow(dead_code, non_camel_case_types)]

struct Result;
struct Ok;
struct Err;
struct Option;
struct Some;
struct None;
struct String;
struct Vec;
struct Default;
struct Clone;
struct Send;
struct Sync;
struct Box;
mod core {}
mod tablekit_private {}

#[derive(::tablekit::TableEntity)]
#[tablekit(kind = "EMP")]
struct Employee {
    #[tablekit(partition_key)]
    department: ::std::string::String,
    #[tablekit(row_key)]
    id: u32,
    name: ::std::string::String,
    #[tablekit(default)]
    nickname: ::std::option::Option<::std::string::String>,
    #[tablekit(flatten)]
    address: Address,
}

#[derive(::tablekit::TableFields)]
struct Address {
    street: ::std::string::String,
}

fn main() {}
