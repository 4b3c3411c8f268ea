//! Every public future of the typed API can be handed to `tokio::spawn` (it is
//! `Send + 'static` once its inputs are moved in), for plain, wide and
//! offloading entities. This is a compile test: if one future is not `Send`,
//! this file does not build. Running it also checks the futures do their work.

use std::sync::Arc;

use tablekit::{BlobStore, IfMatch, Loaded, Table, TableEntity, TableFields, UnknownKind};
use tablekit_mem::{MemBackend, MemBlobStore};

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Spawned", kind = "PLAIN")]
struct Plain {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    id: u32,
    n: i64,
    #[tablekit(series)]
    daily: Vec<i32>,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Spawned", kind = "WIDE", wide)]
struct Wide {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(series)]
    points: Vec<i64>,
}

#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Spawned", kind = "DOC")]
struct Doc {
    #[tablekit(partition_key)]
    pk: String,
    #[tablekit(row_key)]
    id: u32,
    #[tablekit(blob)]
    body: Vec<u8>,
    #[tablekit(flatten)]
    meta: Meta,
}

#[derive(TableFields, Debug, Clone, PartialEq, Default)]
struct Meta {
    title: String,
}

#[derive(tablekit::EntityKinds, Debug)]
enum Row {
    Plain(Plain),
    Wide(Wide),
}

/// Spawns `future` and returns its output.
async fn spawned<F>(future: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(future).await.expect("the task ran")
}

