//! Clients built from table SAS tokens, against Azurite: permissions work;
//! a key outside the token's range is refused by the client before sending
//! (Azurite does not enforce ranges, the service does).

mod azurite;

use tablekit::{Entity, Error, GetOptions, IfMatch, TableBackend};
use tablekit_azure::AzureTables;
use tablekit_azure::auth::TableSas;
use tablekit_azure::config::{Account, Credentials};

fn sas_client(token: String) -> AzureTables {
    let mut account = azurite::account();
    account.credentials = Credentials::Sas(token);
    AzureTables::new(account).unwrap()
}

fn key_of(account: &Account) -> Vec<u8> {
    match &account.credentials {
        Credentials::SharedKey { key } => key.clone(),
        Credentials::Sas(_) => unreachable!("the emulator account signs with its key"),
    }
}

#[tokio::test]
async fn sas_clients_read_write_and_stay_in_range() {
    let owner = AzureTables::new(azurite::account()).unwrap();
    owner.create_table("sastbl").await.unwrap();
    for pk in ["a", "m", "z"] {
        owner
            .insert_entity("sastbl", &Entity::new(pk, "r").with("v", 1))
            .await
            .unwrap();
    }
    let account = azurite::account();
    let expiry = tablekit::DateTime::from(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    )
    .to_string();
    let expiry = expiry
        .split('.')
        .next()
        .unwrap()
        .trim_end_matches('Z')
        .to_owned()
        + "Z";
    let ranged = TableSas {
        table: "sastbl",
        permissions: "raud",
        start: None,
        expiry: &expiry,
        start_key: Some(("m", "")),
        end_key: Some(("m", "zzzz")),
        version: tablekit_azure::client::SERVICE_VERSION,
    };
    let client = sas_client(ranged.token(&account.name, &key_of(&account)));

    let read = client
        .get_entity("sastbl", "m", "r", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(read.partition_key, "m");
    client
        .insert_entity("sastbl", &Entity::new("m", "s"))
        .await
        .unwrap();
    client
        .delete_entity("sastbl", "m", "s", &IfMatch::Any)
        .await
        .unwrap();

    for pk in ["a", "z"] {
        let outside = client
            .get_entity("sastbl", pk, "r", &GetOptions::default())
            .await;
        assert!(
            matches!(outside, Err(Error::Service { status: 403, .. })),
            "{pk}: {outside:?}"
        );
        let write = client.insert_entity("sastbl", &Entity::new(pk, "s")).await;
        assert!(
            matches!(write, Err(Error::Service { status: 403, .. })),
            "{pk}: {write:?}"
        );
    }

    // A read-only token cannot write (Azurite checks permissions).
    let read_only = TableSas {
        permissions: "r",
        start_key: None,
        end_key: None,
        ..ranged
    };
    let reader = sas_client(read_only.token(&account.name, &key_of(&account)));
    reader
        .get_entity("sastbl", "a", "r", &GetOptions::default())
        .await
        .unwrap();
    let denied = reader.insert_entity("sastbl", &Entity::new("a", "t")).await;
    assert!(denied.is_err(), "{denied:?}");
    owner.delete_table("sastbl").await.unwrap();
}
