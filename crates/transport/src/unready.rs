//! Why a path cannot serve yet: the last failed attempt to open or settle
//! it, kept for `mpio show paths` and the log (the file and NBD
//! transports each keep one per path).

use crate::lock;
use std::sync::Mutex;

/// The reason a path is not ready, written by each failed attempt.
#[derive(Debug, Default)]
pub(crate) struct Unready(Mutex<Option<String>>);

impl Unready {
    /// Records `why` the last attempt failed; true if it differs from
    /// what was recorded before (a change worth logging).
    pub(crate) fn note(&self, why: String) -> bool {
        let mut reason = lock(&self.0);
        let changed = reason.as_deref() != Some(why.as_str());
        *reason = Some(why);
        changed
    }

    /// The reason for a path that is not `ready`: the last one noted, or
    /// `fallback` before any attempt failed. `None` for a ready path.
    pub(crate) fn reason(&self, ready: bool, fallback: &str) -> Option<String> {
        if ready {
            return None;
        }
        Some(lock(&self.0).clone().unwrap_or_else(|| fallback.into()))
    }
}
