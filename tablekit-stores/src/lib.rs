//! # tablekit-stores
//!
//! One way to open [tablekit](https://docs.rs/tablekit)'s stores (tables, blobs and queues) from
//! configuration: a connection string names where the data lives, and the
//! program does not change with it.
//!
//! | connection string | stores |
//! | --- | --- |
//! | `UseLocalStorage=./data` | a directory on this machine ([`tablekit_local`]): kept across restarts, no server |
//! | `UseLocalStorage=./data;ReadOnly=true` | the same, read-only: nothing in the directory is made or changed, and every write fails |
//! | `UseLocalStorage=./data;CacheSize=16MiB` | the same, keeping at most 16 MiB of the store's file in memory (64 MiB when not said; bytes, or a number of `KiB`, `MiB` or `GiB`) |
//! | `UseLocalStorage=./data;SkipDamagedRows=true` | the same, its queries passing over damaged rows (kept in [`Stores::skipped_rows`]): to copy out what a damaged store still holds |
//! | `UseLocalStorage=./data;ReadOnly=true;VerifyOnOpen=false` | the same, read-only, without checking every page of the file at the open (which refuses a damaged file): to read what a damaged store still holds |
//! | `UseLocalStorage=./data;QuickRecovery=true` | the same: taken so that strings that say it still work, and changes nothing, as every open after a crash is quick now |
//! | `UseMemoryStorage=true` | in memory ([`tablekit_mem`]): gone when the program stops |
//! | `UseDevelopmentStorage=true` | the Azurite emulator on its default ports; `TablePort=20002`, `BlobPort`, `QueuePort` and `DevelopmentStorageProxyUri=http://host` name another |
//! | `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…` | an Azure storage account (or Cosmos DB for Table, with its `TableEndpoint`) |
//! | `AccountName=…;Authentication=Environment` | an Azure storage account, signed in with Microsoft Entra ID: the identity the environment provides (workload identity, a client secret, a managed identity, else the Azure CLI's sign-in); also `ManagedIdentity`, `WorkloadIdentity`, `ClientSecret`, `AzureCli` (the `azure-identity` feature) |
//!
//! An account's connection string may also say how to reach it:
//! `Proxy=http://proxy:3128` (and `NoProxy=` hosts; without them the
//! `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` variables are read, and
//! `Proxy=none` reads none), `CaCertificate=<PEM file>` and
//! `TrustPlatformRoots=true` (whom TLS trusts beside the Mozilla roots),
//! `SecondaryReads=true` (reads from the secondary region while the primary
//! fails) and `MaxConnectionsPerHost=<n>`.
//!
//! Settings are `key=value` pairs separated by `;`; keys are matched
//! without regard to case. A local directory is created if needed (but not
//! when read-only, and only in a directory that exists: a path whose parent
//! is missing is refused); a relative one is relative to the working
//! directory.
//!
//! ```
//! use tablekit::{Entity, TableBackend, TableBackendExt};
//! use tablekit_stores::Stores;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! # let connection = format!("UseLocalStorage={}", dir.path().display());
//! // connection = "UseLocalStorage=./data", from the program's settings
//! let stores = Stores::open(&connection)?;
//! println!("data in {}", stores.location());
//! stores.tables.create_table("orders").await?;
//! stores.tables.insert_entity("orders", &Entity::new("customer1", "order1")).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Typed tables take the stores' shared backend with [`Table::from_arc`]
//! (and a blob store for offloaded fields with `with_blob_store`):
//!
//! ```
//! use std::sync::Arc;
//! use tablekit::{Table, TableEntity};
//! use tablekit_stores::Stores;
//!
//! #[derive(TableEntity, Debug, Clone, PartialEq)]
//! #[tablekit(table = "Orders", kind = "ORD")]
//! struct Order {
//!     #[tablekit(partition_key)]
//!     customer: String,
//!     #[tablekit(row_key)]
//!     number: u32,
//!     total_cents: i64,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tablekit::Result<()> {
//! let stores = Stores::open("UseMemoryStorage=true")?;
//! let orders: Table<Order> = Table::from_arc(Arc::clone(&stores.tables), "Orders");
//! orders.create_if_missing().await?;
//! orders.insert(&Order { customer: "c1".into(), number: 7, total_cents: 1250 }).await?;
//! let read = orders.get("c1", 7).await?.expect("stored");
//! assert_eq!(read.total_cents, 1250);
//! # Ok(())
//! # }
//! ```
//!
//! [`Table::from_arc`]: https://docs.rs/tablekit/latest/tablekit/struct.Table.html#method.from_arc
//!
//! Each backend is a cargo feature (`mem`, `local`, `azure`, all on by
//! default); a connection string naming one that was left out is refused
//! with [`Error::Configuration`] saying which.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use tablekit_core::{BlobStore, Error, QueueStore, Result, TableBackend};

