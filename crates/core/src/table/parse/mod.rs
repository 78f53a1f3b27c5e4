//! Reading a table line ([`Table::parse`]) and checking it against the
//! selectors ([`Table::canonical`]).
//!
//! # Words
//! The text is split on ASCII whitespace: any run of spaces, tabs and
//! newlines separates two words, and leading or trailing whitespace is
//! ignored. Other characters, non-ASCII whitespace included, belong to a
//! word. dm's `dm_split_args` also honours a backslash escape (`a\ b` is
//! one word); mpio does not, so a word never holds whitespace and the
//! printed form always splits back into the same words.
//!
//! # Numbers
//! Counts and values are plain decimal digits: no sign, no spaces, leading
//! zeros allowed (dm's `%u` takes them too). A number too large for its
//! type is out of its range like any other, never a panic. dm's `sscanf`
//! also takes `+5` and turns `-1` into 4294967295; mpio refuses both.
//!
//! # Where mpio is as lenient as dm
//! - Feature words and `queue_mode` values are matched ignoring ASCII case
//!   (dm's `strcasecmp`); they print back in lower case.
//! - A feature given twice is accepted and the last value wins; the
//!   printed form names it once.
//! - `parse` takes any word as a selector name; [`Table::canonical`]
//!   checks it, as dm checks it when it builds the group.
//!
//! # Where mpio is stricter than dm
//! - `<start>` must be 0: an mpio map is a single target covering its
//!   device (dm's start belongs to the device's table, not to the target).
//! - The initial group must be one of the groups: dm takes any `1..=1024`
//!   and, past the last group, simply starts with none preselected.
//! - Words after the last group are refused as such; dm reads them as a
//!   further group and then reports a group count mismatch.
//! - A path word is in a table once ([`Table::canonical`]): the map's
//!   status, messages and reloads name a path by its word, so a second
//!   use would be a second path no verb could tell apart. dm refuses the
//!   same device twice only when it builds the table (its `dm_get_device`
//!   shares one reference). Every table goes through `canonical` (a
//!   config's, `--table`'s, a reload's), so this is the one rule.
//!
//! # Errors
//! Every refusal is a [`TableError`] naming the 1-based index of the word
//! (one past the last word when the text ends early, with `found` set to
//! `end of table`) and what the grammar wanted there, with the range of a
//! number and, for counted lists, which count the word belongs to.
//! [`Table::canonical`] on a table built in code, whose words have no index
//! (`word` 0), reports position 0 and says in the message which group and
//! path is wrong.
//!
//! # Panics
//! Never, whatever the text: every index is checked and every number is
//! parsed with overflow detection.

use std::str::FromStr;

use super::{
    Features, GroupSpec, PathSpec, QueueMode, Table, TableError, MAX_ARGS, MAX_GROUPS,
    MAX_PATHS_PER_GROUP,
};
use crate::numa::NumaTopology;
use crate::selector::{ArgError, PathSetup, Selector, Setup, SELECTOR_NAMES};

/// Most words after `<#features>` (dm's limit: every feature once is 8).
const MAX_FEATURE_WORDS: usize = 8;
/// dm's range for `pg_init_retries`.
const PG_INIT_RETRIES_MIN: u32 = 1;
/// dm's range for `pg_init_retries`.
const PG_INIT_RETRIES_MAX: u32 = 50;
/// dm's upper bound for `pg_init_delay_msecs` (the lower is 0).
const PG_INIT_DELAY_MSECS_MAX: u32 = 60_000;
/// Longest device: its size in bytes must fit in a u64.
const MAX_LENGTH_SECTORS: u64 = u64::MAX / crate::io::SECTOR_SIZE;
/// The target type word, third in the line.
const TARGET_TYPE: &str = "multipath";
/// `found` when the text ends before the grammar does.
const END_OF_TABLE: &str = "end of table";
/// Longest part of a word quoted in an error; the rest is counted.
const QUOTE_CHARS: usize = 64;
/// The feature words, for error messages.
const FEATURE_WORDS: &str =
    "queue_if_no_path, pg_init_retries, pg_init_delay_msecs, retain_attached_hw_handler, queue_mode";

