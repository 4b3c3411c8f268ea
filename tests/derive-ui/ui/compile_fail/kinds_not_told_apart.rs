use tablekit::{EntityKinds, TableEntity};

// Two kinds of rows another client writes, with the same keys and no kind
// in the RowKey: nothing tells a Payment row from an Invoice row.
#[derive(TableEntity)]
#[tablekit(table = "Ledger")]
struct Invoice {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
    amount: f64,
}

#[derive(TableEntity)]
#[tablekit(table = "Ledger")]
struct Payment {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
    amount: f64,
}

#[derive(EntityKinds)]
enum Ledger {
    Invoice(Invoice),
    Payment(Payment),
}

fn main() {}