/// Where a connection string says the data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// In memory (`UseMemoryStorage=true`).
    Memory,
    /// In a local directory (`UseLocalStorage=<dir>`), opened as its
    /// settings say.
    Local(LocalSettings),
    /// At the Table, Blob and Queue services of an account or of the
    /// emulator: any other connection string, kept as given.
    Service(String),
}

/// A local directory and how it is opened: `UseLocalStorage=<dir>`, with
/// `ReadOnly`, `SkipDamagedRows` and `QuickRecovery` (each `true` or
/// `false`, `false` when not given), `VerifyOnOpen` (`true` when not
/// given) and `CacheSize` beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalSettings {
    /// The directory.
    pub dir: PathBuf,
    /// `ReadOnly=true`: nothing in the directory is made or changed, and
    /// every write fails (`tablekit_local`'s
    /// `LocalStorageBuilder::read_only`).
    pub read_only: bool,
    /// `QuickRecovery=true`: taken so that connection strings that say it
    /// still parse; it changes nothing, as every open of a local store after
    /// a crash takes milliseconds now (the store keeps a journal).
    pub quick_recovery: bool,
    /// `CacheSize=16MiB`: the most memory the store keeps of its file, in
    /// bytes (`tablekit_local`'s `LocalStorageBuilder::cache_size`; its
    /// default, 64 MiB, when `None`).
    pub cache_size: Option<usize>,
    /// `SkipDamagedRows=true`: queries pass over damaged rows and the
    /// store keeps their keys (`tablekit_local`'s
    /// `LocalStorageBuilder::skip_damaged_rows`, [`Stores::skipped_rows`]).
    pub skip_damaged_rows: bool,
    /// `VerifyOnOpen=false`: the open does not read the whole file to
    /// check its pages first (`tablekit_local`'s
    /// `LocalStorageBuilder::verify_on_open`; `true` when not given).
    pub verify_on_open: bool,
}

impl LocalSettings {
    /// `dir`, writable, without quick recovery.
    pub fn new(dir: impl Into<PathBuf>) -> LocalSettings {
        LocalSettings {
            dir: dir.into(),
            read_only: false,
            quick_recovery: false,
            cache_size: None,
            skip_damaged_rows: false,
            verify_on_open: true,
        }
    }
}

