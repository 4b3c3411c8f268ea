//! Indexes of wide and offloaded entities, and transactions that span kinds and their index rows.

use super::*;

/// A wide entity with a unique index: its rows point at it.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "YEAR", wide)]
pub struct Tagged {
    /// The site.
    #[tablekit(partition_key)]
    pub site: String,
    /// The year.
    #[tablekit(row_key)]
    pub year: u16,
    /// One count per day: more than a row holds.
    #[tablekit(series)]
    pub daily: Vec<u32>,
    /// Unique in the site.
    #[tablekit(unique = "code")]
    pub code: String,
}

/// An entity with an offloaded body and a unique index whose rows copy it
/// (a reference to the blob).
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "FILED")]
pub struct Filed {
    /// The folder.
    #[tablekit(partition_key)]
    pub folder: String,
    /// The id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique in the folder.
    #[tablekit(unique = "title")]
    pub title: String,
    /// In the blob store when too large for a row.
    #[tablekit(offload)]
    pub body: String,
}

/// Wide entities and entities with offloaded values keep their index rows
/// in step too, and are read back whole through them.
pub async fn indexes_of_wide_and_offloaded_entities(
    backend: Arc<dyn TableBackend>,
    blobs: Arc<dyn tablekit::BlobStore>,
) {
    let name = fresh_table(&*backend, "idxlarge").await;
    let wide: Table<Tagged> = Table::from_arc(Arc::clone(&backend), &name);
    let year = |code: &str, seed: u32| Tagged {
        site: "s".into(),
        year: 2026,
        daily: (0..400).map(|d| d * 2 + seed).collect(),
        code: code.into(),
    };
    wide.insert(&year("alpha", 1)).await.expect("insert wide");
    assert_eq!(
        index_problems::<Tagged>(&*backend, &name, "s").await,
        Vec::<String>::new()
    );
    let by_code = wide.index(Tagged::indexes().code);
    assert_eq!(
        by_code.get("s", "alpha").await.expect("get"),
        Some(year("alpha", 1))
    );
    let mut loaded = wide.get("s", 2026u16).await.expect("get").expect("found");
    *loaded = year("beta", 2);
    wide.replace(&mut loaded).await.expect("replace wide");
    assert_eq!(
        index_problems::<Tagged>(&*backend, &name, "s").await,
        Vec::<String>::new()
    );
    assert_eq!(by_code.get("s", "alpha").await.expect("get"), None);
    assert_eq!(
        by_code.get("s", "beta").await.expect("get"),
        Some(year("beta", 2))
    );
    wide.merge_unconditionally(&year("gamma", 3))
        .await
        .expect("merge wide");
    assert_eq!(
        index_problems::<Tagged>(&*backend, &name, "s").await,
        Vec::<String>::new()
    );
    wide.delete_unconditionally("s", 2026u16)
        .await
        .expect("delete wide");
    let left = backend.query_all(&name, Query::new()).await.expect("rows");
    assert!(
        left.is_empty(),
        "no part and no index row is left: {left:?}"
    );

    indexes_of_offloaded_entities(&backend, &blobs, &name).await;
    backend.delete_table(&name).await.expect("drop");
}

