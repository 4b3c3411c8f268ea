//! A certificate authority and a server certificate for `127.0.0.1` and
//! `localhost`, made for the test run (rcgen), and the test credential that
//! mints the JSON Web Tokens Azurite's `--oauth basic` accepts. It is
//! compiled beside the Azurite harness (`mod azurite` at the test's root),
//! whose watcher input it shares.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tablekit_azure::credential::{AccessToken, TokenCredential};

/// The files Azurite serves HTTPS with, and the authority's certificate.
pub struct Certificates {
    /// The server's certificate (PEM).
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
    /// The authority's certificate (PEM), the one clients trust.
    pub ca_pem: String,
    /// The same, in a file.
    pub ca: PathBuf,
}

impl Certificates {
    /// Azurite's arguments to serve HTTPS with these certificates, and to
    /// check bearer tokens (`--oauth basic`) when `oauth`.
    pub fn azurite_args(&self, oauth: bool) -> Vec<&str> {
        let mut args = if oauth {
            vec!["--oauth", "basic"]
        } else {
            Vec::new()
        };
        args.extend([
            "--cert",
            self.cert.to_str().expect("a UTF-8 path"),
            "--key",
            self.key.to_str().expect("a UTF-8 path"),
        ]);
        args
    }
}

/// Makes an authority and a server certificate it signs, written to a
/// directory of this test process.
pub fn certificates(name: &str) -> Certificates {
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "tablekit test authority");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).expect("a CA certificate");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().expect("a server key");
    let mut params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("server params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "127.0.0.1");
    let server = params
        .signed_by(&server_key, &issuer)
        .expect("a server certificate");
    let dir = std::env::temp_dir().join(format!("tablekit-tls-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for the certificates");
    remove_when_done(&dir);
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, server.pem()).expect("write cert.pem");
    std::fs::write(&key, server_key.serialize_pem()).expect("write key.pem");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, ca_cert.pem()).expect("write ca.pem");
    Certificates {
        cert,
        key,
        ca_pem: ca_cert.pem(),
        ca,
    }
}

/// A JSON Web Token as Entra ID issues them, unsigned: Azurite's `basic`
/// OAuth checks the audience, issuer and lifetime, not the signature.
pub fn jwt(audience: &str, expires: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"RS256"}"#);
    let claims = serde_json::json!({
        "aud": audience,
        "iss": "https://sts.windows.net/ab1f708d-50f6-404c-a006-d71b2ac7a606/",
        "iat": now - 10,
        "nbf": now - 10,
        "exp": expires,
        "oid": "11059fcc-5514-4800-b5f8-49808b9cfab6",
    });
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{header}.{claims}.c2lnbmF0dXJl")
}

/// A credential that mints a token for the scope asked (or for a fixed
/// audience), living `lifetime` (which a test may change between tokens),
/// and counts what it was asked.
#[derive(Debug)]
pub struct Minting {
    pub audience: Option<String>,
    pub lifetime: Mutex<Duration>,
    pub calls: AtomicU32,
    pub scopes: Mutex<Vec<String>>,
}

impl Minting {
    pub fn new(lifetime: Duration) -> Minting {
        Minting {
            audience: None,
            lifetime: Mutex::new(lifetime),
            calls: AtomicU32::new(0),
            scopes: Mutex::new(Vec::new()),
        }
    }

    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl TokenCredential for Minting {
    async fn get_token(&self, scope: &str) -> tablekit::Result<AccessToken> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.scopes.lock().unwrap().push(scope.to_owned());
        let audience = self
            .audience
            .clone()
            .unwrap_or_else(|| scope.trim_end_matches("/.default").to_owned());
        // Whole seconds, as in the token.
        let lifetime = *self.lifetime.lock().unwrap();
        let expires = (SystemTime::now() + lifetime)
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
            + 1;
        Ok(AccessToken::new(
            jwt(&audience, expires),
            UNIX_EPOCH + Duration::from_secs(expires),
        ))
    }
}

/// Removes `dir` once this test process is gone: an Azurite started with the
/// certificates reads them for as long as it runs, so they cannot go sooner.
fn remove_when_done(dir: &std::path::Path) {
    // Not waited on: the watcher outlives this test process on purpose.
    #[allow(clippy::zombie_processes)]
    std::process::Command::new("sh")
        .arg("-c")
        .arg("while read -r _; do :; done; rm -rf \"$0\"")
        .arg(dir)
        .stdin(crate::azurite::until_this_process_ends())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a watcher that removes the certificates");
}
