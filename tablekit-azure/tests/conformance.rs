//! The whole conformance suite against a real Azurite that the test process
//! starts itself (see `azurite/mod.rs`): never skipped.

mod azurite;

use tablekit_azure::AzureTables;

fn backend() -> AzureTables {
    AzureTables::new(azurite::account()).expect("a client for Azurite")
}

mod tables {
    use super::*;
    tablekit::table_conformance_tests!(backend());
}
