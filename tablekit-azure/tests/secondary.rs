//! Reads from the secondary endpoint (read-access geo-redundant storage),
//! with two Azurites standing for the primary and the secondary region. The
//! primary is reached through a switch on loopback that can cut it off, as
//! an outage of its region would.

mod azurite;

use std::sync::Arc;
use std::time::Duration;

use tablekit::TableBackendExt;
use tablekit::{BlobStore, Entity, Error, GetOptions, Query, TableBackend, Value};
use tablekit_azure::config::{Account, ClientOptions};
use tablekit_azure::policy::RetryPolicy;
use tablekit_azure::{AzureBlobs, AzureTables};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP forwarder to `target` that can be switched off: then it closes
/// every connection it has and every new one at once.
struct Switch {
    on: watch::Sender<bool>,
}

impl Switch {
    async fn start(target: u16) -> (Arc<Switch>, u16) {
        let (on, _) = watch::channel(true);
        let switch = Arc::new(Switch { on });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("its address").port();
        let serving = switch.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let mut on = serving.on.subscribe();
                if !*on.borrow() {
                    continue; // dropped: closed at once
                }
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = on.wait_for(|on| !on) => {}
                    }
                });
            }
        });
        (switch, port)
    }

    fn set(&self, on: bool) {
        self.on.send_replace(on);
    }
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
    }
}

/// An account whose primary goes through the switch and whose secondary is
/// the second Azurite.
fn account(primary_table: u16, primary_blob: u16, secondary: &azurite::Azurite) -> Account {
    let mut account = Account::emulator("127.0.0.1", primary_table, primary_blob, 1);
    account.table_secondary_endpoint = Some(format!(
        "http://127.0.0.1:{}/devstoreaccount1",
        secondary.table_port
    ));
    account.blob_secondary_endpoint = Some(format!(
        "http://127.0.0.1:{}/devstoreaccount1",
        secondary.blob_port
    ));
    account
}

fn row(value: &str) -> Entity {
    let mut entity = Entity::new("p", "r");
    entity
        .properties
        .insert("Region".to_owned(), Value::String(value.to_owned()));
    entity
}

