use tablekit::TableEntity;

// An index without its own tag would move to the new kind's.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", previous_kinds = ["PRD"])]
#[tablekit(index(name = "code"))]
struct Untagged {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(unique = "code")]
    code: String,
}

// An index kept elsewhere cannot move in the same transaction.
#[derive(TableEntity)]
#[tablekit(table = "Catalog", kind = "ITEM", previous_kinds = ["PRD"])]
#[tablekit(index(name = "code", tag = "code", table = "Codes"))]
struct Remote {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(index = "code")]
    code: String,
}

fn main() {}
