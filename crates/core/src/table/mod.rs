//! dm multipath table syntax: parse, validate and print exactly as dm does.
//!
//! ```text
//! <start> <len> multipath <#features> [feature...] <#hwh_args> [hwh...]
//!   <#PGs> <initial_PG>
//!   { <selector> <#selector_args> [arg...] <#paths> <#per_path_args> { <path> [arg...] }+ }+
//! ```
//!
//! [`Table::parse`] checks the grammar, counts, numbers and feature words;
//! [`Table::canonical`] also builds every group's selector, which checks the
//! selector's arguments and fills in its defaults, giving the form dm prints
//! back (`service-time 0 2 2 P1 1 1 P2 1 1`). `Display` prints a table with
//! every count recomputed from what it holds.
//!
//! # Errors
//! A [`TableError`] names the 1-based index of the offending word, the word
//! itself (or the end of the text) and what was expected there. Parsing
//! never panics, whatever the input.

mod parse;
pub use parse::quote;
mod print;

use serde::Serialize;

/// Most priority groups in one table (dm's limit).
pub const MAX_GROUPS: usize = 1024;
/// Most paths in one priority group (dm's limit).
pub(crate) const MAX_PATHS_PER_GROUP: usize = 1024;
/// Most arguments in any one argument list (dm's limit).
pub const MAX_ARGS: usize = 1024;

/// A parsed multipath table line.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    /// First sector of the target: always 0 for mpio (one target per map).
    pub start_sector: u64,
    /// Length of the device in 512-byte sectors; never 0.
    pub length_sectors: u64,
    /// The feature words.
    pub features: Features,
    /// Hardware handler name then its arguments; empty for none. Accepted
    /// and printed back; mpio runs no hardware handler.
    pub hardware_handler: Vec<String>,
    /// Group I/O starts on (1-based); 0 exactly when there are no groups.
    pub initial_group: u32,
    /// The priority groups, in priority order.
    pub groups: Vec<GroupSpec>,
}

/// The feature words dm knows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Features {
    /// `queue_if_no_path`: hold I/O while no path is usable.
    pub queue_if_no_path: bool,
    /// `pg_init_retries N` (1..=50 as dm); accepted, reported back.
    pub pg_init_retries: Option<u32>,
    /// `pg_init_delay_msecs N` (0..=60000 as dm); accepted, reported back.
    pub pg_init_delay_msecs: Option<u32>,
    /// `retain_attached_hw_handler`; accepted, reported back.
    pub retain_attached_hw_handler: bool,
    /// `queue_mode bio|rq|mq`; accepted (mpio has one mode), reported back.
    pub queue_mode: Option<QueueMode>,
}

/// dm's `queue_mode` feature values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// `bio`
    Bio,
    /// `rq`
    Rq,
    /// `mq`
    Mq,
}

/// One priority group as written in the table.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSpec {
    /// Selector name (`round-robin`, ...).
    pub selector: String,
    /// Selector arguments.
    pub selector_args: Vec<String>,
    /// The paths, at least one; all with the same number of args.
    pub paths: Vec<PathSpec>,
    /// 1-based index in the source of the selector name's word (0 when
    /// built in code); for error messages only.
    #[serde(skip)]
    pub word: usize,
}

/// One path of a group as written in the table.
#[derive(Clone, Debug, Serialize)]
pub struct PathSpec {
    /// The path word: a configured path name or a transport URI.
    pub name: String,
    /// Per-path selector arguments.
    pub args: Vec<String>,
    /// 1-based index in the source of the path name's word (0 when built in
    /// code); for error messages only.
    #[serde(skip)]
    pub word: usize,
}

/// A table that does not parse or does not validate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("word {position} ({found}): expected {expected}")]
pub struct TableError {
    /// 1-based index of the offending word; one past the last word when the
    /// text ended too early.
    pub position: usize,
    /// The offending word, quoted, or `end of table`.
    pub found: String,
    /// What was expected there, or why the word is refused.
    pub expected: String,
}
