//! A `tracing` subscriber that keeps every event's level, message and
//! fields, for tests that check what is logged (the map's events and the
//! checker's).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One captured event.
#[derive(Clone, Debug)]
pub struct Captured {
    /// Its level.
    pub level: Level,
    /// Its message.
    pub message: String,
    /// Its other fields, as displayed (strings without quotes).
    pub fields: BTreeMap<String, String>,
}

impl Captured {
    /// Field `name`, or "" if the event has none.
    #[allow(dead_code)]
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

/// The subscriber; clones share what they captured.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    events: Arc<Mutex<Vec<Captured>>>,
}

impl Capture {
    /// Runs `body` with this subscriber as the thread's default.
    pub fn during<R>(&self, body: impl FnOnce() -> R) -> R {
        tracing::subscriber::with_default(self.clone(), body)
    }

    /// Takes the events captured so far.
    pub fn take(&self) -> Vec<Captured> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

struct Fields<'a>(&'a mut Captured);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.store(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.store(field, format!("{value:?}"));
    }
}

impl Fields<'_> {
    fn store(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.0.message = value;
        } else {
            self.0.fields.insert(field.name().to_string(), value);
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut captured = Captured {
            level: *event.metadata().level(),
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut Fields(&mut captured));
        self.events.lock().unwrap().push(captured);
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}
