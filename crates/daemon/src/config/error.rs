//! [`ConfigError`]: where in the file a config is wrong (line, column,
//! key) and why; and the means to find those from toml's byte spans.
//!
//! A key is written the way an admin reads the file: the tables that hold
//! it, arrays of tables by their `name` where they have one, then `: ` and
//! the key itself (`map "mpatha" path "b": uri`, `defaults.marginal:
//! failures`, `map "mpatha" group[0]: paths[1]`). Array elements count
//! from 0, as in TOML tools.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A config that cannot be read, or is refused.
///
/// `Display` gives one line: `FILE: line L, column C: KEY VALUE: REASON`
/// (the file when the config came from one; the value when the error is
/// about one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, when the config was read from one ([`super::DaemonConfig::load`]).
    pub file: Option<PathBuf>,
    /// 1-based line of the offending text; 0 only when the file could not
    /// be read at all.
    pub line: usize,
    /// 1-based column (in characters) on that line; 0 with line 0.
    pub column: usize,
    /// Where: the key, with the tables that hold it (`map "mpatha" path
    /// "b": uri`); empty when the text is not TOML before any key.
    pub key: String,
    /// The refused value as written in TOML (`"nbd:/x"`, `0`), if the
    /// error is about one value.
    pub value: Option<String>,
    /// Why it is refused.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if self.line > 0 {
            write!(f, "line {}, column {}: ", self.line, self.column)?;
        }
        if !self.key.is_empty() {
            f.write_str(&self.key)?;
            if let Some(value) = &self.value {
                write!(f, " {value}")?;
            }
            f.write_str(": ")?;
        } else if let Some(value) = &self.value {
            write!(f, "{value}: ")?;
        }
        f.write_str(&self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// A checked value's place: its byte span in the text and the key it is
/// reported under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Place {
    /// Byte span of the value (or the table header) in the text.
    pub span: Range<usize>,
    /// The key as [`ConfigError::key`] writes it.
    pub key: String,
}

impl Place {
    /// The place of `value` under `key`.
    pub(crate) fn of<T>(value: &Spanned<T>, key: impl Into<String>) -> Place {
        Place {
            span: value.span(),
            key: key.into(),
        }
    }
}

/// A value and where it was written.
#[derive(Clone, Debug)]
pub(super) struct Located<T> {
    /// The checked value.
    pub value: T,
    /// Where it was written.
    pub place: Place,
}

/// The config text, for turning byte offsets into lines and columns.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub text: &'a str,
}

impl Source<'_> {
    /// An error at `place`, about `value` (written as TOML would: strings
    /// quoted), for `reason`.
    pub(crate) fn error(
        &self,
        place: &Place,
        value: Option<String>,
        reason: impl Into<String>,
    ) -> ConfigError {
        let (line, column) = self.line_column(place.span.start);
        ConfigError {
            file: None,
            line,
            column,
            key: place.key.clone(),
            value,
            reason: reason.into(),
        }
    }

    /// 1-based line and column (in characters) of byte `offset`; an offset
    /// past the end or inside a character counts as the nearest character
    /// boundary before it.
    pub(crate) fn line_column(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.bytes().filter(|&byte| byte == b'\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |at| at + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// Turns one of toml's own errors (syntax, unknown key, wrong type,
    /// missing key) into a [`ConfigError`] at its span, naming the key
    /// found there.
    pub(crate) fn toml_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span().unwrap_or(self.text.len()..self.text.len());
        let key = key_at(self.text, span.start);
        let (line, column) = self.line_column(span.start);
        ConfigError {
            file: None,
            line,
            column,
            key,
            value: None,
            reason: error.message().trim_end().to_string(),
        }
    }
}

/// Quotes a string value as TOML writes it.
pub(super) fn quoted(text: &str) -> Option<String> {
    Some(format!("{text:?}"))
}

/// One step from the document's root to a key.
#[derive(Clone, Debug)]
enum Segment {
    /// A key of a table.
    Key(String),
    /// An element of an array: its index, the `name` it has if it is a
    /// table with one, and whether it is a table.
    Element {
        index: usize,
        name: Option<String>,
        table: bool,
    },
}

/// The key at byte `offset` of `text`, as [`ConfigError::key`] writes it:
/// the deepest key or array element whose key or value span holds the
/// offset. The text is read with toml's recovering parser, so a key is
/// found even in a document with a syntax error after it.
fn key_at(text: &str, offset: usize) -> String {
    let (root, _) = DeTable::parse_recoverable(text);
    let mut path = Vec::new();
    let mut best = Vec::new();
    search_table(root.get_ref(), offset, &mut path, &mut best);
    render(&best)
}

/// Whether `span` holds `offset` (an empty span holds its own start).
fn holds(span: &Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.is_empty() && span.start == offset)
}

fn search_table(
    table: &DeTable<'_>,
    offset: usize,
    path: &mut Vec<Segment>,
    best: &mut Vec<Segment>,
) {
    for (key, value) in table.iter() {
        path.push(Segment::Key(key.get_ref().to_string()));
        if (holds(&key.span(), offset) || holds(&value.span(), offset)) && path.len() > best.len() {
            best.clone_from(path);
        }
        search_value(value.get_ref(), offset, path, best);
        path.pop();
    }
}

fn search_value(
    value: &DeValue<'_>,
    offset: usize,
    path: &mut Vec<Segment>,
    best: &mut Vec<Segment>,
) {
    match value {
        DeValue::Table(table) => search_table(table, offset, path, best),
        DeValue::Array(array) => {
            for (index, element) in array.iter().enumerate() {
                let name = element
                    .get_ref()
                    .as_table()
                    .and_then(|table| table.get("name"))
                    .and_then(|name| name.get_ref().as_str())
                    .map(str::to_string);
                path.push(Segment::Element {
                    index,
                    name,
                    table: element.get_ref().is_table(),
                });
                if holds(&element.span(), offset) && path.len() > best.len() {
                    best.clone_from(path);
                }
                search_value(element.get_ref(), offset, path, best);
                path.pop();
            }
        }
        _ => {}
    }
}

/// `map "mpatha" path "b": uri`, `defaults.marginal: failures`,
/// `map "m" group[0]: paths[1]`, `map "mpatha"` (the table itself).
fn render(path: &[Segment]) -> String {
    // The leaf is the last key and the scalar elements after it, unless
    // the path ends at a table (an array-of-tables element).
    let ends_at_table = matches!(path.last(), Some(Segment::Element { table: true, .. }));
    let leaf_start = if ends_at_table {
        path.len()
    } else {
        path.iter()
            .rposition(|segment| matches!(segment, Segment::Key(_)))
            .unwrap_or(path.len())
    };
    let mut context = String::new();
    let mut previous_was_key = false;
    for segment in &path[..leaf_start] {
        match segment {
            Segment::Key(key) => {
                if previous_was_key {
                    context.push('.');
                } else if !context.is_empty() {
                    context.push(' ');
                }
                context.push_str(key);
                previous_was_key = true;
            }
            Segment::Element { index, name, .. } => {
                match name {
                    Some(name) => context.push_str(&format!(" {name:?}")),
                    None => context.push_str(&format!("[{index}]")),
                }
                previous_was_key = false;
            }
        }
    }
    let mut leaf = String::new();
    for segment in &path[leaf_start..] {
        match segment {
            Segment::Key(key) => leaf.push_str(key),
            Segment::Element { index, .. } => leaf.push_str(&format!("[{index}]")),
        }
    }
    match (context.is_empty(), leaf.is_empty()) {
        (_, true) => context,
        (true, false) => leaf,
        (false, false) => format!("{context}: {leaf}"),
    }
}
