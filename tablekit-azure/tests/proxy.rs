//! Requests through an HTTP proxy: a proxy on loopback, written here over
//! hyper's server, that opens CONNECT tunnels (for `https://` endpoints)
//! and forwards absolute-form requests (for `http://` ones), counting both
//! and checking the proxy's credentials when asked to.

mod azurite;
mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tablekit::TableBackendExt;
use tablekit::{Entity, Error, TableBackend};
use tablekit_azure::AzureTables;
use tablekit_azure::config::{Account, ClientOptions, Proxy, Trust};
use tokio::net::{TcpListener, TcpStream};

/// A proxy and what it saw.
#[derive(Default)]
struct TestProxy {
    tunnels: AtomicU32,
    forwarded: AtomicU32,
    /// Every `Proxy-Authorization` it was sent (or none).
    authorizations: Mutex<Vec<Option<String>>>,
    /// The `Proxy-Authorization` it asks for, if any.
    wanted: Option<String>,
    /// Answers 403 to everything.
    refuse: AtomicBool,
}

impl TestProxy {
    async fn start(wanted: Option<String>) -> (Arc<TestProxy>, SocketAddr) {
        let proxy = Arc::new(TestProxy {
            wanted,
            ..TestProxy::default()
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("its address");
        let serving = proxy.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let proxy = serving.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let proxy = proxy.clone();
                        async move { Ok::<_, Infallible>(proxy.handle(request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        (proxy, addr)
    }

    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let authorization = request
            .headers()
            .get(hyper::header::PROXY_AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.authorizations
            .lock()
            .unwrap()
            .push(authorization.clone());
        if self.refuse.load(Ordering::SeqCst) {
            return answer(StatusCode::FORBIDDEN);
        }
        if self.wanted.is_some() && authorization != self.wanted {
            let mut response = answer(StatusCode::PROXY_AUTHENTICATION_REQUIRED);
            response.headers_mut().insert(
                "proxy-authenticate",
                hyper::header::HeaderValue::from_static("Basic realm=\"test\""),
            );
            return response;
        }
        if request.method() == Method::CONNECT {
            self.tunnels.fetch_add(1, Ordering::SeqCst);
            let target = request
                .uri()
                .authority()
                .map(ToString::to_string)
                .unwrap_or_default();
            tokio::spawn(async move {
                let Ok(upgraded) = hyper::upgrade::on(request).await else {
                    return;
                };
                let Ok(mut server) = TcpStream::connect(&target).await else {
                    return;
                };
                let mut client = TokioIo::new(upgraded);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
            return answer(StatusCode::OK);
        }
        // An absolute-form request: forwarded on a connection of its own.
        self.forwarded.fetch_add(1, Ordering::SeqCst);
        let (mut parts, body) = request.into_parts();
        parts.headers.remove(hyper::header::PROXY_AUTHORIZATION);
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http::<Full<Bytes>>();
        match client
            .request(Request::from_parts(parts, Full::new(body)))
            .await
        {
            Ok(response) => {
                let (parts, body) = response.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                Response::from_parts(parts, Full::new(body))
            }
            Err(_) => answer(StatusCode::BAD_GATEWAY),
        }
    }
}

fn answer(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

/// Azurite over HTTPS (Shared Key), for tunnels; started once.
fn secure() -> &'static (azurite::Azurite, String) {
    static SECURE: OnceLock<(azurite::Azurite, String)> = OnceLock::new();
    SECURE.get_or_init(|| {
        let certificates = tls::certificates("proxy");
        let azurite = azurite::start_with(&certificates.azurite_args(false));
        (azurite, certificates.ca_pem)
    })
}

fn secure_tables(options: ClientOptions) -> AzureTables {
    let (a, ca) = secure();
    let mut account = Account::emulator(a.host, a.table_port, a.blob_port, a.queue_port);
    account.table_endpoint = format!("https://127.0.0.1:{}/devstoreaccount1", a.table_port);
    let trust = Trust::mozilla().with_pem(ca.as_bytes()).expect("the CA");
    AzureTables::with_options(account, options.trust(trust)).expect("a client")
}

fn plain_tables(options: ClientOptions) -> AzureTables {
    AzureTables::with_options(azurite::account(), options).expect("a client")
}

fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", fastrand::u32(..))
}

/// Three requests: create a table, insert, read back.
async fn three_requests(tables: &AzureTables) -> tablekit::Result<()> {
    let table = unique("px");
    tables.create_table(&table).await?;
    tables.insert_entity(&table, &Entity::new("p", "r")).await?;
    tables
        .get_entity(&table, "p", "r", &Default::default())
        .await?;
    Ok(())
}

#[tokio::test]
async fn every_request_goes_through_the_proxy_and_no_proxy_bypasses_it() {
    let (proxy, addr) = TestProxy::start(None).await;
    let url = format!("http://{addr}");
    // http:// endpoints: absolute-form requests to the proxy.
    let tables = plain_tables(ClientOptions::tables().proxy(Proxy::url(&url, "")));
    three_requests(&tables).await.expect("through the proxy");
    assert_eq!(proxy.forwarded.load(Ordering::SeqCst), 3);
    // https:// endpoints: one tunnel, every request inside it.
    let tables = secure_tables(ClientOptions::tables().proxy(Proxy::url(&url, "")));
    three_requests(&tables).await.expect("through a tunnel");
    assert!(proxy.tunnels.load(Ordering::SeqCst) >= 1);
    assert_eq!(proxy.forwarded.load(Ordering::SeqCst), 3);
    // The hosts NO_PROXY lists are reached directly.
    let seen = proxy.authorizations.lock().unwrap().len();
    for tables in [
        plain_tables(ClientOptions::tables().proxy(Proxy::url(&url, "localhost,127.0.0.1"))),
        secure_tables(ClientOptions::tables().proxy(Proxy::url(&url, "127.0.0.1"))),
    ] {
        three_requests(&tables).await.expect("around the proxy");
    }
    assert_eq!(proxy.authorizations.lock().unwrap().len(), seen);
}

#[tokio::test]
async fn the_proxy_gets_the_credentials_of_its_url() {
    // `user:pa ss`, as Basic credentials.
    let wanted = "Basic dXNlcjpwYSBzcw==".to_owned();
    let (proxy, addr) = TestProxy::start(Some(wanted.clone())).await;
    let url = format!("http://user:pa%20ss@{addr}");
    three_requests(&plain_tables(
        ClientOptions::tables().proxy(Proxy::url(&url, "")),
    ))
    .await
    .expect("plain requests with credentials");
    three_requests(&secure_tables(
        ClientOptions::tables().proxy(Proxy::url(&url, "")),
    ))
    .await
    .expect("a tunnel with credentials");
    let seen = proxy.authorizations.lock().unwrap().clone();
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(seen.iter().all(|a| a.as_deref() == Some(wanted.as_str())));
}

#[tokio::test]
async fn a_proxy_that_refuses_gives_a_clear_error() {
    let (proxy, addr) = TestProxy::start(Some("Basic c29tZW9uZTplbHNl".into())).await;
    let url = format!("http://{addr}");
    // No credentials for a proxy that wants them.
    let error = three_requests(&secure_tables(
        ClientOptions::tables().proxy(Proxy::url(&url, "")),
    ))
    .await
    .expect_err("refused");
    assert!(
        matches!(&error, Error::Configuration { message } if message.contains(&addr.to_string()) && message.contains("refused to open a tunnel")),
        "{error:?}"
    );
    let error = three_requests(&plain_tables(
        ClientOptions::tables().proxy(Proxy::url(&url, "")),
    ))
    .await
    .expect_err("refused");
    assert!(
        matches!(&error, Error::Configuration { message } if message.contains("407")),
        "{error:?}"
    );
    proxy.refuse.store(true, Ordering::SeqCst);
    let error = three_requests(&secure_tables(
        ClientOptions::tables().proxy(Proxy::url(&url, "")),
    ))
    .await
    .expect_err("refused");
    assert!(matches!(error, Error::Configuration { .. }), "{error:?}");
    // A proxy that is not there: named in the error.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address")
    };
    let options = ClientOptions::tables()
        .proxy(Proxy::url(format!("http://{closed}"), ""))
        .retry(tablekit_azure::policy::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        });
    let error = three_requests(&secure_tables(options))
        .await
        .expect_err("no proxy there");
    assert!(
        matches!(&error, Error::Transient { message } if message.contains(&format!("the proxy {closed} could not be reached"))),
        "{error:?}"
    );
    assert!(
        tablekit_azure::config::ClientOptions::tables()
            .with_connection_string("Proxy=https://secure.proxy:443")
            .map(|o| AzureTables::with_options(azurite::account(), o))
            .is_ok_and(|client| client.is_err()),
        "an https:// proxy URL is refused when the client is built"
    );
}

/// The environment's `HTTP_PROXY` and `NO_PROXY`, read by a client with the
/// default options. A variable of the environment is set for a child
/// process (this test binary again), never in the running one.
#[tokio::test]
async fn the_environment_names_the_proxy() {
    const CHILD: &str = "TABLEKIT_PROXY_TEST_CHILD";
    if let Ok(table_port) = std::env::var(CHILD) {
        let port: u16 = table_port.parse().expect("a port");
        let tables =
            AzureTables::new(Account::emulator("127.0.0.1", port, 1, 2)).expect("a client");
        three_requests(&tables).await.expect("the child's requests");
        return;
    }
    let (proxy, addr) = TestProxy::start(None).await;
    let a = azurite::azurite();
    let run = move |no_proxy: &str| {
        let mut child = std::process::Command::new(std::env::current_exe().expect("this test"));
        child
            .args([
                "--exact",
                "the_environment_names_the_proxy",
                "--test-threads=1",
            ])
            .env(CHILD, a.table_port.to_string())
            .env("HTTP_PROXY", format!("http://{addr}"))
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .env_remove("no_proxy");
        if no_proxy.is_empty() {
            child.env_remove("NO_PROXY");
        } else {
            child.env("NO_PROXY", no_proxy);
        }
        let output = child.output().expect("the child runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
    };
    tokio::task::spawn_blocking(move || {
        run("");
    })
    .await
    .expect("the child");
    assert_eq!(proxy.forwarded.load(Ordering::SeqCst), 3);
    tokio::task::spawn_blocking(move || run("127.0.0.1"))
        .await
        .expect("the child");
    assert_eq!(
        proxy.forwarded.load(Ordering::SeqCst),
        3,
        "NO_PROXY bypasses it"
    );
}
