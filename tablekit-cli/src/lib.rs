//! # tablekit-cli
//!
//! The `tablekit` command: copies tables between any two stores, and
//! exports them to JSON Lines and imports them back. Stores are named by
//! connection strings, as [`tablekit_stores`] reads them:
//! `UseLocalStorage=./data`, `UseDevelopmentStorage=true` (Azurite), or an
//! Azure account's.
//!
//! ```text
//! tablekit copy   --from <conn> --to <conn> [--table T]... [--prefix P] [--filter F]
//!                 [--conflict fail|skip|overwrite] [--parallelism N] [--unpaced]
//!                 [--skip-damaged]
//!                 [--checkpoint FILE] [--container C]... [--queue Q]...
//! tablekit export --from <conn> --out DIR [--table T]... [--prefix P] [--filter F]
//!                 [--skip-damaged]
//! tablekit import --to <conn> --in DIR|FILE [--table T] [--conflict fail|skip|overwrite]
//!                 [--checkpoint FILE]
//! tablekit check  --store UseLocalStorage=<dir>
//! tablekit compact --store UseLocalStorage=<dir>
//! tablekit tables --from <conn> [--prefix P]
//! tablekit get    --from <conn> --table T --pk P --rk R [--format json|table|csv]
//! tablekit query  --from <conn> --table T [--filter F] [--select A,B] [--top N]
//!                 [--format json|table|csv]
//! tablekit infer  --from <conn> --table T [--sample N] [--kind-property P] [--out FILE]
//! tablekit studio --store <conn> [--port N] [--write]
//! tablekit --verbose <command> …
//! tablekit --version
//! ```
//!
//! - **copy** copies the named tables (all by default), blob containers and
//!   queues' messages (received once at the source, then made visible
//!   again), paced, resumable: with `--checkpoint`, the
//!   copy keeps where it stands in that file after every page, and a copy
//!   started again with the same file goes on from there.
//! - **export** writes one `<table>.jsonl` per table into a directory: one
//!   row per line, in the service's wire form with type annotations.
//! - **import** reads such files (the table is the file's name, or
//!   `--table`), resumable with `--checkpoint` as copy is.
//! - **check** reads a whole local store, read-only, and checks every
//!   row, blob and message against its checksum; it names each damaged
//!   piece and exits 1 if there is any. A store left by a killed process
//!   is checked as recovered, in memory, its files unchanged.
//! - `--skip-damaged` (copy, export) passes over the damaged rows of a
//!   local source, where each would stop the run, and names each on
//!   standard error (the source is opened read-only, without the check of
//!   its file's pages that refuses a damaged store at an open).
//! - **compact** makes a local store's file as short as its data (a store
//!   written for a while keeps free space in it), and says how much it
//!   gave back. No other program may have the store open.
//! - **tables** lists a store's tables; **get** prints one row by its
//!   keys; **query** prints the rows a filter matches (`--select`,
//!   `--top`). They print `--format json` (the default: a row per line, as
//!   `export` writes them), `table` (aligned columns) or `csv`, with no
//!   colour or progress, so their output pipes cleanly.
//! - **infer** prints Rust source for a table that already exists (see
//!   [`infer_source`]): a `#[derive(TableEntity)]` type per kind its rows
//!   show, and an `EntityKinds` enum when there are several; each type
//!   says what was seen. A property seen with two EDM types is named on
//!   standard error and left out of its type (a replace keeps it).
//! - **studio** serves a page on 127.0.0.1 (behind a random token in the
//!   address it prints) to look at a store: tables, rows by page, filters,
//!   each property's EDM type, tablekit's own rows named, change-feed
//!   consumers and their lag; with `--write`, edits and deletes guarded by
//!   the ETag of the row shown.
//! - A local store a command reads (`--from`, and the studio's `--store`
//!   without `--write`) is opened read-only and left as it was; none of
//!   them makes a store where its directory is missing.
//!
//! `--verbose` (`-v`, before or after the command) prints each operation
//! on a store as it ends, with its outcome and time, and each retry and
//! throttle, on standard error (tablekit's `tracing` spans and events, see
//! `tablekit::telemetry`); the progress bar stays whole.
//!
//! A row the target already holds with other properties stops the copy by
//! default (`--conflict fail`); `skip` keeps the target's, `overwrite`
//! replaces it. A row already there with the same properties (one an
//! interrupted run wrote) is never a conflict.
//!
//! Install it with `cargo install --path tablekit-cli`.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};
use indicatif::{ProgressBar, ProgressStyle};
use tablekit::Error;
use tablekit::copy::{
    Checkpoint, Conflict, Copier, copy_container, copy_queue, export_table, import_table,
};
use tablekit::filter::Filter;
use tablekit_stores::Stores;

