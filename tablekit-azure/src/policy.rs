//! Retries, query parameters and the key range of a SAS: the decisions the
//! REST backend makes around each request, kept free of I/O so they are
//! tested on their own.

use std::cmp::Ordering;
use std::ops::Bound;
use std::time::Duration;

use tablekit_core::filter::{Filter, KeyRange};

use tablekit_core::keyorder::cmp_utf16;
use tablekit_core::{ContinuationToken, Error, Query, validate};

/// How the backend retries transient failures.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first back-off; doubled for each further attempt.
    pub base_delay: Duration,
    /// The longest back-off.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(8),
        }
    }
}

/// Whether sending a request twice has the effect of sending it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotence {
    /// Reads, insert-or-replace, insert-or-merge, unconditional deletes of a
    /// table: safe to repeat after any transient failure.
    Idempotent,
    /// Inserts, conditional updates and deletes, batches: a repeat after a
    /// lost response can meet the first attempt's effect (its own 409, a 412
    /// because its own write changed the ETag, a 404 because it deleted the
    /// entity). These are retried only when the failure shows the request was
    /// not applied (throttling), and the caller sees the error otherwise.
    NotIdempotent,
}

impl RetryPolicy {
    /// Whether attempt `attempt` (1 for the first) that failed with `error`
    /// is tried again.
    pub fn should_retry(&self, attempt: u32, idempotence: Idempotence, error: &Error) -> bool {
        if attempt >= self.max_attempts {
            return false;
        }
        match error {
            // Server Busy: the service refused before doing anything.
            Error::Throttled { .. } => true,
            // Sending an idempotent request again has the effect of sending it once.
            Error::Transient { .. } | Error::OutcomeUnknown { .. } => {
                idempotence == Idempotence::Idempotent
            }
            _ => false,
        }
    }

    /// The wait before attempt `attempt + 1`: exponential back-off with full
    /// jitter (`random` in 0.0..1.0), at least what the service asked for.
    pub fn delay(&self, attempt: u32, random: f64, retry_after: Option<Duration>) -> Duration {
        let exponent = attempt.saturating_sub(1).min(16);
        let ceiling = self
            .base_delay
            .saturating_mul(1 << exponent)
            .min(self.max_delay);
        let jittered = ceiling.mul_f64(random.clamp(0.0, 1.0));
        retry_after.map_or(jittered, |asked| jittered.max(asked))
    }
}

/// The query-string parameters of a Query Entities request (`$filter`,
/// `$select`, `$top`, `NextPartitionKey`, `NextRowKey`), values not yet
/// percent-encoded. A projection always selects the keys, which the
/// entity needs.
///
/// The query was checked at the door ([`tablekit_core::backend::door`],
/// through [`Served`](tablekit_core::layer::Served)): no name that is not a
/// property name reaches `$filter` or `$select`, and a value is escaped as
/// it is rendered.
pub fn query_parameters(query: &Query) -> Vec<(&'static str, String)> {
    let mut params = Vec::new();
    if let Some(filter) = &query.filter {
        params.push(("$filter", filter.to_string()));
    }
    if let Some(select) = &query.select {
        let mut names: Vec<&str> = vec!["PartitionKey", "RowKey"];
        names.extend(
            select
                .iter()
                .map(String::as_str)
                .filter(|n| *n != "PartitionKey" && *n != "RowKey"),
        );
        params.push(("$select", names.join(",")));
    }
    if let Some(top) = query.top {
        params.push(("$top", top.to_string()));
    }
    if let Some(token) = &query.continuation {
        params.push(("NextPartitionKey", token.next_partition_key().to_owned()));
        if let Some(rk) = token.next_row_key() {
            params.push(("NextRowKey", rk.to_owned()));
        }
    }
    params
}

/// The continuation of a Query Entities response, from its
/// `x-ms-continuation-NextPartitionKey` and `-NextRowKey` headers.
pub fn continuation(
    next_partition_key: Option<&str>,
    next_row_key: Option<&str>,
) -> Option<ContinuationToken> {
    next_partition_key.map(|pk| ContinuationToken::new(pk, next_row_key.map(str::to_owned)))
}

/// The key range a SAS token grants (`spk`/`srk` to `epk`/`erk`), to refuse a
/// key outside it before sending anything (Azurite does not enforce ranges).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SasRange {
    /// `spk`, `srk`.
    pub start: Option<(String, Option<String>)>,
    /// `epk`, `erk`.
    pub end: Option<(String, Option<String>)>,
}

