//! Sign-in with tokens against Azurite over HTTPS with `--oauth basic`
//! (tables, blobs and queues all check bearer tokens in that mode: the
//! audience, the issuer and the lifetime), its certificate made by the test
//! and trusted through `Trust::with_pem`.

mod azurite;
mod tls;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tablekit::TableBackendExt;
use tablekit::{BatchOperation, BlobStore, Entity, Error, QueueStore, TableBackend};
use tablekit_azure::config::{Account, ClientOptions, Credentials, Trust};
use tablekit_azure::credential::{STORAGE_SCOPE, TokenCredential};
use tablekit_azure::{AzureBlobs, AzureQueues, AzureTables};
use tls::Minting;

struct Secure {
    azurite: azurite::Azurite,
    certificates: tls::Certificates,
}

/// Azurite over HTTPS with OAuth, started once for this test binary.
fn secure() -> &'static Secure {
    static SECURE: OnceLock<Secure> = OnceLock::new();
    SECURE.get_or_init(|| {
        let certificates = tls::certificates("sign-in");
        let azurite = azurite::start_with(&certificates.azurite_args(true));
        Secure {
            azurite,
            certificates,
        }
    })
}

fn account(credential: Arc<dyn TokenCredential>) -> Account {
    let a = &secure().azurite;
    let mut account = Account::emulator(a.host, a.table_port, a.blob_port, a.queue_port);
    account.table_endpoint = format!("https://127.0.0.1:{}/devstoreaccount1", a.table_port);
    account.blob_endpoint = format!("https://127.0.0.1:{}/devstoreaccount1", a.blob_port);
    account.queue_endpoint = Some(format!(
        "https://127.0.0.1:{}/devstoreaccount1",
        a.queue_port
    ));
    account.credentials = Credentials::Token(credential);
    account
}

fn options() -> ClientOptions {
    let trust = Trust::mozilla()
        .with_pem(secure().certificates.ca_pem.as_bytes())
        .expect("the test authority");
    ClientOptions::tables().trust(trust)
}

fn tables(credential: Arc<dyn TokenCredential>) -> AzureTables {
    AzureTables::with_options(account(credential), options()).expect("a client")
}

fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", fastrand::u32(..))
}

#[tokio::test]
async fn tables_blobs_and_queues_work_with_a_token() {
    let credential = Arc::new(Minting::new(Duration::from_secs(3600)));
    let tables = tables(credential.clone());
    let table = unique("tok");
    tables.create_table(&table).await.expect("create a table");
    let mut entity = Entity::new("p", "r1");
    entity
        .properties
        .insert("N".to_owned(), tablekit::Value::Int32(1));
    tables.insert_entity(&table, &entity).await.expect("insert");
    tables
        .submit_transaction(
            &table,
            &[
                BatchOperation::Insert(Entity::new("p", "r2")),
                BatchOperation::Insert(Entity::new("p", "r3")),
            ],
        )
        .await
        .expect("a batch");
    let page = tables
        .query_entities(&table, &tablekit::Query::new())
        .await
        .expect("a query");
    assert_eq!(page.entities.len(), 3);
    let read = tables
        .get_entity(&table, "p", "r1", &Default::default())
        .await
        .expect("a point read");
    assert_eq!(read.properties.get("N"), Some(&tablekit::Value::Int32(1)));

    let blobs = AzureBlobs::with_options(account(credential.clone()), options()).expect("blobs");
    let container = unique("tok");
    blobs
        .create_container(&container)
        .await
        .expect("a container");
    blobs
        .put_blob(
            &container,
            "a/b.bin",
            b"secret".to_vec(),
            &Default::default(),
        )
        .await
        .expect("put a blob");
    let blob = blobs.get_blob(&container, "a/b.bin").await.expect("get it");
    assert_eq!(blob.data, b"secret");

    let queues = AzureQueues::with_options(account(credential.clone()), options()).expect("queues");
    let queue = unique("tok");
    queues.create_queue(&queue).await.expect("a queue");
    queues
        .put_message(&queue, "hello", &Default::default())
        .await
        .expect("put a message");
    let got = queues
        .get_messages(&queue, 1, Duration::from_secs(30))
        .await
        .expect("get it");
    assert_eq!(got[0].text, "hello");

    // One token per client (each asks for the same storage scope).
    assert_eq!(credential.calls(), 3);
    assert!(
        credential
            .scopes
            .lock()
            .unwrap()
            .iter()
            .all(|s| s == STORAGE_SCOPE)
    );
}

