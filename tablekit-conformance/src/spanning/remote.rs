//! Indexes kept in another partition: model runs, writes, repairs and damage.

use super::*;
use tablekit::TableBackendExt;

/// Every item of a stream of reads through an index.
pub(super) async fn read_all<Q>(
    reads: futures::stream::BoxStream<'static, tablekit::Result<Q>>,
) -> Vec<Q> {
    futures::TryStreamExt::try_collect(reads)
        .await
        .expect("read through the index")
}

/// A contact, found by email through an index kept in another partition
/// of its table, and by city through one kept in another table.
#[derive(TableEntity, Debug, Clone, PartialEq)]
#[tablekit(table = "Conformance", kind = "CON")]
#[tablekit(index(name = "email", partition = "email", copy(salary)))]
#[tablekit(index(name = "city", table = "ConformanceCities"))]
#[tablekit(index(name = "tier", partition = "tier", list))]
pub struct Contact {
    /// The team.
    #[tablekit(partition_key)]
    pub team: String,
    /// The contact id.
    #[tablekit(row_key)]
    pub id: u32,
    /// Indexed in partition `email_{team}`.
    #[tablekit(index = "email")]
    pub email: String,
    /// Indexed in table `ConformanceCities`, partition `{team}`.
    #[tablekit(index = "city")]
    pub city: String,
    /// Copied into the email index.
    pub salary: u32,
    /// Listed in one index entity per tier, in partition `tier_{team}`.
    #[tablekit(index = "tier")]
    pub tier: String,
}

/// An entity an index entity should list: the index's name and the
/// entity's RowKey.
pub(super) type ListedBy<'a> = (&'a str, String);

/// The rows of `T`'s indexes kept elsewhere that the entities of `table`'s
/// partitions `pks` should have, against those there are.
pub(super) async fn remote_rows_in_step<T: TableEntity>(
    backend: &dyn TableBackend,
    table: &str,
    pks: &[String],
) -> Result<(), String> {
    use tablekit::__conformance::index_row;
    use tablekit::index::RemoteIndexDef;
    let mut expected: BTreeMap<(String, String, String), Entity> = BTreeMap::new();
    let mut places: Vec<(&RemoteIndexDef, String, String)> = Vec::new();
    // For each index entity (table, partition, RowKey): its index's name
    // and the RowKeys it should list.
    let mut lists: BTreeMap<(String, String, String), Vec<ListedBy<'_>>> = BTreeMap::new();
    for pk in pks {
        let filter = tablekit::filter::Filter::partition_key().eq(pk.as_str());
        let rows = backend
            .query_all(table, Query::new().filter(filter))
            .await
            .map_err(|e| e.to_string())?;
        for def in tablekit::index::remote_indexes::<T>() {
            let (index_table, partition) = def.place(table, pk);
            places.push((def, index_table, partition));
        }
        for row in rows
            .iter()
            .filter(|r| tablekit::schema::is_kind::<T>(r) && !outbox::is_bookkeeping_row(r))
        {
            let value: T = tablekit::schema::from_entity(row).map_err(|e| e.to_string())?;
            for (i, def) in tablekit::index::remote_indexes::<T>().iter().enumerate() {
                let key = tablekit::__conformance::remote_index_key(&value, i, &row.row_key)
                    .map_err(|e| e.to_string())?;
                if key.is_empty() {
                    continue;
                }
                let (index_table, partition) = def.place(table, pk);
                if def.index.list {
                    lists
                        .entry((index_table, partition, key))
                        .or_default()
                        .push((def.index.name, row.row_key.clone()));
                    continue;
                }
                let mut index = index_row::<T>(&def.index, key.clone(), row);
                index.partition_key.clone_from(&partition);
                expected.insert((index_table, partition, key), index);
            }
        }
    }
    // An index entity lists its entities' RowKeys in order, one per line,
    // and names its index when the kind writes it.
    for ((index_table, partition, key), mut members) in lists {
        members.sort();
        let mut row = Entity::new(partition.as_str(), key.as_str()).with(
            "_Rows0",
            members
                .iter()
                .map(|(_, rk)| format!("{rk}\n"))
                .collect::<String>(),
        );
        if T::DESCRIPTOR.kind_properties {
            row.insert("_Index", members[0].0);
        }
        expected.insert((index_table, partition, key), row);
    }
    for (def, index_table, partition) in places {
        let filter = tablekit::filter::Filter::partition_key()
            .eq(partition.as_str())
            .and(tablekit::__conformance::row_key_prefix(&def.index.prefix()));
        let rows = backend
            .query_all(&index_table, Query::new().filter(filter))
            .await
            .map_err(|e| e.to_string())?;
        for row in rows {
            let key = (index_table.clone(), partition.clone(), row.row_key.clone());
            let Some(want) = expected.remove(&key) else {
                return Err(format!("an index row no entity wants: {key:?}"));
            };
            let sorted = |e: &Entity| {
                let mut props: Vec<(String, tablekit::Value)> = e
                    .properties
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.clone()))
                    .collect();
                props.sort_by(|a, b| a.0.cmp(&b.0));
                props
            };
            if sorted(&row) != sorted(&want) {
                return Err(format!("a stale index row {key:?}: {row:?}, want {want:?}"));
            }
        }
    }
    match expected.into_keys().next() {
        Some(missing) => Err(format!("a missing index row: {missing:?}")),
        None => Ok(()),
    }
}

