use tablekit::{DateTime, TableEntity};

#[derive(TableEntity)]
#[tablekit(table = "Things", buckets = "week")]
struct Weekly {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Things")]
struct NoPeriod {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    #[tablekit(bucket)]
    at: DateTime,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", buckets = "day")]
struct Twice {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    #[tablekit(bucket)]
    at: DateTime,
    #[tablekit(bucket)]
    again: DateTime,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", buckets = "day")]
struct NotATime {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    #[tablekit(bucket)]
    at: String,
}

fn main() {}
