use tablekit::TableEntity;

// A year of daily counts does not fit one row (252 properties).
#[derive(TableEntity)]
struct Year {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(series)]
    daily: [u32; 365],
}

fn main() {}
