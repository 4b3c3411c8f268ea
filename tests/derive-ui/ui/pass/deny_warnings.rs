//! A public entity under the strictest lints: the derive adds no warning.
#![deny(warnings, missing_docs, unused, clippy::all)]

use tablekit::{EntityKinds, TableEntity};

/// An employee.
#[derive(TableEntity, Debug)]
#[tablekit(table = "Staff", kind = "EMP")]
pub struct Employee {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The id.
    #[tablekit(row_key)]
    pub id: u32,
    /// The name.
    pub name: String,
}

/// A department.
#[derive(TableEntity, Debug)]
#[tablekit(table = "Staff", kind = "DEPT")]
pub struct Department {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
}

/// Either.
#[derive(EntityKinds, Debug)]
pub enum StaffRow {
    /// An employee.
    Employee(Employee),
    /// A department.
    Department(Department),
}

fn main() {}
