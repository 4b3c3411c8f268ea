//! Clients built from table SAS tokens, against Azurite: permissions work;
//! a key outside the token's range is refused by the client before sending
//! (Azurite does not enforce ranges, the service does).

mod azurite;

use tablekit::QueueStore;
use tablekit::TableBackendExt as _;
use tablekit::queue::PutMessageOptions;
use tablekit::{
    BlobStore, Entity, Error, GetOptions, IfMatch, ListBlobsOptions, PutCondition, TableBackend,
};
use tablekit_azure::auth::{BlobSas, QueueSas, TableSas};
use tablekit_azure::config::{Account, Credentials};
use tablekit_azure::{AzureBlobs, AzureQueues, AzureTables};

fn sas_client(token: String) -> AzureTables {
    let mut account = azurite::account();
    account.credentials = Credentials::Sas(token);
    AzureTables::new(account).unwrap()
}

fn key_of(account: &Account) -> Vec<u8> {
    match &account.credentials {
        Credentials::SharedKey { key } => key.clone(),
        _ => unreachable!("the emulator account signs with its key"),
    }
}

/// An expiry an hour from now, to the second (`2026-11-21T23:39:25Z`).
fn in_an_hour() -> String {
    let text = tablekit::DateTime::from(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    )
    .to_string();
    text.split('.')
        .next()
        .unwrap()
        .trim_end_matches('Z')
        .to_owned()
        + "Z"
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
    let expiry = in_an_hour();
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

fn blob_sas_client(token: String) -> AzureBlobs {
    let mut account = azurite::account();
    account.credentials = Credentials::Sas(token);
    AzureBlobs::new(account).unwrap()
}

#[tokio::test]
async fn blob_sas_tokens_grant_what_they_say() {
    let owner = AzureBlobs::new(azurite::account()).unwrap();
    owner.create_container("sasblobs").await.unwrap();
    for name in ["a/1", "a/2", "b/1"] {
        owner
            .put_blob(
                "sasblobs",
                name,
                name.as_bytes().to_vec(),
                &PutCondition::None,
            )
            .await
            .unwrap();
    }
    let account = azurite::account();
    let key = key_of(&account);
    let expiry = in_an_hour();

    // A container token that reads and lists.
    let container = BlobSas {
        container: "sasblobs",
        blob: None,
        permissions: "rl",
        start: None,
        expiry: &expiry,
    };
    let reader = blob_sas_client(container.token(&account.name, &key));
    assert_eq!(
        reader.get_blob("sasblobs", "b/1").await.unwrap().data,
        b"b/1"
    );
    let listed = reader
        .list_blobs("sasblobs", &ListBlobsOptions::prefix("a/"))
        .await
        .unwrap();
    let names: Vec<_> = listed.blobs.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["a/1", "a/2"]);
    let write = reader
        .put_blob("sasblobs", "c", b"c".to_vec(), &PutCondition::None)
        .await;
    assert!(
        matches!(write, Err(Error::Service { status: 403, .. })),
        "{write:?}"
    );

    // A token for one blob, which may write it.
    let one = BlobSas {
        blob: Some("a/1"),
        permissions: "rw",
        ..container
    };
    let writer = blob_sas_client(one.token(&account.name, &key));
    writer
        .put_blob("sasblobs", "a/1", b"new".to_vec(), &PutCondition::None)
        .await
        .unwrap();
    assert_eq!(
        owner.get_blob("sasblobs", "a/1").await.unwrap().data,
        b"new"
    );
    let other = writer.get_blob("sasblobs", "a/2").await;
    assert!(
        matches!(other, Err(Error::Service { status: 403, .. })),
        "{other:?}"
    );

    // A token signed with another key is refused.
    let forged = blob_sas_client(container.token(&account.name, b"not the key"));
    let refused = forged.get_blob("sasblobs", "b/1").await;
    assert!(
        matches!(refused, Err(Error::Service { status: 403, .. })),
        "{refused:?}"
    );
    owner.delete_container("sasblobs").await.unwrap();
}

