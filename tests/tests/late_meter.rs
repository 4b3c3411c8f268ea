//! A meter provider a program installs after tablekit's first operation
//! receives tablekit's metrics from then on (tablekit follows the global
//! provider rather than keeping the one it found first). In a test binary
//! of its own: the global provider is the process's.

use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tablekit::TableBackend;

/// How many operations the duration histogram counted on `table`.
fn operations_on(exporter: &InMemoryMetricExporter, table: &str) -> u64 {
    let mut total = 0;
    for resource in exporter.get_finished_metrics().expect("the metrics") {
        for scope in resource.scope_metrics() {
            for metric in scope
                .metrics()
                .filter(|m| m.name() == "db.client.operation.duration")
            {
                if let AggregatedMetrics::F64(MetricData::Histogram(h)) = metric.data() {
                    for point in h.data_points() {
                        if point.attributes().any(|kv| {
                            kv.key.as_str() == "db.collection.name" && kv.value.as_str() == table
                        }) {
                            total += point.count();
                        }
                    }
                }
            }
        }
    }
    total
}

#[tokio::test]
async fn a_meter_provider_set_after_the_first_operation_gets_the_metrics() {
    let backend = tablekit_mem::MemBackend::new();
    // tablekit's first measurement, with no provider installed yet.
    backend.create_table("Early").await.expect("a table");
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());
    backend.create_table("Later").await.expect("a table");
    backend.create_table("Latest").await.expect("a table");
    provider.force_flush().expect("a flush");
    assert_eq!(operations_on(&exporter, "Later"), 1);
    assert_eq!(operations_on(&exporter, "Latest"), 1);
    assert_eq!(operations_on(&exporter, "Early"), 0);
}