/// The index rows of an entity whose body is offloaded to a blob follow
/// every write, and its replaced blobs go.
async fn indexes_of_offloaded_entities(
    backend: &Arc<dyn TableBackend>,
    blobs: &Arc<dyn tablekit::BlobStore>,
    name: &str,
) {
    let container = crate::unique_table("c").to_ascii_lowercase();
    blobs.create_container(&container).await.expect("container");
    let filed: Table<Filed> =
        Table::from_arc(Arc::clone(backend), name).with_blob_store(Arc::clone(blobs), &container);
    let doc = |title: &str, size: usize| Filed {
        folder: "f".into(),
        id: 1,
        title: title.into(),
        body: "b".repeat(size),
    };
    filed
        .insert(&doc("plan", 100_000))
        .await
        .expect("insert offloaded");
    assert_eq!(
        index_problems::<Filed>(backend, name, "f").await,
        Vec::<String>::new()
    );
    let by_title = filed.index(Filed::indexes().title);
    assert_eq!(
        by_title.get("f", "plan").await.expect("get"),
        Some(doc("plan", 100_000))
    );
    filed
        .upsert(&doc("report", 120_000))
        .await
        .expect("upsert offloaded");
    assert_eq!(
        index_problems::<Filed>(backend, name, "f").await,
        Vec::<String>::new()
    );
    assert_eq!(
        by_title.get("f", "report").await.expect("get"),
        Some(doc("report", 120_000))
    );
    assert_eq!(by_title.get("f", "plan").await.expect("get"), None);
    assert!(
        filed
            .orphan_blobs(std::time::Duration::ZERO)
            .await
            .expect("orphans")
            .is_empty(),
        "the replaced body's blob is gone, the new one referenced"
    );
    filed
        .delete_unconditionally("f", 1u32)
        .await
        .expect("delete");
    assert!(
        backend
            .query_all(name, Query::new())
            .await
            .expect("rows")
            .is_empty()
    );
    blobs
        .delete_container(&container)
        .await
        .expect("drop container");
}

/// A department whose manager's details are copied into its employees.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "DEPT")]
pub struct Dept {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// Always 0: one row per department.
    #[tablekit(row_key)]
    pub row: u8,
    /// The manager's name.
    pub manager: String,
}

/// An employee holding a copy of their manager's name.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "MEMBER")]
pub struct Member {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique in the department.
    #[tablekit(unique = "email")]
    pub email: String,
    /// The copy of the department's manager.
    pub manager: String,
}

/// The entities of a department, read by kind.
#[derive(tablekit::EntityKinds, Debug, Clone, PartialEq)]

pub(super) enum DeptRows {
    Dept(Dept),
    Member(Member),
}

/// Submits `tx`, whose third write holds a stale ETag: the transaction
/// fails at that write, and nothing of it lands (the department keeps
/// `Ann`, member 1 its email, the index rows their places).
pub(super) async fn refused_at_its_stale_write(
    tx: tablekit::table::Transaction,
    backend: &dyn TableBackend,
    name: &str,
    members: &Table<Member>,
    depts: &Table<Dept>,
) {
    match tx.submit().await {
        Err(Error::BatchFailed { index: 2, source }) => {
            assert!(
                matches!(*source, Error::PreconditionFailed { ref row_key, .. } if row_key == "MEMBER_0000000002"),
                "{source:?}"
            );
        }
        other => panic!("expected the third write to fail, got {other:?}"),
    }
    assert_eq!(
        depts
            .get("Sales", 0u8)
            .await
            .expect("get")
            .expect("found")
            .manager,
        "Ann"
    );
    assert_eq!(
        members
            .get("Sales", 1u32)
            .await
            .expect("get")
            .expect("found")
            .email,
        "a@x"
    );
    assert_eq!(
        index_problems::<Member>(backend, name, "Sales").await,
        Vec::<String>::new()
    );
}

/// A typed batch of members (an insert, an upsert that moves an email, a
/// delete) keeps their index rows in step.
pub(super) async fn batches_keep_index_rows(
    backend: &dyn TableBackend,
    name: &str,
    members: &Table<Member>,
) {
    let mut batch = members.batch();
    batch.insert(&sales_member(6, "f@x", "Cy")).expect("add");
    batch.upsert(&sales_member(1, "a4@x", "Cy")).expect("add");
    batch.delete_unconditionally("Sales", 2u32).expect("add");
    batch.submit().await.expect("batch");
    assert_eq!(
        index_problems::<Member>(backend, name, "Sales").await,
        Vec::<String>::new()
    );
    let by_email = members.index(Member::indexes().email);
    assert_eq!(
        by_email
            .get("Sales", "a4@x")
            .await
            .expect("get")
            .map(|m| m.id),
        Some(1)
    );
    assert!(by_email.get("Sales", "b2@x").await.expect("get").is_none());
}

/// Member `id` of Sales.
pub(super) fn sales_member(id: u32, email: &str, manager: &str) -> Member {
    Member {
        department: "Sales".into(),
        id,
        email: email.into(),
        manager: manager.into(),
    }
}

