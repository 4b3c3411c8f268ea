//! `copy::copy_container`: every blob of a container copied, across pages
//! of the listings; a blob the target holds with the same bytes is left,
//! one with other bytes (even of the same length) is copied, and one whose
//! MD5 the stores do not know is always copied.

use tablekit::copy::copy_container;
use tablekit::{BlobStore, ListBlobsOptions, PutCondition};
use tablekit_mem::MemBlobStore;

#[path = "support/tampered.rs"]
mod tampered;
use tampered::{Tampered, Tampering};

async fn put(store: &dyn BlobStore, name: &str, data: &[u8]) {
    store
        .put_blob("files", name, data.to_vec(), &PutCondition::None)
        .await
        .unwrap();
}

/// Every blob of the container, name and bytes.
async fn contents(store: &dyn BlobStore) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut options = ListBlobsOptions::default();
    loop {
        let page = store.list_blobs("files", &options).await.unwrap();
        for blob in page.blobs {
            let data = store.get_blob("files", &blob.name).await.unwrap().data;
            out.push((blob.name, data));
        }
        match page.next_marker {
            Some(marker) => options.marker = Some(marker),
            None => return out,
        }
    }
}

/// The source holds `same`, `other` (bytes of the same length as the
/// target's), `new` and 5,000 more (past a listing's page); the target holds
/// `same`, its own `other` and `theirs`.
async fn stores() -> (MemBlobStore, MemBlobStore) {
    let (source, target) = (MemBlobStore::new(), MemBlobStore::new());
    source.create_container("files").await.unwrap();
    target.create_container("files").await.unwrap();
    put(&source, "same", b"kept bytes").await;
    put(&target, "same", b"kept bytes").await;
    put(&source, "other", b"source's!").await;
    put(&target, "other", b"target's!").await;
    put(&source, "new", b"new bytes").await;
    put(&target, "theirs", b"only there").await;
    for n in 0..5_000 {
        put(
            &source,
            &format!("many/{n:05}"),
            format!("blob {n}").as_bytes(),
        )
        .await;
    }
    (source, target)
}

#[tokio::test]
async fn a_container_is_copied_but_for_the_same_bytes() {
    let (source, target) = stores().await;
    let copied = copy_container(&source, &target, "files").await.unwrap();
    assert_eq!(copied, 5_002, "`other`, `new` and the 5,000; not `same`");
    let mut expected = contents(&source).await;
    expected.push(("theirs".into(), b"only there".to_vec()));
    expected.sort();
    assert_eq!(contents(&target).await, expected);
    // Again: nothing left to copy.
    assert_eq!(copy_container(&source, &target, "files").await.unwrap(), 0);
}

#[tokio::test]
async fn a_blob_whose_md5_is_not_known_is_copied() {
    let (source, target) = stores().await;
    let (source, target) = (
        Tampered(source, Tampering::ForgetMd5),
        Tampered(target, Tampering::ForgetMd5),
    );
    let copied = copy_container(&source, &target, "files").await.unwrap();
    assert_eq!(copied, 5_003, "nothing can be told the same");
    let other = target.get_blob("files", "other").await.unwrap().data;
    assert_eq!(other, b"source's!");
}
