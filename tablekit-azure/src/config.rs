//! Where the account is and how to sign for it: connection strings and parts.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::credential::TokenCredential;

/// The emulator's well-known account name.
pub const DEV_ACCOUNT: &str = "devstoreaccount1";
/// The emulator's well-known account key (public; documented by Microsoft).
pub const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Why a configuration is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A `key=value` pair has no `=`.
    #[error("connection string part {0:?} is not `key=value`")]
    MalformedPart(String),
    /// A setting appears twice.
    #[error("connection string sets `{0}` twice")]
    Duplicate(String),
    /// A required setting is missing.
    #[error("connection string lacks `{0}`")]
    Missing(&'static str),
    /// The account key is not base64.
    #[error("the account key is not base64")]
    BadKey,
    /// A setting has a value it cannot take.
    #[error("`{key}` cannot be {value:?}")]
    BadValue {
        /// The setting.
        key: String,
        /// Its value.
        value: String,
    },
}

/// So that `?` works on a configuration in a function returning
/// `tablekit::Result`.
impl From<ConfigError> for tablekit_core::Error {
    fn from(error: ConfigError) -> tablekit_core::Error {
        tablekit_core::Error::Configuration {
            message: error.to_string(),
        }
    }
}

/// How a client talks HTTP: timeouts, retries, proxy, trust, connections.
/// Shared by [`AzureTables`](crate::AzureTables),
/// [`AzureBlobs`](crate::AzureBlobs) and [`AzureQueues`](crate::AzureQueues).
///
/// What a client reads from its environment: `HTTPS_PROXY`, `HTTP_PROXY`,
/// `ALL_PROXY` and `NO_PROXY` (in upper or lower case, read as curl reads
/// them), unless [`Proxy::Disabled`] or an explicit [`Proxy::Url`] is set;
/// with [`Trust::platform_roots`], the system's trust store (on Linux, the
/// files `SSL_CERT_FILE` and `SSL_CERT_DIR` name, else the distribution's
/// bundle). Nothing else.
///
/// ```
/// use std::time::Duration;
/// use tablekit_azure::config::{ClientOptions, Proxy, Trust};
/// let options = ClientOptions::tables()
///     .timeout(Duration::from_secs(5))
///     .connect_timeout(Duration::from_secs(1))
///     .proxy(Proxy::url("http://proxy.corp.example:3128", "localhost,.internal"))
///     .trust(Trust::mozilla().with_platform_roots())
///     .max_connections_per_host(64);
/// assert_eq!(options.request_timeout, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// The longest one attempt of a request may take, response body
    /// included; an attempt that takes longer fails as transient (and is
    /// retried if the request is idempotent).
    pub request_timeout: Duration,
    /// The longest a new connection may take to open.
    pub connect_timeout: Duration,
    /// How transient failures are retried.
    pub retry: crate::policy::RetryPolicy,
    /// Which proxy requests go through: by default the one the environment
    /// names.
    pub proxy: Proxy,
    /// Whose certificates TLS accepts: by default the Mozilla roots alone.
    pub trust: Trust,
    /// How long a pooled connection may stay idle before it is closed.
    /// `None` (the default) chooses by endpoint: 4 s for a server on this
    /// machine (the emulator, like every Node.js server, closes idle
    /// connections after 5 s), 50 s for the cloud (below the 60 to 75 s
    /// after which proxies, NAT gateways and load balancers commonly drop
    /// idle connections). A shorter `Keep-Alive: timeout=` from the server
    /// shortens it further, whatever is set here.
    pub idle_timeout: Option<Duration>,
    /// At most this many connections at once to a service (requests
    /// beyond it wait for one to be free): per client, its primary and
    /// secondary hosts together. `None` for no limit.
    pub max_connections_per_host: Option<usize>,
    /// Reads that fail on the primary endpoint with a transient error are
    /// tried on the secondary one (`<account>-secondary.<service>…`, or the
    /// `TableSecondaryEndpoint`/`BlobSecondaryEndpoint` given), for accounts
    /// with read-access geo-redundant storage. Writes never go there. Off by
    /// default.
    pub secondary_reads: bool,
    /// The scope to ask a token credential for, when the endpoint does not
    /// tell it (see [`crate::credential::scope_for`]).
    pub token_scope: Option<String>,
}

