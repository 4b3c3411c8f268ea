use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Readings")]
struct Sensor {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(series)]
    value: f64,
    #[tablekit(series)]
    grid: Vec<Vec<f64>>,
}

fn main() {}
