use tablekit::{DateTime, TableEntity};

#[derive(TableEntity)]
#[tablekit(table = "Sessions", kind = "S")]
struct Session {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(expires, encrypted)]
    until: DateTime,
    #[tablekit(expires)]
    again: Option<DateTime>,
}

#[derive(TableEntity)]
#[tablekit(table = "Carts", kind = "C")]
struct Cart {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(expires)]
    until: String,
}


#[derive(TableEntity)]
#[tablekit(table = "Carts", kind = "K", time_to_live = "30 minutes please")]
struct Basket {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Carts", kind = "L", time_to_live = "30m")]
struct Trolley {
    #[tablekit(partition_key)]
    user: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(expires)]
    until: DateTime,
}

fn main() {}
