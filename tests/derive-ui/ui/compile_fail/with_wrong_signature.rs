use tablekit::TableEntity;

mod celsius {
    pub fn to_value(v: &f32) -> f64 {
        f64::from(*v)
    }
    pub fn from_value(v: f64) -> f32 {
        v as f32
    }
}

#[derive(TableEntity)]
#[tablekit(table = "Readings")]
struct Reading {
    #[tablekit(partition_key)]
    site: String,
    #[tablekit(with = celsius)]
    temperature: f32,
}

fn main() {}
