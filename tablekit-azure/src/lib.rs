//! # tablekit-azure
//!
//! The REST backend of [tablekit](https://docs.rs/tablekit) for Azure Table Storage, Cosmos DB for Table
//! and Azurite: [`AzureTables`] implements `tablekit::TableBackend`,
//! [`AzureBlobs`] implements `tablekit::BlobStore` and [`AzureQueues`]
//! implements `tablekit::QueueStore`, so the typed client and derived
//! entities run on it unchanged.
//!
//! - Sign-in with Microsoft Entra ID: any [`credential::TokenCredential`]
//!   (with the `azure-identity` feature, every credential of the Azure
//!   SDK's `azure_identity` through `identity::AzureIdentity`), and
//!   [`Account::with_credential`] to build a client from an endpoint and a
//!   credential alone. Tokens are cached, replaced before they run out and
//!   sent over `https://` only.
//! - Configuration from a connection string (`UseDevelopmentStorage=true`,
//!   account key, explicit endpoints, SAS, `Authentication=`) or from parts
//!   ([`config`]); timeouts, retries, proxy, trust and connections through
//!   [`config::ClientOptions`].
//! - Shared Key signing for tables, blobs and queues, table SAS generation, and
//!   clients built from a SAS ([`auth`]); a client with a range-scoped SAS
//!   refuses keys outside its range before sending.
//! - The network of a company: the proxy of `HTTPS_PROXY`/`HTTP_PROXY`/
//!   `NO_PROXY` or of the options ([`config::Proxy`]), the Mozilla roots or
//!   the platform's trust store or a private certificate authority
//!   ([`config::Trust`]), pooled connections that are closed before the
//!   server would close them and never written to once it has, and reads
//!   from the secondary region of a geo-redundant account
//!   ([`config::ClientOptions::secondary_reads`]).
//! - The shared validator runs before every request, and service errors map
//!   onto `tablekit::Error` ([`errors`]), so the same bad input gets the same
//!   typed error as on the in-memory backend, also where Azurite is laxer
//!   than the service.
//! - Against the emulator ([`config::Account::is_emulator`]), entities and
//!   queue messages are sent in ASCII alone, every other character
//!   escaped: Azurite stores a character of several bytes that falls
//!   between two reads of a request body as replacement characters, with
//!   no error ([`AzureTables::with_ascii_bodies`]).
//! - Transient failures are retried with exponential back-off and jitter on
//!   idempotent requests ([`policy`]). Every call to the service is a
//!   `tracing` span, and each HTTP attempt a child span with both request
//!   ids; retries and throttles are events (see `tablekit::telemetry`).
//!
//! ```
//! use tablekit_azure::{AzureTables, config::Account};
//! let account = Account::from_connection_string("UseDevelopmentStorage=true")?;
//! assert_eq!(account.name, "devstoreaccount1");
//! // Building a client sends nothing; requests go out when it is used.
//! let tables = AzureTables::new(account)?;
//! assert_eq!(tables.account().table_endpoint, "http://127.0.0.1:10002/devstoreaccount1");
//! # Ok::<(), tablekit_azure::config::ConfigError>(())
//! ```

mod ascii;
pub mod auth;
pub mod batch;
pub mod blobs;
pub mod client;
pub mod config;
pub mod credential;
pub mod errors;
pub mod identity;
mod net;
pub mod policy;
mod pool;
pub mod queues;
mod storage;
mod transport;
pub mod url;

pub use blobs::AzureBlobs;
pub use client::AzureTables;
pub use config::{Account, ConfigError};
pub use queues::AzureQueues;