impl Location {
    /// Reads a connection string. Only the form is checked here; an
    /// account's settings are checked when it is opened.
    ///
    /// # Errors
    /// [`Error::Configuration`] for an empty string, a `UseMemoryStorage`
    /// other than `true`, an empty `UseLocalStorage`, or either beside other
    /// settings (but `ReadOnly`, `SkipDamagedRows`, `VerifyOnOpen` and
    /// `QuickRecovery` beside `UseLocalStorage`, each once, `true` or
    /// `false`, and `CacheSize`, once, a size).
    pub fn parse(connection: &str) -> Result<Location> {
        let parts: Vec<(&str, &str)> = connection
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .map_or((p, ""), |(k, v)| (k.trim(), v.trim()))
            })
            .collect();
        let config = |message: String| Error::Configuration { message };
        if parts.is_empty() {
            return Err(config("the connection string is empty".into()));
        }
        let named = |key: &str| parts.iter().find(|(k, _)| k.eq_ignore_ascii_case(key));
        let alone = |key: &str| {
            if parts.len() > 1 {
                Err(config(format!("`{key}` takes no other setting beside it")))
            } else {
                Ok(())
            }
        };
        // A misspelt key of this crate's own would otherwise be read as an
        // account's setting, and refused for a missing `AccountName`.
        for (key, _) in &parts {
            for own in ["UseMemoryStorage", "UseLocalStorage"] {
                if !key.eq_ignore_ascii_case(own) && close_to(key, own) {
                    return Err(config(format!(
                        "unknown setting `{key}`; did you mean `{own}`?"
                    )));
                }
            }
        }
        if let Some((key, value)) = named("UseMemoryStorage") {
            alone(key)?;
            if !value.eq_ignore_ascii_case("true") {
                return Err(config(format!(
                    "`{key}` cannot be {value:?}; it takes `true`"
                )));
            }
            return Ok(Location::Memory);
        }
        if let Some((key, value)) = named("UseLocalStorage") {
            if value.is_empty() {
                return Err(config(format!("`{key}` needs a directory: `{key}=./data`")));
            }
            let mut settings = LocalSettings::new(value);
            let mut seen: Vec<&str> = Vec::new();
            for (other, flag) in parts.iter().filter(|(k, _)| k != key) {
                if seen.iter().any(|s| s.eq_ignore_ascii_case(other)) {
                    return Err(config(format!("`{other}` is given twice")));
                }
                seen.push(other);
                if other.eq_ignore_ascii_case("CacheSize") {
                    settings.cache_size = Some(size(flag).ok_or_else(|| {
                        config(format!(
                            "`{other}` cannot be {flag:?}; it takes a size: bytes, or a number of KiB, MiB or GiB (`{other}=64MiB`)"
                        ))
                    })?);
                    continue;
                }
                let field = if other.eq_ignore_ascii_case("ReadOnly") {
                    &mut settings.read_only
                } else if other.eq_ignore_ascii_case("QuickRecovery") {
                    &mut settings.quick_recovery
                } else if other.eq_ignore_ascii_case("SkipDamagedRows") {
                    &mut settings.skip_damaged_rows
                } else if other.eq_ignore_ascii_case("VerifyOnOpen") {
                    &mut settings.verify_on_open
                } else {
                    return Err(config(format!(
                        "`{key}` takes no other setting beside it than `ReadOnly`, `CacheSize`, `SkipDamagedRows`, `VerifyOnOpen` and `QuickRecovery`, not `{other}`"
                    )));
                };
                *field = match flag.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(config(format!(
                            "`{other}` cannot be {flag:?}; it takes `true` or `false`"
                        )));
                    }
                };
            }
            return Ok(Location::Local(settings));
        }
        Ok(Location::Service(connection.to_owned()))
    }
}

/// The bytes of a size: a whole number of bytes, or of `KiB`, `MiB` or
/// `GiB` (case aside, a space before the unit allowed); `None` for anything
/// else, or a size past `usize`.
fn size(text: &str) -> Option<usize> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    // Digits only (`parse` would also take a sign); none is no number.
    let (number, unit) = text.split_at(digits);
    let number: usize = number.parse().ok()?;
    let shift = match unit.trim_start().to_ascii_lowercase().as_str() {
        "" => 0,
        "kib" => 10,
        "mib" => 20,
        "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}

/// Whether `key` is a misspelling of `known`: at most two edits apart,
/// case aside.
fn close_to(key: &str, known: &str) -> bool {
    strsim::levenshtein(&key.to_ascii_lowercase(), &known.to_ascii_lowercase()) <= 2
}

impl fmt::Display for Location {
    /// Where the data lives, for a program to print at start (never the
    /// account's key).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Memory => f.write_str("memory (gone when the program stops)"),
            Location::Local(settings) => {
                let dir = &settings.dir;
                let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
                write!(f, "the directory {}", shown.display())?;
                if settings.read_only {
                    f.write_str(", read-only")?;
                }
                if settings.quick_recovery {
                    f.write_str(", with quick recovery")?;
                }
                Ok(())
            }
            Location::Service(connection) => {
                let account = connection.split(';').find_map(|part| {
                    let (k, v) = part.split_once('=')?;
                    let k = k.trim();
                    (k.eq_ignore_ascii_case("AccountName")
                        || k.eq_ignore_ascii_case("TableEndpoint"))
                    .then(|| v.trim().to_owned())
                });
                match account {
                    Some(account) => write!(f, "the service at {account}"),
                    None if connection
                        .to_ascii_lowercase()
                        .contains("usedevelopmentstorage") =>
                    {
                        f.write_str("the storage emulator (Azurite)")
                    }
                    None => f.write_str("the service of the connection string"),
                }
            }
        }
    }
}

