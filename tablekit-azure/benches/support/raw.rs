//! The raw clients the request-path benches measure tablekit against: a
//! signed Table request as tablekit sends it, and hyper on one kept
//! connection (no pool, no checkout: the least a client can do per
//! request). Shared by `request_path.rs` and `request_instructions.rs`.
#![allow(dead_code)]

use std::cell::RefCell;
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tablekit_azure::auth::Signer;
use tablekit_azure::config::Account;

/// One signed request, as both raw clients send it.
pub(crate) struct Raw {
    pub(crate) method: &'static str,
    pub(crate) url: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Bytes,
}

/// How a raw request is authorized.
pub(crate) enum Auth<'a> {
    Key(&'a Signer),
    Bearer(&'a str),
}

/// A raw signed Table request: the headers tablekit sends, signed with
/// the account key or carrying a token.
pub(crate) fn raw_request(
    account: &Account,
    auth: &Auth<'_>,
    method: &'static str,
    path: &str,
    query: &str,
    body: Option<String>,
) -> Raw {
    let date = httpdate::fmt_http_date(SystemTime::now());
    let content_type = if body.is_some() {
        "application/json"
    } else {
        ""
    };
    let (prefix, _) = account
        .table_endpoint
        .split_once("//")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map_or(("", ""), |(_, p)| (p, ""));
    let resource = format!("/{}/{prefix}{path}", account.name);
    let text = format!("{method}\n\n{content_type}\n{date}\n{resource}");
    let mut headers = vec![
        ("x-ms-date", date),
        ("x-ms-version", "2019-02-02".to_owned()),
        ("DataServiceVersion", "3.0;NetFx".to_owned()),
        ("MaxDataServiceVersion", "3.0;NetFx".to_owned()),
        (
            "Accept",
            "application/json;odata=minimalmetadata".to_owned(),
        ),
        (
            "Authorization",
            match auth {
                Auth::Key(signer) => signer.shared_key_header(&account.name, &text),
                Auth::Bearer(token) => format!("Bearer {token}"),
            },
        ),
    ];
    if body.is_some() {
        headers.push(("Content-Type", content_type.to_owned()));
        headers.push(("Prefer", "return-no-content".to_owned()));
    }
    Raw {
        method,
        url: format!("{}{path}{query}", account.table_endpoint),
        headers,
        body: body.map(Bytes::from).unwrap_or_default(),
    }
}

/// What a raw client does with a query page's body: parses its JSON (a
/// client that uses the rows must), and says how many bytes it was.
pub(crate) fn parse_page(body: &[u8]) -> usize {
    let json: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    assert_eq!(json["value"].as_array().map(Vec::len), Some(1000));
    body.len()
}

/// What a raw client does with a point read's body: parses the row's JSON
/// (a client that uses the row must, as tablekit does before it answers),
/// and says how many members it has.
pub(crate) fn parse_row(body: &[u8]) -> usize {
    let row: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    row.as_object().map_or(0, serde_json::Map::len)
}

/// What a raw client does with an answer's body.
#[derive(Clone, Copy)]
pub(crate) enum Use {
    /// Nothing but count its bytes (an upsert's empty body).
    Bytes,
    /// Parse it as one row ([`parse_row`]).
    Row,
    /// Parse it as a 1,000-row page ([`parse_page`]).
    Page,
}

impl Use {
    /// `body`, used so.
    pub(crate) fn of(self, body: &[u8]) -> usize {
        match self {
            Use::Bytes => body.len(),
            Use::Row => parse_row(body),
            Use::Page => parse_page(body),
        }
    }
}

/// hyper on one kept connection: no pool, no checkout; the least a
/// client can do per request.
pub(crate) struct OneConnection {
    sender: RefCell<Option<SendRequest<Full<Bytes>>>>,
    host: String,
}

impl OneConnection {
    pub(crate) async fn open(port: u16) -> OneConnection {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("a connection");
        stream.set_nodelay(true).expect("nodelay");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("a handshake");
        tokio::spawn(connection);
        OneConnection {
            sender: RefCell::new(Some(sender)),
            host: format!("127.0.0.1:{port}"),
        }
    }

    pub(crate) async fn send(&self, raw: Raw, used: Use) -> usize {
        used.of(&self.send_for_body(raw).await)
    }

    /// Sends `raw` and reads the answer's body whole.
    pub(crate) async fn send_for_body(&self, raw: Raw) -> Bytes {
        let mut sender = self.sender.take().expect("one request at a time");
        let target = raw
            .url
            .split_once("//")
            .and_then(|(_, rest)| rest.find('/').map(|at| rest[at..].to_owned()))
            .expect("a path");
        let mut request = hyper::Request::builder()
            .method(raw.method)
            .uri(target)
            .header("Host", &self.host);
        for (name, value) in raw.headers {
            request = request.header(name, value);
        }
        sender.ready().await.expect("ready");
        let response = sender
            .send_request(request.body(Full::new(raw.body)).expect("a request"))
            .await
            .expect("sent");
        self.sender.replace(Some(sender));
        assert!(response.status().is_success(), "{}", response.status());
        response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes()
    }
}

/// Sends `raw` through hyper-util's pooled client and reads the answer's
/// body whole.
pub(crate) async fn send_pooled<C>(
    client: &hyper_util::client::legacy::Client<C, Full<Bytes>>,
    raw: Raw,
) -> Bytes
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let mut request = hyper::Request::builder().method(raw.method).uri(&raw.url);
    for (name, value) in raw.headers {
        request = request.header(name, value);
    }
    let response = client
        .request(request.body(Full::new(raw.body)).expect("a request"))
        .await
        .expect("sent");
    assert!(response.status().is_success(), "{}", response.status());
    response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes()
}

/// The bearer-token side of the benches: an Azurite of its own over HTTPS
/// with `--oauth basic` (its certificate made here), tablekit signing in
/// with a token, and hyper-util's pooled client over rustls sending the
/// same token.
pub(crate) struct Bearer {
    pub(crate) tablekit: tablekit_azure::AzureTables,
    pub(crate) hyper: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    pub(crate) account: Account,
    pub(crate) token: String,
}

/// Starts the [`Bearer`] side.
pub(crate) async fn bearer() -> Bearer {
    use std::sync::Arc;
    use std::time::Duration;

    use rustls_pki_types::pem::PemObject as _;
    use tablekit_azure::config::{ClientOptions, Credentials, Trust};
    use tablekit_azure::credential::TokenCredential as _;

    let certificates = crate::tls::certificates("bench");
    let a = crate::azurite::start_with(&certificates.azurite_args(true));
    let credential = Arc::new(crate::tls::Minting::new(Duration::from_secs(3600)));
    let token = credential
        .get_token(tablekit_azure::credential::STORAGE_SCOPE)
        .await
        .expect("a token");
    let mut account = Account::emulator(a.host, a.table_port, a.blob_port, a.queue_port);
    account.table_endpoint = format!("https://127.0.0.1:{}/devstoreaccount1", a.table_port);
    account.credentials = Credentials::Token(credential);
    let trust = Trust::mozilla()
        .with_pem(certificates.ca_pem.as_bytes())
        .expect("the CA");
    let tablekit = tablekit_azure::AzureTables::with_options(
        account.clone(),
        ClientOptions::tables().trust(trust),
    )
    .expect("a client");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(certificates.ca_pem.as_bytes()) {
        roots.add(cert.expect("a certificate")).expect("a root");
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(tcp);
    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<Bytes>>(https);
    Bearer {
        tablekit,
        hyper,
        account,
        token: token.secret().to_owned(),
    }
}