mod infer;
mod read;
mod studio;
pub use infer::{Inferred, infer_source};

/// The forms of a store's connection string, for `--help`.
const STORE_FORMS: &str = "\
Stores (--from, --to) are connection strings:
  UseMemoryStorage=true                        in memory
  UseLocalStorage=./data                       a directory on this machine
  UseDevelopmentStorage=true                   Azurite on its default ports (TablePort=, BlobPort=, QueuePort= move them)
  AccountName=acme;AccountKey=...              an Azure storage account, with its key
  AccountName=acme;Authentication=Environment  signed in with Microsoft Entra ID: the environment's identity
                                               (also ManagedIdentity, WorkloadIdentity, ClientSecret, AzureCli)
  TableEndpoint=https://acme.table.cosmos.azure.com;Authentication=ManagedIdentity
                                               Cosmos DB for Table
  ...;SharedAccessSignature=sv=...             with a SAS
Beside an account's settings: Proxy=http://host:port (else HTTPS_PROXY, HTTP_PROXY, NO_PROXY
are read), NoProxy=hosts, CaCertificate=ca.pem, TrustPlatformRoots=true, SecondaryReads=true.";

/// `--conflict`: what to do with a row the target holds with other
/// properties.
fn conflict_arg() -> Arg {
    Arg::new("conflict")
        .long("conflict")
        .value_parser(["fail", "skip", "overwrite"])
        .default_value("fail")
        .help("a row the target holds with other properties: stop, keep it, or replace it")
}

/// `--table`, `--prefix` and `--filter`: which tables and rows to take.
fn selection_args() -> [Arg; 3] {
    [
        Arg::new("table")
            .long("table")
            .action(ArgAction::Append)
            .help("a table to take (repeatable; all by default)"),
        Arg::new("prefix")
            .long("prefix")
            .conflicts_with("table")
            .help("take the tables whose names start with this"),
        Arg::new("filter")
            .long("filter")
            .help("take only the rows this filter matches (the service's syntax: \"Price gt 10\")"),
    ]
}

/// `--skip-damaged`: a local source's damaged rows passed over and named.
fn skip_damaged_arg() -> Arg {
    Arg::new("skip-damaged")
        .long("skip-damaged")
        .action(ArgAction::SetTrue)
        .help("a local source: pass over its damaged rows (each is named), where they stop the run")
}

/// `--checkpoint`: where a resumable run keeps where it stands.
fn checkpoint_arg() -> Arg {
    Arg::new("checkpoint")
        .long("checkpoint")
        .value_parser(clap::value_parser!(PathBuf))
        .help("keep where the run stands in this file; a run with the same file resumes")
}