impl SasRange {
    /// The range of a SAS token's query string (without `?`).
    pub fn from_token(token: &str) -> SasRange {
        let get = |name: &str| {
            token.split('&').find_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                (k == name).then(|| {
                    percent_encoding::percent_decode_str(v)
                        .decode_utf8_lossy()
                        .into_owned()
                })
            })
        };
        let (spk, srk, epk, erk) = (get("spk"), get("srk"), get("epk"), get("erk"));
        SasRange {
            start: spk.map(|pk| (pk, srk)),
            end: epk.map(|pk| (pk, erk)),
        }
    }

    /// Whether the entity `(pk, rk)` lies inside the range, in (PartitionKey,
    /// RowKey) order; a missing RowKey bound leaves its partition open.
    pub fn allows(&self, pk: &str, rk: &str) -> bool {
        let after_start = self
            .start
            .as_ref()
            .is_none_or(|(spk, srk)| match cmp_utf16(pk, spk) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => srk
                    .as_deref()
                    .is_none_or(|srk| cmp_utf16(rk, srk) != Ordering::Less),
            });
        let before_end = self
            .end
            .as_ref()
            .is_none_or(|(epk, erk)| match cmp_utf16(pk, epk) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => erk
                    .as_deref()
                    .is_none_or(|erk| cmp_utf16(rk, erk) != Ordering::Greater),
            });
        after_start && before_end
    }

    /// Whether the range leaves keys out at all.
    pub fn is_bounded(&self) -> bool {
        self.start.is_some() || self.end.is_some()
    }

    /// The PartitionKeys the range reaches, `spk` to `epk`.
    pub fn partitions(&self) -> KeyRange<'_> {
        KeyRange {
            lower: self
                .start
                .as_ref()
                .map_or(Bound::Unbounded, |(pk, _)| Bound::Included(pk.as_str())),
            upper: self
                .end
                .as_ref()
                .map_or(Bound::Unbounded, |(pk, _)| Bound::Included(pk.as_str())),
        }
    }

    /// The RowKeys the range reaches inside partition `pk` (which
    /// [`SasRange::partitions`] holds): bounded only in the first and last one.
    fn rows_in(&self, pk: &str) -> KeyRange<'_> {
        fn edge<'r>(end: &'r Option<(String, Option<String>)>, pk: &str) -> Bound<&'r str> {
            match end {
                Some((edge_pk, Some(rk))) if edge_pk == pk => Bound::Included(rk.as_str()),
                _ => Bound::Unbounded,
            }
        }
        KeyRange {
            lower: edge(&self.start, pk),
            upper: edge(&self.end, pk),
        }
    }

    /// Whether a query with `filter` may match an entity inside the range.
    /// Only the key comparisons joined by `and` at the top of the filter are
    /// read, so `false` means the query can only reach entities outside it.
    pub fn may_reach(&self, filter: Option<&Filter>) -> bool {
        let Some(filter) = filter else {
            return true;
        };
        let partitions = filter
            .key_range("PartitionKey")
            .intersect(self.partitions());
        if partitions.is_empty() {
            return false;
        }
        match partitions.single() {
            Some(pk) => !filter
                .key_range("RowKey")
                .intersect(self.rows_in(pk))
                .is_empty(),
            None => true,
        }
    }

    /// The query narrowed to the range's partitions (`PartitionKey ge spk and
    /// PartitionKey le epk` joined to its filter) when that keeps it within
    /// the service's 15 comparisons; otherwise the query as it is. Either way
    /// the caller still drops every returned entity the range does not allow,
    /// as the service itself would not return it.
    pub fn narrow(&self, query: &Query) -> Query {
        let mut bounds = Vec::new();
        if let Some((spk, _)) = &self.start {
            bounds.push(Filter::partition_key().ge(spk.as_str()));
        }
        if let Some((epk, _)) = &self.end {
            bounds.push(Filter::partition_key().le(epk.as_str()));
        }
        let mut narrowed = query.clone();
        let count = query.filter.as_ref().map_or(0, Filter::comparison_count);
        if count + bounds.len() > validate::limits::MAX_FILTER_COMPARISONS {
            return narrowed;
        }
        let Some(bound) = bounds.into_iter().reduce(Filter::and) else {
            return narrowed;
        };
        narrowed.filter = Some(match narrowed.filter.take() {
            Some(filter) => bound.and(filter),
            None => bound,
        });
        narrowed
    }

    /// Whether a whole partition lies inside the range (for queries that name one).
    pub fn allows_partition(&self, pk: &str) -> bool {
        let after = self
            .start
            .as_ref()
            .is_none_or(|(spk, srk)| match cmp_utf16(pk, spk) {
                Ordering::Greater => true,
                Ordering::Equal => srk.as_deref().is_none_or(str::is_empty),
                Ordering::Less => false,
            });
        let before = self
            .end
            .as_ref()
            .is_none_or(|(epk, erk)| match cmp_utf16(pk, epk) {
                Ordering::Less => true,
                Ordering::Equal => erk.is_none(),
                Ordering::Greater => false,
            });
        after && before
    }
}

