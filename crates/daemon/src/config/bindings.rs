//! The bindings file: user-friendly names (`mpatha`, `mpathb`, …) bound
//! to WWIDs, in multipath-tools' format (`/etc/multipath/bindings`), so a
//! map by WWID keeps its name across restarts, reboots and whatever order
//! its devices are found in.
//!
//! # Format
//! Lines that are empty or start with `#` are comments; every other line
//! is `ALIAS WWID`, two words separated by spaces or tabs, and a `#` ends
//! a line's words. multipath-tools writes WWIDs in udev's form
//! (`3600a0980…`); a binding matches a WWID written in either form
//! ([`same_lun`]).
//!
//! # Contract
//! - [`Bindings::parse`] refuses a line that is not two words, an alias
//!   that is not a map name, and an alias or a WWID bound twice, naming
//!   the line: names must not depend on which of two bindings wins.
//! - [`Bindings::assign`] gives every WWID its bound alias and every
//!   unbound WWID, in sorted order, the lowest free name of the sequence
//!   `mpatha` … `mpathz`, `mpathaa`, … (multipath's `alias_prefix` then
//!   letters counting from `a` as a bijective base 26). A name bound to
//!   any WWID, or taken by the caller, is never given again, so a name is
//!   never reused for another LUN. The outcome depends on the file and
//!   the set of WWIDs only, never on their order.
//! - [`write`] replaces the file atomically (a temporary file in the same
//!   directory, synced, then renamed over it), keeping every line it had
//!   and appending the new bindings.

use super::wwid::multipath_form;
use mpio_transport::blockdev::wwid_forms::same_lun;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

/// The prefix of new names (multipath's default `alias_prefix`).
pub(super) const ALIAS_PREFIX: &str = "mpath";

/// Where the bindings are kept unless `bindings_file` says.
pub const DEFAULT_BINDINGS_FILE: &str = "/etc/mpio/bindings";

/// The comment lines a new file starts with, as multipath-tools writes
/// them.
const HEADER: &str = "# Multipath bindings, Version : 1.0\n\
                      # NOTE: this file is automatically maintained by the multipath program.\n\
                      # You should not need to edit this file in normal circumstances.\n\
                      #\n\
                      # Format:\n\
                      # alias wwid\n\
                      #\n";

/// One `ALIAS WWID` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Binding {
    pub alias: String,
    pub wwid: String,
    /// Its 1-based line in the file.
    pub line: usize,
}

/// A bindings file, parsed: its text as read and its bindings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Bindings {
    text: String,
    entries: Vec<Binding>,
}

/// A line of the file that is refused, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct BadLine {
    pub line: usize,
    pub reason: String,
}

