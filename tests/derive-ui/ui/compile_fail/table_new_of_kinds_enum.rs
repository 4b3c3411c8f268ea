use tablekit::{EntityKinds, Table, TableEntity};

#[derive(TableEntity)]
#[tablekit(table = "Ledger", kind = "INV")]
struct Invoice {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Ledger", kind = "PAY")]
struct Payment {
    #[tablekit(partition_key)]
    account: String,
    #[tablekit(row_key)]
    id: String,
}

#[derive(EntityKinds)]
enum Ledger {
    Invoice(Invoice),
    Payment(Payment),
}

fn main() {
    let _ledger: Table<Ledger> = Table::new(tablekit_mem::MemBackend::new());
}
