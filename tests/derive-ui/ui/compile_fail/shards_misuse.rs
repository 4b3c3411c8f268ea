use tablekit::{EntityKinds, TableEntity};

#[derive(TableEntity)]
#[tablekit(table = "Things", shards = 1)]
struct TooFew {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", shards = 101)]
struct TooMany {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", kind = "E", shards = 4)]
struct Indexed {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
    #[tablekit(unique = "email")]
    email: String,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", kind = "P", collection, shards = 4)]
struct Parent {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", kind = "A", shards = 4)]
struct Sharded {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Things", kind = "B")]
struct Plain {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    rk: u32,
}

#[derive(EntityKinds)]
enum Both {
    A(Sharded),
    B(Plain),
}

fn main() {}
