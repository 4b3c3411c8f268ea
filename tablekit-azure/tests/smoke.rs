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

/// Text far from ASCII in bodies long enough that Azurite reads them in
/// pieces comes back as written: a character falling across two pieces
/// would otherwise be stored as replacement characters (the client sends
/// the emulator ASCII bodies). Every offset of a 4-byte character is tried.
#[tokio::test]
async fn long_text_outside_ascii_is_stored_as_written() {
    use tablekit::queue::{PutMessageOptions, QueueStore};
    let backend = AzureTables::new(azurite::account()).unwrap();
    backend.create_table("wideText").await.unwrap();
    // Each entity is inserted, replaced, then merged under its ETag. Past
    // about 350 KB of such text the escaped body of an update passes the
    // 1 MiB Azurite takes for one, and the client sends it as a
    // transaction of one operation instead.
    for (size, pad) in [70_000usize, 200_000, 700_000]
        .into_iter()
        .flat_map(|size| (0..4).map(move |pad| (size, pad)))
    {
        let mut entity = Entity::new("p", format!("{size}-{pad}"));
        let mut left = size / 4;
        while left > 0 {
            let n = left.min(8_000);
            let text = format!("{}{}", "a".repeat(pad), "\u{1f600}".repeat(n));
            let name = format!("S{}", entity.properties.len());
            entity = entity.with(name, text);
            left -= n;
        }
        let first = backend.insert_entity("wideText", &entity).await.unwrap();
        entity = entity.with("S0", "\u{e9}".repeat(16_000));
        let replaced = backend
            .upsert_entity("wideText", &entity, UpdateMode::Replace)
            .await
            .unwrap();
        let change = entity.clone().with("S1", "\u{4e2d}".repeat(16_000));
        let stale = backend
            .update_entity(
                "wideText",
                &change,
                UpdateMode::Merge,
                &IfMatch::ETag(first),
            )
            .await;
        assert!(
            matches!(stale, Err(tablekit::Error::PreconditionFailed { .. })),
            "{size} bytes: a stale ETag is the update's own failure: {stale:?}"
        );
        backend
            .update_entity(
                "wideText",
                &change,
                UpdateMode::Merge,
                &IfMatch::ETag(replaced),
            )
            .await
            .unwrap();
        entity = entity.with("S1", "\u{4e2d}".repeat(16_000));
        let got = backend
            .get_entity("wideText", "p", &entity.row_key, &GetOptions::default())
            .await
            .unwrap();
        assert!(
            got.properties == entity.properties,
            "{size} bytes, {pad} before: other text"
        );
    }

    let queues = tablekit_azure::AzureQueues::new(azurite::account()).unwrap();
    queues.create_queue("wide-text").await.unwrap();
    for pad in 0..4 {
        let max = tablekit::queue::MAX_MESSAGE_BYTES;
        let text = format!("{}{}", "a".repeat(pad), "\u{1f600}".repeat((max - pad) / 4));
        queues
            .put_message("wide-text", &text, &PutMessageOptions::default())
            .await
            .unwrap();
        let got = queues
            .get_messages("wide-text", 1, std::time::Duration::from_secs(60))
            .await
            .unwrap();
        assert!(got[0].text == text, "{pad} before: another text");
        queues
            .delete_message("wide-text", &got[0].id, &got[0].pop_receipt)
            .await
            .unwrap();
    }
}
