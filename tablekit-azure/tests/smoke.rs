//! A first round trip against Azurite.

mod azurite;

use tablekit::{Entity, GetOptions, IfMatch, Query, TableBackend, TableBackendExt, UpdateMode};
use tablekit_azure::AzureTables;

#[tokio::test]
async fn round_trip() {
    let backend = AzureTables::new(azurite::account()).unwrap();
    backend.create_table("smoke").await.unwrap();
    let etag = backend
        .insert_entity(
            "smoke",
            &Entity::new("p", "o'k").with("v", 1).with("L", 5i64),
        )
        .await
        .unwrap();
    let got = backend
        .get_entity("smoke", "p", "o'k", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(got.get("L"), Some(&tablekit::Value::Int64(5)));
    assert_eq!(got.etag.as_ref(), Some(&etag));
    backend
        .update_entity(
            "smoke",
            &Entity::new("p", "o'k").with("w", 2),
            UpdateMode::Merge,
            &IfMatch::ETag(etag),
        )
        .await
        .unwrap();
    let all = backend.query_all("smoke", Query::new()).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].get("v"), Some(&tablekit::Value::Int32(1)));
    backend
        .delete_entity("smoke", "p", "o'k", &IfMatch::Any)
        .await
        .unwrap();
    backend.delete_table("smoke").await.unwrap();
}
