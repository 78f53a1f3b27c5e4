//! What became of each keyword: carried over as mpio keys, already what
//! mpio does, or not carried over and why. Nothing is left out: every
//! keyword of the file gets one [`Note`] or a key in the output.

use std::fmt;

/// Why a keyword is not carried over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// mpio has no such setting.
    NoEquivalent,
    /// mpio has a setting of that name or purpose that means something
    /// else, or takes only some of its values.
    DifferentMeaning,
    /// multipath-tools itself ignores it (obsolete, unknown, a value it
    /// refuses, or overridden elsewhere in the file).
    IgnoredByMultipathTools,
}

impl Why {
    /// The words the report uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Why::NoEquivalent => "no equivalent",
            Why::DifferentMeaning => "different meaning",
            Why::IgnoredByMultipathTools => "ignored by multipath-tools",
        }
    }
}

/// What became of one keyword that did not become a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Its line.
    pub line: usize,
    /// The keyword and value as written, with its section
    /// (`defaults: rr_weight uniform`).
    pub what: String,
    /// `None`: mpio already does what it says, nothing to write;
    /// else why it is not carried over.
    pub why: Option<Why>,
    /// The detail.
    pub reason: String,
}

impl fmt::Display for Note {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.why {
            Some(why) => write!(
                formatter,
                "line {}: {}: {}: {}",
                self.line,
                self.what,
                why.as_str(),
                self.reason
            ),
            None => write!(
                formatter,
                "line {}: {}: as mpio does: {}",
                self.line, self.what, self.reason
            ),
        }
    }
}

/// The outcome of mapping one keyword.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Outcome {
    /// These mpio keys (a dotted key is in a sub-table: `marginal.failures`).
    Set(Vec<(&'static str, Value)>),
    /// mpio already does this; nothing to write.
    Same(String),
    /// Not carried over.
    Dropped(Why, String),
}

/// An mpio value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Value {
    Text(String),
    Integer(i64),
    Flag(bool),
    List(Vec<Value>),
}

impl Value {
    /// The value as TOML writes it.
    pub(super) fn toml(&self) -> String {
        match self {
            Value::Text(text) => quote(text),
            Value::Integer(value) => value.to_string(),
            Value::Flag(value) => value.to_string(),
            Value::List(values) => format!(
                "[{}]",
                values
                    .iter()
                    .map(Value::toml)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// `text` as a TOML basic string.
pub(super) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