/// The three stores a program runs on, opened from one connection string.
/// Clones share the stores.
#[derive(Clone)]
pub struct Stores {
    /// The table store.
    pub tables: Arc<dyn TableBackend>,
    /// The blob store.
    pub blobs: Arc<dyn BlobStore>,
    /// The queue store.
    pub queues: Arc<dyn QueueStore>,
    location: Location,
    /// The local store, when the data lives in one.
    #[cfg(feature = "local")]
    local: Option<tablekit_local::LocalStorage>,
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

#[cfg_attr(
    all(feature = "mem", feature = "local", feature = "azure"),
    allow(dead_code)
)]
fn left_out(feature: &str) -> Error {
    Error::Configuration {
        message: format!(
            "this program was built without tablekit-stores' `{feature}` feature, which this connection string needs"
        ),
    }
}

impl Stores {
    /// Opens the stores a connection string names (see the [crate
    /// documentation](crate)).
    ///
    /// # Errors
    /// [`Error::Configuration`] for a connection string that cannot be read
    /// (it says which setting and why); [`Error::Storage`] if a local
    /// directory cannot be opened (another handle has it open, say).
    pub fn open(connection: &str) -> Result<Stores> {
        Stores::at(Location::parse(connection)?)
    }

    /// Opens the stores at `location`.
    ///
    /// # Errors
    /// As [`Stores::open`].
    pub fn at(location: Location) -> Result<Stores> {
        match &location {
            Location::Memory => Stores::memory(location),
            Location::Local(settings) => Stores::local(settings.clone(), location),
            Location::Service(connection) => Stores::service(connection.clone(), location),
        }
    }