/// Random writes of every kind to contacts whose indexes are kept in
/// another partition and another table, with faults injected into the
/// tables and the queue (failures, lost answers, a writer that stops after
/// its commit); after each run the worker drains, the sweeper runs, and
/// every index row must match its entity, with none left over and no
/// record left.
pub async fn remote_index_model_runs(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    runs: usize,
    steps: usize,
    seed: u64,
) -> OutboxOutcomes {
    let mut outcomes = OutboxOutcomes::default();
    cities_table(backend.as_ref()).await;
    let queue = unique_queue();
    let tables = FaultInjection::new(Arc::clone(&backend));
    let faults = tables.handle();
    faults.seed(seed);
    let faulty: Arc<dyn TableBackend> = Arc::new(tables);
    let outbox = Outbox::new(Arc::clone(&queues), queue.clone()).delay(Duration::ZERO);
    OutboxWorker::new(Arc::clone(&backend), Arc::clone(&queues), &queue)
        .create_queues()
        .await
        .expect("create the queues");
    let mut rng = fastrand::Rng::with_seed(seed);
    let tag: String = std::iter::repeat_with(|| rng.lowercase()).take(6).collect();
    for run in 0..runs {
        // A table per run, so that checking a run reads only its rows.
        let name = fresh_table(&*backend, "remote").await;
        let table: Table<Contact> =
            Table::from_arc(Arc::clone(&faulty), &name).with_outbox(outbox.clone());
        let pk = format!("{tag}{run}");
        for _ in 0..steps {
            faults.clear();
            if rng.f64() < 0.5 {
                let fault = [Fault::Transient, Fault::LostResponse][rng.usize(0..2)];
                faults.inject(Injection::any().skip(rng.usize(0..8)).fault(fault));
            }
            if rng.f64() < 0.1 {
                faults.inject(Injection::on(Operation::QueryEntities).times(usize::MAX));
            }
            let id = rng.u32(0..3);
            let value = Contact {
                team: pk.clone(),
                id,
                email: ["a@x", "b@x", "c@x"][rng.usize(0..3)].into(),
                city: ["Oslo", "Rome"][rng.usize(0..2)].into(),
                salary: rng.u32(..100),
                tier: ["gold", "silver"][rng.usize(0..2)].into(),
            };
            let result = match rng.usize(0..6) {
                0 => table.insert(&value).await.map(drop),
                1 => table.upsert(&value).await.map(drop),
                2 => table.upsert_merge(&value).await.map(drop),
                3 => table.delete_unconditionally(pk.as_str(), id).await,
                4 => table
                    .update(pk.as_str(), id, |c| {
                        c.email = value.email.clone();
                        c.salary += 1;
                    })
                    .await
                    .map(drop),
                _ => match table.get(pk.as_str(), id).await {
                    Ok(Some(mut loaded)) => {
                        loaded.city = value.city.clone();
                        table.replace(&mut loaded).await.map(drop)
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok(()) => outcomes.moved += 1,
                Err(Error::OutcomeUnknown { .. }) => outcomes.unknown += 1,
                Err(_) => outcomes.refused += 1,
            }
        }
        faults.clear();
        drain(&backend, &queues, &queue, &name).await;
        let all = rows(backend.as_ref(), &name).await;
        assert!(!all.iter().any(outbox::is_outbox_row), "no record left");
        if let Err(problem) =
            remote_rows_in_step::<Contact>(backend.as_ref(), &name, std::slice::from_ref(&pk)).await
        {
            panic!("run {run}: {problem}");
        }
        backend
            .delete_table(&name)
            .await
            .expect("delete the run's table");
    }
    outcomes
}

/// Reads through the indexes kept elsewhere find the entities once their
/// steps are applied (at once, by the writer), follow moves of the value,
/// and leave out rows an entity no longer matches.
pub async fn remote_indexes_follow_writes(
    backend: Arc<dyn TableBackend>,
    queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "remotes").await;
    cities_table(backend.as_ref()).await;
    let queue = unique_queue();
    queues.create_queue(&queue).await.expect("create queue");
    let table: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name)
        .with_outbox(Outbox::new(Arc::clone(&queues), queue.clone()));
    let team: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    let ann = Contact {
        team: team.clone(),
        id: 1,
        email: "ann@x".into(),
        city: "Oslo".into(),
        salary: 5,
        tier: "gold".into(),
    };
    table.insert(&ann).await.expect("insert");
    let by_email = table.remote_index(Contact::indexes().email);
    let by_city = table.remote_index(Contact::indexes().city);
    let found: Vec<Contact> = read_all(by_email.find(team.as_str(), "ann@x")).await;
    assert_eq!(
        found,
        std::slice::from_ref(&ann),
        "found through the email index"
    );
    let found: Vec<Contact> = read_all(by_city.find(team.as_str(), "Oslo")).await;
    assert_eq!(
        found,
        std::slice::from_ref(&ann),
        "found through the city index"
    );
    // The tier index keeps one index entity per tier, listing contacts.
    let by_tier = table.remote_index(Contact::indexes().tier);
    let gold: Vec<Contact> = read_all(by_tier.find(team.as_str(), "gold")).await;
    assert_eq!(gold, std::slice::from_ref(&ann), "listed in the gold tier");
    table
        .update(team.as_str(), 1u32, |c| c.tier = "silver".into())
        .await
        .expect("update");
    assert!(
        read_all(by_tier.find(team.as_str(), "gold"))
            .await
            .is_empty()
    );
    let silver: Vec<Contact> = read_all(by_tier.find(team.as_str(), "silver")).await;
    assert_eq!(silver.len(), 1, "listed in the silver tier now");
    table
        .update(team.as_str(), 1u32, |c| c.tier = "gold".into())
        .await
        .expect("update");
    // The email moves: the old row goes, the new one comes.
    table
        .update(team.as_str(), 1u32, |c| c.email = "anna@x".into())
        .await
        .expect("update");
    let old: Vec<Contact> = read_all(by_email.find(team.as_str(), "ann@x")).await;
    assert!(old.is_empty(), "the old value finds nothing");
    let new: Vec<Contact> = read_all(by_email.find(team.as_str(), "anna@x")).await;
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].email, "anna@x");
    // The email index's rows copy the salary only: followed to the entity.
    let page = by_email
        .find_page(team.as_str(), "anna@x", 10, None)
        .await
        .expect("page");
    assert_eq!(page.items.len(), 1);
    table
        .delete_unconditionally(team.as_str(), 1u32)
        .await
        .expect("delete");
    let gone: Vec<Contact> = read_all(by_city.find(team.as_str(), "Oslo")).await;
    assert!(gone.is_empty(), "a deleted entity's index rows go");
    // Inserted again: its rows come back, above the fences its first life left.
    table.insert(&ann).await.expect("insert again");
    let back: Vec<Contact> = read_all(by_email.find(team.as_str(), "ann@x")).await;
    assert_eq!(
        back,
        std::slice::from_ref(&ann),
        "an entity inserted again is indexed again"
    );
    remote_rows_in_step::<Contact>(backend.as_ref(), &name, std::slice::from_ref(&team))
        .await
        .expect("index rows in step");
    assert!(
        queues
            .peek_messages(&queue, 32)
            .await
            .expect("peek")
            .is_empty(),
        "every notice withdrawn"
    );
}

