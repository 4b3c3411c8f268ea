//! Sign-in with Microsoft Entra ID: the credential contract, the scopes the
//! services ask for, and the token cache every client shares.
//!
//! A [`TokenCredential`] gives an access token for a scope. tablekit asks
//! for one scope per service (see [`scope_for`]), keeps the token, sends it
//! as `Authorization: Bearer …`, and asks for a new one before the old one
//! runs out:
//!
//! - A token is used until half of its life, at most five minutes, is left.
//!   Then one request asks the credential for a new token while the others
//!   go on with the old one, which is still valid.
//! - Once a token has run out, every request waits for one new token:
//!   32 requests at that moment ask the credential once, not 32 times.
//! - A request the service refuses with 401 drops the token it carried, asks
//!   for a new one and is sent once more.
//! - Reading the cached token takes no lock: requests between two refreshes
//!   only load a pointer.
//!
//! With the `azure-identity` feature, every credential of the Azure SDK's
//! `azure_identity` crate (managed identity, workload identity, Azure CLI,
//! client secret) works as it is: see [`crate::identity`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, SystemTime};
//! use tablekit_azure::credential::{AccessToken, TokenCredential};
//!
//! /// A credential that reads its token from wherever the program keeps it.
//! #[derive(Debug)]
//! struct Fixed;
//!
//! #[async_trait::async_trait]
//! impl TokenCredential for Fixed {
//!     async fn get_token(&self, scope: &str) -> tablekit::Result<AccessToken> {
//!         assert_eq!(scope, "https://storage.azure.com/.default");
//!         Ok(AccessToken::new("eyJ0eXAi…", SystemTime::now() + Duration::from_secs(3600)))
//!     }
//! }
//!
//! let account = tablekit_azure::Account::with_credential(
//!     "https://acme.table.core.windows.net",
//!     Arc::new(Fixed),
//! )?;
//! assert_eq!(account.name, "acme");
//! # Ok::<(), tablekit_azure::ConfigError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use http::HeaderValue;
use tablekit_core::{Error, Result};

/// An OAuth 2 access token and when it stops being valid.
#[derive(Clone)]
pub struct AccessToken {
    token: String,
    expires_on: SystemTime,
}

impl AccessToken {
    /// A token that the service accepts until `expires_on`.
    pub fn new(token: impl Into<String>, expires_on: SystemTime) -> AccessToken {
        AccessToken {
            token: token.into(),
            expires_on,
        }
    }

    /// The token itself (a secret).
    pub fn secret(&self) -> &str {
        &self.token
    }

    /// When the token stops being valid.
    pub fn expires_on(&self) -> SystemTime {
        self.expires_on
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print secrets.
        f.debug_struct("AccessToken")
            .field("token", &"…")
            .field("expires_on", &self.expires_on)
            .finish()
    }
}

/// Something that gives access tokens: the contract between tablekit and
/// any sign-in method.
///
/// # Contract
/// - `get_token` returns a token for `scope` (one scope, such as
///   `https://storage.azure.com/.default`), with its real expiry.
/// - It may be slow (a network call): tablekit caches what it returns and
///   calls it again only shortly before the token runs out, or when the
///   service refused the token.
/// - A failure is [`Error::Credential`] when asking again will not help (no
///   identity here, refused), [`Error::Transient`] when it may.
#[async_trait]
pub trait TokenCredential: Send + Sync + fmt::Debug {
    /// A token for `scope`.
    async fn get_token(&self, scope: &str) -> Result<AccessToken>;
}

/// The scope of Azure Storage's tables, blobs and queues in the public
/// cloud.
pub const STORAGE_SCOPE: &str = "https://storage.azure.com/.default";
/// The scope of Cosmos DB (Cosmos DB for Table among its APIs) in the public
/// cloud.
pub const COSMOS_SCOPE: &str = "https://cosmos.azure.com/.default";

