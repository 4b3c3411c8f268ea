//! What the service's measurement runs (`service_load`, `service_idle`)
//! share: their settings from the environment, their exit status, and the
//! CPU they used.

use std::process::ExitCode;

/// The number in the environment variable `name`, or `default` when it is
/// unset or not a number.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A run's exit status: success, or failure with its error printed.
pub fn exit_code(result: Result<(), Box<dyn std::error::Error>>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// This process's CPU time so far (user and system), in seconds, where the
/// system says (`/proc/self/stat` on Linux): what a run reports.
pub fn process_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Linux counts in clock ticks of 1/100 s.
    Some(ticks / 100.0)
}
