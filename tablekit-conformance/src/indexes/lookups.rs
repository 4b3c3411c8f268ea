//! Repairs, index listings and pages, case-insensitive and optional values.

use super::*;
use tablekit::TableBackendExt;

/// [`Staff`] as written before its indexes were declared.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "EMP")]
pub struct StaffBefore {
    /// The department.
    #[tablekit(partition_key)]
    pub department: String,
    /// The employee id.
    #[tablekit(row_key)]
    pub id: u32,
    /// The email.
    pub email: String,
    /// The last name.
    pub last_name: String,
    /// The first name.
    pub first_name: String,
    /// The phone.
    pub phone: Option<String>,
    /// The salary.
    pub salary: u32,
    /// The hours.
    #[tablekit(series)]
    pub hours: [u8; 2],
    /// The team.
    pub team: String,
}

/// Indexes declared on existing data: verify reports what is missing,
/// stale or left over; repair fixes it, idempotently, partition by
/// partition, resumable.
pub async fn index_repair_finds_and_fixes(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxrepair").await;
    let before: Table<StaffBefore> = Table::from_arc(Arc::clone(&backend), &name);
    let table: Table<Staff> = before.of();
    for dept in ["A", "B", "C"] {
        for id in 1..=3 {
            let s = staff(dept, id, &format!("{dept}{id}@x"), "Lee", &format!("N{id}"));
            before
                .insert(&StaffBefore {
                    department: s.department,
                    id: s.id,
                    email: s.email,
                    last_name: s.last_name,
                    first_name: s.first_name,
                    phone: s.phone,
                    salary: s.salary,
                    hours: s.hours,
                    team: s.team,
                })
                .await
                .expect("insert");
        }
    }
    let audit = table.verify_indexes("A").await.expect("verify");
    assert_eq!(
        (audit.missing.len(), audit.stale.len(), audit.orphans.len()),
        (7, 0, 0),
        "{audit:?}"
    );
    let repaired = table.repair_indexes("A").await.expect("repair");
    assert_eq!(repaired.missing.len(), 7);
    assert!(table.verify_indexes("A").await.expect("verify").is_clean());
    assert!(
        table.repair_indexes("A").await.expect("again").is_clean(),
        "a second repair finds nothing"
    );
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "A").await,
        Vec::<String>::new()
    );

    // A stale copy and a row that belongs to no entity.
    let mut stale = backend
        .try_get_entity(&name, "A", "email_A1@x")
        .await
        .expect("get")
        .expect("row");
    stale.properties.insert("salary", 1i64);
    backend
        .update_entity(&name, &stale, tablekit::UpdateMode::Replace, &IfMatch::Any)
        .await
        .expect("spoil");
    let orphan = Entity::new("A", "EMP.name_Nobody|X|EMP_0000000099")
        .with("_Index", "name")
        .with("_Row", "EMP_0000000099");
    backend.insert_entity(&name, &orphan).await.expect("orphan");
    let audit = table.verify_indexes("A").await.expect("verify");
    assert_eq!(
        (audit.missing.len(), audit.stale.len(), audit.orphans.len()),
        (0, 1, 1),
        "{audit:?}"
    );

    whole_table_repairs_resume_by_pass(&*backend, &name, &table).await;
    backend.delete_table(&name).await.expect("drop");
}

/// A repair of the whole table, one partition per pass, resumed from each
/// pass's token, fixes every partition's problems, and a check finds none left.
async fn whole_table_repairs_resume_by_pass(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Staff>,
) {
    // The whole table, one partition per pass, resumed from each pass's token.
    let mut resume: Option<String> = None;
    let mut passes = 0;
    let mut fixed = 0;
    loop {
        let pass = table
            .repair_all_indexes(resume.as_deref(), 1, true)
            .await
            .expect("pass");
        passes += 1;
        fixed += pass.audit.missing.len() + pass.audit.stale.len() + pass.audit.orphans.len();
        match pass.resume {
            Some(next) => resume = Some(next),
            None => break,
        }
        assert!(passes <= 4, "the passes end");
    }
    assert_eq!(
        fixed,
        2 + 7 + 7,
        "A's two problems, and B's and C's missing rows"
    );
    for dept in ["A", "B", "C"] {
        assert_eq!(
            index_problems::<Staff>(backend, name, dept).await,
            Vec::<String>::new(),
            "{dept}"
        );
    }
    let check = table
        .repair_all_indexes(None, usize::MAX, false)
        .await
        .expect("verify all");
    assert!(
        check.audit.is_clean() && check.partitions == 3 && check.resume.is_none(),
        "{check:?}"
    );
}

