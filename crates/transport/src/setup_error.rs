//! [`SetupError`]: why a map could not be built, or reloaded, over its
//! transports; each names the table word, path word or size at fault.

use crate::file::FileError;
use crate::limits::LimitsRefused;
use crate::uri::UriError;
use mpio_core::map::MapError;

/// Why a map could not be set up over its transports.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A path word names no transport.
    #[error(transparent)]
    Uri(#[from] UriError),
    /// The map itself is malformed.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A file path could not be opened.
    #[error("path {word:?}: {source}")]
    File {
        /// The path word.
        word: String,
        /// What failed.
        source: FileError,
    },
    /// Two NBD paths of the map disagree on whether the export is
    /// read-only: which path the selector picked would decide whether a
    /// write succeeds.
    #[error(
        "paths {first:?} and {word:?} disagree: {what} (every nbd path of a map must be \
         writable, or every one read-only)"
    )]
    NbdPathsDiffer {
        /// The first NBD path word.
        first: String,
        /// The path word that differs from it.
        word: String,
        /// What differs.
        what: String,
    },
    /// The new paths cannot take what a block device serving the map
    /// sends (its limits were fixed when the kernel made it).
    #[error("the map's block device cannot be served by these paths: {refused}")]
    Limits {
        /// What they would refuse.
        refused: LimitsRefused,
    },
    /// A memory disk larger than the host's memory.
    #[error(
        "path {word:?}: a memory disk of {size_bytes} bytes cannot be held by this host \
         ({host_bytes} bytes of memory)"
    )]
    MemoryTooLarge {
        /// The path word.
        word: String,
        /// The disk's size.
        size_bytes: u64,
        /// The host's memory ([`crate::host::memory_bytes`]).
        host_bytes: u64,
    },
    /// A path is smaller than the map.
    #[error("path {word:?} holds {path_bytes} bytes but the map needs {map_bytes}")]
    TooSmall {
        /// The path word.
        word: String,
        /// What the path holds.
        path_bytes: u64,
        /// What the map needs.
        map_bytes: u64,
    },
}
