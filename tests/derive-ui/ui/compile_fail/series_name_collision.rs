use tablekit::TableEntity;

#[derive(TableEntity)]
struct Meter {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(series)]
    hourly: Vec<u32>,
    hourly_total: u64,
}

fn main() {}