/// Which proxy a client's requests go through.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Proxy {
    /// The one `HTTPS_PROXY` (for `https://` endpoints), `HTTP_PROXY` (for
    /// `http://` ones) or `ALL_PROXY` names, except for the hosts
    /// `NO_PROXY` lists; none when they are not set. The default.
    #[default]
    Environment,
    /// No proxy, whatever the environment says.
    Disabled,
    /// This proxy for every request, except for the hosts `no_proxy` lists
    /// (as `NO_PROXY` does: `localhost,.corp.example,10.0.0.0/8`).
    Url {
        /// `http://[user:password@]host:port`: an HTTP proxy; `https://`
        /// endpoints are reached through a CONNECT tunnel, and credentials
        /// in the URL are sent as `Proxy-Authorization: Basic`.
        url: String,
        /// The hosts reached without the proxy.
        no_proxy: String,
    },
}

impl Proxy {
    /// [`Proxy::Url`].
    pub fn url(url: impl Into<String>, no_proxy: impl Into<String>) -> Proxy {
        Proxy::Url {
            url: url.into(),
            no_proxy: no_proxy.into(),
        }
    }
}

/// Whose certificates a client trusts for TLS.
///
/// By default the Mozilla root certificates alone, built into the program
/// (the `webpki-roots` crate), so a program trusts the same servers on
/// every machine. Behind a TLS-inspecting proxy, or for an endpoint signed
/// by a company's own certificate authority, add that authority's
/// certificate ([`Trust::with_pem`]) or trust the system's store
/// ([`Trust::with_platform_roots`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Trust {
    /// The Mozilla root certificates.
    pub mozilla_roots: bool,
    /// The system's trust store.
    pub platform_roots: bool,
    /// Further certificate authorities.
    pub extra: Vec<rustls_pki_types::CertificateDer<'static>>,
}

impl Default for Trust {
    fn default() -> Trust {
        Trust::mozilla()
    }
}

impl Trust {
    /// The Mozilla roots alone: the default.
    pub fn mozilla() -> Trust {
        Trust {
            mozilla_roots: true,
            platform_roots: false,
            extra: Vec::new(),
        }
    }

    /// No root at all: only what is added after.
    pub fn none() -> Trust {
        Trust {
            mozilla_roots: false,
            ..Trust::mozilla()
        }
    }

    /// Trusts the system's trust store as well.
    #[must_use]
    pub fn with_platform_roots(mut self) -> Trust {
        self.platform_roots = true;
        self
    }

    /// Trusts every certificate in `pem` as well (one or more `BEGIN
    /// CERTIFICATE` blocks).
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] when `pem` holds no certificate or one that
    /// cannot be read.
    pub fn with_pem(mut self, pem: &[u8]) -> Result<Trust, ConfigError> {
        use rustls_pki_types::pem::PemObject as _;
        let bad = |why: String| ConfigError::BadValue {
            key: "CaCertificate".into(),
            value: why,
        };
        let mut found = 0;
        for certificate in rustls_pki_types::CertificateDer::pem_slice_iter(pem) {
            self.extra
                .push(certificate.map_err(|e| bad(format!("unreadable PEM: {e}")))?);
            found += 1;
        }
        if found == 0 {
            return Err(bad("PEM with no certificate in it".into()));
        }
        Ok(self)
    }

    /// Trusts every certificate in the PEM file at `path` as well.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] when the file cannot be read or holds no
    /// certificate.
    pub fn with_pem_file(self, path: impl AsRef<std::path::Path>) -> Result<Trust, ConfigError> {
        let path = path.as_ref();
        let pem = std::fs::read(path).map_err(|e| ConfigError::BadValue {
            key: "CaCertificate".into(),
            value: format!("{}: {e}", path.display()),
        })?;
        self.with_pem(&pem)
    }
}

impl ClientOptions {
    /// The defaults for table requests: 30 s per attempt, 10 s to connect,
    /// [`RetryPolicy::default`](crate::policy::RetryPolicy::default), the
    /// environment's proxy, the Mozilla roots, idle connections closed as
    /// [`ClientOptions::idle_timeout`] says, no cap on connections, no
    /// secondary reads.
    pub fn tables() -> ClientOptions {
        ClientOptions {
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry: crate::policy::RetryPolicy::default(),
            proxy: Proxy::Environment,
            trust: Trust::mozilla(),
            idle_timeout: None,
            max_connections_per_host: None,
            secondary_reads: false,
            token_scope: None,
        }
    }