/// A queue SAS client works within its permissions; a forged one is refused.
#[tokio::test]
async fn queue_sas_tokens_grant_what_they_say() {
    let account = azurite::account();
    let key = key_of(&account);
    let owner = AzureQueues::new(account.clone()).unwrap();
    owner.create_queue("sasqueue").await.unwrap();
    let expiry = in_an_hour();
    let client = |token: String| {
        let mut account = azurite::account();
        account.credentials = Credentials::Sas(token);
        AzureQueues::new(account).unwrap()
    };
    let worker = client(
        QueueSas {
            queue: "sasqueue",
            permissions: "raup",
            start: None,
            expiry: &expiry,
        }
        .token(&account.name, &key),
    );
    worker
        .put_message("sasqueue", "job <1>", &PutMessageOptions::default())
        .await
        .unwrap();
    let got = worker
        .get_messages("sasqueue", 1, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(got[0].text, "job <1>");
    worker
        .delete_message("sasqueue", &got[0].id, &got[0].pop_receipt)
        .await
        .unwrap();

    let reader = client(
        QueueSas {
            queue: "sasqueue",
            permissions: "r",
            start: None,
            expiry: &expiry,
        }
        .token(&account.name, &key),
    );
    assert!(
        reader
            .peek_messages("sasqueue", 1)
            .await
            .unwrap()
            .is_empty()
    );
    let put = reader
        .put_message("sasqueue", "x", &PutMessageOptions::default())
        .await;
    assert!(
        matches!(put, Err(Error::Service { status: 403, .. })),
        "{put:?}"
    );
    let forged = client(
        QueueSas {
            queue: "sasqueue",
            permissions: "raup",
            start: None,
            expiry: &expiry,
        }
        .token(&account.name, b"not the key"),
    );
    let refused = forged.peek_messages("sasqueue", 1).await;
    assert!(
        matches!(refused, Err(Error::Service { status: 403, .. })),
        "{refused:?}"
    );
    owner.delete_queue("sasqueue").await.unwrap();
}

/// A range-scoped client's queries return only rows inside its range, and a
/// query that can only reach outside it is refused (the service enforces
/// ranges; Azurite does not, so this is the client's doing).
#[tokio::test]
async fn sas_range_scopes_every_query() {
    use tablekit::filter::{Filter, prop};
    use tablekit::{Query, TableBackendExt};

    let owner = AzureTables::new(azurite::account()).unwrap();
    owner.create_table("sasquery").await.unwrap();
    for pk in ["a", "b", "c", "d", "e", "f"] {
        for rk in ["r0", "r1", "r2"] {
            owner
                .insert_entity("sasquery", &Entity::new(pk, rk).with("v", 1))
                .await
                .unwrap();
        }
    }
    let account = azurite::account();
    let expiry = in_an_hour();
    let ranged = TableSas {
        table: "sasquery",
        permissions: "r",
        start: None,
        expiry: &expiry,
        start_key: Some(("b", "r1")),
        end_key: Some(("d", "r1")),
        version: tablekit_azure::client::SERVICE_VERSION,
    };
    let client = sas_client(ranged.token(&account.name, &key_of(&account)));
    let keys = |rows: Vec<Entity>| -> Vec<String> {
        rows.into_iter()
            .map(|e| format!("{}/{}", e.partition_key, e.row_key))
            .collect()
    };
    let inside = ["b/r1", "b/r2", "c/r0", "c/r1", "c/r2", "d/r0", "d/r1"];

    let all = client.query_all("sasquery", Query::new()).await.unwrap();
    assert_eq!(keys(all), inside, "no filter");
    let unrelated = Query::new().filter(prop("v").eq(1));
    let all = client.query_all("sasquery", unrelated).await.unwrap();
    assert_eq!(keys(all), inside, "a filter on another property");
    // Fifteen comparisons leave no room to narrow the request: the rows
    // outside are still dropped.
    let mut wide = prop("v").eq(1);
    for i in 2..=15 {
        wide = wide | prop("v").eq(i);
    }
    let all = client
        .query_all("sasquery", Query::new().filter(wide))
        .await
        .unwrap();
    assert_eq!(keys(all), inside, "fifteen comparisons");
    // Pages of one row still add up to the range.
    let paged = client
        .query_all("sasquery", Query::new().top(1))
        .await
        .unwrap();
    assert_eq!(keys(paged), inside, "one row a page");

    let partly = Query::new().filter(Filter::partition_key().le("b"));
    let rows = client.query_all("sasquery", partly).await.unwrap();
    assert_eq!(
        keys(rows),
        ["b/r1", "b/r2"],
        "a range that overlaps the edge"
    );

    for outside in [
        Filter::partition_key().eq("a"),
        Filter::partition_key().gt("d"),
        Filter::partition_key().lt("b"),
        Filter::partition_key().eq("b") & Filter::row_key().lt("r1"),
        Filter::partition_key().eq("d") & Filter::row_key().eq("r2"),
    ] {
        let text = outside.to_string();
        let refused = client
            .query_entities("sasquery", &Query::new().filter(outside))
            .await;
        assert!(
            matches!(refused, Err(Error::Service { status: 403, .. })),
            "{text}: {refused:?}"
        );
    }
    owner.delete_table("sasquery").await.unwrap();
}