impl Bindings {
    /// Parses a bindings file's text; `is_name` says whether an alias may
    /// name a map.
    ///
    /// # Errors
    /// The first refused line (see the module docs).
    pub(super) fn parse(text: &str, is_name: impl Fn(&str) -> bool) -> Result<Bindings, BadLine> {
        let mut entries: Vec<Binding> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let words = line.split('#').next().unwrap_or_default();
            let words: Vec<&str> = words
                .split([' ', '\t', '\r'])
                .filter(|w| !w.is_empty())
                .collect();
            let bad = |reason: String| BadLine {
                line: number,
                reason,
            };
            let (alias, wwid) = match words[..] {
                [] => continue,
                [alias, wwid] => (alias, wwid),
                _ => {
                    return Err(bad(format!(
                        "{} word(s); a binding is `ALIAS WWID`",
                        words.len()
                    )))
                }
            };
            if !is_name(alias) {
                return Err(bad(format!(
                    "alias {alias:?} is not a map name (letters, digits, '.', '_' or '-')"
                )));
            }
            if let Some(first) = entries.iter().find(|entry| entry.alias == alias) {
                return Err(bad(format!(
                    "alias {alias:?} is bound at line {} too",
                    first.line
                )));
            }
            if let Some(first) = entries.iter().find(|entry| same_lun(&entry.wwid, wwid)) {
                return Err(bad(format!(
                    "WWID {wwid:?} is bound to {:?} at line {} too",
                    first.alias, first.line
                )));
            }
            entries.push(Binding {
                alias: alias.to_string(),
                wwid: wwid.to_string(),
                line: number,
            });
        }
        Ok(Bindings {
            text: text.to_string(),
            entries,
        })
    }

    /// The binding of `wwid` (in either form), if it has one.
    pub(super) fn of(&self, wwid: &str) -> Option<&Binding> {
        self.entries
            .iter()
            .find(|entry| same_lun(&entry.wwid, wwid))
    }

    /// The binding of the name `alias`, if it has one.
    pub(super) fn of_alias(&self, alias: &str) -> Option<&Binding> {
        self.entries.iter().find(|entry| entry.alias == alias)
    }

    /// Each of `wwids` with its name: its binding's, else a new one (see
    /// the module docs); `taken` are names the new ones must not be.
    /// Returns the names in the order of `wwids` and whether a binding
    /// was added (the file must then be written).
    pub(super) fn assign(&mut self, wwids: &[&str], taken: &HashSet<&str>) -> (Vec<String>, bool) {
        let mut unbound: Vec<String> = wwids
            .iter()
            .filter(|wwid| self.of(wwid).is_none())
            .map(|wwid| multipath_form(wwid))
            .collect();
        unbound.sort();
        unbound.dedup_by(|a, b| same_lun(a, b));
        let added = !unbound.is_empty();
        let mut next = 1;
        for wwid in unbound {
            let alias = loop {
                let alias = format!("{ALIAS_PREFIX}{}", letters(next));
                next += 1;
                if self.of_alias(&alias).is_none() && !taken.contains(alias.as_str()) {
                    break alias;
                }
            };
            self.add(alias, wwid);
        }
        let names = wwids
            .iter()
            .map(|wwid| self.of(wwid).expect("bound above").alias.clone())
            .collect();
        (names, added)
    }

    /// Appends the binding `alias WWID` as a new line of the text.
    fn add(&mut self, alias: String, wwid: String) {
        if self.text.is_empty() {
            self.text.push_str(HEADER);
        } else if !self.text.ends_with('\n') {
            self.text.push('\n');
        }
        self.text.push_str(&format!("{alias} {wwid}\n"));
        self.entries.push(Binding {
            alias,
            wwid,
            line: self.text.lines().count(),
        });
    }

    /// The file's text: the lines read, then the bindings added.
    pub(super) fn text(&self) -> &str {
        &self.text
    }
}

/// The letters of sequence number `number` (from 1): `a` … `z`, `aa` …
/// `az`, `ba` …, as multipath's `format_devname`: bijective base 26, so
/// every name has exactly one number.
fn letters(mut number: u64) -> String {
    let mut reversed = Vec::new();
    while number > 0 {
        number -= 1;
        reversed.push(b'a' + (number % 26) as u8);
        number /= 26;
    }
    reversed.reverse();
    String::from_utf8(reversed).expect("ASCII letters")
}

