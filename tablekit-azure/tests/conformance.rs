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

fn blobs() -> tablekit_azure::AzureBlobs {
    tablekit_azure::AzureBlobs::new(azurite::account()).expect("a blob client for Azurite")
}

mod blob_store {
    use super::*;
    tablekit::blob_conformance_tests!(blobs());
}

mod typed {
    use std::sync::Arc;

    use tablekit::{BlobStore, TableBackend};

    use super::*;
    tablekit::typed_conformance_tests!(
        Arc::new(backend()) as Arc<dyn TableBackend>,
        Arc::new(blobs()) as Arc<dyn BlobStore>
    );
}