fn region(entity: &Entity) -> &Value {
    entity.properties.get("Region").expect("a Region")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_to_the_secondary_while_the_primary_fails_and_writes_never_do() {
    let primary = azurite::azurite();
    let secondary = azurite::start_with(&[]);
    let (table_switch, table_port) = Switch::start(primary.table_port).await;
    let (blob_switch, blob_port) = Switch::start(primary.blob_port).await;
    let table = format!("geo{:08x}", fastrand::u32(..));

    // The same table in both regions, with a row that tells them apart
    // (the emulators do not replicate).
    for (a, name) in [(primary, "primary"), (&secondary, "secondary")] {
        let direct = AzureTables::new(Account::emulator(a.host, a.table_port, a.blob_port, 1))
            .expect("a client");
        direct.create_table(&table).await.expect("a table");
        direct
            .insert_entity(&table, &row(name))
            .await
            .expect("a row");
        let blobs = AzureBlobs::new(Account::emulator(a.host, a.table_port, a.blob_port, 1))
            .expect("a client");
        blobs.create_container(&table).await.expect("a container");
        blobs
            .put_blob(&table, "b", name.as_bytes().to_vec(), &Default::default())
            .await
            .expect("a blob");
    }
    let primary_only = AzureTables::new(Account::emulator(
        primary.host,
        primary.table_port,
        primary.blob_port,
        1,
    ))
    .expect("a client");
    primary_only
        .insert_entity(&table, &Entity::new("p", "only-primary"))
        .await
        .expect("a row not replicated yet");

    let options = ClientOptions::tables().retry(quick()).secondary_reads(true);
    let account = account(table_port, blob_port, &secondary);
    let tables = AzureTables::with_options(account.clone(), options.clone()).expect("a client");
    let blobs = AzureBlobs::with_options(account.clone(), options.clone()).expect("a client");
    let get = GetOptions::default();

    // The primary answers: reads come from it.
    let read = tables
        .get_entity(&table, "p", "r", &get)
        .await
        .expect("read");
    assert_eq!(region(&read), &Value::String("primary".into()));
    assert_eq!(
        blobs.get_blob(&table, "b").await.expect("blob").data,
        b"primary"
    );

    // The primary's region is out: reads come from the secondary.
    table_switch.set(false);
    blob_switch.set(false);
    let read = tables
        .get_entity(&table, "p", "r", &get)
        .await
        .expect("read");
    assert_eq!(region(&read), &Value::String("secondary".into()));
    let page = tables
        .query_entities(&table, &Query::new())
        .await
        .expect("a query");
    assert_eq!(page.entities.len(), 1);
    assert_eq!(
        region(&page.entities[0]),
        &Value::String("secondary".into())
    );
    assert_eq!(
        blobs.get_blob(&table, "b").await.expect("blob").data,
        b"secondary"
    );

    // A row the secondary has not seen yet is not reported missing from
    // there: the primary's failure is the answer.
    let error = tables
        .get_entity(&table, "p", "only-primary", &get)
        .await
        .expect_err("the primary is out");
    assert!(error.is_transient(), "{error:?}");

    // Writes never go to the secondary.
    let error = tables
        .upsert_entity(
            &table,
            &Entity::new("p", "new"),
            tablekit::UpdateMode::Replace,
        )
        .await
        .expect_err("the primary is out");
    assert!(
        matches!(
            error,
            Error::Transient { .. } | Error::OutcomeUnknown { .. }
        ),
        "{error:?}"
    );
    let direct = AzureTables::new(Account::emulator(
        secondary.host,
        secondary.table_port,
        secondary.blob_port,
        1,
    ))
    .expect("a client");
    assert!(matches!(
        direct.get_entity(&table, "p", "new", &get).await,
        Err(Error::EntityNotFound { .. })
    ));

    // Without the option, reads stay with the primary and fail with it.
    let primary_alone = AzureTables::with_options(account, ClientOptions::tables().retry(quick()))
        .expect("a client");
    let error = primary_alone
        .get_entity(&table, "p", "r", &get)
        .await
        .expect_err("the primary is out");
    assert!(error.is_transient(), "{error:?}");

    // The primary is back: reads come from it again.
    table_switch.set(true);
    let read = tables
        .get_entity(&table, "p", "r", &get)
        .await
        .expect("read");
    assert_eq!(region(&read), &Value::String("primary".into()));
}

#[test]
fn secondary_endpoints_from_connection_strings() {
    let key = tablekit_azure::config::DEV_KEY;
    let cloud = Account::from_connection_string(&format!("AccountName=acme;AccountKey={key}"))
        .expect("an account");
    assert_eq!(
        cloud.table_secondary_endpoint.as_deref(),
        Some("https://acme-secondary.table.core.windows.net")
    );
    assert_eq!(
        cloud.blob_secondary_endpoint.as_deref(),
        Some("https://acme-secondary.blob.core.windows.net")
    );
    let explicit = Account::from_connection_string(&format!(
        "AccountName=acme;AccountKey={key};TableEndpoint=https://t.example;TableSecondaryEndpoint=https://t2.example/"
    ))
    .expect("an account");
    assert_eq!(
        explicit.table_secondary_endpoint.as_deref(),
        Some("https://t2.example")
    );
    let none = Account::from_connection_string(&format!(
        "AccountName=acme;AccountKey={key};TableEndpoint=https://t.example"
    ))
    .expect("an account");
    assert_eq!(
        none.table_secondary_endpoint, None,
        "not guessed for an endpoint given"
    );
    let dev = Account::from_connection_string("UseDevelopmentStorage=true;SecondaryReads=true")
        .expect("client settings beside the emulator");
    assert_eq!(dev.table_secondary_endpoint, None);
}