    /// The connection string in the environment variable `var`, or
    /// `default` when it is not set.
    ///
    /// # Errors
    /// As [`Stores::open`], and [`Error::Configuration`] if the variable is
    /// not Unicode.
    pub fn from_env(var: &str, default: &str) -> Result<Stores> {
        match std::env::var(var) {
            Ok(connection) => Stores::open(&connection),
            Err(std::env::VarError::NotPresent) => Stores::open(default),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::Configuration {
                message: format!("`{var}` is not Unicode"),
            }),
        }
    }

    /// Where the data lives; its `Display` is for a program to print at
    /// start.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The damaged rows queries passed over, for a local store opened with
    /// `SkipDamagedRows=true` (none otherwise, and for other stores).
    #[cfg(feature = "local")]
    pub fn skipped_rows(&self) -> Vec<tablekit_local::SkippedRow> {
        self.local
            .as_ref()
            .map(tablekit_local::LocalStorage::skipped_rows)
            .unwrap_or_default()
    }

    #[cfg(feature = "mem")]
    fn memory(location: Location) -> Result<Stores> {
        Ok(Stores {
            tables: Arc::new(tablekit_mem::MemBackend::new()),
            blobs: Arc::new(tablekit_mem::MemBlobStore::new()),
            queues: Arc::new(tablekit_mem::MemQueueStore::new()),
            location,
            #[cfg(feature = "local")]
            local: None,
        })
    }

    #[cfg(not(feature = "mem"))]
    fn memory(_: Location) -> Result<Stores> {
        Err(left_out("mem"))
    }

    #[cfg(feature = "local")]
    fn local(settings: LocalSettings, location: Location) -> Result<Stores> {
        let mut builder = tablekit_local::LocalStorage::builder()
            .read_only(settings.read_only)
            .skip_damaged_rows(settings.skip_damaged_rows)
            .verify_on_open(settings.verify_on_open);
        if let Some(bytes) = settings.cache_size {
            builder = builder.cache_size(bytes);
        }
        let store = builder.open(settings.dir)?;
        Ok(Stores {
            tables: Arc::new(store.clone()),
            blobs: Arc::new(store.clone()),
            queues: Arc::new(store.clone()),
            location,
            local: Some(store),
        })
    }

    #[cfg(not(feature = "local"))]
    fn local(_: LocalSettings, _: Location) -> Result<Stores> {
        Err(left_out("local"))
    }

    #[cfg(feature = "azure")]
    fn service(connection: String, location: Location) -> Result<Stores> {
        use tablekit_azure::config::{Account, ClientOptions};
        let account = Account::from_connection_string(&connection)?;
        let options = ClientOptions::tables().with_connection_string(&connection)?;
        let blob_options = ClientOptions::blobs().with_connection_string(&connection)?;
        let tables = tablekit_azure::AzureTables::with_options(account.clone(), options.clone())?;
        let blobs = tablekit_azure::AzureBlobs::with_options(account.clone(), blob_options)?;
        let queues = tablekit_azure::AzureQueues::with_options(account, options)?;
        Ok(Stores {
            tables: Arc::new(tables),
            blobs: Arc::new(blobs),
            queues: Arc::new(queues),
            location,
            #[cfg(feature = "local")]
            local: None,
        })
    }

    #[cfg(not(feature = "azure"))]
    fn service(_: String, _: Location) -> Result<Stores> {
        Err(left_out("azure"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekit_core::TableBackendExt;

    #[test]
    fn connection_strings_name_their_stores() {
        assert_eq!(
            Location::parse("UseMemoryStorage=true").unwrap(),
            Location::Memory
        );
        assert_eq!(
            Location::parse(" uselocalstorage = ./data ;").unwrap(),
            Location::Local(LocalSettings::new("./data"))
        );
        assert_eq!(
            Location::parse("UseLocalStorage=./data;readonly=TRUE").unwrap(),
            Location::Local(LocalSettings {
                read_only: true,
                ..LocalSettings::new("./data")
            })
        );
        assert_eq!(
            Location::parse("ReadOnly=false;UseLocalStorage=./data").unwrap(),
            Location::Local(LocalSettings::new("./data"))
        );
        assert_eq!(
            Location::parse("UseLocalStorage=./data;QuickRecovery=true").unwrap(),
            Location::Local(LocalSettings {
                quick_recovery: true,
                ..LocalSettings::new("./data")
            })
        );
        assert_eq!(
            Location::parse("quickrecovery=True;UseLocalStorage=./d;ReadOnly=false").unwrap(),
            Location::Local(LocalSettings {
                quick_recovery: true,
                ..LocalSettings::new("./d")
            })
        );
        assert_eq!(
            Location::parse("UseLocalStorage=./d;ReadOnly=true;verifyonopen=FALSE").unwrap(),
            Location::Local(LocalSettings {
                read_only: true,
                verify_on_open: false,
                ..LocalSettings::new("./d")
            })
        );
        assert!(matches!(
            Location::parse("UseDevelopmentStorage=true").unwrap(),
            Location::Service(_)
        ));
        for bad in [
            "UseLocalStorage=./a;VerifyOnOpen=no",
            "UseLocalStorage=./a;VerifyOnOpen=false;VerifyOnOpen=true",
            "",
            " ; ",
            "UseMemoryStorage=yes",
            "UseLocalStorage=",
            "UseLocalStorage=./a;AccountName=x",
            "UseMemoryStorage=true;UseLocalStorage=./a",
            "UseLocalStorage=./a;ReadOnly=yes",
            "UseLocalStorage=./a;ReadOnly=true;AccountName=x",
            "UseLocalStorage=./a;QuickRecovery=1",
            "UseLocalStorage=./a;QuickRecovery=true;quickrecovery=false",
            "UseLocalStorage=./a;QuickRecover=true",
            "UseMemoryStorage=true;ReadOnly=true",
        ] {
            let err = Location::parse(bad).unwrap_err();
            assert!(
                matches!(err, Error::Configuration { .. }),
                "{bad:?}: {err:?}"
            );
        }
    }

    /// `CacheSize` takes bytes or a number of KiB, MiB or GiB, and nothing
    /// else: a size misread would be a store holding another amount of
    /// memory than the one said.
    #[test]
    fn a_cache_size_is_a_size() {
        let cache = |text: &str| match Location::parse(&format!("UseLocalStorage=./d;{text}")) {
            Ok(Location::Local(settings)) => Ok(settings.cache_size),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(cache("ReadOnly=false"), Ok(None));
        for (text, bytes) in [
            ("CacheSize=0", 0),
            ("CacheSize=1048576", 1 << 20),
            ("cachesize=16MiB", 16 << 20),
            ("CacheSize=64 kib", 64 << 10),
            ("CacheSize=2GiB", 2 << 30),
        ] {
            assert_eq!(cache(text), Ok(Some(bytes)), "{text}");
        }
        for text in [
            "CacheSize=",
            "CacheSize=-1",
            "CacheSize=+5",
            "CacheSize=1.5MiB",
            "CacheSize=16MB",
            "CacheSize=16M",
            "CacheSize=MiB",
            "CacheSize=99999999999999999999",
            "CacheSize=18446744073709551615GiB",
            "CacheSize=1MiB;CacheSize=2MiB",
        ] {
            let err = cache(text).unwrap_err();
            assert!(err.contains("CacheSize"), "{text}: {err}");
        }
    }

    #[tokio::test]
    async fn a_local_store_opens_with_its_cache_size() {
        let dir = tempfile::tempdir().unwrap();
        let connection = format!("UseLocalStorage={};CacheSize=0", dir.path().display());
        let stores = Stores::open(&connection).unwrap();
        stores.tables.create_table("kept").await.unwrap();
        let row = tablekit_core::Entity::new("p", "r").with("v", 7);
        stores.tables.insert_entity("kept", &row).await.unwrap();
        let got = stores
            .tables
            .get_entity("kept", "p", "r", &Default::default())
            .await
            .unwrap();
        assert_eq!(got.get("v"), Some(&tablekit_core::Value::Int32(7)));
    }

    #[test]
    fn a_bad_account_string_is_a_configuration_error() {
        let err = Stores::open("AccountName=x;AccountKey=not base64!").unwrap_err();
        assert!(
            matches!(&err, Error::Configuration { message } if message.contains("base64")),
            "{err:?}"
        );
        let err = Stores::open("nonsense").unwrap_err();
        assert!(matches!(&err, Error::Configuration { .. }), "{err:?}");
    }

    /// "Use the environment's Azure identity" is a whole connection string
    /// (nothing is asked of the identity until a request needs a token).
    #[test]
    fn the_environments_identity_is_a_connection_string() {
        let opened = Stores::open("AccountName=acme;Authentication=Environment");
        #[cfg(feature = "azure-identity")]
        {
            let stores = opened.expect("an account signed in with Entra ID");
            assert_eq!(stores.location().to_string(), "the service at acme");
        }
        #[cfg(not(feature = "azure-identity"))]
        assert!(
            matches!(&opened, Err(Error::Configuration { message }) if message.contains("azure-identity")),
            "{:?}",
            opened.err()
        );
        let err = Stores::open("AccountName=acme;Authentication=Magic").unwrap_err();
        assert!(
            matches!(&err, Error::Configuration { message } if message.contains("ManagedIdentity")),
            "{err:?}"
        );
        let err =
            Stores::open("AccountName=acme;AccountKey=AA==;Authentication=AzureCli").unwrap_err();
        assert!(matches!(&err, Error::Configuration { .. }), "{err:?}");
        let err = Stores::open("AccountName=acme;AccountKey=AA==;Proxy=ftp://p").unwrap_err();
        assert!(
            matches!(&err, Error::Configuration { message } if message.contains("Proxy")),
            "{err:?}"
        );
    }

    #[test]
    fn locations_print_without_keys() {
        let shown = Location::parse("AccountName=acme;AccountKey=c2VjcmV0")
            .unwrap()
            .to_string();
        assert_eq!(shown, "the service at acme");
        let shown = Location::parse("UseDevelopmentStorage=true")
            .unwrap()
            .to_string();
        assert_eq!(shown, "the storage emulator (Azurite)");
    }

    #[tokio::test]
    async fn a_local_store_keeps_its_data_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let connection = format!("UseLocalStorage={}", dir.path().display());
        {
            let stores = Stores::open(&connection).unwrap();
            stores.tables.create_table("kept").await.unwrap();
        }
        let stores = Stores::open(&connection).unwrap();
        let tables = stores
            .tables
            .list_tables(&Default::default())
            .await
            .unwrap();
        assert_eq!(tables.tables, ["kept"]);
        assert!(
            stores
                .location()
                .to_string()
                .contains(&*dir.path().to_string_lossy())
        );
    }

    /// `QuickRecovery=true` opens a store that writes and keeps its data,
    /// also read-only beside it; the location says so.
    #[tokio::test]
    async fn a_local_store_opens_with_quick_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let quick = format!(
            "UseLocalStorage={};QuickRecovery=true",
            dir.path().display()
        );
        {
            let stores = Stores::open(&quick).unwrap();
            assert!(
                stores
                    .location()
                    .to_string()
                    .ends_with(", with quick recovery"),
                "{}",
                stores.location()
            );
            stores.tables.create_table("kept").await.unwrap();
        }
        let read_only = format!("{quick};ReadOnly=true");
        let stores = Stores::open(&read_only).unwrap();
        let tables = stores
            .tables
            .list_tables(&Default::default())
            .await
            .unwrap();
        assert_eq!(tables.tables, ["kept"]);
        assert!(stores.tables.create_table("more").await.is_err());
    }
}
