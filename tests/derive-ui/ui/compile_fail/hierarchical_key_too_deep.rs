use tablekit::TableEntity;

#[derive(TableEntity)]
struct Event {
    #[tablekit(partition_key)]
    tenant: String,
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(partition_key)]
    session: u32,
    #[tablekit(partition_key)]
    device: u32,
}

fn main() {}