/// Transactions of indexed members refused whole: a unique violation
/// names the write, and two writes wanting one value are refused before
/// anything is sent; the department keeps its manager `Cy`.
pub(super) async fn refused_transactions_write_nothing(
    members: &Table<Member>,
    depts: &Table<Dept>,
) {
    let member = sales_member;
    // A unique violation inside a transaction names the write.
    let mut tx = members.transaction();
    tx.upsert(&Dept {
        department: "Sales".into(),
        row: 0,
        manager: "Dee".into(),
    })
    .expect("add");
    tx.insert(&member(3, "b2@x", "Dee")).expect("add");
    match tx.submit().await {
        Err(Error::BatchFailed { index: 1, source }) => {
            assert!(
                matches!(*source, Error::UniqueViolation { index: "email", .. }),
                "{source:?}"
            );
        }
        other => panic!("expected the second write to fail, got {other:?}"),
    }
    assert_eq!(
        depts
            .get("Sales", 0u8)
            .await
            .expect("get")
            .expect("found")
            .manager,
        "Cy"
    );
    // Two writes wanting one value in the same transaction are refused
    // before anything is sent, in the caller's terms.
    let mut tx = members.transaction();
    tx.insert(&member(4, "same@x", "Cy")).expect("add");
    tx.insert(&member(5, "same@x", "Cy")).expect("add");
    assert!(matches!(
        tx.submit().await,
        Err(Error::Invalid(
            tablekit::InvalidInput::BatchDuplicateEntity {
                first: 0,
                index: 1,
                ..
            }
        ))
    ));
}

/// One transaction writes entities of several types, each with its index
/// rows; a failure names the write in the caller's order and applies
/// nothing, so a denormalized copy never disagrees with its source.
pub async fn transactions_span_kinds_and_indexes(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxtx").await;
    let members: Table<Member> = Table::from_arc(Arc::clone(&backend), &name);
    let depts: Table<Dept> = members.of();
    one_transaction_writes_kinds_and_index_rows(backend.as_ref(), &name, &members).await;

    // The manager changes: the department and every copy, together.
    let mut dept = depts.get("Sales", 0u8).await.expect("get").expect("found");
    let mut one = members
        .get("Sales", 1u32)
        .await
        .expect("get")
        .expect("found");
    let two = members
        .get("Sales", 2u32)
        .await
        .expect("get")
        .expect("found");
    dept.manager = "Bea".into();
    one.manager = "Bea".into();
    one.email = "a2@x".into();
    // Another writer changes employee 2 first: the whole transaction fails
    // at the write of employee 2, and nothing of it lands.
    members
        .update("Sales", 2u32, |m| m.email = "b2@x".into())
        .await
        .expect("update");
    let mut stale_two = two.clone();
    stale_two.manager = "Bea".into();
    let mut tx = members.transaction();
    tx.replace(&dept).expect("add");
    tx.replace(&one).expect("add");
    tx.replace(&stale_two).expect("add");
    refused_at_its_stale_write(tx, backend.as_ref(), &name, &members, &depts).await;

    // With the current version, it lands whole, index rows moved.
    let mut two = members
        .get("Sales", 2u32)
        .await
        .expect("get")
        .expect("found");
    two.manager = "Bea".into();
    let mut tx = members.transaction();
    tx.replace(&dept).expect("add");
    tx.replace(&one).expect("add");
    tx.replace(&two).expect("add");
    let etags = tx.submit().await.expect("submit");
    Loaded::set_etag(&mut dept, etags[0].clone().expect("etag"));
    Loaded::set_etag(&mut one, etags[1].clone().expect("etag"));
    assert!(
        members
            .get("Sales", 1u32)
            .await
            .expect("get")
            .is_some_and(|m| m.manager == "Bea" && m.email == "a2@x")
    );
    assert_eq!(
        index_problems::<Member>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );
    // The ETags returned are the versions written: writing through them works.
    dept.manager = "Cy".into();
    depts
        .replace(&mut dept)
        .await
        .expect("replace with the returned ETag");
    one.email = "a3@x".into();
    members
        .replace(&mut one)
        .await
        .expect("replace with the returned ETag");
    assert_eq!(
        index_problems::<Member>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );

    refused_transactions_write_nothing(&members, &depts).await;

    // A typed batch of one indexed type keeps the index rows too.
    batches_keep_index_rows(backend.as_ref(), &name, &members).await;
    backend.delete_table(&name).await.expect("drop");
}