fn copy_command() -> Command {
    Command::new("copy")
        .about("Copies tables (and blob containers) from one store to another")
        .arg(Arg::new("from").long("from").required(true).help("the source's connection string"))
        .arg(Arg::new("to").long("to").required(true).help("the target's connection string"))
        .args(selection_args())
        .arg(conflict_arg())
        .arg(skip_damaged_arg())
        .arg(
            Arg::new("parallelism")
                .long("parallelism")
                .value_parser(clap::value_parser!(usize))
                .default_value("4")
                .help("tables at once, and transactions at once within one"),
        )
        .arg(
            Arg::new("unpaced")
                .long("unpaced")
                .action(ArgAction::SetTrue)
                .help("write as fast as the target takes it (not above the service's targets)"),
        )
        .arg(checkpoint_arg())
        .arg(
            Arg::new("container")
                .long("container")
                .action(ArgAction::Append)
                .help("a blob container to copy too (repeatable)"),
        )
        .arg(
            Arg::new("queue")
                .long("queue")
                .action(ArgAction::Append)
                .help("a queue whose messages to copy too (repeatable; each message is received once at the source and made visible again)"),
        )
        .arg(
            Arg::new("queue-visibility")
                .long("queue-visibility")
                .value_parser(clap::value_parser!(u64).range(1..=604_800))
                .default_value("300")
                .help("seconds a source message stays hidden while its queue is copied"),
        )
}

fn export_command() -> Command {
    Command::new("export")
        .about("Writes tables to <DIR>/<table>.jsonl, one row per line")
        .arg(
            Arg::new("from")
                .long("from")
                .required(true)
                .help("the source's connection string"),
        )
        .arg(
            Arg::new("out")
                .long("out")
                .required(true)
                .value_parser(clap::value_parser!(PathBuf))
                .help("the directory to write into (made if missing, in a directory that exists)"),
        )
        .args(selection_args())
        .arg(skip_damaged_arg())
}

fn check_command() -> Command {
    Command::new("check")
        .about("Reads a whole local store, read-only, and names every damaged row, blob or message")
        .arg(
            Arg::new("store")
                .long("store")
                .required(true)
                .help("the store's connection string: UseLocalStorage=<dir>"),
        )
}

fn compact_command() -> Command {
    Command::new("compact")
        .about("Makes a local store's file as short as its data")
        .arg(
            Arg::new("store")
                .long("store")
                .required(true)
                .help("the store's connection string: UseLocalStorage=<dir>"),
        )
}

fn import_command() -> Command {
    Command::new("import")
        .about("Reads JSON Lines files into tables")
        .arg(
            Arg::new("to")
                .long("to")
                .required(true)
                .help("the target's connection string"),
        )
        .arg(
            Arg::new("in")
                .long("in")
                .required(true)
                .value_parser(clap::value_parser!(PathBuf))
                .help("a directory of <table>.jsonl files, or one file"),
        )
        .arg(
            Arg::new("table")
                .long("table")
                .help("the table to import one file into (its file name by default)"),
        )
        .arg(conflict_arg())
        .arg(checkpoint_arg())
}

/// The command line's description.
pub fn command() -> Command {
    Command::new("tablekit")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Copies tables between stores, exports and imports them as JSON Lines, and reads them")
        .after_help(STORE_FORMS)
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(
            Arg::new("verbose")
                .long("verbose")
                .short('v')
                .global(true)
                .action(ArgAction::SetTrue)
                .help("say each operation on a store, each retry and each throttle, on standard error"),
        )
        .subcommand(copy_command())
        .subcommand(export_command())
        .subcommand(check_command())
        .subcommand(compact_command())
        .subcommand(import_command())
        .subcommand(read::tables_command())
        .subcommand(read::get_command())
        .subcommand(read::query_command())
        .subcommand(infer::infer_command())
        .subcommand(studio::studio_command())
}

/// Runs the command line `args` (the program's name first).
///
/// # Errors
/// A usage error, or the first error of a store or a file, said plainly.
pub async fn run<I, T>(args: I) -> Result<(), CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command()
        .try_get_matches_from(args)
        .map_err(CliError::Usage)?;
    if matches.get_flag("verbose") {
        verbose::install();
    }
    match matches.subcommand() {
        Some(("copy", m)) => copy(m).await,
        Some(("export", m)) => export(m).await,
        Some(("import", m)) => import(m).await,
        Some(("check", m)) => check(m).await,
        Some(("compact", m)) => compact(m).await,
        Some(("tables", m)) => read::tables(m).await,
        Some(("get", m)) => read::get(m).await,
        Some(("query", m)) => read::query(m).await,
        Some(("infer", m)) => infer::infer(m).await,
        Some(("studio", m)) => studio::studio(m).await,
        _ => unreachable_usage(),
    }
}