#[cfg(test)]
mod tests {
    use tablekit_core::filter::Filter;

    use super::*;

    #[test]
    fn retries_only_what_is_safe() {
        let policy = RetryPolicy::default();
        let transient = Error::Transient {
            message: "reset".into(),
        };
        let busy = Error::Throttled { retry_after: None };
        assert!(policy.should_retry(1, Idempotence::Idempotent, &transient));
        assert!(
            !policy.should_retry(1, Idempotence::NotIdempotent, &transient),
            "an insert may have been applied"
        );
        assert!(
            policy.should_retry(1, Idempotence::NotIdempotent, &busy),
            "503 Server Busy was not applied"
        );
        assert!(
            !policy.should_retry(4, Idempotence::Idempotent, &transient),
            "attempts are bounded"
        );
        let conflict = Error::TableNotFound { table: "t".into() };
        assert!(!policy.should_retry(1, Idempotence::Idempotent, &conflict));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_a_ceiling() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(1, 1.0, None), Duration::from_millis(200));
        assert_eq!(policy.delay(3, 1.0, None), Duration::from_millis(800));
        assert_eq!(policy.delay(3, 0.5, None), Duration::from_millis(400));
        assert_eq!(policy.delay(30, 1.0, None), Duration::from_secs(8));
        assert_eq!(
            policy.delay(1, 0.0, Some(Duration::from_secs(3))),
            Duration::from_secs(3),
            "Retry-After wins"
        );
    }

    #[test]
    fn query_parameters_and_continuations() {
        let token = continuation(Some("1!8!cGFydA--"), Some("1!4!cjE-")).unwrap();
        let query = Query::new()
            .filter(Filter::partition_key().eq("it's"))
            .select(["Name"])
            .top(10)
            .continuation(Some(token));
        let params = query_parameters(&query);
        assert_eq!(params[0], ("$filter", "PartitionKey eq 'it''s'".to_owned()));
        assert_eq!(
            params[1],
            ("$select", "PartitionKey,RowKey,Name".to_owned())
        );
        assert_eq!(params[2], ("$top", "10".to_owned()));
        assert_eq!(params[3], ("NextPartitionKey", "1!8!cGFydA--".to_owned()));
        assert_eq!(params[4], ("NextRowKey", "1!4!cjE-".to_owned()));
        assert!(query_parameters(&Query::new()).is_empty());
        assert_eq!(
            continuation(None, Some("x")),
            None,
            "no NextPartitionKey: the last page"
        );
        assert_eq!(continuation(Some("p"), None).unwrap().next_row_key(), None);
    }

    #[test]
    fn sas_ranges() {
        let range =
            SasRange::from_token("sv=2019-02-02&tn=t&sp=raud&spk=m&srk=&epk=m&erk=zz&sig=x");
        assert!(range.allows("m", "a"));
        assert!(range.allows("m", "zz"));
        assert!(!range.allows("m", "zzz"));
        assert!(!range.allows("a", "a"));
        assert!(!range.allows("n", ""));
        assert!(
            !range.allows_partition("m"),
            "erk closes partition m before its end"
        );
        let whole = SasRange::from_token("spk=b&epk=d");
        assert!(
            whole.allows_partition("b")
                && whole.allows_partition("c")
                && whole.allows_partition("d")
        );
        assert!(!whole.allows_partition("e") && !whole.allows_partition("a"));
        assert!(SasRange::from_token("sv=1&sig=2").allows("anything", "at all"));
        let encoded = SasRange::from_token("spk=a%20b&epk=a%20b");
        assert!(encoded.allows("a b", "x") && !encoded.allows("a", "x"));
    }
}
