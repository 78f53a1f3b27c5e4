//! `mpio import-multipath-conf`: a multipath.conf read as multipath-tools
//! reads it and written as the mpio config that means the same, with
//! every keyword that cannot be carried over listed with its line and
//! why. Nothing is dropped silently: each keyword of the file either
//! becomes a key (followed in the output by a comment with its line) or
//! a [`Note`] (listed at the top of the output).
//!
//! One file per concern: [`lexer`] (words, quotes, comments, limits),
//! [`parser`] (sections and sub-sections), [`model`] (what they hold),
//! `settings` (each keyword's meaning against mpio's keys), `sections`
//! (each section and the precedence between them), [`report`] (the
//! notes), `emit` (the TOML text).
//!
//! # Contract
//! [`import`] never panics, whatever the bytes: text that is not
//! UTF-8, a control character, a line over [`lexer::MAX_LINE_BYTES`],
//! an unclosed quote or section, a stray `}`, an unknown section or
//! sub-section, or a keyword outside a section is an [`ImportError`]
//! naming the line. Every value written is first checked by mpio's own
//! config loader, so the output loads (`DaemonConfig::parse`) once its
//! maps' WWIDs find devices; a file without `multipaths` entries gives
//! no `[[map]]`, which the loader asks for.

mod emit;
pub mod fuzz;
pub mod lexer;
pub mod model;
pub mod parser;
pub mod report;
mod sections;
mod settings;
#[cfg(test)]
mod tests;

use super::wwid::NoPaths;
use super::DaemonConfig;
use report::{quote, Note, Value};
use std::fmt;

/// A multipath.conf that could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    /// The line (from 1).
    pub line: usize,
    /// Why.
    pub reason: String,
}

impl ImportError {
    pub(crate) fn new(line: usize, reason: impl Into<String>) -> ImportError {
        ImportError {
            line,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ImportError {}

/// An imported multipath.conf.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The mpio config.
    pub toml: String,
    /// Every keyword that did not become a key, and why.
    pub notes: Vec<Note>,
    /// The lines of the keywords that became keys.
    pub carried: Vec<usize>,
    /// The maps written.
    pub maps: usize,
}

impl Imported {
    /// The notes of keywords not carried over.
    pub fn dropped(&self) -> impl Iterator<Item = &Note> {
        self.notes.iter().filter(|note| note.why.is_some())
    }
}

/// Reads `data` as a multipath.conf.
///
/// # Errors
/// The first fault that keeps the file from being read, with its line.
pub fn import(data: &[u8]) -> Result<Imported, ImportError> {
    let text = std::str::from_utf8(data).map_err(|error| {
        let good = &data[..error.valid_up_to()];
        let line = good.iter().filter(|&&byte| byte == b'\n').count() + 1;
        ImportError::new(
            line,
            format!(
                "byte 0x{:02x} is not UTF-8: not a text file",
                data[error.valid_up_to()]
            ),
        )
    })?;
    let words = lexer::words(text)?;
    let parsed = parser::parse(&words)?;
    let mapped = sections::map(&parsed, &probe);
    let mut notes = mapped.notes.clone();
    notes.sort_by_key(|note| note.line);
    let mut carried: Vec<usize> = mapped
        .defaults
        .iter()
        .chain(&mapped.blacklist.devnode)
        .chain(&mapped.blacklist.wwid)
        .chain(&mapped.exceptions.devnode)
        .chain(&mapped.exceptions.wwid)
        .chain(mapped.maps.iter().flat_map(|map| &map.settings))
        .map(|entry| entry.line)
        .collect();
    carried.extend(mapped.maps.iter().flat_map(|map| map.lines.iter().copied()));
    carried.sort_unstable();
    Ok(Imported {
        toml: emit::toml(&mapped, &notes),
        maps: mapped.maps.len(),
        notes,
        carried,
    })
}

/// Checks `keys` of a `context` (`blacklist`, `blacklist_exceptions`,
/// `map` for a map's name, else map settings and top-level keys) with
/// the daemon's loader.
fn probe(context: &str, keys: &[(&'static str, Value)]) -> Result<(), String> {
    const MAP: &str = "[[map]]\nname = \"probe\"\nsize = \"1M\"\n\
                       [[map.path]]\nname = \"p\"\nuri = \"null:1M\"\n";
    let line = |key: &str, value: &Value| format!("{key} = {}\n", value.toml());
    let text = match context {
        "blacklist" | "blacklist_exceptions" => {
            let mut text = format!("[{context}]\n");
            for (key, value) in keys {
                text += &line(key, &Value::List(vec![value.clone()]));
            }
            text + MAP
        }
        "map" => {
            let name = keys
                .first()
                .map_or(String::new(), |(_, value)| value.toml());
            format!(
                "[[map]]\nname = {name}\nsize = \"1M\"\n[[map.path]]\nname = \"p\"\nuri = {}\n",
                quote("null:1M")
            )
        }
        _ => {
            let mut top = String::new();
            let mut text = String::from("[defaults]\n");
            let mut marginal = String::new();
            for (key, value) in keys {
                match key.strip_prefix("marginal.") {
                    Some(key) => marginal += &line(key, value),
                    None if settings::TOP_LEVEL.contains(key) => top += &line(key, value),
                    None => text += &line(key, value),
                }
            }
            text = top + &text;
            if !marginal.is_empty() {
                text += "[defaults.marginal]\n";
                text += &marginal;
            }
            text + MAP
        }
    };
    DaemonConfig::parse_with(&text, &NoPaths)
        .map(|_| ())
        .map_err(|error| error.reason)
}