    /// The defaults for blob requests: as for tables, but 120 s per attempt,
    /// since a blob may be large.
    pub fn blobs() -> ClientOptions {
        ClientOptions {
            request_timeout: Duration::from_secs(120),
            ..ClientOptions::tables()
        }
    }

    /// Sets the per-attempt timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> ClientOptions {
        self.request_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientOptions {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry(mut self, retry: crate::policy::RetryPolicy) -> ClientOptions {
        self.retry = retry;
        self
    }

    /// Sets the proxy.
    #[must_use]
    pub fn proxy(mut self, proxy: Proxy) -> ClientOptions {
        self.proxy = proxy;
        self
    }

    /// Sets whom TLS trusts.
    #[must_use]
    pub fn trust(mut self, trust: Trust) -> ClientOptions {
        self.trust = trust;
        self
    }

    /// Sets how long a pooled connection may stay idle.
    #[must_use]
    pub fn idle_timeout(mut self, idle: Duration) -> ClientOptions {
        self.idle_timeout = Some(idle);
        self
    }

    /// Caps the connections to one host.
    #[must_use]
    pub fn max_connections_per_host(mut self, connections: usize) -> ClientOptions {
        self.max_connections_per_host = Some(connections);
        self
    }

    /// Turns reads from the secondary endpoint on or off.
    #[must_use]
    pub fn secondary_reads(mut self, on: bool) -> ClientOptions {
        self.secondary_reads = on;
        self
    }

    /// Sets the scope token credentials are asked for.
    #[must_use]
    pub fn token_scope(mut self, scope: impl Into<String>) -> ClientOptions {
        self.token_scope = Some(scope.into());
        self
    }

    /// These options with the client settings of a connection string
    /// applied: `Proxy=http://host:port` (with `NoProxy=` hosts beside it,
    /// or `Proxy=none`), `CaCertificate=<PEM file>`,
    /// `TrustPlatformRoots=true`, `SecondaryReads=true`,
    /// `MaxConnectionsPerHost=<n>`. Account settings are read by
    /// [`Account::from_connection_string`], which ignores these.
    ///
    /// ```
    /// use tablekit_azure::config::{ClientOptions, Proxy};
    /// let options = ClientOptions::tables().with_connection_string(
    ///     "AccountName=acme;AccountKey=AA==;Proxy=http://proxy:3128;NoProxy=.internal;SecondaryReads=true",
    /// )?;
    /// assert_eq!(options.proxy, Proxy::url("http://proxy:3128", ".internal"));
    /// assert!(options.secondary_reads);
    /// # Ok::<(), tablekit_azure::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] for a setting it cannot take.
    pub fn with_connection_string(mut self, text: &str) -> Result<ClientOptions, ConfigError> {
        let settings = settings_of(text)?;
        let get = |name: &str| setting(&settings, name);
        let bad = |key: &str, value: &str| ConfigError::BadValue {
            key: key.into(),
            value: value.into(),
        };
        let flag = |key: &str| -> Result<Option<bool>, ConfigError> {
            match get(key) {
                None => Ok(None),
                Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
                Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
                Some(v) => Err(bad(key, v)),
            }
        };
        match (get("Proxy"), get("NoProxy")) {
            (Some(none), _) if none.eq_ignore_ascii_case("none") => self.proxy = Proxy::Disabled,
            (Some(url), no_proxy) => self.proxy = Proxy::url(url, no_proxy.unwrap_or("")),
            (None, Some(no_proxy)) => return Err(bad("NoProxy", no_proxy)),
            (None, None) => {}
        }
        if let Some(path) = get("CaCertificate") {
            self.trust = self.trust.with_pem_file(path)?;
        }
        if let Some(on) = flag("TrustPlatformRoots")? {
            self.trust.platform_roots = on;
        }
        if let Some(on) = flag("SecondaryReads")? {
            self.secondary_reads = on;
        }
        if let Some(n) = get("MaxConnectionsPerHost") {
            let n = n
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("MaxConnectionsPerHost", n))?;
            self.max_connections_per_host = Some(n);
        }
        Ok(self)
    }

