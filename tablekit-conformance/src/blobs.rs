//! Blob store operations.

use super::assert_invalid;
use tablekit::blob::{BlobStore, ListBlobsOptions, PutCondition};
use tablekit::{Error, InvalidInput};

/// A fresh container name.
fn unique_container(tag: &str) -> String {
    let suffix: String = std::iter::repeat_with(fastrand::lowercase)
        .take(10)
        .collect();
    format!("tk-{tag}-{suffix}")
}

/// Put, get, list by prefix (paged), delete; missing blobs and containers are reported.
pub async fn blob_put_get_list_delete(store: &dyn BlobStore) {
    let container = unique_container("crud");
    store
        .create_container(&container)
        .await
        .expect("create container");
    assert!(
        matches!(
            store.create_container(&container).await,
            Err(Error::ContainerAlreadyExists { .. })
        ),
        "creating a container twice"
    );
    let data = b"hello world".to_vec();
    let props = store
        .put_blob(&container, "t/p/r/a", data.clone(), &PutCondition::None)
        .await
        .expect("put");
    assert_eq!(props.content_length, 11);
    // MD5("hello world"), as the service computes it.
    assert_eq!(
        props.content_md5,
        [
            0x5e, 0xb6, 0x3b, 0xbb, 0xe0, 0x1e, 0xee, 0xd0, 0x93, 0xcb, 0x22, 0xbb, 0x8f, 0x5a,
            0xcd, 0xc3
        ]
    );
    let blob = store.get_blob(&container, "t/p/r/a").await.expect("get");
    assert_eq!(blob.data, data);
    assert_eq!(blob.properties.etag, props.etag);

    for name in ["t/p/r/b", "t/p/r/c", "t/q/r/a", "u/a"] {
        store
            .put_blob(
                &container,
                name,
                name.as_bytes().to_vec(),
                &PutCondition::None,
            )
            .await
            .expect("put");
    }
    let mut options = ListBlobsOptions::prefix("t/p/");
    options.max_results = Some(2);
    let mut names = Vec::new();
    loop {
        let page = store.list_blobs(&container, &options).await.expect("list");
        assert!(
            page.blobs.len() <= 2,
            "a page holds at most max_results blobs"
        );
        names.extend(page.blobs.into_iter().map(|b| b.name));
        match page.next_marker {
            Some(marker) => options.marker = Some(marker),
            None => break,
        }
    }
    assert_eq!(
        names,
        ["t/p/r/a", "t/p/r/b", "t/p/r/c"],
        "listing by prefix, in name order"
    );

    store
        .delete_blob(&container, "t/p/r/a", None)
        .await
        .expect("delete");
    assert!(
        matches!(
            store.get_blob(&container, "t/p/r/a").await,
            Err(Error::BlobNotFound { .. })
        ),
        "a deleted blob is gone"
    );
    assert!(
        matches!(
            store.delete_blob(&container, "t/p/r/a", None).await,
            Err(Error::BlobNotFound { .. })
        ),
        "deleting a missing blob"
    );
    store
        .delete_container(&container)
        .await
        .expect("delete container");
    assert!(
        matches!(
            store.get_blob(&container, "u/a").await,
            Err(Error::ContainerNotFound { .. })
        ),
        "a blob in a missing container"
    );
}

/// Create-only puts, `If-Match` puts and deletes, with the service's errors.
pub async fn blob_conditions(store: &dyn BlobStore) {
    let container = unique_container("cond");
    store
        .create_container(&container)
        .await
        .expect("create container");
    let first = store
        .put_blob(&container, "b", b"one".to_vec(), &PutCondition::IfNotExists)
        .await
        .expect("create-only put of a new blob");
    let again = store
        .put_blob(&container, "b", b"two".to_vec(), &PutCondition::IfNotExists)
        .await;
    assert!(
        matches!(again, Err(Error::BlobAlreadyExists { .. })),
        "create-only put of an existing blob: {again:?}"
    );
    let second = store
        .put_blob(
            &container,
            "b",
            b"two".to_vec(),
            &PutCondition::IfMatch(first.etag.clone()),
        )
        .await
        .expect("put with the current ETag");
    assert_ne!(first.etag, second.etag, "every write gives a new ETag");
    let stale = store
        .put_blob(
            &container,
            "b",
            b"three".to_vec(),
            &PutCondition::IfMatch(first.etag.clone()),
        )
        .await;
    assert!(
        matches!(stale, Err(Error::BlobConditionNotMet { .. })),
        "put with a stale ETag: {stale:?}"
    );
    let stale = store.delete_blob(&container, "b", Some(&first.etag)).await;
    assert!(
        matches!(stale, Err(Error::BlobConditionNotMet { .. })),
        "delete with a stale ETag: {stale:?}"
    );
    assert_eq!(
        store.get_blob(&container, "b").await.expect("get").data,
        b"two",
        "failed writes change nothing"
    );
    store
        .delete_blob(&container, "b", Some(&second.etag))
        .await
        .expect("delete with the current ETag");
    store
        .delete_container(&container)
        .await
        .expect("delete container");
}

/// Container and blob names are validated before anything is sent.
pub async fn blob_names_are_validated(store: &dyn BlobStore) {
    for bad in ["ab", "Abc", "-abc", "abc-", "a--b", "a_b"] {
        assert_invalid(store.create_container(bad).await, bad, |e| {
            matches!(e, InvalidInput::ContainerName { .. })
        });
    }
    let container = unique_container("names");
    store
        .create_container(&container)
        .await
        .expect("create container");
    let result = store
        .put_blob(&container, "", Vec::new(), &PutCondition::None)
        .await;
    assert_invalid(result, "empty blob name", |e| {
        matches!(e, InvalidInput::BlobName { .. })
    });
    let long = "x".repeat(1025);
    let result = store
        .put_blob(&container, &long, Vec::new(), &PutCondition::None)
        .await;
    assert_invalid(result, "blob name over 1,024 characters", |e| {
        matches!(e, InvalidInput::BlobName { .. })
    });
    store
        .delete_container(&container)
        .await
        .expect("delete container");
}
