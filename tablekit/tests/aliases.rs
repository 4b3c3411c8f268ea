//! Changing an entity without a migration: a renamed field reads its older
//! name too (`alias`), and a field added later reads a default
//! (`default`, `default = path`) where older rows lack it.

use futures::TryStreamExt;
use tablekit::TableBackendExt;
use tablekit::schema;
use tablekit::{Entity, Loaded, Table, TableBackend, TableEntity};
use tablekit_mem::MemBackend;

/// Version 2 of a product: `Colour` is now `Color`, and `size` is new.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Products", kind = "PROD", version = 2, min_version = 1)]
struct Product {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(rename = "Color", alias = "Colour", alias = "Colr")]
    color: String,
    #[tablekit(default = medium)]
    size: u32,
    #[tablekit(default)]
    tags: Option<String>,
}

fn medium() -> u32 {
    40
}

/// A row as version 1 wrote it.
fn version_one(sku: &str, colour_name: &'static str) -> Entity {
    Entity::new("main", format!("PROD_{sku}"))
        .with("_Kind", "PROD")
        .with("_Version", 1i32)
        .with(colour_name, "red")
}

#[test]
fn older_names_and_missing_fields_read() {
    for name in ["Colour", "Colr", "Color"] {
        let read: Product = schema::from_entity(&version_one("a", name)).expect("read");
        assert_eq!(read.color, "red", "read from `{name}`");
        assert_eq!(read.size, 40, "the default function's value");
        assert_eq!(read.tags, None);
    }
    // The current name wins over an older one.
    let both = version_one("a", "Colour").with("Color", "blue");
    let read: Product = schema::from_entity(&both).expect("read");
    assert_eq!(read.color, "blue");
    // The typed JSON reader takes the older name too.
    let text =
        r#"{"PartitionKey":"main","RowKey":"PROD_a","_Kind":"PROD","_Version":1,"Colour":"red"}"#;
    let read: Product = schema::from_json(text).expect("from_json");
    assert_eq!(read.color, "red");
    // Written under the current name only.
    let written = schema::to_entity(&read).expect("write");
    assert!(written.properties.contains("Color"));
    assert!(!written.properties.contains("Colour"));
    assert_eq!(
        written.properties.get("size"),
        Some(&tablekit::Value::Int64(40))
    );
    // A projection asks for the older names too.
    let mut names = Vec::new();
    assert!((Product::DESCRIPTOR.property_names)(&mut names));
    for name in ["Color", "Colour", "Colr"] {
        assert!(names.iter().any(|n| n == name), "{names:?}");
    }
}

#[tokio::test]
async fn typed_reads_and_writes_take_older_rows() {
    let backend = MemBackend::new();
    let products: Table<Product> = Table::new(backend.clone());
    products.create_if_missing().await.expect("create");
    backend
        .insert_entity("Products", &version_one("a", "Colour"))
        .await
        .expect("a version-1 row");
    let rows: Vec<_> = products
        .query()
        .partition("main")
        .stream()
        .try_collect()
        .await
        .expect("query");
    assert_eq!(rows.len(), 1);
    let mut loaded = products
        .get("main", "a")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(loaded.color, "red");
    assert_eq!(Loaded::version(&loaded), Some(1), "stored as version 1");
    assert_eq!(Loaded::version(&rows[0]), Some(1));
    loaded.size = 42;
    products.replace(&mut loaded).await.expect("replace");
    assert_eq!(Loaded::version(&loaded), Some(2), "written as version 2");
    let reread = products.get("main", "a").await.expect("get");
    assert_eq!(reread.as_ref().and_then(Loaded::version), Some(2));
    let stored = backend
        .get_entity("Products", "main", "PROD_a", &Default::default())
        .await
        .expect("stored");
    assert_eq!(
        stored.properties.get("Color"),
        Some(&tablekit::Value::String("red".into()))
    );
    assert!(
        !stored.properties.contains("Colour"),
        "the old name is gone"
    );
    assert_eq!(
        stored.properties.get("_Version"),
        Some(&tablekit::Value::Int32(2))
    );
}

/// Version 1 of the product, as an older program still running knows it.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Products", kind = "PROD", version = 1)]
struct ProductV1 {
    #[tablekit(partition_key)]
    shop: String,
    #[tablekit(row_key)]
    sku: String,
    #[tablekit(rename = "Colour")]
    colour: String,
}

/// During a rolling deploy an older program must not overwrite a row a
/// newer one wrote: its update and its replace are refused with
/// `NewerVersion`, naming both versions, and the row keeps what it holds.
#[tokio::test]
async fn older_programs_do_not_overwrite_newer_rows() {
    let backend = MemBackend::new();
    let new: Table<Product> = Table::new(backend.clone());
    new.create_if_missing().await.expect("create");
    let written = Product {
        shop: "main".into(),
        sku: "a".into(),
        color: "red".into(),
        size: 44,
        tags: Some("sale".into()),
    };
    let etag = new.insert(&written).await.expect("insert version 2");
    let old: Table<ProductV1> = Table::new(backend.clone());
    let refused = old
        .update("main", "a", |p| p.colour = "blue".into())
        .await
        .expect_err("an older update");
    assert!(
        matches!(
            refused,
            tablekit::Error::NewerVersion {
                stored: 2,
                writing: 1,
                ..
            }
        ),
        "{refused}"
    );
    // A replace through a value made with the row's ETag (as a service
    // does with a client's If-Match) reads the version first.
    let mut stale = Loaded::new(
        ProductV1 {
            shop: "main".into(),
            sku: "a".into(),
            colour: "blue".into(),
        },
        etag,
        None,
    );
    let refused = old.replace(&mut stale).await.expect_err("an older replace");
    assert!(
        matches!(refused, tablekit::Error::NewerVersion { .. }),
        "{refused}"
    );
    let kept = new.get("main", "a").await.expect("get").expect("there");
    assert_eq!(*kept, written, "nothing was dropped");
}
