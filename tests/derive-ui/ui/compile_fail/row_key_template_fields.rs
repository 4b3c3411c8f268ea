use tablekit::TableEntity;
use tablekit::key::Padded;

// The template names `{employee}`, which is no row key field.
#[derive(TableEntity)]
#[tablekit(table = "Seeds", row_key = "{employee}_{year}")]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    id: Padded<6>,
    #[tablekit(row_key)]
    year: Padded<4>,
}

fn main() {}
