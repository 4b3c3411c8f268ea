use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Events", kind = "EVT", buckets = "day")]
struct Event {
    #[tablekit(partition_key)]
    source: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(bucket)]
    at: String,
}

fn main() {}