fn unreachable_usage() -> Result<(), CliError> {
    Err(CliError::Usage(command().error(
        clap::error::ErrorKind::MissingSubcommand,
        "name a command: copy, export, import, check, compact, tables, get, query, infer or studio",
    )))
}

/// What went wrong.
#[derive(Debug)]
pub enum CliError {
    /// The command line is not one this program takes.
    Usage(clap::Error),
    /// A store, a file or the input said no.
    Failed(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(e) => write!(f, "{e}"),
            CliError::Failed(message) => write!(f, "error: {message}"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<Error> for CliError {
    fn from(error: Error) -> CliError {
        CliError::Failed(error.to_string())
    }
}

fn failed(message: impl Into<String>) -> CliError {
    CliError::Failed(message.into())
}

/// Opens the stores of a connection string, naming the flag in the error.
fn open(m: &ArgMatches, flag: &str) -> Result<Stores, CliError> {
    let connection = m
        .get_one::<String>(flag)
        .map(String::as_str)
        .unwrap_or_default();
    let mut location = tablekit_stores::Location::parse(connection)
        .map_err(|e| failed(format!("--{flag}: {e}")))?;
    if flag == "from" && m.try_get_one::<bool>("skip-damaged").ok().flatten() == Some(&true) {
        match &mut location {
            // What a damaged store still holds: its file is not refused
            // for failing the check of its pages at the open.
            tablekit_stores::Location::Local(settings) => {
                settings.skip_damaged_rows = true;
                settings.verify_on_open = false;
            }
            _ => {
                return Err(failed(
                    "--skip-damaged: a local source's damaged rows are passed over; a service keeps no damaged rows to pass",
                ));
            }
        }
    }
    // A source (and the studio's store, unless it may write) is read,
    // never written: a local one is opened read-only, and is not changed.
    let writes = m.try_get_one::<bool>("write").ok().flatten() == Some(&true);
    let looked_at = flag == "from" || flag == "store";
    if looked_at
        && !writes
        && let tablekit_stores::Location::Local(settings) = &mut location
    {
        settings.read_only = true;
    }
    // Nor is it made: a directory that is not there is a typo, not an
    // empty store to read nothing from.
    if looked_at
        && let tablekit_stores::Location::Local(settings) = &location
        && !settings.dir.exists()
    {
        return Err(failed(format!(
            "--{flag}: the directory {} does not exist (no store there to read)",
            settings.dir.display()
        )));
    }
    Stores::at(location).map_err(|e| failed(format!("--{flag}: {e}")))
}

/// The local store `--store` names, for `command` (`check`, `compact`).
fn local_store(m: &ArgMatches, command: &str) -> Result<tablekit_stores::LocalSettings, CliError> {
    let connection = m
        .get_one::<String>("store")
        .map(String::as_str)
        .unwrap_or_default();
    let location = tablekit_stores::Location::parse(connection)
        .map_err(|e| failed(format!("--store: {e}")))?;
    match location {
        tablekit_stores::Location::Local(settings) => Ok(settings),
        _ => Err(failed(format!(
            "--store: {command} works on a local store (UseLocalStorage=<dir>); a service keeps its own"
        ))),
    }
}

/// `tablekit compact`: the store's file cut to its data; the lengths
/// before and after said.
async fn compact(m: &ArgMatches) -> Result<(), CliError> {
    let settings = local_store(m, "compact")?;
    let dir = settings.dir;
    if settings.read_only {
        return Err(failed(
            "--store: compact writes the store; leave ReadOnly out",
        ));
    }
    // A writable open makes a store that is missing: a typo must not.
    if !dir.join(tablekit_local::FILE_NAME).is_file() {
        return Err(failed(format!("--store: no store in {}", dir.display())));
    }
    let store =
        tablekit_local::LocalStorage::open(&dir).map_err(|e| failed(format!("--store: {e}")))?;
    let bar = spinner(&format!("compacting {}", dir.display()));
    let done = store.compact().await?;
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    finish(
        &bar,
        format!(
            "compacted {}: {:.1} MiB, from {:.1} MiB",
            dir.display(),
            mib(done.after),
            mib(done.before)
        ),
    );
    Ok(())
}

/// `tablekit check`: the whole store read, read-only; the damage named,
/// one line each, and a failure if there is any.
async fn check(m: &ArgMatches) -> Result<(), CliError> {
    let dir = local_store(m, "check")?.dir;
    // The check names each damaged piece itself: the open does not refuse
    // a file whose pages fail the engine's own check.
    let store = tablekit_local::LocalStorage::builder()
        .read_only(true)
        .verify_on_open(false)
        .open(&dir)
        .map_err(|e| failed(format!("--store: {e}")))?;
    let bar = spinner(&format!("checking {}", dir.display()));
    let report = store.check().await?;
    finish(
        &bar,
        format!(
            "{report}{}",
            rate(report.rows + report.blobs + report.messages, "pieces", &bar)
        ),
    );
    for damage in &report.damaged {
        println!("damaged: {damage}");
    }
    if report.is_clean() {
        Ok(())
    } else {
        Err(failed(format!(
            "{} damaged in {}. `copy --skip-damaged` copies what is left to a new store. A \
             damaged table row can also be got rid of in place, by its keys, in the store \
             opened with `VerifyOnOpen=false` (an open that checks the file's pages refuses \
             it): an unconditional delete removes it unread (`Table::delete_unconditionally`, \
             or `delete_entity` with `IfMatch::Any`); a conditional delete or update of it is \
             refused, since its version cannot be read",
            report.damaged.len(),
            dir.display()
        )))
    }
}

fn conflict_of(m: &ArgMatches) -> Conflict {
    match m.get_one::<String>("conflict").map(String::as_str) {
        Some("skip") => Conflict::Skip,
        Some("overwrite") => Conflict::Overwrite,
        _ => Conflict::Fail,
    }
}

fn filter_of(m: &ArgMatches) -> Result<Option<Filter>, CliError> {
    m.get_one::<String>("filter")
        .map(|text| Filter::parse(text).map_err(|e| failed(format!("--filter: {e}"))))
        .transpose()
}

/// How often a run whose output is not a terminal (cron, CI, a pipe) says
/// where it stands.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(10);

fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    verbose::around(&bar);
    if bar.is_hidden() {
        // No terminal to draw on: a plain line at a steady pace instead.
        let plain = bar.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(PLAIN_PROGRESS_EVERY);
                if plain.is_finished() {
                    return;
                }
                eprintln!("[{:>5} s] {}", plain.elapsed().as_secs(), plain.message());
            }
        });
    }
    bar
}