/// An index entity per value lists the entities that hold it: kept in the
/// same transaction as each entity, guarded by its own ETag and retried when
/// concurrent writers change it; a list that would outgrow a row is refused
/// with nothing written.
pub async fn index_entities_list_entities(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxlist").await;
    let table: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    let member = |id: u32, team: &str| Staff {
        team: team.into(),
        ..staff("Sales", id, &format!("m{id}@x"), "Lee", "Al")
    };
    for (id, team) in [(3, "red"), (1, "red"), (2, "blue"), (4, "red")] {
        table.insert(&member(id, team)).await.expect("insert");
    }
    let row = backend
        .try_get_entity(&name, "Sales", "EMP.team_red")
        .await
        .expect("get")
        .expect("the red team's index entity");
    assert_eq!(
        row.get("_Rows0"),
        Some(&tablekit::Value::String(
            "EMP_0000000001\nEMP_0000000003\nEMP_0000000004\n".into()
        )),
        "one row lists the red team, in RowKey order"
    );
    let teams = table.index(Staff::indexes().team);
    let red: Vec<u32> = teams
        .find("Sales", "red")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(red, [1, 3, 4]);
    let all: Vec<u32> = teams
        .range("Sales", "a", "z")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("range");
    assert_eq!(all, [2, 1, 3, 4], "blue, then red");

    // Moving to another team leaves one list and joins the other.
    let mut three = table.get("Sales", 3u32).await.expect("get").expect("found");
    three.team = "blue".into();
    table.replace(&mut three).await.expect("replace");
    let blue: Vec<u32> = teams
        .find("Sales", "blue")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(blue, [2, 3]);
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );

    // Writers racing on one list: each conflict is read again and retried.
    let writers = (0..2u32).map(|w| {
        let table = table.clone();
        async move {
            for i in 0..10u32 {
                table
                    .insert(&member(100 + w * 100 + i, "green"))
                    .await
                    .expect("racing insert");
            }
        }
    });
    futures::future::join_all(writers).await;
    let green: Vec<u32> = teams
        .find("Sales", "green")
        .map_ok(|s| s.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(green.len(), 20, "every racing insert is listed once");
    assert_eq!(
        index_problems::<Staff>(&*backend, &name, "Sales").await,
        Vec::<String>::new()
    );

    a_full_list_refuses_one_more(&*backend, &name, &table, &member(999_999, "huge")).await;
    backend.delete_table(&name).await.expect("drop");
}

/// A list that would outgrow its row refuses one more entity, and nothing
/// of that write lands.
async fn a_full_list_refuses_one_more(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Staff>,
    huge: &Staff,
) {
    // A list that would outgrow its row is refused, and nothing is written.
    let mut full = Entity::new("Sales", "EMP.team_huge").with("_Index", "team");
    // 14 properties of 2,133 RowKeys of 15 characters: as full as a list gets.
    for n in 0..14 {
        let chunk: String = (0..2_133)
            .map(|i| format!("EMP_{:010}\n", n * 2_133 + i))
            .collect();
        full.insert(format!("_Rows{n}"), chunk);
    }
    backend
        .insert_entity(name, &full)
        .await
        .expect("a full list, by hand");
    let refused = table.insert(huge).await;
    assert!(
        matches!(&refused, Err(Error::Invalid(tablekit::InvalidInput::IndexListFull { index: "team", value, .. })) if value == "huge"),
        "{refused:?}"
    );
    assert!(
        table.get("Sales", 999_999u32).await.expect("get").is_none(),
        "nothing written"
    );
}

