use tablekit::TableEntity;
use tablekit::key::Verbatim;

// Nested rows continue the head's key after a separator; verbatim text has
// no end of its own, so it cannot head a collection.
#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "C", collection)]
struct Customer {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(row_key)]
    customer: Verbatim,
}

fn main() {
    let _ = tablekit::schema::row_key_of(&Customer { tenant: "t".into(), customer: "c".into() });
}