    /// Checks that the options can make a client: timeouts above zero, at
    /// least one attempt.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.request_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(ConfigError::BadValue {
                key: "timeout".into(),
                value: "0 s".into(),
            });
        }
        if self.retry.max_attempts == 0 {
            return Err(ConfigError::BadValue {
                key: "retry.max_attempts".into(),
                value: "0".into(),
            });
        }
        if self.max_connections_per_host == Some(0) {
            return Err(ConfigError::BadValue {
                key: "max_connections_per_host".into(),
                value: "0".into(),
            });
        }
        if self.idle_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::BadValue {
                key: "idle_timeout".into(),
                value: "0 s".into(),
            });
        }
        Ok(())
    }
}

/// The client settings a connection string may carry beside the account's
/// (read by [`ClientOptions::with_connection_string`]).
pub const CLIENT_SETTINGS: [&str; 6] = [
    "Proxy",
    "NoProxy",
    "CaCertificate",
    "TrustPlatformRoots",
    "SecondaryReads",
    "MaxConnectionsPerHost",
];

/// Every setting a connection string may hold (the account's, the
/// emulator's, the client's).
const KNOWN_SETTINGS: [&str; 20] = [
    "DefaultEndpointsProtocol",
    "AccountName",
    "AccountKey",
    "EndpointSuffix",
    "TableEndpoint",
    "BlobEndpoint",
    "QueueEndpoint",
    "FileEndpoint",
    "TableSecondaryEndpoint",
    "BlobSecondaryEndpoint",
    "QueueSecondaryEndpoint",
    "FileSecondaryEndpoint",
    "SharedAccessSignature",
    "Authentication",
    "ManagedIdentityClientId",
    "UseDevelopmentStorage",
    "DevelopmentStorageProxyUri",
    "TablePort",
    "BlobPort",
    "QueuePort",
];

/// A key that is none of the settings but nearly one of them is a typo: it
/// is refused with the setting it was probably meant to be, never ignored
/// (a setting left out changes where the data goes). Other keys are left
/// alone, as the Azure SDKs leave them.
fn check_spelling(settings: &[(String, String)]) -> Result<(), ConfigError> {
    let known = KNOWN_SETTINGS.iter().chain(CLIENT_SETTINGS.iter());
    let known: Vec<&str> = known.copied().collect();
    for (key, _) in settings {
        if known.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            continue;
        }
        let lower = key.to_ascii_lowercase();
        if let Some(meant) = known
            .iter()
            .map(|k| (strsim::levenshtein(&lower, &k.to_ascii_lowercase()), k))
            .filter(|(distance, _)| *distance <= 2)
            .min()
        {
            return Err(ConfigError::BadValue {
                key: key.clone(),
                value: format!("an unknown setting; did you mean `{}`?", meant.1),
            });
        }
    }
    Ok(())
}

/// The value of the setting `name` (its case aside), if it is there.
fn setting<'a>(settings: &'a [(String, String)], name: &str) -> Option<&'a str> {
    settings
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The `key=value` pairs of a connection string, trimmed, each key once.
fn settings_of(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut settings: Vec<(String, String)> = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| ConfigError::MalformedPart(part.to_owned()))?;
        // Compared as stored (trimmed), so `AccountName =b` cannot hide a
        // second `AccountName`.
        let key = key.trim();
        if settings.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
            return Err(ConfigError::Duplicate(key.to_owned()));
        }
        settings.push((key.to_owned(), value.trim().to_owned()));
    }
    check_spelling(&settings)?;
    Ok(settings)
}

/// How requests are authorized.
#[derive(Clone)]
#[non_exhaustive]
pub enum Credentials {
    /// Shared Key: the account key signs each request.
    SharedKey {
        /// The decoded account key.
        key: Vec<u8>,
    },
    /// A shared access signature (the query string, without `?`).
    Sas(String),
    /// Microsoft Entra ID: a token from this credential is sent as
    /// `Authorization: Bearer` (see [`crate::credential`]). Such a client
    /// never signs with a key, and talks only to `https://` endpoints.
    Token(Arc<dyn TokenCredential>),
}