/// Reads the file at `path`; `None` if there is none.
///
/// # Errors
/// It exists and cannot be read.
pub(super) fn read(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Replaces the file at `path` with `text` atomically: a reader sees the
/// old file or the new, never a part (see the module docs). Makes the
/// directory if it is missing.
///
/// # Errors
/// The directory or the temporary file cannot be made, written, synced
/// or renamed.
pub(super) fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(directory)?;
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = directory.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        // The rename itself is durable once the directory is synced.
        std::fs::File::open(directory)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_name(text: &str) -> bool {
        super::super::check::is_name(text)
    }

    fn parse(text: &str) -> Result<Bindings, BadLine> {
        Bindings::parse(text, is_name)
    }

    #[test]
    fn letters_count_as_multipath_does() {
        let cases = [
            (1, "a"),
            (2, "b"),
            (26, "z"),
            (27, "aa"),
            (52, "az"),
            (53, "ba"),
            (702, "zz"),
            (703, "aaa"),
        ];
        for (number, expected) in cases {
            assert_eq!(letters(number), expected, "{number}");
        }
    }

    #[test]
    fn parse_reads_comments_blank_lines_and_both_separators() {
        let bindings = parse(
            "# Multipath bindings, Version : 1.0\n\n\
             mpatha 3600a0980000000000000000000000001\n\
             mpathb\t3600a0980000000000000000000000002   # a comment\n  \n",
        )
        .unwrap();
        assert_eq!(
            bindings
                .of("naa.600a0980000000000000000000000002")
                .unwrap()
                .alias,
            "mpathb",
            "found by the kernel's form too"
        );
        assert_eq!(
            bindings
                .of("3600a0980000000000000000000000001")
                .unwrap()
                .line,
            3
        );
        assert!(bindings.of("3600a0980000000000000000000000003").is_none());
    }

    #[test]
    fn parse_refuses_a_malformed_line_naming_it() {
        let cases = [
            ("mpatha\n", 1, "1 word(s)"),
            ("# c\nmpatha 36001 extra\n", 2, "3 word(s)"),
            ("mpath/a 36001\n", 1, "not a map name"),
            ("mpatha 36001\nmpatha 36002\n", 2, "bound at line 1 too"),
            (
                "mpatha 36001\nmpathb naa.6001\n",
                2,
                "bound to \"mpatha\" at line 1 too",
            ),
        ];
        for (text, line, reason) in cases {
            let error = parse(text).unwrap_err();
            assert_eq!(error.line, line, "{text:?}");
            assert!(error.reason.contains(reason), "{text:?}: {}", error.reason);
        }
    }

    #[test]
    fn new_names_are_the_lowest_free_in_sorted_wwid_order() {
        let mut bindings = Bindings::default();
        let (names, added) = bindings.assign(&["36002", "36001", "36003"], &HashSet::new());
        assert!(added);
        assert_eq!(names, ["mpathb", "mpatha", "mpathc"]);
        assert!(bindings.text().starts_with(HEADER), "{}", bindings.text());
        assert!(bindings
            .text()
            .ends_with("mpatha 36001\nmpathb 36002\nmpathc 36003\n"));
        let again = parse(bindings.text()).unwrap();
        assert_eq!(again.of("36003").unwrap().alias, "mpathc");
    }

    #[test]
    fn bound_names_are_reused_and_never_given_to_another_wwid() {
        // mpatha's LUN is gone from the host; its name stays its own.
        let mut bindings = parse("mpatha 36001\nmpathc 36003\n").unwrap();
        let (names, added) = bindings.assign(&["36003", "36009", "36008"], &HashSet::new());
        assert!(added);
        assert_eq!(names, ["mpathc", "mpathd", "mpathb"]);
        let (names, added) = bindings.assign(&["36008", "36009"], &HashSet::new());
        assert!(!added, "every WWID bound already");
        assert_eq!(names, ["mpathb", "mpathd"]);
    }

    #[test]
    fn the_name_after_mpathz_is_mpathaa() {
        let text: String = (1..=26)
            .map(|number| format!("mpath{} 36{number:03}\n", letters(number)))
            .collect();
        let mut bindings = parse(&text).unwrap();
        let (names, _) = bindings.assign(&["36999"], &HashSet::new());
        assert_eq!(names, ["mpathaa"]);
    }

    #[test]
    fn names_taken_by_the_config_are_skipped() {
        let mut bindings = Bindings::default();
        let taken = HashSet::from(["mpatha", "mpathc"]);
        let (names, _) = bindings.assign(&["36001", "36002"], &taken);
        assert_eq!(names, ["mpathb", "mpathd"]);
    }

    #[test]
    fn new_bindings_are_appended_to_the_lines_read() {
        let mut bindings = parse("# mine\nmpatha 36001").unwrap();
        bindings.assign(&["36002"], &HashSet::new());
        assert_eq!(bindings.text(), "# mine\nmpatha 36001\nmpathb 36002\n");
        assert_eq!(bindings.of("36002").unwrap().line, 3);
    }

    #[test]
    fn write_replaces_the_file_atomically_and_read_finds_it() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("etc/mpio/bindings");
        assert_eq!(read(&path).unwrap(), None);
        write(&path, "mpatha 36001\n").unwrap();
        write(&path, "mpatha 36001\nmpathb 36002\n").unwrap();
        assert_eq!(
            read(&path).unwrap().as_deref(),
            Some("mpatha 36001\nmpathb 36002\n")
        );
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, ["bindings"], "no temporary file is left behind");
    }

    #[test]
    fn write_into_an_unwritable_place_fails_and_leaves_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let blocker = directory.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        assert!(write(&blocker.join("bindings"), "x").is_err());
    }
}
