//! Blob offload: large values in the blob store, a reference in the row, and a
//! write protocol that never leaves a row pointing at a missing blob.

use std::sync::Arc;
use std::time::Duration;

use tablekit::layer::{FaultInjection, Operation};
use tablekit::{
    BlobStore, Error, ListBlobsOptions, PutCondition, Query, SchemaError, Table, TableBackendExt,
    TableEntity,
};
use tablekit_mem::{MemBackend, MemBlobStore};

#[path = "support/tampered.rs"]
mod tampered;
use tampered::{Tampered, Tampering};

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Photos", kind = "PHOTO", rename_all = "PascalCase")]
struct Photo {
    #[tablekit(partition_key)]
    album: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(blob)]
    image: Vec<u8>,
    #[tablekit(offload)]
    caption: String,
    #[tablekit(offload)]
    thumbnail: Option<Vec<u8>>,
}

fn photo(id: u32, size: usize, caption_len: usize, seed: u8) -> Photo {
    Photo {
        album: "trip".into(),
        id,
        image: (0..size)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect(),
        caption: "c".repeat(caption_len),
        thumbnail: Some(vec![seed; 16]),
    }
}

struct Fixture {
    backend: MemBackend,
    blobs: MemBlobStore,
    blob_faults: tablekit::layer::FaultHandle,
    photos: Table<Photo>,
}

async fn fixture() -> Fixture {
    let backend = MemBackend::new();
    let blobs = MemBlobStore::new();
    blobs.create_container("photos").await.unwrap();
    let blob_layer = FaultInjection::new(blobs.clone());
    let blob_faults = blob_layer.handle();
    let photos: Table<Photo> =
        Table::new(backend.clone()).with_blob_store(Arc::new(blob_layer), "photos");
    photos.create_if_missing().await.unwrap();
    Fixture {
        backend,
        blobs,
        blob_faults,
        photos,
    }
}

async fn blob_names(store: &MemBlobStore) -> Vec<String> {
    let page = store
        .list_blobs("photos", &ListBlobsOptions::default())
        .await
        .unwrap();
    page.blobs.into_iter().map(|b| b.name).collect()
}

