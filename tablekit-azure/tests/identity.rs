//! The `azure_identity` adapter end to end: `Authentication=ManagedIdentity`
//! (and `=Environment`) in a connection string, the Azure SDK's managed
//! identity credential asking a token endpoint on loopback of the kind App
//! Service, Functions and Container Apps give (`IDENTITY_ENDPOINT`,
//! `IDENTITY_HEADER`), and its tokens signing tables, blobs and queues on
//! Azurite over HTTPS with `--oauth basic`.
//!
//! The credential reads its endpoint from the environment, so the part that
//! signs in runs in a child process (this test binary again) with those
//! variables set; the running process's environment is never changed.

mod azurite;
mod tls;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tablekit::TableBackendExt;
use tablekit::{BlobStore, Entity, QueueStore, TableBackend};
use tablekit_azure::{AzureBlobs, AzureQueues, AzureTables};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CHILD: &str = "TABLEKIT_IDENTITY_TEST_CHILD";
const SECRET: &str = "x-identity-secret-of-this-test";

/// What the token endpoint was asked.
#[derive(Default)]
struct Asked {
    calls: AtomicU32,
    /// Request lines with a wrong or missing identity header.
    refused: Mutex<Vec<String>>,
    resources: Mutex<Vec<String>>,
}

/// A managed identity endpoint: `GET /msi/token?api-version=…&resource=…`
/// with the `X-IDENTITY-HEADER` secret gives a token for that resource.
async fn token_endpoint() -> (Arc<Asked>, u16) {
    let asked = Arc::new(Asked::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let serving = asked.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let asked = serving.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                let line = text.lines().next().unwrap_or_default().to_owned();
                asked.calls.fetch_add(1, Ordering::SeqCst);
                let secret_given = text.lines().any(|l| {
                    l.split_once(':').is_some_and(|(n, v)| {
                        n.eq_ignore_ascii_case("x-identity-header") && v.trim() == SECRET
                    })
                });
                let resource = line
                    .split(['?', '&', ' '])
                    .find_map(|p| p.strip_prefix("resource="))
                    .map(|r| r.replace("%3A", ":").replace("%2F", "/"))
                    .unwrap_or_default();
                let (status, body) = if secret_given && line.starts_with("GET /msi/token?") {
                    asked.resources.lock().unwrap().push(resource.clone());
                    let expires = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .expect("after 1970")
                        .as_secs()
                        + 3600;
                    let token = tls::jwt(&resource, expires);
                    (
                        "200 OK",
                        format!(
                            r#"{{"access_token":"{token}","expires_on":"{expires}","resource":"{resource}","token_type":"Bearer"}}"#
                        ),
                    )
                } else {
                    asked.refused.lock().unwrap().push(line);
                    (
                        "400 Bad Request",
                        r#"{"error":"invalid_request"}"#.to_owned(),
                    )
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (asked, port)
}

/// The child's part: sign in as the connection string says and use every
/// service.
async fn child(connection: &str) {
    let tables = AzureTables::from_connection_string(connection).expect("a table client");
    let table = format!("mi{:08x}", fastrand::u32(..));
    tables.create_table(&table).await.expect("create a table");
    tables
        .insert_entity(&table, &Entity::new("p", "r"))
        .await
        .expect("insert");
    tables
        .get_entity(&table, "p", "r", &Default::default())
        .await
        .expect("read back");
    let blobs = AzureBlobs::from_connection_string(connection).expect("a blob client");
    blobs.create_container(&table).await.expect("a container");
    blobs
        .put_blob(&table, "b", b"x".to_vec(), &Default::default())
        .await
        .expect("a blob");
    let queues = AzureQueues::from_connection_string(connection).expect("a queue client");
    queues.create_queue(&table).await.expect("a queue");
}

#[tokio::test]
async fn managed_identity_from_a_connection_string_signs_every_service() {
    if let Ok(connection) = std::env::var(CHILD) {
        child(&connection).await;
        return;
    }
    let (asked, port) = token_endpoint().await;
    let certificates = tls::certificates("identity");
    let a = azurite::start_with(&certificates.azurite_args(true));
    let endpoints = format!(
        "TableEndpoint=https://127.0.0.1:{}/devstoreaccount1;BlobEndpoint=https://127.0.0.1:{}/devstoreaccount1;QueueEndpoint=https://127.0.0.1:{}/devstoreaccount1;CaCertificate={}",
        a.table_port,
        a.blob_port,
        a.queue_port,
        certificates.ca.display()
    );
    for (method, secret) in [
        ("ManagedIdentity", SECRET),
        ("Environment", SECRET),
        ("ManagedIdentity", "a wrong secret"),
    ] {
        let connection =
            format!("AccountName=devstoreaccount1;Authentication={method};{endpoints}");
        let mut command = std::process::Command::new(std::env::current_exe().expect("this test"));
        command
            .args([
                "--exact",
                "managed_identity_from_a_connection_string_signs_every_service",
            ])
            .env(CHILD, &connection)
            .env(
                "IDENTITY_ENDPOINT",
                format!("http://127.0.0.1:{port}/msi/token"),
            )
            .env("IDENTITY_HEADER", secret);
        for other in [
            "AZURE_FEDERATED_TOKEN_FILE",
            "AZURE_CLIENT_SECRET",
            "MSI_ENDPOINT",
            "IDENTITY_SERVER_THUMBPRINT",
            "IMDS_ENDPOINT",
        ] {
            command.env_remove(other);
        }
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("the child")
            .expect("the child runs");
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if secret == SECRET {
            assert!(output.status.success(), "{method}: {shown}");
        } else {
            assert!(!output.status.success(), "a wrong secret signed in");
            assert!(shown.contains("Credential"), "{shown}");
        }
    }
    let resources = asked.resources.lock().unwrap().clone();
    // One token per client and scope (three clients per child), never more.
    assert!(
        !resources.is_empty() && resources.len() <= 6,
        "{resources:?}"
    );
    assert!(resources.iter().all(|r| r == "https://storage.azure.com"));
    assert!(
        !asked.refused.lock().unwrap().is_empty(),
        "the wrong secret was asked with"
    );
}

/// The README's first Azure example, as written there (without the
/// requests, which need an account in the cloud).
#[test]
fn the_readme_example_builds() -> Result<(), Box<dyn std::error::Error>> {
    use tablekit::Table;
    use tablekit_azure::{Account, identity::AzureIdentity};

    #[derive(tablekit::TableEntity, Debug, Clone)]
    #[tablekit(table = "Staff", kind = "EMP", rename_all = "PascalCase")]
    struct Employee {
        #[tablekit(partition_key)]
        department: String,
        #[tablekit(row_key)]
        id: u32,
        name: String,
    }

    let credential = azure_identity::ManagedIdentityCredential::new(None)?;
    let account = Account::with_credential(
        "https://acme.table.core.windows.net",
        Arc::new(AzureIdentity::new(credential)),
    )?;
    let staff: Table<Employee> = Table::new(AzureTables::new(account)?);
    assert_eq!(staff.name(), "Staff");
    Ok(())
}