/// Pages through an index cover every entity once, in index order, and
/// their cursors survive being written out as text; a cursor of another
/// read is refused.
pub async fn index_pages_cover_every_entity_once(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "idxpage").await;
    let table: Table<Staff> = Table::from_arc(Arc::clone(&backend), &name);
    for id in 1..=7u32 {
        let first = format!("N{}", 8 - id);
        table
            .insert(&staff("Sales", id, &format!("p{id}@x"), "Page", &first))
            .await
            .expect("insert");
    }
    table
        .insert(&staff("Sales", 50, "other@x", "Other", "X"))
        .await
        .expect("insert");
    let by_name = table.index(Staff::indexes().name);
    let mut seen = Vec::new();
    let mut after: Option<tablekit::Cursor> = None;
    let mut pages = 0;
    loop {
        let page = by_name
            .prefix_page("Sales", "Page", 3, after.as_ref())
            .await
            .expect("page");
        pages += 1;
        seen.extend(page.items.iter().map(|s| s.first_name.clone()));
        match page.next {
            // Written out and read back, as a web page would.
            Some(cursor) => after = Some(cursor.to_string().parse().expect("cursor")),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["N1", "N2", "N3", "N4", "N5", "N6", "N7"]);
    let first = by_name
        .prefix_page("Sales", "Page", 2, None)
        .await
        .expect("page");
    let cursor = first.next.expect("more");
    assert!(matches!(
        by_name
            .prefix_page("Sales", "Other", 2, Some(&cursor))
            .await,
        Err(Error::Invalid(tablekit::InvalidInput::Cursor { .. }))
    ));
    let by_email = table.index(Staff::indexes().email);
    let one = by_email
        .find_page("Sales", "p3@x", 10, None)
        .await
        .expect("page");
    assert_eq!((one.items.len(), one.next.is_none()), (1, true));
    let ranged = by_email
        .range_page("Sales", "p1@x", "p4@x", 2, None)
        .await
        .expect("page");
    assert_eq!(
        ranged.items.iter().map(|s| s.id).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(ranged.next.is_some());
    backend.delete_table(&name).await.expect("drop");
}

/// A member whose email is unique whatever its case.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "CLUB")]
#[tablekit(index(name = "email", tag = "email"))]
pub struct ClubMember {
    /// The club.
    #[tablekit(partition_key)]
    pub club: String,
    /// The member's number.
    #[tablekit(row_key)]
    pub id: u32,
    /// Stored as given, unique in lower case.
    #[tablekit(unique = "email")]
    pub email: tablekit::key::CaseInsensitive,
}

/// An index over [`CaseInsensitive`](tablekit::key::CaseInsensitive) text:
/// values differing in case only are one unique value, a lookup finds the
/// entity whatever the case it is given in, and the value reads back as
/// stored.
pub async fn case_insensitive_values_share_one_unique_row(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "caseless").await;
    let members: Table<ClubMember> = Table::from_arc(Arc::clone(&backend), &name);
    let ann = ClubMember {
        club: "Chess".into(),
        id: 1,
        email: "Ann@Example.com".into(),
    };
    members.insert(&ann).await.expect("insert");
    let twin = ClubMember {
        id: 2,
        email: "ann@EXAMPLE.COM".into(),
        ..ann.clone()
    };
    assert!(matches!(
        members.insert(&twin).await,
        Err(Error::UniqueViolation { index: "email", .. })
    ));
    let by_email = members.index(ClubMember::indexes().email);
    for asked in ["ann@example.com", "ANN@EXAMPLE.COM", "Ann@Example.com"] {
        let found = by_email.get("Chess", asked).await.expect("get");
        assert_eq!(found.as_ref(), Some(&ann), "{asked}");
    }
    let stored = members
        .get("Chess", 1u32)
        .await
        .expect("get")
        .expect("there");
    assert_eq!(stored.email.as_str(), "Ann@Example.com", "stored as given");
    // Changed in case only: the same unique value, kept.
    let mut loaded = stored;
    loaded.email = "ANN@example.com".into();
    members.replace(&mut loaded).await.expect("replace");
    assert!(matches!(
        members.insert(&twin).await,
        Err(Error::UniqueViolation { .. })
    ));
    assert!(
        members
            .verify_indexes("Chess")
            .await
            .expect("verify")
            .is_clean()
    );
    folded_values_share_one_unique_row(&*backend, &members).await;
    backend.delete_table(&name).await.expect("delete table");
}

/// Values that differ only in full Unicode case folding (`ß` and `SS`, a
/// final `ς` and `Σ`) are one unique value too; an index row keyed in lower
/// case only (as an earlier build wrote it) is found stale, repaired, and
/// then found by a lookup.
pub(super) async fn folded_values_share_one_unique_row(
    backend: &dyn TableBackend,
    members: &Table<ClubMember>,
) {
    let fritz = ClubMember {
        club: "Go".into(),
        id: 1,
        email: "Fritz.Straße@Example.com".into(),
    };
    members.insert(&fritz).await.expect("insert");
    let sigma = ClubMember {
        id: 2,
        email: "ΣΑΣ@x".into(),
        ..fritz.clone()
    };
    members.insert(&sigma).await.expect("insert");
    for (id, email) in [(3, "FRITZ.STRASSE@example.com"), (4, "σας@X")] {
        let twin = ClubMember {
            id,
            email: email.into(),
            ..fritz.clone()
        };
        let refused = members.insert(&twin).await;
        assert!(
            matches!(refused, Err(Error::UniqueViolation { index: "email", .. })),
            "{email}: {refused:?}"
        );
    }
    let by_email = members.index(ClubMember::indexes().email);
    for (asked, member) in [
        ("fritz.strasse@example.com", &fritz),
        ("FRITZ.STRAẞE@EXAMPLE.COM", &fritz),
        ("σασ@x", &sigma),
    ] {
        let found = by_email.get("Go", asked).await.expect("get");
        assert_eq!(found.as_ref(), Some(member), "{asked}");
    }
    // The index row as a build that lower-cased wrote it: `straße`.
    let query = Query::new().filter(Filter::partition_key().eq("Go"));
    let rows = backend
        .query_all(members.name(), query)
        .await
        .expect("rows");
    let folded = rows
        .iter()
        .find(|row| row.row_key.contains("fritz.strasse@"))
        .expect("the index row, keyed folded")
        .clone();
    let mut lowered = folded.clone();
    lowered.row_key = folded.row_key.replace("strasse", "straße");
    backend
        .insert_entity(members.name(), &lowered)
        .await
        .expect("write the lower-cased row");
    backend
        .delete_entity(members.name(), "Go", &folded.row_key, &IfMatch::Any)
        .await
        .expect("delete the folded row");
    assert!(
        !members
            .verify_indexes("Go")
            .await
            .expect("verify")
            .is_clean()
    );
    assert!(
        by_email
            .get("Go", "fritz.strasse@example.com")
            .await
            .expect("get")
            .is_none()
    );
    members.repair_indexes("Go").await.expect("repair");
    assert!(
        members
            .verify_indexes("Go")
            .await
            .expect("verify")
            .is_clean()
    );
    let found = by_email
        .get("Go", "Fritz.STRASSE@example.com")
        .await
        .expect("get");
    assert_eq!(found.as_ref(), Some(&fritz));
}