#[tokio::test]
async fn a_token_for_another_audience_is_refused() {
    let credential = Arc::new(Minting {
        audience: Some("https://vault.azure.net".into()),
        ..Minting::new(Duration::from_secs(3600))
    });
    let tables = tables(credential.clone());
    let error = tables
        .get_entity("anytable", "p", "r", &Default::default())
        .await
        .expect_err("refused");
    // The service's reason is kept.
    assert!(
        matches!(&error, Error::Credential { message }
            if message.contains("AuthenticationFailed") && message.contains("Invalid token audience")),
        "{error:?}"
    );
    // Refused once, asked again once, refused again: no more.
    assert_eq!(credential.calls(), 2);
    let blobs = AzureBlobs::with_options(account(credential.clone()), options()).expect("blobs");
    let error = blobs.get_blob("container", "b").await.expect_err("refused");
    assert!(
        matches!(&error, Error::Credential { message } if message.contains("audience")),
        "{error:?}"
    );
    let queues = AzureQueues::with_options(account(credential), options()).expect("queues");
    let error = queues.create_queue("queue").await.expect_err("refused");
    assert!(matches!(error, Error::Credential { .. }), "{error:?}");
}

#[tokio::test]
async fn a_token_that_runs_out_during_a_run_is_replaced_without_a_failure() {
    let credential = Arc::new(Minting::new(Duration::from_secs(2)));
    let tables = tables(credential.clone());
    let table = unique("exp");
    tables.create_table(&table).await.expect("create");
    // About 6 s of requests over tokens of 2 to 3 s.
    for n in 0..30 {
        tables
            .upsert_entity(
                &table,
                &Entity::new("p", format!("r{n}")),
                tablekit::UpdateMode::Replace,
            )
            .await
            .unwrap_or_else(|e| panic!("request {n} failed: {e}"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        credential.calls() >= 3,
        "{} tokens over 6 s of 2 s tokens",
        credential.calls()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_requests_at_expiry_ask_for_one_token() {
    let credential = Arc::new(Minting::new(Duration::from_secs(1)));
    let tables = tables(credential.clone());
    let table = unique("burst");
    tables.create_table(&table).await.expect("create");
    tables
        .insert_entity(&table, &Entity::new("p", "r"))
        .await
        .expect("insert");
    // One token, or more if a slow machine took longer than its life.
    let before = credential.calls();
    assert!(before >= 1);
    // Past the last token's end (at most 2 s away). The next one lives an
    // hour, so that it outlives the burst however slow the machine is.
    *credential.lifetime.lock().unwrap() = Duration::from_secs(3600);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let reads = futures::future::join_all((0..32).map(|_| {
        let tables = tables.clone();
        let table = table.clone();
        async move {
            tables
                .get_entity(&table, "p", "r", &Default::default())
                .await
        }
    }))
    .await;
    for read in reads {
        read.expect("a read at expiry");
    }
    assert_eq!(
        credential.calls(),
        before + 1,
        "one new token for 32 requests"
    );
}

#[test]
fn tokens_are_sent_over_https_only() {
    let credential = Arc::new(Minting::new(Duration::from_secs(60)));
    let mut account = Account::emulator("127.0.0.1", 1, 2, 3);
    account.credentials = Credentials::Token(credential.clone());
    let error = AzureTables::new(account.clone()).expect_err("http refused");
    assert!(error.to_string().contains("https://"), "{error}");
    assert!(AzureBlobs::new(account.clone()).is_err());
    assert!(AzureQueues::new(account).is_err());
    // An endpoint and a credential are a whole configuration.
    let cloud =
        Account::with_credential("https://acme.table.core.windows.net/", credential.clone())
            .expect("an account");
    assert_eq!(cloud.name, "acme");
    assert_eq!(cloud.blob_endpoint, "https://acme.blob.core.windows.net");
    assert_eq!(
        cloud.table_secondary_endpoint.as_deref(),
        Some("https://acme-secondary.table.core.windows.net")
    );
    let cosmos = Account::with_credential("https://acme.table.cosmos.azure.com:443", credential)
        .expect("a Cosmos account");
    assert_eq!(
        cosmos.table_endpoint,
        "https://acme.table.cosmos.azure.com:443"
    );
    assert_eq!(cosmos.table_secondary_endpoint, None);
    assert!(AzureTables::new(cosmos).is_ok());
}

/// An endpoint of the emulator on an IP address names its account in its
/// path: the account is that name, and the emulator's needs are met (text
/// outside ASCII, which Azurite can split between two reads of a body,
/// reads back as written).
#[tokio::test]
async fn a_token_account_on_an_address_is_the_emulators() {
    let a = &secure().azurite;
    let credential = Arc::new(Minting::new(Duration::from_secs(3600)));
    let account = Account::with_credential(
        &format!("https://127.0.0.1:{}/devstoreaccount1", a.table_port),
        credential,
    )
    .expect("an account");
    assert_eq!(account.name, "devstoreaccount1");
    assert!(account.is_emulator(&account.table_endpoint));
    let tables = AzureTables::with_options(account, options()).expect("a client");
    let table = unique("addr");
    tables.create_table(&table).await.expect("create a table");
    // Eight properties of 25,000 characters of two and three bytes each:
    // a body of about 440 KB, read by Azurite in several pieces.
    let memo = format!("{}{}", "é".repeat(15_000), "ü€".repeat(5_000));
    let mut entity = Entity::new("p", "r");
    for n in 0..8 {
        entity
            .properties
            .insert(format!("Memo{n}"), tablekit::Value::String(memo.clone()));
    }
    tables.insert_entity(&table, &entity).await.expect("insert");
    let read = tables
        .get_entity(&table, "p", "r", &Default::default())
        .await
        .expect("read");
    for n in 0..8 {
        assert_eq!(
            read.properties.get(&format!("Memo{n}")),
            Some(&tablekit::Value::String(memo.clone())),
            "Memo{n}"
        );
    }
}

/// The emulator over HTTPS, named by a connection string, with the
/// authority that signed its certificate.
#[tokio::test]
async fn the_emulator_over_https_by_connection_string() {
    let a = &secure().azurite;
    let text = format!(
        "UseDevelopmentStorage=true;DefaultEndpointsProtocol=https;TablePort={};BlobPort={};QueuePort={};CaCertificate={}",
        a.table_port,
        a.blob_port,
        a.queue_port,
        secure().certificates.ca.display()
    );
    let tables = AzureTables::from_connection_string(&text).expect("a client");
    let table = unique("dev");
    tables.create_table(&table).await.expect("create a table");
    tables
        .insert_entity(&table, &Entity::new("p", "r"))
        .await
        .expect("insert");
}

/// A server whose certificate is not trusted is a configuration error,
/// said at once with what to do, never a transient failure retried.
#[tokio::test]
async fn an_untrusted_certificate_says_what_to_trust() {
    let a = &secure().azurite;
    let credential = Arc::new(Minting::new(Duration::from_secs(3600)));
    for trust in [
        Trust::mozilla(),
        // The server's own certificate given as the authority.
        Trust::none()
            .with_pem(&std::fs::read(&secure().certificates.cert).expect("the server's"))
            .expect("a certificate"),
    ] {
        let tables = AzureTables::with_options(
            account(credential.clone()),
            ClientOptions::tables().trust(trust),
        )
        .expect("a client");
        let error = tables
            .get_entity("anytable", "p", "r", &Default::default())
            .await
            .expect_err("not trusted");
        let Error::Configuration { message } = &error else {
            panic!("{error:?}");
        };
        assert!(
            message.contains("not trusted")
                && message.contains("CaCertificate")
                && message.contains(&format!("127.0.0.1:{}", a.table_port)),
            "{message}"
        );
        // Not transient, so never retried.
        assert!(!error.is_transient());
    }
}