/// Verify finds the rows of indexes kept elsewhere that are missing, stale
/// or left over (rows written by another client, a record not finished);
/// repair fixes them all, and a second repair finds nothing.
pub async fn remote_index_repair_finds_and_fixes(
    backend: Arc<dyn TableBackend>,
    _queues: Arc<dyn QueueStore>,
    _time: QueueTime,
) {
    let name = fresh_table(&*backend, "rrepair").await;
    cities_table(backend.as_ref()).await;
    let table: Table<Contact> = Table::from_arc(Arc::clone(&backend), &name);
    let team: String = std::iter::repeat_with(fastrand::lowercase)
        .take(8)
        .collect();
    for (id, email, city) in [(1, "a@x", "Oslo"), (2, "b@x", "Rome"), (3, "c@x", "Oslo")] {
        let contact = Contact {
            team: team.clone(),
            id,
            email: email.into(),
            city: city.into(),
            salary: id,
            tier: if id == 2 { "silver" } else { "gold" }.into(),
        };
        table.insert(&contact).await.expect("insert");
    }
    let clean = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert!(clean.is_clean(), "{clean:?}");
    damage_remote_rows(backend.as_ref(), &name, &team).await;
    let found = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert_eq!(found.missing.len(), 1, "{found:?}");
    assert_eq!(found.stale.len(), 2, "{found:?}");
    assert_eq!(found.orphans.len(), 1, "{found:?}");
    let repaired = table
        .repair_remote_indexes(team.as_str())
        .await
        .expect("repair");
    assert_eq!(repaired, found, "repair reports what it found");
    let after = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert!(after.is_clean(), "{after:?}");
    remote_rows_in_step::<Contact>(backend.as_ref(), &name, std::slice::from_ref(&team))
        .await
        .expect("in step");
    let again = table
        .repair_remote_indexes(team.as_str())
        .await
        .expect("repair again");
    assert!(again.is_clean(), "a second repair finds nothing: {again:?}");
    whole_table_remote_repairs_resume(&*backend, &name, &table, &team).await;
    // Writes after a repair still reach their rows.
    table
        .update(team.as_str(), 1u32, |c| c.city = "Rome".into())
        .await
        .expect("update");
    let after = table
        .verify_remote_indexes(team.as_str())
        .await
        .expect("verify");
    assert!(after.is_clean(), "{after:?}");
}

