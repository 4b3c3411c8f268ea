//! The Azure SDK's `azure_identity` credentials as tablekit
//! [`TokenCredential`]s, and the `Authentication=` setting of connection
//! strings. `AzureIdentity` needs the `azure-identity` cargo feature
//! (without it, `Authentication=` is refused with an error that says so).
//!
//! Any credential of `azure_identity` (or anything else that implements
//! `azure_core`'s `TokenCredential`) works through `AzureIdentity`:
//!
//! ```no_run
//! # #[cfg(feature = "azure-identity")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use tablekit_azure::{Account, AzureTables, identity::AzureIdentity};
//!
//! let credential = azure_identity::ManagedIdentityCredential::new(None)?;
//! let account = Account::with_credential(
//!     "https://acme.table.core.windows.net",
//!     Arc::new(AzureIdentity::new(credential)),
//! )?;
//! let tables = AzureTables::new(account)?;
//! # let _ = tables;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "azure-identity"))]
//! # fn main() {}
//! ```

use std::sync::Arc;

use crate::credential::TokenCredential;

/// The methods `Authentication=` names.
pub const METHODS: [&str; 5] = [
    "Environment",
    "ManagedIdentity",
    "WorkloadIdentity",
    "ClientSecret",
    "AzureCli",
];

/// The credential an `Authentication=<method>` setting names (with the
/// `ManagedIdentityClientId=` beside it, if any) and the environment
/// completes; `Err` says why there is none (the configuration turns it into
/// its error).
pub(crate) fn from_setting(
    method: &str,
    client_id: Option<&str>,
) -> Result<Arc<dyn TokenCredential>, String> {
    let Some(method) = METHODS.iter().find(|m| m.eq_ignore_ascii_case(method)) else {
        return Err(format!(
            "{method} (one of {} is needed)",
            METHODS.join(", ")
        ));
    };
    build(method, client_id.map(str::to_owned))
}

#[cfg(not(feature = "azure-identity"))]
fn build(method: &str, _client_id: Option<String>) -> Result<Arc<dyn TokenCredential>, String> {
    Err(format!(
        "{method} (signing in with Microsoft Entra ID from a connection string needs the `azure-identity` feature of tablekit-azure)"
    ))
}

#[cfg(feature = "azure-identity")]
pub use adapter::AzureIdentity;

#[cfg(feature = "azure-identity")]
use adapter::build;

#[cfg(feature = "azure-identity")]
mod adapter {
    use std::fmt;
    use std::sync::Arc;
    use std::time::SystemTime;

    use async_trait::async_trait;
    use azure_core::credentials::TokenCredential as AzureCredential;
    use azure_core::error::ErrorKind;
    use azure_identity::{
        AzureCliCredential, ClientSecretCredential, ManagedIdentityCredential,
        ManagedIdentityCredentialOptions, UserAssignedId, WorkloadIdentityCredential,
    };
    use tablekit_core::{Error, Result};

    use crate::credential::{AccessToken, TokenCredential};

    /// An `azure_core` credential (every credential of `azure_identity`)
    /// as a tablekit [`TokenCredential`]. Needs the `azure-identity`
    /// feature.
    #[derive(Clone)]
    pub struct AzureIdentity {
        inner: Arc<dyn AzureCredential>,
        /// For `Debug`: which credential.
        name: &'static str,
    }

    impl AzureIdentity {
        /// Wraps `credential`.
        pub fn new<C: AzureCredential + 'static>(credential: Arc<C>) -> AzureIdentity {
            AzureIdentity {
                inner: credential,
                name: std::any::type_name::<C>(),
            }
        }

        /// Wraps a credential already behind `dyn`.
        pub fn from_dyn(credential: Arc<dyn AzureCredential>) -> AzureIdentity {
            AzureIdentity {
                inner: credential,
                name: "dyn TokenCredential",
            }
        }
    }

    impl fmt::Debug for AzureIdentity {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_tuple("AzureIdentity").field(&self.name).finish()
        }
    }

    #[async_trait]
    impl TokenCredential for AzureIdentity {
        async fn get_token(&self, scope: &str) -> Result<AccessToken> {
            let token = self
                .inner
                .get_token(&[scope], None)
                .await
                .map_err(|e| match e.kind() {
                    // The identity endpoint could not be reached: may pass.
                    ErrorKind::Io => Error::Transient {
                        message: format!("{}: {e}", self.name),
                    },
                    _ => Error::Credential {
                        message: format!("{}: {e}", self.name),
                    },
                })?;
            Ok(AccessToken::new(
                token.token.secret(),
                SystemTime::from(token.expires_on),
            ))
        }
    }

    fn failed(method: &str, error: &azure_core::Error) -> String {
        format!("{method} ({error})")
    }

    fn var(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    /// The credential of `method` (one of [`super::METHODS`]).
    pub(super) fn build(
        method: &str,
        client_id: Option<String>,
    ) -> Result<Arc<dyn TokenCredential>, String> {
        let chosen = match method {
            "Environment" => environment_method(),
            other => other,
        };
        let credential = match chosen {
            "ManagedIdentity" => {
                let options = ManagedIdentityCredentialOptions {
                    user_assigned_id: client_id.map(UserAssignedId::ClientId),
                    ..Default::default()
                };
                AzureIdentity::new(
                    ManagedIdentityCredential::new(Some(options))
                        .map_err(|e| failed(chosen, &e))?,
                )
            }
            "WorkloadIdentity" => AzureIdentity::new(
                WorkloadIdentityCredential::new(None).map_err(|e| failed(chosen, &e))?,
            ),
            "ClientSecret" => {
                let missing = |name: &str| {
                    format!("ClientSecret (the environment variable {name} is not set)")
                };
                let tenant = var("AZURE_TENANT_ID").ok_or_else(|| missing("AZURE_TENANT_ID"))?;
                let client = var("AZURE_CLIENT_ID").ok_or_else(|| missing("AZURE_CLIENT_ID"))?;
                let secret =
                    var("AZURE_CLIENT_SECRET").ok_or_else(|| missing("AZURE_CLIENT_SECRET"))?;
                AzureIdentity::new(
                    ClientSecretCredential::new(&tenant, client, secret.into(), None)
                        .map_err(|e| failed(chosen, &e))?,
                )
            }
            _ => AzureIdentity::new(
                AzureCliCredential::new(None).map_err(|e| failed("AzureCli", &e))?,
            ),
        };
        Ok(Arc::new(credential))
    }

    /// What `Authentication=Environment` uses here: workload identity where
    /// a federated token file is given, a client secret where one is given,
    /// a managed identity where its endpoint is (App Service, Functions,
    /// Container Apps, Arc, Service Fabric, Cloud Shell), else the Azure CLI's
    /// sign-in. (A virtual machine's managed identity has no variable to
    /// tell it: name `ManagedIdentity` there.)
    fn environment_method() -> &'static str {
        if var("AZURE_FEDERATED_TOKEN_FILE").is_some() {
            "WorkloadIdentity"
        } else if var("AZURE_CLIENT_SECRET").is_some() {
            "ClientSecret"
        } else if var("IDENTITY_ENDPOINT").is_some() || var("MSI_ENDPOINT").is_some() {
            "ManagedIdentity"
        } else {
            "AzureCli"
        }
    }
}