/// A transaction writes a department and its employees, with the employees'
/// index rows; a read of every kind in the partition sees the entities only.
async fn one_transaction_writes_kinds_and_index_rows(
    backend: &dyn TableBackend,
    name: &str,
    members: &Table<Member>,
) {
    let member = sales_member;
    let mut tx = members.transaction();
    tx.insert(&Dept {
        department: "Sales".into(),
        row: 0,
        manager: "Ann".into(),
    })
    .expect("add");
    tx.insert(&member(1, "a@x", "Ann")).expect("add");
    tx.insert(&member(2, "b@x", "Ann")).expect("add");
    assert_eq!(tx.len(), 3);
    let etags = tx.submit().await.expect("submit");
    assert_eq!(etags.len(), 3);
    assert!(
        etags.iter().all(Option::is_some),
        "one ETag per write: {etags:?}"
    );
    assert_eq!(
        index_problems::<Member>(backend, name, "Sales").await,
        Vec::<String>::new()
    );
    // A read of every kind in the partition sees the entities, never their
    // index rows (an unknown kind would fail it).
    let kinds: Vec<DeptRows> = members
        .of::<DeptRows>()
        .read_partition("Sales", tablekit::UnknownKind::Fail)
        .map_ok(Loaded::into_inner)
        .try_collect()
        .await
        .expect("read every kind");
    assert_eq!(kinds.len(), 3, "{kinds:?}");
}

/// The audit of index rows from the raw rows alone (no type): clean on a
/// partition in step; after an entity is deleted and another's copied
/// value changed behind the library's back, exactly the orphaned index
/// rows, the stale copy and the dangling entry of the team's list.
pub async fn raw_audits_find_orphans_stale_copies_and_dangling_lists(
    backend: Arc<dyn TableBackend>,
) {
    use tablekit::index::audit_raw;
    let name = fresh_table(&*backend, "rawaudit").await;
    let t: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    let mut blue = staff("d", 3, "c@x", "Cole", "Cy");
    blue.team = "blue".into();
    for s in [
        staff("d", 1, "a@x", "Ames", "Al"),
        staff("d", 2, "b@x", "Bo", "Bea"),
        blue,
    ] {
        t.insert(&s).await.expect("insert");
    }
    let clean = audit_raw(&*backend, &name, "d").await.expect("an audit");
    assert!(clean.is_clean(), "{clean:?}");
    // Per entity a unique row and a name row; one list per team.
    assert_eq!((clean.entities, clean.index_rows), (3, 8), "{clean:?}");

    let key = |id: u32| {
        tablekit::schema::encode_keys::<Staff>(&"d", &id)
            .expect("keys")
            .1
    };
    backend
        .delete_entity(&name, "d", &key(3), &IfMatch::Any)
        .await
        .expect("a raw delete");
    let changed = Entity::new("d", key(1)).with("email", "changed@x");
    backend
        .update_entity(
            &name,
            &changed,
            tablekit::backend::UpdateMode::Merge,
            &IfMatch::Any,
        )
        .await
        .expect("a raw merge");
    let audit = audit_raw(&*backend, &name, "d").await.expect("an audit");
    let pointed: Vec<&str> = audit.orphans.iter().map(|(_, rk)| rk.as_str()).collect();
    assert_eq!(pointed, [key(3), key(3)], "{audit:?}");
    // Its unique row and its name row both copy the email it no longer has.
    let stale: Vec<(&str, &str)> = (audit.stale.iter())
        .map(|(rk, property)| (rk.as_str(), property.as_str()))
        .collect();
    assert_eq!(
        stale,
        [
            ("EMP.name_Ames|Al|EMP_0000000001", "email"),
            ("email_a@x", "email")
        ],
        "{audit:?}"
    );
    assert_eq!(audit.dangling.len(), 1, "{audit:?}");
    assert_eq!(audit.dangling[0].1, key(3), "{audit:?}");
    backend.delete_table(&name).await.expect("drop");
}