impl Table {
    /// The device's size in bytes: `length_sectors` sectors of
    /// [`crate::io::SECTOR_SIZE`] (saturating; a map refuses a table whose
    /// size overflows).
    pub fn size_bytes(&self) -> u64 {
        self.length_sectors.saturating_mul(crate::io::SECTOR_SIZE)
    }

    /// Parses one table line (see the module docs for the word and number
    /// rules).
    ///
    /// # Errors
    /// A [`TableError`] at the first word that does not fit the grammar,
    /// is out of range, or is left over after the last group.
    pub fn parse(text: &str) -> Result<Table, TableError> {
        let mut words = Words::new(text);
        let start_sector: u64 = words.number(0, 0, expected_start_sector)?;
        let length_sectors: u64 = words.number(1, MAX_LENGTH_SECTORS, expected_length)?;
        let (position, target) = words.next(|| format!("the target type {TARGET_TYPE:?}"))?;
        if target != TARGET_TYPE {
            return Err(error(
                position,
                target,
                format!("the target type {TARGET_TYPE:?}"),
            ));
        }
        let features = parse_features(&mut words)?;
        let hardware_handler = parse_hardware_handler(&mut words)?;

        let group_count_position = words.position();
        let group_count: u32 = words.number(0, MAX_GROUPS as u32, || {
            format!("the number of priority groups (0..={MAX_GROUPS})")
        })?;
        let initial_group: u32 = words.number(u32::from(group_count > 0), group_count, || {
            expected_initial_group(group_count as usize)
        })?;

        let group_count = group_count as usize;
        let mut groups = Vec::with_capacity(group_count.min(words.remaining()));
        for number in 1..=group_count {
            groups.push(parse_group(&mut words, number, group_count)?);
        }
        if let Some((position, word)) = words.peek() {
            return Err(error(
                position,
                word,
                format!(
                    "the end of the table after the {} counted at word {group_count_position} \
                     ({} left over)",
                    plural(group_count, "priority group", "priority groups"),
                    plural(words.remaining(), "word", "words"),
                ),
            ));
        }
        Ok(Table {
            start_sector,
            length_sectors,
            features,
            hardware_handler,
            initial_group,
            groups,
        })
    }

    /// The table as dm would print it back once loaded: each group's
    /// selector is built (on `numa`), which checks the selector name and
    /// its arguments, and the selector's own canonical arguments replace
    /// what was written (`round-robin 0 2 0 P1 P2` becomes
    /// `round-robin 0 2 1 P1 1 P2 1`). Features become what dm keeps of
    /// them (Linux 6.12, `tests/fixtures/dm_table_oracle.txt`): `queue_mode
    /// rq` and `mq` are dm's default and vanish; `queue_mode bio` turns
    /// `retain_attached_hw_handler` on. The canonical form of a canonical
    /// table is the same table.
    ///
    /// A table built in code is also checked for what [`Table::parse`]
    /// guarantees (start 0, a length, groups with paths, an initial group
    /// that exists, names that are single words), so a table this accepts
    /// always prints as a line that parses back to the same print.
    ///
    /// # Errors
    /// A [`TableError`] at the selector name when no selector has it, at
    /// the argument a selector refuses (with the selector's reason), or at
    /// whatever a table built in code got wrong.
    pub fn canonical(&self, numa: &NumaTopology) -> Result<Table, TableError> {
        self.check_structure()?;
        let groups = self
            .groups
            .iter()
            .enumerate()
            .map(|(index, group)| canonical_group(group, index + 1, numa))
            .collect::<Result<Vec<_>, _>>()?;
        let mut features = self.features.clone();
        match features.queue_mode {
            Some(QueueMode::Bio) => features.retain_attached_hw_handler = true,
            Some(QueueMode::Rq | QueueMode::Mq) => features.queue_mode = None,
            None => {}
        }
        Ok(Table {
            start_sector: self.start_sector,
            length_sectors: self.length_sectors,
            features,
            hardware_handler: self.hardware_handler.clone(),
            initial_group: self.initial_group,
            groups,
        })
    }