/// The scope a service at `endpoint` accepts tokens for.
///
/// Cosmos DB for Table (`*.table.cosmos.azure.com`) takes Cosmos DB's
/// scope; every other endpoint is Azure Storage's. The national clouds
/// (China, US Government) have scopes of their own, told by the endpoint's
/// suffix. An endpoint under another name (a private DNS zone, a custom
/// domain) takes its scope from [`ClientOptions::token_scope`](crate::config::ClientOptions::token_scope).
///
/// ```
/// use tablekit_azure::credential::scope_for;
/// assert_eq!(scope_for("https://acme.table.core.windows.net"), "https://storage.azure.com/.default");
/// assert_eq!(scope_for("https://acme.table.cosmos.azure.com:443/"), "https://cosmos.azure.com/.default");
/// assert_eq!(scope_for("https://acme.blob.core.chinacloudapi.cn"), "https://storage.azure.cn/.default");
/// ```
pub fn scope_for(endpoint: &str) -> &'static str {
    let host = crate::url::host_of(endpoint).to_ascii_lowercase();
    let cosmos = host.contains(".table.cosmos.") || host.contains(".table.cosmosdb.");
    match (cosmos, cloud_of(&host)) {
        (true, Cloud::China) => "https://cosmos.azure.cn/.default",
        (true, Cloud::UsGovernment) => "https://cosmos.azure.us/.default",
        (true, Cloud::Public) => COSMOS_SCOPE,
        (false, Cloud::China) => "https://storage.azure.cn/.default",
        (false, Cloud::UsGovernment) => "https://storage.azure.us/.default",
        (false, Cloud::Public) => STORAGE_SCOPE,
    }
}

enum Cloud {
    Public,
    China,
    UsGovernment,
}

fn cloud_of(host: &str) -> Cloud {
    if host.ends_with(".chinacloudapi.cn") || host.ends_with(".azure.cn") {
        Cloud::China
    } else if host.ends_with(".usgovcloudapi.net") || host.ends_with(".azure.us") {
        Cloud::UsGovernment
    } else {
        Cloud::Public
    }
}

/// A token ready to send, and when to stop using it.
struct Cached {
    /// `Bearer <token>`, marked sensitive.
    header: HeaderValue,
    /// From here on, one request asks for a new token.
    refresh_at: Instant,
    /// From here on, the token is not sent.
    expires_at: Instant,
}

/// The token of one credential for one scope, shared by every request of a
/// client (and its clones).
pub(crate) struct TokenCache {
    credential: Arc<dyn TokenCredential>,
    scope: String,
    /// Read without a lock on every request.
    current: ArcSwapOption<Cached>,
    /// Held by the one request that asks the credential.
    refreshing: tokio::sync::Mutex<()>,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("credential", &self.credential)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// How long before its end a token is last sent: the time a request may
/// take to reach the service, and clocks that disagree a little.
fn expiry_margin(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(30))
}

/// How long before its end a token is replaced: half its life, at most
/// five minutes (as the Azure SDKs do).
fn refresh_margin(lifetime: Duration) -> Duration {
    (lifetime / 2).min(Duration::from_secs(300))
}

