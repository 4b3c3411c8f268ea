//! Where the account is and how to sign for it: connection strings and parts.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

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
impl From<ConfigError> for tablekit::Error {
    fn from(error: ConfigError) -> tablekit::Error {
        tablekit::Error::Configuration {
            message: error.to_string(),
        }
    }
}

/// How a client talks HTTP: timeouts and retries. Shared by
/// [`AzureTables`](crate::AzureTables) and [`AzureBlobs`](crate::AzureBlobs).
///
/// ```
/// use std::time::Duration;
/// use tablekit_azure::config::ClientOptions;
/// let options = ClientOptions::tables()
///     .timeout(Duration::from_secs(5))
///     .connect_timeout(Duration::from_secs(1));
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
}

impl ClientOptions {
    /// The defaults for table requests: 30 s per attempt, 10 s to connect,
    /// [`RetryPolicy::default`](crate::policy::RetryPolicy::default).
    pub fn tables() -> ClientOptions {
        ClientOptions {
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retry: crate::policy::RetryPolicy::default(),
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
        Ok(())
    }
}

/// How requests are authorized.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Shared Key: the account key signs each request.
    SharedKey {
        /// The decoded account key.
        key: Vec<u8>,
    },
    /// A shared access signature (the query string, without `?`).
    Sas(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        match self {
            Credentials::SharedKey { .. } => f.write_str("SharedKey(…)"),
            Credentials::Sas(_) => f.write_str("Sas(…)"),
        }
    }
}

/// An account: its name, endpoints and credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl Account {
    /// An Azure account in the public cloud, signed with its key.
    pub fn with_key(name: &str, key_base64: &str) -> Result<Account, ConfigError> {
        Ok(Account {
            name: name.to_owned(),
            credentials: Credentials::SharedKey {
                key: BASE64.decode(key_base64).map_err(|_| ConfigError::BadKey)?,
            },
            table_endpoint: format!("https://{name}.table.core.windows.net"),
            blob_endpoint: format!("https://{name}.blob.core.windows.net"),
            queue_endpoint: Some(format!("https://{name}.queue.core.windows.net")),
        })
    }

    /// The local emulator (Azurite) at `host`, with its table, blob and
    /// queue ports (10002, 10000 and 10001 by default).
    pub fn emulator(host: &str, table_port: u16, blob_port: u16, queue_port: u16) -> Account {
        Account {
            name: DEV_ACCOUNT.to_owned(),
            credentials: Credentials::SharedKey {
                // The constant is valid base64.
                key: BASE64.decode(DEV_KEY).unwrap_or_default(),
            },
            table_endpoint: format!("http://{host}:{table_port}/{DEV_ACCOUNT}"),
            blob_endpoint: format!("http://{host}:{blob_port}/{DEV_ACCOUNT}"),
            queue_endpoint: Some(format!("http://{host}:{queue_port}/{DEV_ACCOUNT}")),
        }
    }

    /// Reads a connection string: `DefaultEndpointsProtocol`, `AccountName`,
    /// `AccountKey`, `EndpointSuffix`, `TableEndpoint`, `BlobEndpoint`,
    /// `QueueEndpoint`, `SharedAccessSignature`, or
    /// `UseDevelopmentStorage=true`.
    ///
    /// `UseDevelopmentStorage=true` names the emulator (Azurite) on this
    /// machine at its default ports: blobs on 10000, queues on 10001, tables
    /// on 10002. An emulator elsewhere takes, beside it,
    /// `DevelopmentStorageProxyUri=http://host` (the host; the name the
    /// Azure SDKs give it) and `TablePort`, `BlobPort`, `QueuePort` (each
    /// port it moves), so that `azurite --tablePort 20002` is
    /// `UseDevelopmentStorage=true;TablePort=20002`.
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
        let get = |name: &str| {
            settings
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
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
        let name = match get("AccountName") {
            Some(name) => name.to_owned(),
            None if sas.is_some() => String::new(),
            None => return Err(ConfigError::Missing("AccountName")),
        };
        let credentials = match (get("AccountKey"), sas) {
            (Some(key), _) => Credentials::SharedKey {
                key: BASE64.decode(key).map_err(|_| ConfigError::BadKey)?,
            },
            (None, Some(sas)) => Credentials::Sas(sas),
            (None, None) => return Err(ConfigError::Missing("AccountKey")),
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
        // Optional: a SAS connection string for tables and blobs alone
        // names no queue endpoint, and needs none.
        let queue_endpoint = endpoint("QueueEndpoint", "queue").ok();
        Ok(Account {
            table_endpoint: endpoint("TableEndpoint", "table")?,
            blob_endpoint: endpoint("BlobEndpoint", "blob")?,
            queue_endpoint,
            credentials,
            name,
        })
    }
}

