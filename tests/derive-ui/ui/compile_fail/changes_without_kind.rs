use tablekit::TableEntity;

// A change feed's rows share the kind's partitions: the kind keeps them
// apart from its entities.
#[derive(TableEntity)]
#[tablekit(table = "Orders", changes)]
struct Order {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
}

// A projection writes as its entity does.
#[derive(TableEntity)]
#[tablekit(table = "Orders", kind = "ORDER", changes)]
struct Full {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
    total: i64,
}

#[derive(TableEntity)]
#[tablekit(projection_of = Full, changes)]
struct Keys {
    #[tablekit(partition_key)]
    customer: String,
    #[tablekit(row_key)]
    id: u32,
}

fn main() {}
