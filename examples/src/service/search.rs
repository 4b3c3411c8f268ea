//! Finding customers by the start of their name
//! (`GET /tenants/{tenant}/customers/by-name/{prefix}`), from a projection
//! that a consumer of the customers' change feed keeps.
//!
//! No write path of the service knows the projection: every customer
//! write records its change in its own transaction, and [`NameSearch`]
//! reads the feed, keeps a [`NameEntry`] per customer (and a
//! [`NamePointer`] to it), and commits its checkpoint after. So:
//! - a customer write that commits reaches the search, even if the
//!   service stops right after it (the change waits in the feed);
//! - the search lags the customers by a poll, and may for a moment show
//!   a name just changed;
//! - a change applied twice (the projector stopped before its commit) is
//!   harmless: each entry is written from the customer's value, with its
//!   pointer, in one transaction.
//!
//! Several instances of the service share the work: each holds a lease on
//! some tenants' partitions, and takes over those of an instance that
//! stopped once its leases run out.
//!
//! The projection never stalls on one customer. A name whose entry would
//! not fit the store's key limits is refused at the door (400), and a
//! change the projector still cannot index (one written around the door,
//! by another program or an older version) is skipped: the customer is
//! left out of the search, the skip is logged (by change number, never by
//! name or id) and counted in `service.name_search.skipped`, and the
//! changes after it go on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use serde_json::{Value as JsonValue, json};
use tablekit::changes::{Change, ChangeOp, Consumer};
use tablekit::filter::Filter;
use tablekit::key::Verbatim;
use tablekit::{Error, Table};

use super::App;
use super::error::{ApiError, ApiResult};
use super::http::{Page, PageParams, page};
use super::model::{Customer, NameEntry, NamePointer};

/// The consumer's name: its checkpoints and leases are rows of the table.
const CONSUMER: &str = "name-search";

/// How long an instance's lease on a partition lasts without a poll.
const LEASE: Duration = Duration::from_secs(30);

/// How long the projector waits after a poll that found nothing, at first.
const IDLE: Duration = Duration::from_millis(500);

/// The longest it waits while nothing comes: a write of another instance
/// is searched within this (one of this instance, at once).
const IDLE_MAX: Duration = Duration::from_secs(20);

/// The projector of the name search
/// (`GET /tenants/{tenant}/customers/by-name/{prefix}`): a consumer of the
/// customers' change feed that keeps a [`NameEntry`] per customer (and a
/// [`NamePointer`] to it) in the tenant's partition, committing its
/// checkpoint after. No write path knows it: a customer write that commits
/// reaches the search even if the service stops right after it; the search
/// lags by a poll; a change applied twice (the projector stopped before its
/// commit) is harmless. Instances share the tenants by leases.
pub struct NameSearch {
    customers: Table<Customer>,
    consumer: Consumer<Customer>,
    skipped: AtomicU64,
    counter: opentelemetry::metrics::Counter<u64>,
}

impl NameSearch {
    /// The projector of `app`'s customers, as the instance `instance` (one
    /// name per process: a random one will do).
    pub fn new(app: &App, instance: &str) -> Result<NameSearch, Error> {
        let consumer = app
            .customers
            .changes()
            .consumer(CONSUMER)?
            .leased(instance, LEASE);
        let counter = opentelemetry::global::meter("tablekit-example-service")
            .u64_counter("service.name_search.skipped")
            .with_description("Customer changes the name search could not index, skipped")
            .build();
        Ok(NameSearch {
            customers: app.customers.clone(),
            consumer,
            skipped: AtomicU64::new(0),
            counter,
        })
    }

    /// Reads up to `max` changes, applies them, and commits; how many. A
    /// change that cannot be indexed is skipped and counted (see
    /// [`skipped`](NameSearch::skipped)); any other failure stops the step,
    /// and the changes are read again by the next.
    pub async fn step(&self, max: usize) -> Result<usize, Error> {
        let batch = self.consumer.poll(max).await?;
        for change in &batch.changes {
            match self.apply(change).await {
                Ok(Indexed::Yes) => {}
                Ok(Indexed::No) => self.skip(change, None),
                Err(error @ (Error::Invalid(_) | Error::Decode { .. } | Error::Schema(_))) => {
                    self.skip(change, Some(&error));
                }
                Err(error) => return Err(error),
            }
        }
        self.consumer.commit(&batch).await?;
        Ok(batch.changes.len())
    }

