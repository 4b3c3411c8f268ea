use tablekit::{Table, TableEntity, bucket::Buckets};

#[derive(TableEntity)]
#[tablekit(table = "Things")]
struct Plain {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

fn main() {
    let _ = Buckets::new(Table::<Plain>::new(tablekit_mem::MemBackend::new()));
}
