use tablekit::TableEntity;
use tablekit::key::Verbatim;

#[derive(TableEntity)]
#[tablekit(table = "Imported")]
struct Imported {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    legacy_id: Verbatim,
    #[tablekit(row_key)]
    version: u32,
}

fn main() {}
