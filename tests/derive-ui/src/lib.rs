//! The compile-time tests of the derives live in `tests/ui.rs`; the cases in `ui/`.
