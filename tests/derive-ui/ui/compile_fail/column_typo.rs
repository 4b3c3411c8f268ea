use tablekit::TableEntity;

#[derive(TableEntity)]
#[tablekit(table = "Staff")]
struct Employee {
    #[tablekit(partition_key)]
    department: String,
    name: String,
    age: i32,
}

fn main() {
    let _ = Employee::columns().agee.ge(18);
}
