// Types with a value the store cannot keep apart from another: an absent
// property is the only way to store `None`.
use std::collections::{BTreeMap, HashMap};
use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Gauges", kind = "GAUGE")]
struct Gauge {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(row_key)]
    day: u32,
    // `Some(None)` would read back as `None`.
    limit: Option<Option<i32>>,
    // A `None` element would read back missing.
    #[tablekit(series)]
    readings: Vec<Option<f64>>,
    #[tablekit(series)]
    labels: BTreeMap<String, Option<String>>,
    #[tablekit(series)]
    counts: HashMap<String, Option<i64>>,
    // An array keeps its `None` elements: its length says where they are.
    #[tablekit(series)]
    hourly: [Option<u32>; 24],
}

fn main() {}
