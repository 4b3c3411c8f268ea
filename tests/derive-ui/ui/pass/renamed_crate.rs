//! A re-exporting crate points the derive at its own path.
mod facade {
    pub use ::tablekit as kit;
}

extern crate tablekit as tk;

#[derive(tk::TableEntity)]
#[tablekit(crate = ::tk)]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
}

fn main() {
    let _ = facade::kit::schema::kind_prefix("X");
    let e = Employee { department: "d".into() };
    let _ = tk::schema::to_entity(&e);
}
