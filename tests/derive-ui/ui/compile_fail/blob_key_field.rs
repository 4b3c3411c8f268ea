use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Docs")]
struct Doc {
    #[tablekit(partition_key, blob)]
    folder: String,
}

fn main() {}
