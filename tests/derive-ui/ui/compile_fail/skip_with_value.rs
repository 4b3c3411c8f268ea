use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Docs")]
struct Doc {
    #[tablekit(partition_key)]
    folder: String,
    #[tablekit(skip = true)]
    cache: u32,
}

fn main() {}