/// Ends a step with its summary: on the bar where there is a terminal, on
/// standard output where there is none (so a script's log keeps it).
/// `n` things over the time since `bar` started: `" (1234 rows/s)"`.
fn rate(n: u64, what: &str, bar: &ProgressBar) -> String {
    let seconds = bar.elapsed().as_secs_f64().max(0.001);
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let per_second = (n as f64 / seconds).round() as u64;
    format!(" ({per_second} {what}/s)")
}

/// `done` of `total` as a share: `" (42%)"`.
fn share(done: u64, total: u64) -> String {
    if total == 0 {
        return String::new();
    }
    format!(" ({}%)", done.saturating_mul(100) / total)
}

fn finish(bar: &ProgressBar, summary: String) {
    if bar.is_hidden() {
        bar.finish();
        println!("{summary}");
    } else {
        bar.finish_with_message(summary);
    }
}

/// `--verbose`: tablekit's spans and events (see `tablekit::telemetry`)
/// as lines on standard error, written around the progress bar so that it
/// stays whole on the terminal.
mod verbose {
    use std::io::Write as _;
    use std::sync::Mutex;

    use indicatif::ProgressBar;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::fmt::format::FmtSpan;
    use tracing_subscriber::prelude::*;

    /// The bar on the terminal now, if any.
    static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

    /// Lines go around `bar` from now on.
    pub(crate) fn around(bar: &ProgressBar) {
        *BAR.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
    }

