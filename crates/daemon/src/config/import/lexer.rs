//! multipath.conf's words, as multipath-tools' parser splits a line:
//! `{` and `}` are words of their own; a `"` opens a quoted word that
//! runs to the next lone `"` (two `""` inside stand for one `"`), so it
//! may hold spaces, braces, `#` and `!`; outside quotes, `#` or `!` starts
//! a comment that runs to the end of the line. Every word keeps its line.
//!
//! Refused, with the line: a line longer than [`MAX_LINE_BYTES`], a
//! quote not closed on its line, control characters other than tab (a
//! binary file), and more than [`MAX_WORDS`] words in all.

use super::ImportError;

/// The longest line taken, in bytes.
pub const MAX_LINE_BYTES: usize = 4096;

/// Most words in one file (a `multipath -t` has about 3000).
pub const MAX_WORDS: usize = 1 << 20;

/// One word of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Word {
    /// `{` outside quotes.
    Open,
    /// `}` outside quotes.
    Close,
    /// Any other word; a quoted one without its quotes.
    Text(String),
}

/// A word and the line (from 1) it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Located {
    pub word: Word,
    pub line: usize,
}

/// The words of `text`.
///
/// # Errors
/// The first line that is too long, holds an unclosed quote or a
/// control character, or the word that passes [`MAX_WORDS`].
pub(super) fn words(text: &str) -> Result<Vec<Located>, ImportError> {
    let mut words = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.len() > MAX_LINE_BYTES {
            return Err(ImportError::new(
                number,
                format!("line of {} bytes, longer than {MAX_LINE_BYTES}", line.len()),
            ));
        }
        if let Some(junk) = line.chars().find(|c| c.is_control() && *c != '\t') {
            return Err(ImportError::new(
                number,
                format!(
                    "control character U+{:04X}: not a text file",
                    u32::from(junk)
                ),
            ));
        }
        split_line(line, number, &mut words)?;
        if words.len() > MAX_WORDS {
            return Err(ImportError::new(
                number,
                format!("more than {MAX_WORDS} words"),
            ));
        }
    }
    Ok(words)
}

/// Appends the words of one line.
fn split_line(line: &str, number: usize, words: &mut Vec<Located>) -> Result<(), ImportError> {
    let mut chars = line.chars().peekable();
    let push = |words: &mut Vec<Located>, word| words.push(Located { word, line: number });
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '#' | '!' => break,
            '{' | '}' => {
                chars.next();
                push(words, if c == '{' { Word::Open } else { Word::Close });
            }
            '"' => {
                chars.next();
                let mut text = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(ImportError::new(
                                number,
                                format!("quote not closed: \"{text}"),
                            ))
                        }
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            text.push('"');
                        }
                        Some('"') => break,
                        Some(other) => text.push(other),
                    }
                }
                push(words, Word::Text(text));
            }
            _ => {
                let mut text = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || matches!(c, '{' | '}' | '"' | '#' | '!') {
                        break;
                    }
                    text.push(c);
                    chars.next();
                }
                push(words, Word::Text(text));
            }
        }
    }
    Ok(())
}