impl PartialEq for Credentials {
    fn eq(&self, other: &Credentials) -> bool {
        match (self, other) {
            (Credentials::SharedKey { key: a }, Credentials::SharedKey { key: b }) => a == b,
            (Credentials::Sas(a), Credentials::Sas(b)) => a == b,
            // The same credential object.
            (Credentials::Token(a), Credentials::Token(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            _ => false,
        }
    }
}

impl Eq for Credentials {}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        match self {
            Credentials::SharedKey { .. } => f.write_str("SharedKey(…)"),
            Credentials::Sas(_) => f.write_str("Sas(…)"),
            Credentials::Token(credential) => write!(f, "Token({credential:?})"),
        }
    }
}

/// An account: its name, endpoints and credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Account {
    /// The account name.
    pub name: String,
    /// How requests are signed.
    pub credentials: Credentials,
    /// The Table service endpoint, without a trailing `/`
    /// (`https://acct.table.core.windows.net`, `http://127.0.0.1:10002/devstoreaccount1`).
    pub table_endpoint: String,
    /// The Blob service endpoint, without a trailing `/`.
    pub blob_endpoint: String,
    /// The Queue service endpoint, without a trailing `/`; `None` when a
    /// connection string with a SAS and no account name gives none.
    pub queue_endpoint: Option<String>,
    /// The Table service's secondary endpoint (read-access geo-redundant
    /// storage), read from when [`ClientOptions::secondary_reads`] is on.
    pub table_secondary_endpoint: Option<String>,
    /// The Blob service's secondary endpoint.
    pub blob_secondary_endpoint: Option<String>,
}

impl Account {
    /// An Azure account in the public cloud, signed with its key.
    pub fn with_key(name: &str, key_base64: &str) -> Result<Account, ConfigError> {
        let key = BASE64.decode(key_base64).map_err(|_| ConfigError::BadKey)?;
        Ok(Account::in_cloud(
            name,
            "https",
            "core.windows.net",
            Credentials::SharedKey { key },
        ))
    }

    /// An account whose endpoints follow the cloud's naming:
    /// `<protocol>://<name>.<service>.<suffix>`, and `<name>-secondary` for
    /// the secondary ones.
    fn in_cloud(name: &str, protocol: &str, suffix: &str, credentials: Credentials) -> Account {
        let at = |service: &str| format!("{protocol}://{name}.{service}.{suffix}");
        let secondary = |service: &str| format!("{protocol}://{name}-secondary.{service}.{suffix}");
        Account {
            name: name.to_owned(),
            credentials,
            table_endpoint: at("table"),
            blob_endpoint: at("blob"),
            queue_endpoint: Some(at("queue")),
            table_secondary_endpoint: Some(secondary("table")),
            blob_secondary_endpoint: Some(secondary("blob")),
        }
    }