impl TokenCache {
    pub(crate) fn new(credential: Arc<dyn TokenCredential>, scope: String) -> TokenCache {
        TokenCache {
            credential,
            scope,
            current: ArcSwapOption::empty(),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The `Authorization` value to send now.
    pub(crate) async fn header(&self) -> Result<HeaderValue> {
        let now = Instant::now();
        if let Some(cached) = self.current.load().as_deref() {
            if now < cached.refresh_at {
                return Ok(cached.header.clone());
            }
            if now < cached.expires_at {
                // Still valid: one request replaces it, the rest go on.
                let Ok(_refreshing) = self.refreshing.try_lock() else {
                    return Ok(cached.header.clone());
                };
                return match self.fetch().await {
                    Ok(header) => Ok(header),
                    // The old token still works; the next request tries again.
                    Err(_) => Ok(cached.header.clone()),
                };
            }
        }
        let _refreshing = self.refreshing.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(cached) = self.current.load().as_deref()
            && Instant::now() < cached.expires_at
        {
            return Ok(cached.header.clone());
        }
        self.fetch().await
    }

    /// Forgets `sent` if it is still the cached token: the service refused
    /// it, so the next request asks for a new one.
    pub(crate) fn refused(&self, sent: &HeaderValue) {
        let current = self.current.load();
        if current.as_deref().is_some_and(|c| c.header == *sent) {
            self.current
                .compare_and_swap(&*current, None::<Arc<Cached>>);
        }
    }

    async fn fetch(&self) -> Result<HeaderValue> {
        let token = self.credential.get_token(&self.scope).await?;
        let now = Instant::now();
        let lifetime = token
            .expires_on
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        if lifetime.is_zero() {
            return Err(Error::Credential {
                message: format!(
                    "the credential gave a token for {} that has already expired",
                    self.scope
                ),
            });
        }
        let mut header =
            HeaderValue::try_from(format!("Bearer {}", token.token)).map_err(|_| {
                Error::Credential {
                    message: "the credential gave a token that cannot be sent in a header".into(),
                }
            })?;
        header.set_sensitive(true);
        self.current.store(Some(Arc::new(Cached {
            header: header.clone(),
            refresh_at: now + lifetime - refresh_margin(lifetime),
            expires_at: now + lifetime - expiry_margin(lifetime),
        })));
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[derive(Debug)]
    struct Counting {
        calls: AtomicU32,
        lifetime: Duration,
    }

    #[async_trait]
    impl TokenCredential for Counting {
        async fn get_token(&self, _scope: &str) -> Result<AccessToken> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(AccessToken::new(
                format!("t{n}"),
                SystemTime::now() + self.lifetime,
            ))
        }
    }

    fn cache(lifetime: Duration) -> (Arc<Counting>, Arc<TokenCache>) {
        let credential = Arc::new(Counting {
            calls: AtomicU32::new(0),
            lifetime,
        });
        let cache = Arc::new(TokenCache::new(credential.clone(), STORAGE_SCOPE.into()));
        (credential, cache)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_share_one_fetch_and_a_refused_token_is_dropped() {
        let (credential, cache) = cache(Duration::from_secs(3600));
        let headers = futures::future::join_all((0..32).map(|_| {
            let cache = cache.clone();
            async move { cache.header().await.unwrap() }
        }))
        .await;
        assert_eq!(credential.calls.load(Ordering::SeqCst), 1);
        assert!(headers.iter().all(|h| h == "Bearer t1"));
        assert!(headers[0].is_sensitive());
        // A refusal of another token leaves the current one.
        cache.refused(&HeaderValue::from_static("Bearer t0"));
        assert_eq!(cache.header().await.unwrap(), "Bearer t1");
        cache.refused(&headers[0]);
        assert_eq!(cache.header().await.unwrap(), "Bearer t2");
        assert_eq!(credential.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_token_is_replaced_before_it_runs_out() {
        let (credential, cache) = cache(Duration::from_millis(400));
        assert_eq!(cache.header().await.unwrap(), "Bearer t1");
        // Past half its life: the next request replaces it.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(cache.header().await.unwrap(), "Bearer t2");
        assert_eq!(credential.calls.load(Ordering::SeqCst), 2);
    }

    /// The services take bearer tokens from these versions on: tables from
    /// 2019-02-02, blobs and queues from 2017-11-09.
    #[test]
    fn every_service_speaks_a_version_that_takes_tokens() {
        assert!(crate::client::SERVICE_VERSION >= "2019-02-02");
        assert!(crate::blobs::BLOB_VERSION >= "2017-11-09");
        assert!(crate::queues::QUEUE_VERSION >= "2017-11-09");
    }

    #[test]
    fn scopes_by_endpoint() {
        assert_eq!(
            scope_for("http://127.0.0.1:10002/devstoreaccount1"),
            STORAGE_SCOPE
        );
        assert_eq!(scope_for("https://a.queue.core.windows.net"), STORAGE_SCOPE);
        assert_eq!(
            scope_for("https://a.table.cosmosdb.azure.com"),
            COSMOS_SCOPE
        );
        assert_eq!(
            scope_for("https://a.table.cosmos.azure.us"),
            "https://cosmos.azure.us/.default"
        );
        assert_eq!(
            scope_for("https://a.table.core.usgovcloudapi.net"),
            "https://storage.azure.us/.default"
        );
        let token = AccessToken::new("secret", SystemTime::UNIX_EPOCH);
        assert!(!format!("{token:?}").contains("secret"));
    }
}
