use tablekit::TableEntity;
use tablekit::key::{Ordered, Verbatim};

#[derive(TableEntity)]
#[tablekit(table = "Imported")]
struct Imported {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    region: Ordered,
    #[tablekit(row_key)]
    legacy_id: Verbatim,
}

fn main() {}