    /// The account of a Table service endpoint, signed in with a token
    /// `credential` (Microsoft Entra ID): no key, no connection string.
    ///
    /// The account name is the endpoint's first label; its blob and queue
    /// endpoints are the same name under `blob.` and `queue.` for Azure
    /// Storage (`https://acme.table.core.windows.net`), and Azure Storage's
    /// public names for Cosmos DB for Table
    /// (`https://acme.table.cosmos.azure.com`), which has neither service.
    /// See [`crate::credential`] for an example.
    ///
    /// An endpoint that names its account in its path is the emulator's
    /// (Azurite over HTTPS, `https://127.0.0.1:10712/devstoreaccount1`):
    /// the account is that name, requests go as the emulator needs them
    /// ([`Account::is_emulator`]), and the blob and queue endpoints are the
    /// same host on the emulator's default ports, 10000 and 10001 (set
    /// [`Account::blob_endpoint`] and [`Account::queue_endpoint`] for
    /// others).
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] for an endpoint that is not `https://`, or
    /// that names no account: no path, and a host that is an IP address or
    /// a single label.
    pub fn with_credential(
        table_endpoint: &str,
        credential: Arc<dyn TokenCredential>,
    ) -> Result<Account, ConfigError> {
        let endpoint = table_endpoint.trim_end_matches('/');
        let named = crate::url::account_of(endpoint);
        let (name, path_style) = match named {
            Some(named) if endpoint.starts_with("https://") => named,
            _ => {
                return Err(ConfigError::BadValue {
                    key: "TableEndpoint".into(),
                    value: format!(
                        "{table_endpoint} (an https:// endpoint that names its account is needed: \
                         `https://<account>.table.core.windows.net`, or the emulator's \
                         `https://<host>:<port>/<account>`)"
                    ),
                });
            }
        };
        let credentials = Credentials::Token(credential);
        if path_style {
            let host = crate::url::host_of(endpoint);
            let mut account = Account::emulator(host, 10002, 10000, 10001);
            account.name = name.to_owned();
            account.credentials = credentials;
            account.table_endpoint = endpoint.to_owned();
            account.blob_endpoint = format!("https://{host}:10000/{name}");
            account.queue_endpoint = Some(format!("https://{host}:10001/{name}"));
            return Ok(account);
        }
        let host = crate::url::host_of(endpoint);
        let storage_suffix = host
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(".table."))
            .filter(|suffix| !suffix.starts_with("cosmos"));
        let mut account = match storage_suffix {
            Some(suffix) => Account::in_cloud(name, "https", suffix, credentials),
            None => Account::in_cloud(name, "https", "core.windows.net", credentials),
        };
        account.table_endpoint = endpoint.to_owned();
        if storage_suffix.is_none() {
            account.table_secondary_endpoint = None;
        }
        Ok(account)
    }

    /// Whether `endpoint`, one of this account's, is the emulator's: the
    /// account is the emulator's well-known one, or the endpoint names the
    /// account in its path (`http://host:port/account`), as the emulator's
    /// do and the service's never do (its accounts are hosts of their own).
    pub fn is_emulator(&self, endpoint: &str) -> bool {
        self.name == DEV_ACCOUNT
            || crate::url::path_prefix(endpoint)
                .trim_matches('/')
                .split('/')
                .next()
                .is_some_and(|first| !first.is_empty() && first == self.name)
    }

    /// The local emulator (Azurite) at `host`, with its table, blob and
    /// queue ports (10002, 10000 and 10001 by default).
    pub fn emulator(host: &str, table_port: u16, blob_port: u16, queue_port: u16) -> Account {
        Account::emulator_over("http", host, [table_port, blob_port, queue_port])
    }

    /// The emulator at `host` over `protocol` (`http` or `https`), on its
    /// table, blob and queue ports.
    fn emulator_over(protocol: &str, host: &str, [table, blob, queue]: [u16; 3]) -> Account {
        let at = |port: u16| format!("{protocol}://{host}:{port}/{DEV_ACCOUNT}");
        Account {
            name: DEV_ACCOUNT.to_owned(),
            credentials: Credentials::SharedKey {
                // The constant is valid base64.
                key: BASE64.decode(DEV_KEY).unwrap_or_default(),
            },
            table_endpoint: at(table),
            blob_endpoint: at(blob),
            queue_endpoint: Some(at(queue)),
            table_secondary_endpoint: None,
            blob_secondary_endpoint: None,
        }
    }

    /// Reads a connection string: `DefaultEndpointsProtocol`, `AccountName`,
    /// `AccountKey`, `EndpointSuffix`, `TableEndpoint`, `BlobEndpoint`,
    /// `QueueEndpoint`, `TableSecondaryEndpoint`, `BlobSecondaryEndpoint`,
    /// `SharedAccessSignature`, `Authentication`, or
    /// `UseDevelopmentStorage=true`. The client settings of
    /// [`ClientOptions::with_connection_string`] may stand beside them.
    ///
    /// `Authentication=<method>` signs in with Microsoft Entra ID instead of
    /// a key, through the Azure SDK's `azure_identity` (the `azure-identity`
    /// feature): `Environment` (workload identity, a client secret, then
    /// managed identity, as the environment provides them, then the Azure
    /// CLI), `ManagedIdentity` (with `ManagedIdentityClientId=` for a
    /// user-assigned one), `WorkloadIdentity`, `ClientSecret` (its secret
    /// from `AZURE_CLIENT_SECRET`, never from the string) or `AzureCli`.
    /// `AccountName=acme;Authentication=Environment` is a whole connection
    /// string; so is `TableEndpoint=https://acme.table.cosmos.azure.com;Authentication=ManagedIdentity`.
    ///
    /// `UseDevelopmentStorage=true` names the emulator (Azurite) on this
    /// machine at its default ports: blobs on 10000, queues on 10001, tables
    /// on 10002. An emulator elsewhere takes, beside it,
    /// `DevelopmentStorageProxyUri=http://host` (the host; the name the
    /// Azure SDKs give it) and `TablePort`, `BlobPort`, `QueuePort` (each
    /// port it moves), so that `azurite --tablePort 20002` is
    /// `UseDevelopmentStorage=true;TablePort=20002`. An emulator over HTTPS
    /// (`azurite --cert … --key …`) takes `DefaultEndpointsProtocol=https`,
    /// or a host given as `https://host`, and the authority that signed its
    /// certificate as `CaCertificate=<PEM file>`; a `CaCertificate` or
    /// `TrustPlatformRoots` beside an emulator over plain HTTP is refused,
    /// since it would be ignored.
    ///
    /// ```
    /// use tablekit_azure::config::Account;
    /// let dev = Account::from_connection_string("UseDevelopmentStorage=true")?;
    /// assert_eq!(dev.table_endpoint, "http://127.0.0.1:10002/devstoreaccount1");
    /// let moved = Account::from_connection_string(
    ///     "UseDevelopmentStorage=true;TablePort=20002;BlobPort=20000",
    /// )?;
    /// assert_eq!(moved.table_endpoint, "http://127.0.0.1:20002/devstoreaccount1");
    /// assert_eq!(moved.blob_endpoint, "http://127.0.0.1:20000/devstoreaccount1");
    /// # Ok::<(), tablekit_azure::config::ConfigError>(())
    /// ```
    pub fn from_connection_string(text: &str) -> Result<Account, ConfigError> {
        let settings = settings_of(text)?;
        let get = |name: &str| setting(&settings, name);
        if let Some(value) = get("UseDevelopmentStorage") {
            if !value.eq_ignore_ascii_case("true") {
                return Err(ConfigError::BadValue {
                    key: "UseDevelopmentStorage".into(),
                    value: value.into(),
                });
            }
            return emulator_of(&settings);
        }
        let sas = get("SharedAccessSignature").map(|s| s.trim_start_matches('?').to_owned());
        let signs_in = get("Authentication");
        let name = match get("AccountName") {
            Some(name) => name.to_owned(),
            None if sas.is_some() => String::new(),
            // The account of the endpoint given.
            None if signs_in.is_some() => get("TableEndpoint")
                .and_then(crate::url::account_of)
                .map(|(name, _)| name.to_owned())
                .ok_or(ConfigError::Missing("AccountName"))?,
            None => return Err(ConfigError::Missing("AccountName")),
        };
        let credentials = match (get("AccountKey"), sas, signs_in) {
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                return Err(ConfigError::BadValue {
                    key: "Authentication".into(),
                    value:
                        "set beside AccountKey or SharedAccessSignature (give one way to sign in)"
                            .into(),
                });
            }
            (Some(key), _, None) => Credentials::SharedKey {
                key: BASE64.decode(key).map_err(|_| ConfigError::BadKey)?,
            },
            (None, Some(sas), None) => Credentials::Sas(sas),
            (None, None, Some(method)) => Credentials::Token(
                crate::identity::from_setting(method, get("ManagedIdentityClientId")).map_err(
                    |value| ConfigError::BadValue {
                        key: "Authentication".into(),
                        value,
                    },
                )?,
            ),
            (None, None, None) => return Err(ConfigError::Missing("AccountKey")),
        };
        let protocol = get("DefaultEndpointsProtocol").unwrap_or("https");
        if protocol != "https" && protocol != "http" {
            return Err(ConfigError::BadValue {
                key: "DefaultEndpointsProtocol".into(),
                value: protocol.into(),
            });
        }
        let suffix = get("EndpointSuffix").unwrap_or("core.windows.net");
        let endpoint = |setting: &'static str, service: &str| -> Result<String, ConfigError> {
            match get(setting) {
                Some(url) => Ok(url.trim_end_matches('/').to_owned()),
                None if !name.is_empty() => Ok(format!("{protocol}://{name}.{service}.{suffix}")),
                None => Err(ConfigError::Missing(setting)),
            }
        };
        // A secondary endpoint: the one given, else the account's own when
        // the primary one is the account's own too.
        let secondary = |setting: &str, primary: &str, service: &str| match get(setting) {
            Some(url) => Some(url.trim_end_matches('/').to_owned()),
            None if !name.is_empty() && get(primary).is_none() => {
                Some(format!("{protocol}://{name}-secondary.{service}.{suffix}"))
            }
            None => None,
        };
        // Optional: a SAS connection string for tables and blobs alone
        // names no queue endpoint, and needs none.
        let queue_endpoint = endpoint("QueueEndpoint", "queue").ok();
        let account = Account {
            table_endpoint: endpoint("TableEndpoint", "table")?,
            blob_endpoint: endpoint("BlobEndpoint", "blob")?,
            queue_endpoint,
            table_secondary_endpoint: secondary("TableSecondaryEndpoint", "TableEndpoint", "table"),
            blob_secondary_endpoint: secondary("BlobSecondaryEndpoint", "BlobEndpoint", "blob"),
            credentials,
            name,
        };
        if matches!(account.credentials, Credentials::Token(_))
            && !account.table_endpoint.starts_with("https://")
        {
            return Err(ConfigError::BadValue {
                key: "Authentication".into(),
                value: format!(
                    "a token for {} (tokens are sent over https:// only)",
                    account.table_endpoint
                ),
            });
        }
        Ok(account)
    }
}

