use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Docs")]
struct Doc {
    #[tablekit(partition_key)]
    folder: String,
    #[tablekit(blob, offload)]
    body: Vec<u8>,
}

fn main() {}
