//! Running the `tablekit` program, for the tests that call it.

use std::process::Command;

/// Runs the program with `args`: its exit code, standard output and
/// standard error.
pub(crate) fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tablekit"))
        .args(args)
        .output()
        .expect("the program runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
