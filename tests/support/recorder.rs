//! Records the spans and events of a test, by name and fields: a minimal
//! `tracing::Subscriber`, enough to see what a user's subscriber would be
//! handed. Shared by the test crates with `#[path]`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) lines: Arc<Mutex<Vec<String>>>,
    next: AtomicU64,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Fields(String::new());
        span.record(&mut fields);
        self.lines.lock().unwrap().push(format!(
            "span {} {}{}",
            span.metadata().level(),
            span.metadata().name(),
            fields.0
        ));
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.lines
            .lock()
            .unwrap()
            .push(format!("event {}{}", event.metadata().level(), fields.0));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