/// Spawns every write, read and query of `Table<T>` for `value`.
async fn spawn_all<T>(table: Table<T>, value: T)
where
    T: TableEntity + Clone + Send + Sync + std::fmt::Debug + 'static,
{
    let (t, v) = (table.clone(), value.clone());
    spawned(async move { t.create_if_missing().await })
        .await
        .unwrap();
    let (t, v2) = (table.clone(), v.clone());
    spawned(async move { t.insert(&v2).await }).await.unwrap();
    let (t, v2) = (table.clone(), v.clone());
    spawned(async move { t.upsert(&v2).await }).await.unwrap();
    let (t, v2) = (table.clone(), v.clone());
    spawned(async move { t.upsert_merge(&v2).await })
        .await
        .unwrap();
    let (t, v2) = (table.clone(), v.clone());
    spawned(async move { t.replace_unconditionally(&v2).await })
        .await
        .unwrap();
    let (t, v2) = (table.clone(), v.clone());
    spawned(async move { t.merge_unconditionally(&v2).await })
        .await
        .unwrap();
    let t = table.clone();
    let (pk, rk) = (v.partition_key(), v.row_key());
    let mut loaded: Loaded<T> = spawned(async move { t.get(pk, rk).await })
        .await
        .unwrap()
        .expect("stored");
    let t = table.clone();
    loaded = spawned(async move { t.replace(&mut loaded).await.map(|_| loaded) })
        .await
        .unwrap();
    let t = table.clone();
    let merged = spawned(async move { t.merge(&mut loaded).await.map(|_| loaded) })
        .await
        .unwrap();
    assert!(Loaded::timestamp(&merged).is_some());
    let t = table.clone();
    let (pk, rk) = (v.partition_key(), v.row_key());
    spawned(async move { t.update(pk, rk, |_| {}).await })
        .await
        .unwrap();
    let t = table.clone();
    let pk = v.partition_key();
    let all = spawned(async move { t.query().partition(pk).collect().await })
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    let t = table.clone();
    let page = spawned(async move { t.query().page().await }).await;
    assert!(
        page.is_ok()
            || matches!(page, Err(tablekit::Error::NotSupported { .. }) if T::DESCRIPTOR.wide()),
        "{page:?}"
    );
    let t = table.clone();
    spawned(async move {
        use futures::TryStreamExt;
        t.query().stream().try_collect::<Vec<_>>().await
    })
    .await
    .unwrap();
    let (t, v2) = (table.clone(), v.clone());
    let report = spawned(async move { t.bulk().upsert(&[v2]).await }).await;
    assert!(report.is_complete(), "{report:?}");
    let (t, v2) = (table.clone(), v.clone());
    let batch = spawned(async move {
        let mut batch = t.batch();
        batch.upsert(&v2)?;
        batch.submit().await
    })
    .await;
    assert!(
        batch.is_ok()
            || matches!(batch, Err(tablekit::Error::NotSupported { .. })
                if T::DESCRIPTOR.wide() || !tablekit::table::offload::blob_fields::<T>().is_empty()),
        "{batch:?}"
    );
    let t = table.clone();
    let loaded = spawned(async move { t.get(v.partition_key(), v.row_key()).await })
        .await
        .unwrap()
        .expect("stored");
    let t = table.clone();
    spawned(async move { t.delete(&loaded).await })
        .await
        .unwrap();
    let (t, v2) = (table.clone(), value.clone());
    let report = spawned(async move {
        let inserted = t.bulk().insert(std::slice::from_ref(&v2)).await;
        assert!(inserted.is_complete(), "{inserted:?}");
        t.bulk().delete(&[v2]).await
    })
    .await;
    assert!(report.is_complete(), "{report:?}");
    let (t, v2) = (table.clone(), value.clone());
    spawned(async move {
        t.insert(&v2).await?;
        t.delete_unconditionally(v2.partition_key(), v2.row_key())
            .await
    })
    .await
    .unwrap();
    let t = table;
    spawned(async move {
        t.sweep_orphan_blobs(std::time::Duration::from_secs(3600))
            .await
    })
    .await
    .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_typed_future_can_be_spawned() {
    let backend: Arc<dyn tablekit::TableBackend> = Arc::new(MemBackend::new());
    let blobs: Arc<dyn BlobStore> = Arc::new(MemBlobStore::new());
    blobs.create_container("spawned").await.unwrap();
    let plain = Plain {
        pk: "p".into(),
        id: 1,
        n: 2,
        daily: vec![1, 2, 3],
    };
    spawn_all(
        Table::<Plain>::from_arc(Arc::clone(&backend), "Spawned"),
        plain,
    )
    .await;
    let wide = Wide {
        pk: "p".into(),
        id: 2,
        points: (0..600).collect(),
    };
    spawn_all(
        Table::<Wide>::from_arc(Arc::clone(&backend), "Spawned"),
        wide,
    )
    .await;
    let doc = Doc {
        pk: "p".into(),
        id: 3,
        body: vec![7; 100_000],
        meta: Meta { title: "t".into() },
    };
    let docs = Table::<Doc>::from_arc(Arc::clone(&backend), "Spawned")
        .with_blob_store(Arc::clone(&blobs), "spawned");
    spawn_all(docs.clone(), doc.clone()).await;
    let element = Plain::columns().daily.at(1);
    let plains = Table::<Plain>::from_arc(Arc::clone(&backend), "Spawned");
    plains
        .insert(&Plain {
            pk: "p".into(),
            id: 9,
            n: 0,
            daily: vec![0; 3],
        })
        .await
        .unwrap();
    spawned(async move {
        plains
            .merge_element("p", 9u32, &element, &5, &IfMatch::Any)
            .await
    })
    .await
    .unwrap();
    let d = docs.clone();
    spawned(async move { d.insert(&doc).await }).await.unwrap();
    let refs = spawned(async move { docs.blob_references("p", 3u32).await })
        .await
        .unwrap();
    assert!(!refs.expect("stored").is_empty());
    let rows = Table::<Row>::from_arc(backend, "Spawned");
    let rows = spawned(async move {
        use futures::TryStreamExt;
        rows.read_partition("p", UnknownKind::Skip)
            .try_collect::<Vec<_>>()
            .await
    })
    .await
    .unwrap();
    let ids: Vec<u32> = rows
        .iter()
        .map(|row| match &**row {
            Row::Plain(p) => p.id,
            Row::Wide(w) => w.id,
        })
        .collect();
    assert_eq!(ids, [9], "the plain row; the document is of another kind");
}
