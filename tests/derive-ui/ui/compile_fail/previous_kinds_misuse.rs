use tablekit::TableEntity;

// No kind to have had earlier names.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", previous_kinds = ["OLD"])]
struct NoKind {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// A string, not a list.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", previous_kinds = "OLD")]
struct NotAList {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// The kind itself, a name twice, a bad name.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", previous_kinds = ["ITEM", "OLD", "OLD", "a_b"])]
struct BadNames {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

// A kind in a collection.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", collection, previous_kinds = ["OLD"])]
struct InCollection {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
}

fn main() {}