/// The emulator a `UseDevelopmentStorage=true` connection string names:
/// its host (`DevelopmentStorageProxyUri`) and ports (`TablePort`,
/// `BlobPort`, `QueuePort`), each at Azurite's default unless given. Any
/// other setting beside it is refused, as it would be ignored.
fn emulator_of(settings: &[(String, String)]) -> Result<Account, ConfigError> {
    let mut host = "127.0.0.1".to_owned();
    let mut protocol = None;
    let mut ports = [
        ("TablePort", 10002u16),
        ("BlobPort", 10000),
        ("QueuePort", 10001),
    ];
    for (key, value) in settings {
        let bad = || ConfigError::BadValue {
            key: key.clone(),
            value: value.clone(),
        };
        let mut set_protocol = |given: &'static str| match protocol {
            Some(set) if set != given => Err(ConfigError::BadValue {
                key: key.clone(),
                value: format!("{value} (the emulator is named over {set} already)"),
            }),
            _ => {
                protocol = Some(given);
                Ok(())
            }
        };
        if key.eq_ignore_ascii_case("UseDevelopmentStorage")
            || CLIENT_SETTINGS.iter().any(|s| key.eq_ignore_ascii_case(s))
        {
            continue;
        }
        if key.eq_ignore_ascii_case("DefaultEndpointsProtocol") {
            match value.as_str() {
                "http" => set_protocol("http")?,
                "https" => set_protocol("https")?,
                _ => return Err(bad()),
            }
            continue;
        }
        if key.eq_ignore_ascii_case("DevelopmentStorageProxyUri") {
            let rest = if let Some(rest) = value.strip_prefix("https://") {
                set_protocol("https")?;
                rest
            } else {
                set_protocol("http")?;
                value.strip_prefix("http://").ok_or_else(bad)?
            };
            let rest = rest.trim_end_matches('/');
            if rest.is_empty()
                || rest.contains(['/', '?', '#', '@'])
                || (rest.contains(':') && !rest.starts_with('['))
            {
                return Err(bad());
            }
            host = rest.to_owned();
            continue;
        }
        let slot = ports
            .iter_mut()
            .find(|(name, _)| key.eq_ignore_ascii_case(name))
            .ok_or_else(|| ConfigError::BadValue {
                key: key.clone(),
                value: "set beside UseDevelopmentStorage=true (give the endpoints without it, or the emulator's host and ports)".into(),
            })?;
        slot.1 = value.parse().ok().filter(|p| *p != 0).ok_or_else(bad)?;
    }
    let protocol = protocol.unwrap_or("http");
    if protocol == "http"
        && let Some((key, _)) = settings.iter().find(|(key, _)| {
            key.eq_ignore_ascii_case("CaCertificate")
                || key.eq_ignore_ascii_case("TrustPlatformRoots")
        })
    {
        return Err(ConfigError::BadValue {
            key: key.clone(),
            value: "set for an emulator over plain HTTP, where it would be ignored (add DefaultEndpointsProtocol=https for an emulator started with a certificate)".into(),
        });
    }
    Ok(Account::emulator_over(
        protocol,
        &host,
        [ports[0].1, ports[1].1, ports[2].1],
    ))
}

#[cfg(test)]
mod tests;
