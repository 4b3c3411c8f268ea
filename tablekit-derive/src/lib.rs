//! The `#[derive(TableEntity)]` macro of tablekit; use it through the `tablekit`
//! crate, whose documentation describes it.
//!
//! This crate is a skeleton until the derive lands: it exports no macro yet.