    /// Operations (as each ends, with its outcome and time), retries and
    /// throttles, at INFO and above; the rest at WARN and above.
    pub(crate) fn install() {
        let filter = Targets::new()
            .with_target("tablekit", tracing::Level::INFO)
            .with_target("tablekit_azure", tracing::Level::INFO)
            .with_target("tablekit_local", tracing::Level::INFO)
            .with_default(tracing::Level::WARN);
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(|| Line(Vec::new()))
            .with_span_events(FmtSpan::CLOSE)
            .with_ansi(false)
            .with_filter(filter);
        // A subscriber set already (a program embedding this one) wins.
        let _ = tracing_subscriber::registry().with(layer).try_init();
    }

    /// One line, written whole when dropped: around the bar, if one is
    /// drawn.
    struct Line(Vec<u8>);

    impl std::io::Write for Line {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Drop for Line {
        fn drop(&mut self) {
            let write = || {
                let _ = std::io::stderr().lock().write_all(&self.0);
            };
            let bar = BAR.lock().unwrap_or_else(|e| e.into_inner()).clone();
            match bar.filter(|bar| !bar.is_finished() && !bar.is_hidden()) {
                Some(bar) => bar.suspend(write),
                None => write(),
            }
        }
    }
}

/// Reads a checkpoint file, if it exists.
fn read_checkpoint<T: serde::de::DeserializeOwned + Default>(
    path: Option<&PathBuf>,
) -> Result<T, CliError> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            failed(format!(
                "checkpoint {}: not one this program wrote: {e}",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(failed(format!("checkpoint {}: {e}", path.display()))),
    }
}

/// Writes a checkpoint file whole or not at all (a new file renamed over
/// the old, so a crash mid-write leaves the last one).
fn write_checkpoint<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    {
        let mut file = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut file, &bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

async fn copy(m: &ArgMatches) -> Result<(), CliError> {
    let from = open(m, "from")?;
    let to = open(m, "to")?;
    let checkpoint_file = m.get_one::<PathBuf>("checkpoint").cloned();
    let resume: Checkpoint = read_checkpoint(checkpoint_file.as_ref())?;
    let mut copier = Copier::new(from.tables.clone(), to.tables.clone())
        .stores(from.location().to_string(), to.location().to_string())
        .conflict(conflict_of(m))
        .parallelism(*m.get_one::<usize>("parallelism").unwrap_or(&4))
        .resume(resume);
    if m.get_flag("unpaced") {
        copier = copier.unpaced();
    }
    if let Some(filter) = filter_of(m)? {
        copier = copier.filter(filter);
    }
    if let Some(prefix) = m.get_one::<String>("prefix") {
        copier = copier.prefix(prefix.clone());
    }
    for table in m.get_many::<String>("table").into_iter().flatten() {
        copier = copier.table(table.clone());
    }
    let tables = copier.source_tables().await?;
    let bar = spinner(&format!(
        "copying {} table(s) from {} to {}",
        tables.len(),
        from.location(),
        to.location()
    ));
    let progress_bar = bar.clone();
    let table_count = tables.len();
    copier = copier.on_progress(move |p| {
        progress_bar.set_message(format!(
            "{} read{}, {} written, {} already there, {} skipped; {} of {table_count} tables done (last: {})",
            p.read,
            rate(p.read, "rows", &progress_bar),
            p.written,
            p.already_there,
            p.skipped,
            p.tables_done,
            p.table
        ));
    });
    if let Some(path) = checkpoint_file.clone() {
        let failures = std::sync::Arc::new(std::sync::Mutex::new(None));
        let seen = std::sync::Arc::clone(&failures);
        copier = copier.on_checkpoint(move |checkpoint| {
            if let Err(e) = write_checkpoint(&path, checkpoint) {
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
            }
        });
        let report = copier.run().await;
        if let Some(e) = failures.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(failed(format!(
                "checkpoint {}: {e}",
                checkpoint_file.unwrap_or_default().display()
            )));
        }
        finish_copy(&bar, report?, m, &from, &to).await
    } else {
        let report = copier.run().await?;
        finish_copy(&bar, report, m, &from, &to).await
    }
}

async fn finish_copy(
    bar: &ProgressBar,
    report: tablekit::copy::CopyReport,
    m: &ArgMatches,
    from: &Stores,
    to: &Stores,
) -> Result<(), CliError> {
    let mut blobs = 0;
    for container in m.get_many::<String>("container").into_iter().flatten() {
        bar.set_message(format!("copying the blob container {container}"));
        blobs += copy_container(&*from.blobs, &*to.blobs, container).await?;
    }
    let mut messages = 0;
    let visibility = Duration::from_secs(*m.get_one::<u64>("queue-visibility").unwrap_or(&300));
    for queue in m.get_many::<String>("queue").into_iter().flatten() {
        bar.set_message(format!("copying the messages of the queue {queue}"));
        messages += copy_queue(&*from.queues, &*to.queues, queue, visibility).await?;
    }
    finish(
        bar,
        format!(
            "copied {} table(s) in {} s: {} rows read{}, {} written, {} already there, {} skipped; {blobs} blob(s), {messages} message(s)",
            report.tables.len(),
            bar.elapsed().as_secs(),
            report.read,
            rate(report.read, "rows", bar),
            report.written,
            report.already_there,
            report.skipped
        ),
    );
    name_skipped(from);
    Ok(())
}

/// Names on standard error each damaged row a `--skip-damaged` run passed
/// over.
fn name_skipped(from: &Stores) {
    let skipped = from.skipped_rows();
    for row in &skipped {
        eprintln!("passed over a damaged row: {row}");
    }
    if !skipped.is_empty() {
        eprintln!(
            "{} damaged row(s) passed over; `tablekit check` names every damaged piece of the store",
            skipped.len()
        );
    }
}

async fn export(m: &ArgMatches) -> Result<(), CliError> {
    let from = open(m, "from")?;
    let out = m.get_one::<PathBuf>("out").cloned().unwrap_or_default();
    let filter = filter_of(m)?;
    let mut copier = Copier::new(from.tables.clone(), from.tables.clone());
    if let Some(prefix) = m.get_one::<String>("prefix") {
        copier = copier.prefix(prefix.clone());
    }
    for table in m.get_many::<String>("table").into_iter().flatten() {
        copier = copier.table(table.clone());
    }
    let tables = copier.source_tables().await?;
    // Made once the source answered: a store that cannot be reached leaves
    // no directory behind.
    make_out_dir(&out)?;
    for table in &tables {
        let path = out.join(format!("{table}.jsonl"));
        let file =
            std::fs::File::create(&path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
        let mut writer = std::io::BufWriter::new(file);
        let bar = spinner(&format!("exporting {table}"));
        let shown = bar.clone();
        let name = table.clone();
        let rows = export_table(
            &*from.tables,
            table,
            filter.as_ref(),
            &mut writer,
            &move |rows| {
                shown.set_message(format!("exporting {name}: {rows} rows"));
            },
        )
        .await?;
        writer
            .into_inner()
            .map_err(|e| failed(format!("{}: {}", path.display(), e.error())))?
            .sync_all()
            .map_err(|e| failed(format!("{}: {e}", path.display())))?;
        finish(
            &bar,
            format!(
                "exported {table}: {rows} rows{} to {}",
                rate(rows, "rows", &bar),
                path.display()
            ),
        );
    }
    name_skipped(&from);
    Ok(())
}

/// Makes the directory `--out` names where it is missing, in a directory
/// that exists, as the disk store makes its own: a path whose parent is
/// missing (a typo in it, say) is refused, and nothing is made.
fn make_out_dir(out: &Path) -> Result<(), CliError> {
    if out.as_os_str().is_empty() || out.is_dir() {
        return Ok(());
    }
    match std::fs::create_dir(out) {
        Ok(()) => Ok(()),
        // Made meanwhile by another program: as good.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && out.is_dir() => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(failed(format!(
            "--out {}: its parent directory does not exist (make it first)",
            out.display()
        ))),
        Err(e) => Err(failed(format!("--out {}: {e}", out.display()))),
    }
}