    /// How many changes this projector skipped because it could not index
    /// them.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Records a change skipped: by its number, never by a key or a name.
    fn skip(&self, change: &Change<Customer>, error: Option<&Error>) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        self.counter.add(1, &[]);
        let reason = match error {
            None => "its name does not fit a search entry's key",
            Some(Error::Decode { .. } | Error::Schema(_)) => "it cannot be read as a customer",
            Some(_) => "the store refuses its search entry",
        };
        tracing::warn!(
            change = change.id.seq,
            reason,
            "the name search skipped a customer change it cannot index"
        );
    }

    /// Runs until `shutdown`: a step, then another at once if it was full.
    /// After a step that found nothing, it waits for a customer write of
    /// this process ([`commits_here`](tablekit::changes::Changes::commits_here)),
    /// or at most a pause that doubles while nothing comes, from 0.5 s up
    /// to 20 s (for the writes of other instances): an idle service
    /// polls rarely, and a write made here is searched at once. A poll
    /// reads the feed's directory and passes by every tenant where nothing
    /// can have come (one not written in the five minutes before it was
    /// last read), so an idle poll costs the same with 20 tenants or
    /// 2,000. A failed step is logged and tried again after the pause (the
    /// changes wait in the feed).
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut commits = self.customers.changes().commits_here();
        let mut idle = IDLE;
        loop {
            let pause = match self.step(100).await {
                Ok(100) => Duration::ZERO,
                Ok(0) => {
                    let pause = idle;
                    idle = (idle * 2).min(IDLE_MAX);
                    pause
                }
                Ok(_) => {
                    idle = IDLE;
                    IDLE
                }
                Err(error) => {
                    tracing::warn!(%error, "the name search did not keep up; trying again");
                    IDLE
                }
            };
            if pause.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = commits.changed() => idle = IDLE,
                _ = &mut shutdown => return,
            }
        }
    }

    /// Brings the name entry of the change's customer in step with the
    /// customer as the change left it (read back for a merge, whose change
    /// holds only the fields it sent).
    async fn apply(&self, change: &Change<Customer>) -> Result<Indexed, Error> {
        let partition = Verbatim::from(change.id.partition_key.as_str());
        let customer = Verbatim::from(change.row_key.as_str());
        let now = match (change.op, &change.value) {
            (ChangeOp::Delete, _) => None,
            (_, Some(value)) => Some(value.clone()),
            // A merge, or a value too large to ride with its change.
            (_, None) => self.current(change).await?,
        };
        let pointers: Table<NamePointer> = self.customers.of();
        let pointer = pointers.get(partition.clone(), customer.clone()).await?;
        let key = now.as_ref().map(|c| entry_key(&c.name, &change.row_key));
        // A name the store cannot key: the customer leaves the search.
        let searchable = key
            .as_ref()
            .is_none_or(|key| encode_entry_keys(&partition, key).is_ok());
        let (now, key) = if searchable { (now, key) } else { (None, None) };
        if pointer.is_none() && key.is_none() {
            // A customer gone that the search never had.
            return Ok(if searchable {
                Indexed::Yes
            } else {
                Indexed::No
            });
        }
        let mut transaction = self.customers.transaction();
        if let Some(pointer) = &pointer
            && Some(&pointer.key) != key.as_ref()
        {
            transaction
                .delete_unconditionally::<NameEntry>(partition.clone(), pointer.key.as_str())?;
        }
        match (now, key) {
            (Some(c), Some(key)) => {
                transaction.upsert(&NameEntry {
                    partition: partition.clone(),
                    key: key.clone(),
                    id: c.id.clone(),
                    name: c.name.clone(),
                    city: c.city.clone(),
                })?;
                transaction.upsert(&NamePointer {
                    partition,
                    customer,
                    key,
                })?;
            }
            _ => {
                if let Some(pointer) = &pointer {
                    transaction.delete(pointer)?;
                }
            }
        }
        transaction.submit().await?;
        Ok(if searchable {
            Indexed::Yes
        } else {
            Indexed::No
        })
    }

    /// The customer a change is about, as stored now.
    async fn current(&self, change: &Change<Customer>) -> Result<Option<Customer>, Error> {
        let keys = Filter::partition_key()
            .eq(change.id.partition_key.as_str())
            .and(Filter::row_key().eq(change.row_key.as_str()));
        let found = self
            .customers
            .query()
            .filter(keys)
            .limit(1)
            .collect()
            .await?;
        Ok(found.into_iter().next().map(|loaded| (*loaded).clone()))
    }
}

