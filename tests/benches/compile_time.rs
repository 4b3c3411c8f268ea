//! Compile time of a crate with 50 `#[derive(TableEntity)]` types beside the
//! same crate with serde's derives, as a ratio from one run.
//!
//! `cargo bench -p tablekit-tests --bench compile_time`
//!
//! It writes two small crates under `target/compile-time/`, builds each once
//! (so their dependencies are compiled and cached), then times rebuilding only
//! the crate itself after touching it, five times each, and prints the
//! medians. Both crates share one target directory and the same dependency
//! versions as this workspace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TYPES: usize = 50;
const RUNS: usize = 5;

fn fields(tablekit: bool) -> String {
    let key = |attr: &str| {
        if tablekit {
            format!("    #[tablekit({attr})]\n")
        } else {
            String::new()
        }
    };
    format!(
        "{}    department: String,\n{}    id: u32,\n    name: String,\n    email: String,\n    age: i32,\n    salary: f64,\n    active: bool,\n    score: i64,\n    notes: Option<String>,\n    manager: Option<u32>,\n",
        key("partition_key"),
        key("row_key"),
    )
}

fn write_crate(dir: &Path, name: &str, workspace: &Path, tablekit: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    let deps = if tablekit {
        format!("tablekit = {{ path = {:?} }}", workspace.join("tablekit"))
    } else {
        "serde = { version = \"1\", features = [\"derive\"] }".to_owned()
    };
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\n{deps}\n\n[workspace]\n"
        ),
    )?;
    let mut src = String::from("#![allow(dead_code)]\n");
    for i in 0..TYPES {
        if tablekit {
            src.push_str(&format!("#[derive(tablekit::TableEntity)]\n#[tablekit(table = \"Table{i}\", kind = \"K{i}\")]\n"));
        } else {
            src.push_str("#[derive(serde::Serialize, serde::Deserialize)]\n");
        }
        src.push_str(&format!(
            "pub struct Entity{i} {{\n{}}}\n\n",
            fields(tablekit)
        ));
    }
    std::fs::write(dir.join("src/lib.rs"), src)
}

fn build(dir: &Path, target: &Path) -> Duration {
    let start = Instant::now();
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building {} failed", dir.display());
    start.elapsed()
}

fn median_rebuild(dir: &Path, target: &Path) -> Duration {
    build(dir, target);
    let lib = dir.join("src/lib.rs");
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            // Rewriting the file gives it a new mtime: only this crate rebuilds.
            let text = std::fs::read_to_string(&lib).expect("read");
            std::fs::write(&lib, text).expect("write");
            build(dir, target)
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`: do nothing then.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_owned();
    let root = workspace.join("target/compile-time");
    let target = root.join("target");
    let derived = root.join("tablekit_entities");
    let serde = root.join("serde_structs");
    write_crate(&derived, "tablekit_entities", &workspace, true).expect("write the tablekit crate");
    write_crate(&serde, "serde_structs", &workspace, false).expect("write the serde crate");
    let t = median_rebuild(&derived, &target);
    let s = median_rebuild(&serde, &target);
    println!("{TYPES} types, median of {RUNS} rebuilds of the crate alone (debug):");
    println!("  #[derive(TableEntity)]              {:>8.2?}", t);
    println!("  #[derive(Serialize, Deserialize)]   {:>8.2?}", s);
    println!(
        "  ratio                               {:>8.2}x",
        t.as_secs_f64() / s.as_secs_f64()
    );
}