async fn import(m: &ArgMatches) -> Result<(), CliError> {
    let input = m.get_one::<PathBuf>("in").cloned().unwrap_or_default();
    let files = import_files(&input, m.get_one::<String>("table"))?;
    if files.is_empty() {
        return Err(failed(format!(
            "--in {}: no .jsonl file to import",
            input.display()
        )));
    }
    // What the import reads is checked before the target is opened: a typo
    // in --in, a file that is not text or a name no table may have makes no
    // store.
    let mut totals = Vec::with_capacity(files.len());
    for (table, path) in &files {
        tablekit::validate::table_name(table)
            .map_err(|e| failed(format!("{}: {e}", path.display())))?;
        totals.push(count_lines(path)?);
    }
    let checkpoint_file = m.get_one::<PathBuf>("checkpoint").cloned();
    let mut done: BTreeMap<String, u64> = read_checkpoint(checkpoint_file.as_ref())?;
    let conflict = conflict_of(m);
    let to = open(m, "to")?;
    for ((table, path), total) in files.into_iter().zip(totals) {
        let file =
            std::fs::File::open(&path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
        let skip = done.get(&table).copied().unwrap_or(0);
        let bar = spinner(&format!("importing {}", path.display()));
        let shown = bar.clone();
        let name = table.clone();
        let progress_file = checkpoint_file.clone();
        let base = done.clone();
        let counts = import_table(
            &*to.tables,
            &table,
            &mut BufReader::new(file),
            conflict,
            skip,
            &move |lines, counts| {
                shown.set_message(format!(
                    "importing {name}: line {lines} of {total}{}{}, {} written, {} already there, {} skipped",
                    share(lines, total),
                    rate(lines.saturating_sub(skip), "lines", &shown),
                    counts.written,
                    counts.already_there,
                    counts.skipped
                ));
                if let Some(path) = &progress_file {
                    let mut at = base.clone();
                    at.insert(name.clone(), lines);
                    // A checkpoint that cannot be kept only costs a rerun
                    // from the last one: the next write of it says so.
                    let _ = write_checkpoint(path, &at);
                }
            },
        )
        .await?;
        let lines = total;
        done.insert(table.clone(), lines);
        if let Some(path) = &checkpoint_file {
            write_checkpoint(path, &done)
                .map_err(|e| failed(format!("checkpoint {}: {e}", path.display())))?;
        }
        finish(
            &bar,
            format!(
                "imported {table}: {lines} lines{}, {} written, {} already there, {} skipped",
                rate(lines.saturating_sub(skip), "lines", &bar),
                counts.written,
                counts.already_there,
                counts.skipped
            ),
        );
    }
    Ok(())
}

/// The files an import reads, each with the table it goes to: the `.jsonl`
/// files of a folder (named after their tables), or the one file given;
/// `table` picks one of a folder's, or names the one file's table.
fn import_files(input: &Path, table: Option<&String>) -> Result<Vec<(String, PathBuf)>, CliError> {
    Ok(if input.is_dir() {
        let mut files = Vec::new();
        let entries = std::fs::read_dir(input)
            .map_err(|e| failed(format!("--in {}: {e}", input.display())))?;
        for entry in entries {
            let path = entry
                .map_err(|e| failed(format!("--in {}: {e}", input.display())))?
                .path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let table = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_owned();
                files.push((table, path));
            }
        }
        files.sort();
        if let Some(table) = table {
            files.retain(|(t, _)| t == table);
        }
        files
    } else {
        let table = match table {
            Some(t) => t.clone(),
            None => input
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned(),
        };
        vec![(table, input.to_path_buf())]
    })
}

fn count_lines(path: &Path) -> Result<u64, CliError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
    let mut lines = 0;
    for line in BufReader::new(file).lines() {
        line.map_err(|e| failed(format!("{}: {e}", path.display())))?;
        lines += 1;
    }
    Ok(lines)
}
