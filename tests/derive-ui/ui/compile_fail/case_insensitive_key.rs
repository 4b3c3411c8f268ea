use tablekit::TableEntity;
use tablekit::key::CaseInsensitive;

// A folded value reads back in lower case: it can be indexed, not be a key.
#[derive(TableEntity)]
#[tablekit(table = "Members")]
struct Member {
    #[tablekit(partition_key)]
    club: String,
    #[tablekit(row_key)]
    email: CaseInsensitive,
}

fn main() {}