/// The emulator a `UseDevelopmentStorage=true` connection string names:
/// its host (`DevelopmentStorageProxyUri`) and ports (`TablePort`,
/// `BlobPort`, `QueuePort`), each at Azurite's default unless given. Any
/// other setting beside it is refused, as it would be ignored.
fn emulator_of(settings: &[(String, String)]) -> Result<Account, ConfigError> {
    let mut host = "127.0.0.1".to_owned();
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
        if key.eq_ignore_ascii_case("UseDevelopmentStorage") {
            continue;
        }
        if key.eq_ignore_ascii_case("DevelopmentStorageProxyUri") {
            let rest = value
                .strip_prefix("http://")
                .ok_or_else(bad)?
                .trim_end_matches('/');
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
    Ok(Account::emulator(&host, ports[0].1, ports[1].1, ports[2].1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_on_other_ports_and_hosts() {
        let account = Account::from_connection_string(
            "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://azurite.local/;QueuePort=21001",
        )
        .unwrap();
        assert_eq!(
            account.table_endpoint,
            "http://azurite.local:10002/devstoreaccount1"
        );
        assert_eq!(
            account.queue_endpoint.as_deref(),
            Some("http://azurite.local:21001/devstoreaccount1")
        );
        for bad in [
            "UseDevelopmentStorage=true;TablePort=0",
            "UseDevelopmentStorage=true;TablePort=70000",
            "UseDevelopmentStorage=true;TablePort=x",
            "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=https://h",
            "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://h:1",
            "UseDevelopmentStorage=true;AccountName=other",
        ] {
            let err = Account::from_connection_string(bad).unwrap_err();
            assert!(
                matches!(err, ConfigError::BadValue { .. }),
                "{bad}: {err:?}"
            );
        }
    }

    /// The form the Azure portal gives for Cosmos DB for Table: an explicit
    /// table endpoint with a port and a trailing slash, no blob endpoint.
    #[test]
    fn cosmos_connection_strings() {
        let cosmos = Account::from_connection_string(&format!(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={DEV_KEY};TableEndpoint=https://acme.table.cosmos.azure.com:443/;"
        ))
        .unwrap();
        assert_eq!(
            cosmos.table_endpoint,
            "https://acme.table.cosmos.azure.com:443"
        );
        assert_eq!(cosmos.name, "acme");
        assert_eq!(cosmos.blob_endpoint, "https://acme.blob.core.windows.net");
        let sas_only = Account::from_connection_string(
            "TableEndpoint=https://a.table.core.windows.net;SharedAccessSignature=sv=2019-02-02&sig=abc",
        );
        assert_eq!(sas_only, Err(ConfigError::Missing("BlobEndpoint")));
    }

    #[test]
    fn connection_strings() {
        let dev = Account::from_connection_string("UseDevelopmentStorage=true").unwrap();
        assert_eq!(dev.name, DEV_ACCOUNT);
        assert_eq!(dev.blob_endpoint, "http://127.0.0.1:10000/devstoreaccount1");

        let explicit = format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEV_KEY};BlobEndpoint=http://127.0.0.1:20000/devstoreaccount1;TableEndpoint=http://127.0.0.1:20002/devstoreaccount1/;"
        );
        let account = Account::from_connection_string(&explicit).unwrap();
        assert_eq!(
            account.table_endpoint,
            "http://127.0.0.1:20002/devstoreaccount1"
        );
        assert_eq!(
            account.credentials,
            Account::emulator("x", 1, 2, 3).credentials
        );

        let cloud = Account::from_connection_string(&format!(
            "AccountName=acct;AccountKey={DEV_KEY};EndpointSuffix=core.chinacloudapi.cn"
        ))
        .unwrap();
        assert_eq!(
            cloud.table_endpoint,
            "https://acct.table.core.chinacloudapi.cn"
        );

        assert_eq!(
            dev.queue_endpoint.as_deref(),
            Some("http://127.0.0.1:10001/devstoreaccount1")
        );
        assert_eq!(
            account.queue_endpoint.as_deref(),
            Some("http://devstoreaccount1.queue.core.windows.net"),
            "no QueueEndpoint: the account's own, with the protocol given"
        );
        let queues = Account::from_connection_string(&format!(
            "{explicit}QueueEndpoint=http://127.0.0.1:20001/devstoreaccount1/"
        ))
        .unwrap();
        assert_eq!(
            queues.queue_endpoint.as_deref(),
            Some("http://127.0.0.1:20001/devstoreaccount1")
        );
        let sas = Account::from_connection_string("TableEndpoint=https://a.table.core.windows.net;BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=?sv=2019-02-02&sig=abc").unwrap();
        assert_eq!(sas.queue_endpoint, None);
        assert_eq!(
            sas.credentials,
            Credentials::Sas("sv=2019-02-02&sig=abc".into())
        );
        assert_eq!(
            format!("{:?}", sas.credentials),
            "Sas(…)",
            "secrets are not printed"
        );

        let error: tablekit::Error = Account::from_connection_string("AccountName")
            .unwrap_err()
            .into();
        assert!(
            matches!(error, tablekit::Error::Configuration { .. }),
            "{error}"
        );
        for bad in [
            "AccountName",
            "AccountName=a",
            "AccountName=a;AccountKey=!!",
            "AccountName=a;AccountName=b;AccountKey=AA==",
            "AccountName=first;AccountKey=AA==;AccountName =second",
            "AccountName=first;AccountKey=AA==; accountname\t=second",
            "UseDevelopmentStorage=maybe",
            "DefaultEndpointsProtocol=ftp;AccountName=a;AccountKey=AA==",
        ] {
            assert!(Account::from_connection_string(bad).is_err(), "{bad}");
        }
    }
}
