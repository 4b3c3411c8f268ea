//! tablekit's metrics (its `metrics` feature) as an OpenTelemetry exporter
//! receives them: an SDK meter provider with an in-memory exporter, made
//! the meter tablekit records on. Start it after `otel::Otel::start`, which
//! holds the lock that keeps tests one at a time.
#![allow(dead_code)]

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// tablekit's metrics, on a meter provider of the test's own.
pub(crate) struct Metrics {
    exporter: InMemoryMetricExporter,
    provider: SdkMeterProvider,
}

impl Metrics {
    pub(crate) fn start() -> Metrics {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        tablekit::telemetry::set_meter(&provider.meter("tablekit"));
        Metrics { exporter, provider }
    }

    fn collected(&self) -> Vec<ResourceMetrics> {
        self.provider.force_flush().unwrap();
        self.exporter.get_finished_metrics().unwrap()
    }

    /// The sum of the counter `name` (cumulative, from the last export)
    /// over the data points whose attributes include `having`.
    pub(crate) fn counter(&self, name: &str, having: &[(&str, &str)]) -> u64 {
        let collected = self.collected();
        let Some(last) = collected.last() else {
            return 0;
        };
        let mut total = 0;
        for scope in last.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                if let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() {
                    for point in sum.data_points() {
                        if matches(point.attributes(), having) {
                            total += point.value();
                        }
                    }
                }
            }
        }
        total
    }

    /// The count of the histogram `name` over the data points whose
    /// attributes include `having`.
    pub(crate) fn histogram_count(&self, name: &str, having: &[(&str, &str)]) -> u64 {
        let collected = self.collected();
        let Some(last) = collected.last() else {
            return 0;
        };
        let mut total = 0;
        for scope in last.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                if let AggregatedMetrics::F64(MetricData::Histogram(h)) = metric.data() {
                    for point in h.data_points() {
                        if matches(point.attributes(), having) {
                            total += point.count();
                        }
                    }
                }
            }
        }
        total
    }

    /// The histogram's bucket boundaries.
    pub(crate) fn histogram_bounds(&self, name: &str) -> Vec<f64> {
        for resource in self.collected().iter().rev() {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics().filter(|m| m.name() == name) {
                    if let AggregatedMetrics::F64(MetricData::Histogram(h)) = metric.data()
                        && let Some(point) = h.data_points().next()
                    {
                        return point.bounds().collect();
                    }
                }
            }
        }
        Vec::new()
    }

    /// The last value of the gauge `name` whose attributes include
    /// `having`.
    pub(crate) fn gauge(&self, name: &str, having: &[(&str, &str)]) -> Option<f64> {
        let collected = self.collected();
        let last = collected.last()?;
        for scope in last.scope_metrics() {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                match metric.data() {
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        for point in g.data_points() {
                            if matches(point.attributes(), having) {
                                return Some(point.value());
                            }
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                        for point in g.data_points() {
                            if matches(point.attributes(), having) {
                                return Some(point.value() as f64);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

fn matches<'a>(
    attributes: impl Iterator<Item = &'a opentelemetry::KeyValue>,
    having: &[(&str, &str)],
) -> bool {
    let attributes: Vec<_> = attributes.collect();
    having.iter().all(|(key, value)| {
        attributes
            .iter()
            .any(|kv| kv.key.as_str() == *key && kv.value.as_str() == *value)
    })
}
