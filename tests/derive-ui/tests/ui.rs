//! Compile-time behaviour of the derives: every misuse is a clear error on the
//! offending token, and valid inputs compile (hygiene and lints included).
//!
//! Refresh the expected messages with `TRYBUILD=overwrite cargo test -p tablekit-derive-ui --test ui`
//! (the pinned toolchain keeps them stable).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/compile_fail/*.rs");
}
