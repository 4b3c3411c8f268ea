//! The `tablekit` command (see the `tablekit_cli` crate documentation).

use std::process::ExitCode;

use tablekit_cli::CliError;

#[tokio::main]
async fn main() -> ExitCode {
    match tablekit_cli::run(std::env::args_os()).await {
        Ok(()) => ExitCode::SUCCESS,
        // Help and version print and exit 0; a bad command line exits 2.
        Err(CliError::Usage(e)) => e.exit(),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