    /// Checks what [`Table::parse`] guarantees and a table built in code
    /// may lack; a parsed table always passes.
    fn check_structure(&self) -> Result<(), TableError> {
        if self.start_sector != 0 {
            return Err(error(
                1,
                &self.start_sector.to_string(),
                expected_start_sector(),
            ));
        }
        if self.length_sectors == 0 || self.length_sectors > MAX_LENGTH_SECTORS {
            return Err(error(2, "0", expected_length()));
        }
        if let Some(retries) = self.features.pg_init_retries {
            if !(PG_INIT_RETRIES_MIN..=PG_INIT_RETRIES_MAX).contains(&retries) {
                return Err(error(
                    0,
                    &retries.to_string(),
                    format!(
                        "a pg_init_retries value in {PG_INIT_RETRIES_MIN}..={PG_INIT_RETRIES_MAX}"
                    ),
                ));
            }
        }
        if let Some(delay) = self.features.pg_init_delay_msecs {
            if delay > PG_INIT_DELAY_MSECS_MAX {
                return Err(error(
                    0,
                    &delay.to_string(),
                    format!("a pg_init_delay_msecs value in 0..={PG_INIT_DELAY_MSECS_MAX}"),
                ));
            }
        }
        if self.hardware_handler.len() > MAX_ARGS {
            return Err(error(
                0,
                &self.hardware_handler.len().to_string(),
                format!("at most {MAX_ARGS} hardware handler words"),
            ));
        }
        if let Some(word) = self.hardware_handler.iter().find(|word| !is_one_word(word)) {
            return Err(error(
                0,
                word,
                "a hardware handler word: one non-empty word without whitespace",
            ));
        }
        let group_count = self.groups.len();
        if group_count > MAX_GROUPS {
            return Err(error(
                0,
                &group_count.to_string(),
                format!("at most {MAX_GROUPS} priority groups"),
            ));
        }
        let initial_fits = if group_count == 0 {
            self.initial_group == 0
        } else {
            (1..=group_count).contains(&(self.initial_group as usize))
        };
        if !initial_fits {
            return Err(error(
                0,
                &self.initial_group.to_string(),
                expected_initial_group(group_count),
            ));
        }
        // Each path's first place, by name: a path is in the table once.
        let mut seen: std::collections::HashMap<&str, (usize, usize, usize)> =
            std::collections::HashMap::new();
        for (index, group) in self.groups.iter().enumerate() {
            let number = index + 1;
            if group.selector_args.len() > MAX_ARGS {
                return Err(error(
                    group.word,
                    &group.selector,
                    format!("at most {MAX_ARGS} selector arguments in priority group {number}"),
                ));
            }
            if !(1..=MAX_PATHS_PER_GROUP).contains(&group.paths.len()) {
                return Err(error(
                    group.word,
                    &group.selector,
                    format!(
                        "1..={MAX_PATHS_PER_GROUP} paths in priority group {number}, not {}",
                        group.paths.len()
                    ),
                ));
            }
            for (path_index, path) in group.paths.iter().enumerate() {
                if !is_one_word(&path.name) {
                    return Err(error(
                        path.word,
                        &path.name,
                        format!(
                            "a path name: one non-empty word without whitespace \
                             (path {} of priority group {number})",
                            path_index + 1
                        ),
                    ));
                }
                if path.args.len() > MAX_ARGS {
                    return Err(error(
                        path.word,
                        &path.name,
                        format!(
                            "at most {MAX_ARGS} arguments for path {}",
                            quote(&path.name)
                        ),
                    ));
                }
                let place = (path.word, number, path_index + 1);
                if let Some((word, group, position)) = seen.insert(&path.name, place) {
                    let first = if word == 0 {
                        format!("path {position} of priority group {group}")
                    } else {
                        format!("word {word}")
                    };
                    return Err(error(
                        path.word,
                        &path.name,
                        format!("a path not in the table yet ({first} names it): a path is in a table once"),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn expected_start_sector() -> String {
    "the start sector 0 (an mpio map is a single target covering its device from sector 0)"
        .to_owned()
}

fn expected_length() -> String {
    format!("the device length in 512-byte sectors (1..={MAX_LENGTH_SECTORS})")
}

fn expected_initial_group(group_count: usize) -> String {
    match group_count {
        0 => "the initial priority group 0 (there are no priority groups)".to_owned(),
        _ => format!("the initial priority group (1..={group_count})"),
    }
}

/// The words of a table and how far they have been read.
struct Words<'a> {
    words: Vec<&'a str>,
    /// Index (0-based) of the next word to read.
    next: usize,
}

impl<'a> Words<'a> {
    fn new(text: &'a str) -> Self {
        Words {
            words: text.split_ascii_whitespace().collect(),
            next: 0,
        }
    }

    /// 1-based position of the next word (one past the last at the end).
    fn position(&self) -> usize {
        self.next + 1
    }

    /// How many words are left.
    fn remaining(&self) -> usize {
        self.words.len() - self.next
    }

    /// The next word and its position, without reading it.
    fn peek(&self) -> Option<(usize, &'a str)> {
        self.words
            .get(self.next)
            .map(|&word| (self.position(), word))
    }

    /// Reads the next word; at the end of the text, an error saying the
    /// grammar wanted `expected` there.
    fn next(&mut self, expected: impl FnOnce() -> String) -> Result<(usize, &'a str), TableError> {
        match self.peek() {
            Some(found) => {
                self.next += 1;
                Ok(found)
            }
            None => Err(TableError {
                position: self.position(),
                found: END_OF_TABLE.to_owned(),
                expected: expected(),
            }),
        }
    }

    /// Reads a decimal number in `min..=max`; `expected` describes it,
    /// range included, for the error.
    fn number<T>(&mut self, min: T, max: T, expected: impl Fn() -> String) -> Result<T, TableError>
    where
        T: FromStr + PartialOrd,
    {
        let (position, word) = self.next(&expected)?;
        match parse_decimal::<T>(word) {
            Some(value) if min <= value && value <= max => Ok(value),
            _ => Err(error(position, word, expected())),
        }
    }

    /// Reads `count` words; `expected(i)` describes word `i` (0-based)
    /// for the error when the text ends first.
    fn take(
        &mut self,
        count: usize,
        expected: impl Fn(usize) -> String,
    ) -> Result<Vec<String>, TableError> {
        let mut taken = Vec::with_capacity(count.min(self.remaining()));
        for index in 0..count {
            let (_, word) = self.next(|| expected(index))?;
            taken.push(word.to_owned());
        }
        Ok(taken)
    }
}

/// `word` as a number of type `T` if it is only ASCII digits and fits.
/// (`FromStr` for integers would also take a leading `+`.)
fn parse_decimal<T: FromStr>(word: &str) -> Option<T> {
    if word.is_empty() || !word.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    word.parse().ok()
}

/// A feature word and whether a value word follows it.
#[derive(Clone, Copy)]
enum Feature {
    QueueIfNoPath,
    PgInitRetries,
    PgInitDelayMsecs,
    RetainAttachedHwHandler,
    QueueMode,
}

impl Feature {
    /// The feature `word` names, ignoring ASCII case as dm does.
    fn from_word(word: &str) -> Option<Feature> {
        [
            ("queue_if_no_path", Feature::QueueIfNoPath),
            ("pg_init_retries", Feature::PgInitRetries),
            ("pg_init_delay_msecs", Feature::PgInitDelayMsecs),
            (
                "retain_attached_hw_handler",
                Feature::RetainAttachedHwHandler,
            ),
            ("queue_mode", Feature::QueueMode),
        ]
        .into_iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name))
        .map(|(_, feature)| feature)
    }

    fn takes_value(self) -> bool {
        matches!(
            self,
            Feature::PgInitRetries | Feature::PgInitDelayMsecs | Feature::QueueMode
        )
    }
}

/// `<#features> [feature...]`: the count is of words, so a feature with a
/// value counts 2.
fn parse_features(words: &mut Words<'_>) -> Result<Features, TableError> {
    let count_position = words.position();
    let count: usize = words.number(0, MAX_FEATURE_WORDS, || {
        format!("the number of feature words (0..={MAX_FEATURE_WORDS})")
    })?;
    let feature_word = || {
        format!(
            "a feature word ({FEATURE_WORDS}); word {count_position} counts {}",
            plural(count, "feature word", "feature words")
        )
    };
    let mut features = Features::default();
    let mut left = count;
    while left > 0 {
        let (position, word) = words.next(feature_word)?;
        left -= 1;
        let feature =
            Feature::from_word(word).ok_or_else(|| error(position, word, feature_word()))?;
        if feature.takes_value() {
            if left == 0 {
                return Err(error(
                    position,
                    word,
                    format!(
                        "a feature that fits in the {} counted at word {count_position} \
                         ({} takes a value, so it counts as 2 words)",
                        plural(count, "feature word", "feature words"),
                        word.to_ascii_lowercase(),
                    ),
                ));
            }
            left -= 1;
        }
        match feature {
            Feature::QueueIfNoPath => features.queue_if_no_path = true,
            Feature::RetainAttachedHwHandler => features.retain_attached_hw_handler = true,
            Feature::PgInitRetries => {
                features.pg_init_retries =
                    Some(words.number(PG_INIT_RETRIES_MIN, PG_INIT_RETRIES_MAX, || {
                        format!("the pg_init_retries value ({PG_INIT_RETRIES_MIN}..={PG_INIT_RETRIES_MAX})")
                    })?);
            }
            Feature::PgInitDelayMsecs => {
                features.pg_init_delay_msecs =
                    Some(words.number(0, PG_INIT_DELAY_MSECS_MAX, || {
                        format!("the pg_init_delay_msecs value (0..={PG_INIT_DELAY_MSECS_MAX})")
                    })?);
            }
            Feature::QueueMode => {
                let expected = || "the queue_mode value (bio, rq or mq)".to_owned();
                let (position, word) = words.next(expected)?;
                features.queue_mode = Some(
                    queue_mode_from_word(word).ok_or_else(|| error(position, word, expected()))?,
                );
            }
        }
    }
    Ok(features)
}

/// The `queue_mode` value `word` names, ignoring ASCII case as dm does.
fn queue_mode_from_word(word: &str) -> Option<QueueMode> {
    [
        ("bio", QueueMode::Bio),
        ("rq", QueueMode::Rq),
        ("mq", QueueMode::Mq),
    ]
    .into_iter()
    .find(|(name, _)| word.eq_ignore_ascii_case(name))
    .map(|(_, mode)| mode)
}

/// `<#hwh_args> [name args...]`: the count includes the name.
fn parse_hardware_handler(words: &mut Words<'_>) -> Result<Vec<String>, TableError> {
    let count: usize = words.number(0, MAX_ARGS, || {
        format!("the number of hardware handler words (0..={MAX_ARGS})")
    })?;
    words.take(count, |index| match index {
        0 => "the hardware handler name".to_owned(),
        _ => format!("hardware handler argument {index} of {}", count - 1),
    })
}

/// `<selector> <#selector_args> [arg...] <#paths> <#per_path_args> { <path> [arg...] }+`
fn parse_group(
    words: &mut Words<'_>,
    number: usize,
    count: usize,
) -> Result<GroupSpec, TableError> {
    let (word, selector) =
        words.next(|| format!("the path selector of priority group {number} of {count}"))?;
    let selector_arg_count: usize = words.number(0, MAX_ARGS, || {
        format!(
            "the number of selector arguments for {} (0..={MAX_ARGS})",
            quote(selector)
        )
    })?;
    let selector_args = words.take(selector_arg_count, |index| {
        format!(
            "selector argument {} of {selector_arg_count} for {}",
            index + 1,
            quote(selector)
        )
    })?;
    let path_count_position = words.position();
    let path_count: usize = words.number(1, MAX_PATHS_PER_GROUP, || {
        format!("the number of paths in priority group {number} (1..={MAX_PATHS_PER_GROUP})")
    })?;
    let path_arg_count_position = words.position();
    let path_arg_count: usize = words.number(0, MAX_ARGS, || {
        format!("the number of arguments per path in priority group {number} (0..={MAX_ARGS})")
    })?;
    let mut paths = Vec::with_capacity(path_count.min(words.remaining()));
    for path_number in 1..=path_count {
        let (word, name) = words.next(|| {
            format!(
                "path {path_number} of {path_count} in priority group {number} (counted at \
                 word {path_count_position}; word {path_arg_count_position} gives each path {})",
                plural(path_arg_count, "argument", "arguments"),
            )
        })?;
        let args = words.take(path_arg_count, |index| {
            format!(
                "argument {} of {path_arg_count} for path {}",
                index + 1,
                quote(name)
            )
        })?;
        paths.push(PathSpec {
            name: name.to_owned(),
            args,
            word,
        });
    }
    Ok(GroupSpec {
        selector: selector.to_owned(),
        selector_args,
        paths,
        word,
    })
}

/// Builds group `number`'s selector and returns the group with the
/// selector's canonical arguments.
fn canonical_group(
    group: &GroupSpec,
    number: usize,
    numa: &NumaTopology,
) -> Result<GroupSpec, TableError> {
    let path_setups: Vec<PathSetup<'_>> = group
        .paths
        .iter()
        .map(|path| PathSetup {
            args: &path.args,
            node: None,
        })
        .collect();
    let setup = Setup {
        args: &group.selector_args,
        paths: &path_setups,
        numa,
    };
    let selector = match Selector::build(&group.selector, &setup) {
        Some(Ok(selector)) => selector,
        Some(Err(refused)) => return Err(argument_error(group, number, refused)),
        None => {
            return Err(error(
                group.word,
                &group.selector,
                format!(
                    "a path selector ({}){}",
                    SELECTOR_NAMES.join(", "),
                    in_code_hint(group.word, number, None),
                ),
            ))
        }
    };
    let paths = group
        .paths
        .iter()
        .enumerate()
        .map(|(position, path)| {
            let args = selector.table_path_args(position);
            debug_assert_eq!(args.len(), selector.table_path_arg_count());
            PathSpec {
                name: path.name.clone(),
                args,
                word: path.word,
            }
        })
        .collect();
    Ok(GroupSpec {
        selector: group.selector.clone(),
        selector_args: selector.table_args(),
        paths,
        word: group.word,
    })
}

/// Places a selector's refusal on the word it refused: selector argument
/// `i` is word `group.word + 2 + i`, argument `i` of a path is word
/// `path.word + 1 + i`. An argument the selector wanted but the list does
/// not have is reported at the group's or path's name.
fn argument_error(group: &GroupSpec, number: usize, refused: ArgError) -> TableError {
    let selector = &group.selector;
    let (name_word, name, first_arg_offset, args, what, path_number) = match refused.path {
        None => (
            group.word,
            selector,
            2,
            &group.selector_args,
            format!("a valid {selector} selector argument"),
            None,
        ),
        Some(position) => match group.paths.get(position) {
            Some(path) => (
                path.word,
                &path.name,
                1,
                &path.args,
                format!("a valid {selector} argument for path {}", quote(&path.name)),
                Some(position + 1),
            ),
            // A selector naming a path the group does not have: still
            // report its reason, at the group.
            None => (
                group.word,
                selector,
                2,
                &group.selector_args,
                format!("a valid {selector} argument for path {}", position + 1),
                None,
            ),
        },
    };
    let hint = in_code_hint(name_word, number, path_number);
    let expected = format!("{what} ({}){hint}", refused.message);
    match args.get(refused.index) {
        Some(word) => error(
            word_after(name_word, first_arg_offset + refused.index),
            word,
            expected,
        ),
        None => error(name_word, name, expected),
    }
}

/// Position `offset` words after the word at `base`; 0 (no position) when
/// `base` is 0, for tables built in code.
fn word_after(base: usize, offset: usize) -> usize {
    if base == 0 {
        0
    } else {
        base.saturating_add(offset)
    }
}

/// For a table built in code (no word positions), where the error is.
fn in_code_hint(word: usize, group_number: usize, path_number: Option<usize>) -> String {
    match (word, path_number) {
        (0, None) => format!(" in priority group {group_number}"),
        (0, Some(path)) => format!(" in path {path} of priority group {group_number}"),
        _ => String::new(),
    }
}

/// Whether `word` prints as exactly one word.
fn is_one_word(word: &str) -> bool {
    !word.is_empty() && !word.bytes().any(|byte| byte.is_ascii_whitespace())
}

/// An error at `position` about `word`, quoted.
fn error(position: usize, word: &str, expected: impl Into<String>) -> TableError {
    TableError {
        position,
        found: quote(word),
        expected: expected.into(),
    }
}

/// `word` quoted for a message; a very long word is cut, with its length
/// (for any text from outside that a message or a log line repeats).
pub fn quote(word: &str) -> String {
    match word.char_indices().nth(QUOTE_CHARS) {
        None => format!("{word:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &word[..cut], word.len()),
    }
}

/// `count` followed by the right form of a noun.
fn plural(count: usize, singular: &str, plural: &str) -> String {
    format!("{count} {}", if count == 1 { singular } else { plural })
}

#[cfg(test)]
mod tests;