/// A player whose badge, when there is one, is unique, and whose nickname,
/// when there is one, is indexed.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "PLY")]
#[tablekit(index(name = "badge", tag = "badge"))]
#[tablekit(index(name = "nick", tag = "nick"))]
pub struct Player {
    /// The team.
    #[tablekit(partition_key)]
    pub team: String,
    /// The player's number.
    #[tablekit(row_key)]
    pub id: u32,
    /// Unique when given; players without one have no row in the index.
    #[tablekit(unique = "badge")]
    pub badge: Option<String>,
    /// Indexed when given.
    #[tablekit(index = "nick")]
    pub nick: Option<String>,
}

/// An index over an optional field, as SQL treats NULL in a unique index:
/// an entity whose value is `None` has no row in it (so any number of them
/// may share "no value"), and gaining or losing the value writes or deletes
/// the row in the same transaction.
pub async fn optional_values_have_rows_only_when_given(backend: Arc<dyn TableBackend>) {
    let name = fresh_table(&*backend, "optional").await;
    let players: Table<Player> = Table::from_arc(Arc::clone(&backend), &name);
    let player = |id: u32, badge: Option<&str>, nick: Option<&str>| Player {
        team: "Reds".into(),
        id,
        badge: badge.map(str::to_owned),
        nick: nick.map(str::to_owned),
    };
    players
        .insert(&player(1, None, None))
        .await
        .expect("insert");
    players
        .insert(&player(2, None, Some("ace")))
        .await
        .expect("a second without a badge");
    players
        .insert(&player(3, Some("b3"), Some("ace")))
        .await
        .expect("insert");
    assert!(matches!(
        players.insert(&player(4, Some("b3"), None)).await,
        Err(Error::UniqueViolation { index: "badge", .. })
    ));
    let badges = players.index(Player::indexes().badge);
    let found = badges.get("Reds", "b3").await.expect("get");
    assert_eq!(found.map(|p| p.id), Some(3));
    let aces: Vec<u32> = players
        .index(Player::indexes().nick)
        .find("Reds", "ace")
        .map_ok(|p| p.id)
        .try_collect()
        .await
        .expect("find");
    assert_eq!(aces, [2, 3]);
    let rows = |backend: Arc<dyn TableBackend>, name: String| async move {
        backend
            .query_all(&name, Query::new())
            .await
            .expect("rows")
            .into_iter()
            .filter(tablekit::index::is_index_row)
            .count()
    };
    assert_eq!(
        rows(Arc::clone(&backend), name.clone()).await,
        3,
        "b3, ace|2, ace|3"
    );
    // Losing a value deletes its row; gaining one writes it.
    let mut three = players
        .get("Reds", 3u32)
        .await
        .expect("get")
        .expect("there");
    three.badge = None;
    players.replace(&mut three).await.expect("replace");
    assert!(badges.get("Reds", "b3").await.expect("get").is_none());
    players
        .insert(&player(4, Some("b3"), None))
        .await
        .expect("the badge is free");
    let mut one = players
        .get("Reds", 1u32)
        .await
        .expect("get")
        .expect("there");
    one.nick = Some("ace".into());
    players.replace(&mut one).await.expect("replace");
    assert!(
        players
            .verify_indexes("Reds")
            .await
            .expect("verify")
            .is_clean()
    );
    for id in 1..=4u32 {
        let loaded = players.get("Reds", id).await.expect("get").expect("there");
        players.delete(&loaded).await.expect("delete");
    }
    assert_eq!(
        rows(Arc::clone(&backend), name.clone()).await,
        0,
        "no index row left"
    );
    backend.delete_table(&name).await.expect("delete table");
}
