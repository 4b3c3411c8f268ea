use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Ledger", discriminator(property = "EntityType", value = "Payment"))]
struct Payment {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
    #[tablekit(rename = "EntityType")]
    entity_type: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Ledger", discriminator(property = "2x", value = "Refund"))]
struct Refund {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Ledger", discriminator(property = "EntityType"))]
struct Fee {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
}

fn main() {}
