use tablekit::{Table, TableEntity};

// A kind declared without `changes` has no change feed to read.
#[derive(TableEntity)]
#[tablekit(table = "Notes", kind = "NOTE")]
struct Note {
    #[tablekit(partition_key)]
    owner: String,
    #[tablekit(row_key)]
    id: u32,
}

fn feed(notes: &Table<Note>) {
    let _ = notes.changes().consumer("search");
}

fn main() {
    let _ = feed;
}
