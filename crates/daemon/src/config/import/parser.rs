//! multipath.conf's sections from its words: the six top-level
//! sections, each holding keywords (a name and the words after it on its
//! line) and the sub-sections multipath-tools knows in it (`device` in
//! `devices`, `blacklist` and `blacklist_exceptions`; `multipath` in
//! `multipaths`; `protocol` in `overrides` and in a `device`). A `{` may
//! follow its name on the same or the next line.
//!
//! Refused, with the line: an unknown section or sub-section, a keyword
//! outside any section, a `}` that closes nothing, a section not closed
//! at the end of the file, sub-sections deeper than multipath-tools has.

use super::lexer::{Located, Word};
use super::model::{Keyword, Section};
use super::ImportError;

/// The top-level sections.
pub const SECTIONS: [&str; 6] = [
    "defaults",
    "blacklist",
    "blacklist_exceptions",
    "devices",
    "multipaths",
    "overrides",
];

/// The sub-sections a section may hold.
fn subsections(parent: &str) -> &'static [&'static str] {
    match parent {
        "blacklist" | "blacklist_exceptions" | "devices" => &["device"],
        "multipaths" => &["multipath"],
        "overrides" | "device" => &["protocol"],
        _ => &[],
    }
}

/// The sections of the file, in order.
///
/// # Errors
/// The first structural fault, with its line.
pub(super) fn parse(words: &[Located]) -> Result<Vec<Section>, ImportError> {
    let mut top = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let Located { word, line } = &words[at];
        match word {
            Word::Text(name) => {
                if !opens(words, at) {
                    return Err(ImportError::new(
                        *line,
                        format!("`{name}` outside a section"),
                    ));
                }
                if !SECTIONS.contains(&name.as_str()) {
                    return Err(ImportError::new(
                        *line,
                        format!(
                            "unknown section `{name}` (multipath.conf has {})",
                            SECTIONS.join(", ")
                        ),
                    ));
                }
                let (section, next) = section(words, at, name, *line)?;
                top.push(section);
                at = next;
            }
            Word::Open => return Err(ImportError::new(*line, "`{` without a section name")),
            Word::Close => return Err(ImportError::new(*line, "`}` closes no section")),
        }
    }
    Ok(top)
}

/// Whether the word after `at` is a `{`.
fn opens(words: &[Located], at: usize) -> bool {
    words
        .get(at + 1)
        .is_some_and(|next| next.word == Word::Open)
}

/// The section named at `at` (its `{` next), and the index after its `}`.
fn section(
    words: &[Located],
    at: usize,
    name: &str,
    line: usize,
) -> Result<(Section, usize), ImportError> {
    let mut section = Section {
        name: name.to_string(),
        line,
        keywords: Vec::new(),
        sections: Vec::new(),
    };
    let mut at = at + 2;
    loop {
        let Some(Located { word, line: here }) = words.get(at) else {
            return Err(ImportError::new(
                words.last().map_or(line, |last| last.line),
                format!("section `{name}` opened at line {line} is not closed"),
            ));
        };
        match word {
            Word::Close => return Ok((section, at + 1)),
            Word::Open => {
                return Err(ImportError::new(
                    *here,
                    format!("`{{` without a sub-section name in `{name}`"),
                ))
            }
            Word::Text(keyword) if opens(words, at) => {
                if !subsections(name).contains(&keyword.as_str()) {
                    let known = subsections(name);
                    return Err(ImportError::new(
                        *here,
                        if known.is_empty() {
                            format!("unknown sub-section `{keyword}`: `{name}` has none")
                        } else {
                            format!(
                                "unknown sub-section `{keyword}` in `{name}` (it has {})",
                                known.join(", ")
                            )
                        },
                    ));
                }
                let (inner, next) = self::section(words, at, keyword, *here)?;
                section.sections.push(inner);
                at = next;
            }
            Word::Text(keyword) => {
                let mut values = Vec::new();
                at += 1;
                while let Some(Located {
                    word: Word::Text(value),
                    line: value_line,
                }) = words.get(at)
                {
                    if value_line != here {
                        break;
                    }
                    values.push(value.clone());
                    at += 1;
                }
                let mut values = values.into_iter();
                section.keywords.push(Keyword {
                    name: keyword.clone(),
                    line: *here,
                    value: values.next(),
                    extra: values.collect(),
                });
            }
        }
    }
}
