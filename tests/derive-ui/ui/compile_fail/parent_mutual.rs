use tablekit::TableEntity;

// Two kinds that name each other as parent: each one's key layout is built
// from the other's, which the compiler reports as a cycle (E0391) at the two
// derives. Two derives cannot see each other, so this stays the compiler's
// own message; `parent = Self` is caught on the token (parent_self.rs).
#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "A", collection, parent = B)]
struct A {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    id: u32,
}

#[derive(TableEntity)]
#[tablekit(table = "Shop", kind = "B", collection, parent = A)]
struct B {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    id: u32,
}

fn main() {}
