//! # tablekit-azure
//!
//! The REST backend of [tablekit] for Azure Table Storage, Cosmos DB for Table
//! and Azurite — **in progress**. This release holds the wire pieces the
//! backend is built from, each tested against the captures in
//! `AZURE_TABLE.md`: connection strings ([`config`]), Shared Key and SAS
//! signing ([`auth`]), request paths with escaped keys ([`url`]), entity
//! group transactions in multipart/mixed ([`batch`]), error mapping onto
//! `tablekit::Error` ([`errors`]), and the retry, query and SAS-range
//! decisions ([`policy`]). The HTTP client that implements `TableBackend` and
//! `BlobStore` on top of them comes next.
//!
//! ```
//! use tablekit_azure::config::Account;
//! let account = Account::from_connection_string("UseDevelopmentStorage=true")?;
//! assert_eq!(account.name, "devstoreaccount1");
//! # Ok::<(), tablekit_azure::config::ConfigError>(())
//! ```

pub mod auth;
pub mod batch;
pub mod blobs;
pub mod client;
pub mod config;
pub mod errors;
pub mod policy;
pub mod url;

pub use blobs::AzureBlobs;
pub use client::AzureTables;