/// A repair of the whole table's remote indexes goes a partition at a time,
/// and resumes from where a pass stopped.
async fn whole_table_remote_repairs_resume(
    backend: &dyn TableBackend,
    name: &str,
    table: &Table<Contact>,
    team: &str,
) {
    // The whole table, a partition at a time, resumable.
    let other_team = format!("{team}z");
    let other = Contact {
        team: other_team.clone(),
        id: 7,
        email: "z@x".into(),
        city: "Rome".into(),
        salary: 7,
        tier: "gold".into(),
    };
    table.insert(&other).await.expect("insert");
    backend
        .delete_entity(
            name,
            &format!("email_{other_team}"),
            "CON.email_z@x|CON_0000000007",
            &tablekit::IfMatch::Any,
        )
        .await
        .expect("delete a row");
    let first = table
        .repair_all_remote_indexes(None, 1, false)
        .await
        .expect("a pass");
    assert_eq!(first.partitions, 1);
    assert!(first.audit.is_clean(), "{first:?}");
    assert_eq!(first.resume.as_deref(), Some(team));
    let second = table
        .repair_all_remote_indexes(first.resume.as_deref(), 1, true)
        .await
        .expect("a pass");
    assert_eq!((second.partitions, second.resume.as_deref()), (1, None));
    assert_eq!(second.audit.missing.len(), 1, "{second:?}");
    let done = table
        .repair_all_remote_indexes(None, 10, false)
        .await
        .expect("a pass");
    assert_eq!(done.partitions, 2);
    assert!(done.audit.is_clean(), "repaired: {done:?}");
}

/// What another client does to `team`'s rows of the indexes kept
/// elsewhere: deletes one row, changes another, leaves a stray one, and
/// drops a contact from the gold tier's list.
pub(super) async fn damage_remote_rows(backend: &dyn TableBackend, name: &str, team: &str) {
    let email_partition = format!("email_{team}");
    // Another client deletes one row, changes another, and leaves one.
    backend
        .delete_entity(
            "ConformanceCities",
            team,
            "CON.city_Rome|CON_0000000002",
            &tablekit::IfMatch::Any,
        )
        .await
        .expect("delete a row");
    let mut changed = backend
        .get_entity(
            name,
            &email_partition,
            "CON.email_a@x|CON_0000000001",
            &Default::default(),
        )
        .await
        .expect("read a row");
    changed.insert("salary", 999i64);
    backend
        .upsert_entity(name, &changed, tablekit::UpdateMode::Replace)
        .await
        .expect("change a row");
    let stray = Entity::new(email_partition.as_str(), "CON.email_zz@x|CON_0000000009")
        .with("_Row", "CON_0000000009");
    backend
        .insert_entity(name, &stray)
        .await
        .expect("add a row");
    // And drops a contact from the gold tier's list.
    let short = Entity::new(format!("tier_{team}"), "CON.tier_gold")
        .with("_Rows0", "CON_0000000001\n")
        .with("_Index", "tier");
    backend
        .upsert_entity(name, &short, tablekit::UpdateMode::Replace)
        .await
        .expect("change a list");
}