#[tokio::test]
async fn values_live_in_blobs_and_rows_keep_references() {
    let f = fixture().await;
    let p = photo(1, 5 * 1024 * 1024, 10, 1);
    f.photos.insert(&p).await.unwrap();

    let row = f
        .backend
        .try_get_entity("Photos", "trip", "PHOTO_0000000001")
        .await
        .unwrap()
        .unwrap();
    assert!(
        row.get("Image").is_none() && row.get("Image_Blob").is_some(),
        "the image is referenced, not stored"
    );
    assert!(
        row.get("Caption").is_some(),
        "a small offload field stays in the row"
    );
    assert_eq!(blob_names(&f.blobs).await.len(), 1);
    assert_eq!(*f.photos.get("trip", 1).await.unwrap().unwrap(), p);

    // A caption too long for a row goes to a blob too.
    let long = photo(2, 10, 40_000, 2);
    f.photos.insert(&long).await.unwrap();
    assert_eq!(blob_names(&f.blobs).await.len(), 3);
    assert_eq!(
        f.photos
            .get("trip", 2)
            .await
            .unwrap()
            .unwrap()
            .caption
            .len(),
        40_000
    );

    // Overwrite: new blobs in, old blobs out.
    let before = blob_names(&f.blobs).await;
    let mut loaded = f.photos.get("trip", 1).await.unwrap().unwrap();
    loaded.image = vec![9; 1000];
    f.photos.replace(&mut loaded).await.unwrap();
    let after = blob_names(&f.blobs).await;
    assert_eq!(after.len(), before.len());
    assert_ne!(after, before, "the old image blob was replaced");
    assert_eq!(
        f.photos.get("trip", 1).await.unwrap().unwrap().image,
        vec![9; 1000]
    );

    // Queries fetch blobs too.
    let all = f.photos.query().partition("trip").collect().await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].caption.len(), 40_000);

    // A reference is the pattern's own, never a column kept from the row
    // read: an offloaded caption made short stays in the row, with no
    // reference to the old blob beside it.
    let mut shortened = f.photos.get("trip", 2).await.unwrap().unwrap();
    assert!(tablekit::Loaded::unknown_properties(&shortened).is_empty());
    shortened.caption = "short".into();
    f.photos.replace(&mut shortened).await.unwrap();
    let row = f
        .backend
        .try_get_entity("Photos", "trip", "PHOTO_0000000002")
        .await
        .unwrap()
        .unwrap();
    assert!(row.get("Caption_Blob").is_none(), "{row:?}");
    assert_eq!(
        f.photos.get("trip", 2).await.unwrap().unwrap().caption,
        "short"
    );

    // Delete: row, then blobs.
    let loaded = f.photos.get("trip", 2).await.unwrap().unwrap();
    f.photos.delete(&loaded).await.unwrap();
    assert_eq!(blob_names(&f.blobs).await.len(), 1);
    assert!(
        f.photos
            .orphan_blobs(Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_missing_or_altered_blob_is_an_error_not_data() {
    let f = fixture().await;
    f.photos.insert(&photo(1, 100, 5, 1)).await.unwrap();
    let name = blob_names(&f.blobs).await.remove(0);
    f.blobs
        .put_blob("photos", &name, vec![0; 100], &PutCondition::None)
        .await
        .unwrap();
    assert!(matches!(
        f.photos.get("trip", 1).await,
        Err(Error::Schema(SchemaError::Property { .. }))
    ));
    f.blobs.delete_blob("photos", &name, None).await.unwrap();
    assert!(matches!(
        f.photos.get("trip", 1).await,
        Err(Error::Schema(SchemaError::Property { .. }))
    ));
}

/// Bytes changed between the store and the reader are refused, though the
/// store reports the properties of the bytes it stored: the reader hashes
/// what it received.
#[tokio::test]
async fn bytes_changed_on_their_way_are_an_error_not_data() {
    let blobs = MemBlobStore::new();
    blobs.create_container("photos").await.unwrap();
    let backend = MemBackend::new();
    let photos: Table<Photo> =
        Table::new(backend.clone()).with_blob_store(Arc::new(blobs.clone()), "photos");
    photos.create_if_missing().await.unwrap();
    photos.insert(&photo(1, 100, 5, 1)).await.unwrap();
    let read = photos.get("trip", 1).await.unwrap().unwrap();
    assert_eq!(*read, photo(1, 100, 5, 1));
    let garbled: Table<Photo> =
        Table::new(backend).with_blob_store(Arc::new(Tampered(blobs, Tampering::Garble)), "photos");
    match garbled.get("trip", 1).await {
        Err(Error::Schema(SchemaError::Property { problem, .. })) => {
            assert!(problem.to_string().contains("does not match"), "{problem}")
        }
        other => panic!("expected the blob refused, got {other:?}"),
    }
}

// Failing every step of every protocol is a conformance test:
// `tablekit_conformance::blob_offload_survives_failures`, run by tablekit-mem.

#[tokio::test]
async fn the_sweep_spares_young_blobs() {
    let f = fixture().await;
    f.blobs
        .put_blob("photos", "photos/photo/stray", vec![1], &PutCondition::None)
        .await
        .unwrap();
    assert!(
        f.photos
            .orphan_blobs(Duration::from_secs(3600))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        f.photos.orphan_blobs(Duration::ZERO).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn without_a_store_blob_fields_are_a_clear_error() {
    let photos: Table<Photo> = Table::new(MemBackend::new());
    photos.create_if_missing().await.unwrap();
    assert!(matches!(
        photos.insert(&photo(1, 10, 5, 1)).await,
        Err(Error::NotSupported { .. })
    ));
}

/// The photo without its image: a projection reads no blob.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Photos", kind = "PHOTO", rename_all = "PascalCase")]
struct PhotoInfo {
    #[tablekit(partition_key)]
    album: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(offload)]
    caption: String,
}

#[tokio::test]
async fn blobs_are_fetched_only_when_asked() {
    let f = fixture().await;
    f.photos.insert(&photo(1, 100_000, 5, 1)).await.unwrap();
    let gets = f.blob_faults.calls(Operation::GetBlob);
    let infos = f
        .photos
        .query()
        .partition("trip")
        .project::<PhotoInfo>()
        .collect()
        .await
        .unwrap();
    assert_eq!(infos[0].caption, "ccccc");
    let refs = f.photos.blob_references("trip", 1).await.unwrap().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        f.blob_faults.calls(Operation::GetBlob),
        gets,
        "no blob was read so far"
    );
    let (field, reference) = &refs[0];
    assert_eq!(*field, "Image");
    assert_eq!(reference.length, 100_000);
    let bytes = f.photos.fetch_blob(reference).await.unwrap();
    assert_eq!(bytes, photo(1, 100_000, 5, 1).image);
    assert_eq!(f.blob_faults.calls(Operation::GetBlob), gets + 1);
}

/// A wide entity with a blob field: offload and splitting work together.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Albums", kind = "ALBUM", wide)]
struct Album {
    #[tablekit(partition_key)]
    owner: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(series)]
    ratings: Vec<u8>,
    #[tablekit(blob)]
    cover: Vec<u8>,
}

#[tokio::test]
async fn wide_entities_offload_too() {
    let backend = MemBackend::new();
    let blobs = MemBlobStore::new();
    blobs.create_container("photos").await.unwrap();
    let albums: Table<Album> =
        Table::new(backend.clone()).with_blob_store(Arc::new(blobs.clone()), "photos");
    albums.create_if_missing().await.unwrap();
    let album = Album {
        owner: "o".into(),
        id: 1,
        ratings: vec![3; 700],
        cover: vec![1; 300_000],
    };
    albums.insert(&album).await.unwrap();
    assert_eq!(
        backend
            .query_all("Albums", Query::new())
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(blob_names(&blobs).await.len(), 1);
    assert_eq!(*albums.get("o", 1).await.unwrap().unwrap(), album);
    let mut loaded = albums.get("o", 1).await.unwrap().unwrap();
    loaded.cover = vec![2; 10];
    loaded.ratings.truncate(5);
    albums.replace(&mut loaded).await.unwrap();
    assert_eq!(
        backend
            .query_all("Albums", Query::new())
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        blob_names(&blobs).await.len(),
        1,
        "the old cover is gone, the new one stored"
    );
    assert_eq!(*albums.get("o", 1).await.unwrap().unwrap(), *loaded);
    let loaded = albums.get("o", 1).await.unwrap().unwrap();
    albums.delete(&loaded).await.unwrap();
    assert!(blob_names(&blobs).await.is_empty());
    assert!(
        backend
            .query_all("Albums", Query::new())
            .await
            .unwrap()
            .is_empty()
    );
}

/// `create_if_missing` prepares what the table writes to: the table and its
/// blob container, each only if missing, so a first write of an offloaded
/// value finds its container.
#[tokio::test]
async fn creating_the_table_creates_its_blob_container() {
    let blobs = MemBlobStore::new();
    let photos: Table<Photo> =
        Table::new(MemBackend::new()).with_blob_store(Arc::new(blobs.clone()), "albums");
    assert!(
        photos.create_if_missing().await.unwrap(),
        "the table is new"
    );
    assert!(
        !photos.create_if_missing().await.unwrap(),
        "and then it is not"
    );
    photos.insert(&photo(1, 100_000, 10, 1)).await.unwrap();
    let back = photos.get("trip", 1).await.unwrap().unwrap();
    assert_eq!(back.image.len(), 100_000);
    assert!(matches!(
        blobs.create_container("albums").await,
        Err(Error::ContainerAlreadyExists { .. })
    ));

    // A container that exists already is kept, with its blobs.
    let kept = MemBlobStore::new();
    kept.create_container("albums").await.unwrap();
    kept.put_blob("albums", "other", vec![7], &PutCondition::None)
        .await
        .unwrap();
    let photos: Table<Photo> =
        Table::new(MemBackend::new()).with_blob_store(Arc::new(kept.clone()), "albums");
    photos.create_if_missing().await.unwrap();
    assert_eq!(
        kept.get_blob("albums", "other").await.unwrap().data,
        vec![7]
    );
}
