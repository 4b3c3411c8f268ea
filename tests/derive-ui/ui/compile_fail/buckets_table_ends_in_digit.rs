use tablekit::TableEntity;

// A bucketed table's name gets the period's digits after it: it must end
// with a letter.
#[derive(TableEntity)]
#[tablekit(table = "Events2", kind = "EVT", buckets = "day")]
struct Event {
    #[tablekit(partition_key)]
    source: String,
    #[tablekit(row_key)]
    id: u32,
}

fn main() {}