/// Whether a change reached the search.
enum Indexed {
    Yes,
    /// The customer's name cannot key a search entry: it is left out.
    No,
}

/// A customer's search key: its name in lower case, `|`, and its stored
/// RowKey (names are not unique).
fn entry_key(name: &str, row_key: &str) -> String {
    format!("{}|{}", name.to_lowercase(), row_key)
}

/// A search entry's keys as stored, checked against the store's limits.
fn encode_entry_keys(partition: &Verbatim, key: &str) -> Result<(String, String), Error> {
    tablekit::schema::encode_keys::<NameEntry>(partition, &key)
}

/// Refuses, at the door, a customer whose name the search could not key.
pub(super) fn check_searchable(tenant: &str, id: &str, name: &str) -> ApiResult<()> {
    let (partition, row_key) = tablekit::schema::encode_keys::<Customer>(&tenant, &id)?;
    let partition = Verbatim::from(partition);
    match encode_entry_keys(&partition, &entry_key(name, &row_key)) {
        Ok(_) => Ok(()),
        Err(_) => Err(ApiError::BadRequest(
            "name is too long to be searched (with the id, it must fit in a key of 1 KiB)".into(),
        )),
    }
}

/// The customers whose names start with `prefix` (any case), by name.
pub(super) async fn customers_by_name(
    State(app): State<App>,
    Path((tenant, prefix)): Path<(String, String)>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> ApiResult<Json<Page>> {
    let Query(params) = params?;
    let partition = tablekit::schema::encode_partition_key::<Customer>(&tenant)?;
    let entries: Table<NameEntry> = app.customers.of();
    // The names that start with the prefix: from it, to the first text
    // after every such name (keys keep the order of the text).
    let prefix = prefix.to_lowercase();
    let query = entries.query().partition(Verbatim::from(partition));
    let query = match past_prefix(&prefix) {
        Some(end) => query.rows(prefix..end),
        None => query.rows(prefix..),
    };
    page(query, &params, entry_json).await
}

/// The first text after every text that starts with `prefix`, in the
/// store's order of keys (by UTF-16 code unit, where a character past
/// U+FFFF sorts between U+D7FF and U+E000); `None` when there is none.
fn past_prefix(prefix: &str) -> Option<String> {
    let mut units: Vec<u16> = prefix.encode_utf16().collect();
    while let Some(last) = units.pop() {
        if last == 0xFFFF {
            continue;
        }
        match last + 1 {
            // After U+D7FF come the characters past U+FFFF: the first.
            0xD800 => units.extend([0xD800, 0xDC00]),
            // After the last character of a high surrogate's block: the
            // next block's first, or U+E000 after the last block.
            0xE000 if units.last().is_some_and(|u| (0xD800..0xDC00).contains(u)) => {
                let high = units.pop().unwrap_or_default();
                if high < 0xDBFF {
                    units.extend([high + 1, 0xDC00]);
                } else {
                    units.push(0xE000);
                }
            }
            next => units.push(next),
        }
        return String::from_utf16(&units).ok();
    }
    None
}

fn entry_json(entry: &NameEntry) -> JsonValue {
    json!({ "id": entry.id, "name": entry.name, "city": entry.city })
}

#[cfg(test)]
mod tests {
    use super::past_prefix;

    /// UTF-16 order, the store's order of keys.
    fn cmp(a: &str, b: &str) -> std::cmp::Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    #[test]
    fn the_range_past_a_prefix_holds_exactly_the_texts_that_start_with_it() {
        let chars = [
            'a',
            'x',
            '\u{7F}',
            '\u{D7FF}',
            '\u{E000}',
            '\u{FFFE}',
            '\u{FFFF}',
            '\u{10000}',
            '\u{1F600}',
            '\u{10FFFE}',
            '\u{10FFFF}',
        ];
        let mut texts = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = texts
                .iter()
                .flat_map(|t| chars.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(longer);
            texts.dedup();
        }
        for prefix in texts.iter().filter(|t| t.chars().count() <= 2) {
            let end = past_prefix(prefix);
            for text in &texts {
                let in_range = cmp(text, prefix).is_ge()
                    && end.as_deref().is_none_or(|end| cmp(text, end).is_lt());
                assert_eq!(
                    in_range,
                    text.starts_with(prefix.as_str()),
                    "{prefix:?} .. {end:?}: {text:?}"
                );
            }
        }
        assert_eq!(past_prefix("x\u{FFFF}").as_deref(), Some("y"));
    }
}
