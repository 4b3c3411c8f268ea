//! The instruments, on the meter `tablekit`.

use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, MeterProvider};

use super::StoreInfo;
use crate::error::Error;

/// The boundaries OpenTelemetry advises for `db.client.operation.duration`.
const BUCKETS: [f64; 9] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0];

struct Instruments {
    duration: Histogram<f64>,
    retries: Counter<u64>,
    throttles: Counter<u64>,
    unknown: Counter<u64>,
    settled: Counter<u64>,
    rows: Counter<u64>,
    pacing: Gauge<f64>,
    pending: Gauge<u64>,
    finished: Counter<u64>,
    poisoned: Counter<u64>,
    orphans: Counter<u64>,
    fences: Counter<u64>,
}

impl Instruments {
    fn new(meter: &Meter) -> Instruments {
        let counter = |name: &'static str, unit: &'static str, what: &'static str| {
            meter
                .u64_counter(name)
                .with_unit(unit)
                .with_description(what)
                .build()
        };
        Instruments {
            duration: meter
                .f64_histogram("db.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of database client operations.")
                .with_boundaries(BUCKETS.to_vec())
                .build(),
            retries: counter("tablekit.client.retries", "{retry}", "Attempts sent again."),
            throttles: counter(
                "tablekit.client.throttles",
                "{response}",
                "Answers that the store is busy (429, 503).",
            ),
            unknown: counter(
                "tablekit.client.outcomes_unknown",
                "{request}",
                "Writes whose answer was lost.",
            ),
            settled: counter(
                "tablekit.client.outcomes_settled",
                "{request}",
                "Lost answers settled by reading the store.",
            ),
            rows: counter(
                "tablekit.client.rows_returned",
                "{row}",
                "Rows returned by queries.",
            ),
            pacing: meter
                .f64_gauge("tablekit.pacing.rate")
                .with_unit("{entity}/s")
                .with_description("The paced rate of an account.")
                .build(),
            pending: meter
                .u64_gauge("tablekit.upkeep.pending")
                .with_unit("{record}")
                .with_description("Pending records of a table after an upkeep round.")
                .build(),
            finished: counter(
                "tablekit.upkeep.records_finished",
                "{record}",
                "Records the upkeep finished.",
            ),
            poisoned: counter(
                "tablekit.upkeep.records_poisoned",
                "{record}",
                "Records set aside as poison.",
            ),
            orphans: counter(
                "tablekit.upkeep.orphan_blobs_removed",
                "{blob}",
                "Offloaded blobs no row names, removed.",
            ),
            fences: counter(
                "tablekit.upkeep.fence_rows_removed",
                "{row}",
                "Fence rows of finished records, removed.",
            ),
        }
    }
}

/// The instruments in use, and what they were made from.
struct Slot {
    instruments: Arc<Instruments>,
    /// The global provider they were made from (its address), or `None`
    /// for a meter given by [`set_meter`], which then stays.
    provider: Option<usize>,
}

static INSTRUMENTS: OnceLock<RwLock<Slot>> = OnceLock::new();

/// The address of a provider, to tell whether the global one changed.
fn address(provider: &Arc<dyn MeterProvider + Send + Sync>) -> usize {
    Arc::as_ptr(provider).cast::<()>() as usize
}

fn slot() -> &'static RwLock<Slot> {
    INSTRUMENTS.get_or_init(|| {
        let provider = opentelemetry::global::meter_provider();
        RwLock::new(Slot {
            instruments: Arc::new(Instruments::new(&provider.meter("tablekit"))),
            provider: Some(address(&provider)),
        })
    })
}

/// The instruments to record on: made again from the global provider
/// when another was installed since they were made (a program that
/// sets its provider after tablekit's first operation gets its metrics
/// from then on), unless [`set_meter`] gave a meter.
fn instruments() -> Arc<Instruments> {
    let slot = slot();
    let current = {
        let held = slot.read().unwrap_or_else(|e| e.into_inner());
        let Some(made_from) = held.provider else {
            return Arc::clone(&held.instruments);
        };
        let provider = opentelemetry::global::meter_provider();
        if address(&provider) == made_from {
            return Arc::clone(&held.instruments);
        }
        provider
    };
    let mut held = slot.write().unwrap_or_else(|e| e.into_inner());
    if held
        .provider
        .is_some_and(|made_from| made_from != address(&current))
    {
        held.instruments = Arc::new(Instruments::new(&current.meter("tablekit")));
        held.provider = Some(address(&current));
    }
    Arc::clone(&held.instruments)
}

/// Records tablekit's metrics on `meter` from now on, instead of the
/// meter `tablekit` of the global provider (which tablekit follows: a
/// provider set after tablekit's first measurement is used from then
/// on).
pub fn set_meter(meter: &Meter) {
    let fresh = Arc::new(Instruments::new(meter));
    *slot().write().unwrap_or_else(|e| e.into_inner()) = Slot {
        instruments: fresh,
        provider: None,
    };
}

/// An operation being timed.
#[derive(Debug)]
pub(super) struct Measured {
    started: Instant,
    attributes: Vec<KeyValue>,
}

impl Measured {
    pub(super) fn start(info: StoreInfo, op: &'static str, collection: &str) -> Measured {
        let mut attributes = vec![
            KeyValue::new("db.system.name", info.system),
            KeyValue::new("db.operation.name", op),
        ];
        if !info.namespace.is_empty() {
            attributes.push(KeyValue::new("db.namespace", info.namespace.to_string()));
        }
        if !collection.is_empty() {
            attributes.push(KeyValue::new("db.collection.name", collection.to_owned()));
        }
        if let Some((address, port)) = info.server() {
            attributes.push(KeyValue::new("server.address", address.to_owned()));
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        Measured {
            started: Instant::now(),
            attributes,
        }
    }

    pub(super) fn rows(&self, rows: usize) {
        instruments().rows.add(rows as u64, &self.attributes);
    }

    pub(super) fn finish(mut self, failed: bool, error: Option<&Error>) {
        let seconds = self.started.elapsed().as_secs_f64();
        if failed {
            let kind = error.map_or("_OTHER", Error::error_type);
            self.attributes.push(KeyValue::new("error.type", kind));
        }
        instruments().duration.record(seconds, &self.attributes);
    }
}

pub(super) fn retry(system: &'static str, reason: &'static str) {
    instruments().retries.add(
        1,
        &[
            KeyValue::new("db.system.name", system),
            KeyValue::new("reason", reason),
        ],
    );
}

pub(super) fn throttle(system: &'static str) {
    instruments()
        .throttles
        .add(1, &[KeyValue::new("db.system.name", system)]);
}

pub(super) fn outcome_unknown() {
    instruments().unknown.add(1, &[]);
}

pub(super) fn settled() {
    instruments().settled.add(1, &[]);
}

pub(super) fn pacing_rate(account: &str, rate: f64) {
    instruments().pacing.record(
        rate,
        &[KeyValue::new("tablekit.account", account.to_owned())],
    );
}

pub(super) fn upkeep_round<'a>(
    finished: usize,
    fences: usize,
    blobs: usize,
    pending: impl IntoIterator<Item = (&'a str, usize)>,
) {
    let i = instruments();
    for (table, records) in pending {
        let attributes = [KeyValue::new("db.collection.name", table.to_owned())];
        i.pending.record(records as u64, &attributes);
    }
    for (counter, value) in [
        (&i.finished, finished),
        (&i.orphans, blobs),
        (&i.fences, fences),
    ] {
        if value > 0 {
            counter.add(value as u64, &[]);
        }
    }
}

pub(super) fn poisoned() {
    instruments().poisoned.add(1, &[]);
}
