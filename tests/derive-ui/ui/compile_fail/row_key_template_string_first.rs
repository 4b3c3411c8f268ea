use tablekit::TableEntity;

// Nothing marks where a string ends inside a template but the text after
// it; only the last field may vary in width.
#[derive(TableEntity)]
#[tablekit(table = "Seeds", row_key = "{name}-{year}")]
struct Review {
    #[tablekit(partition_key)]
    department: String,
    #[tablekit(row_key)]
    name: String,
    #[tablekit(row_key)]
    year: u16,
}

fn main() {
    let _ = tablekit::schema::row_key_of(&Review { department: "d".into(), name: "n".into(), year: 1 });
}
