//! Opening a file path after its map was built: a device that was
//! offline, in ALUA standby or unavailable (capacity 0), or a file not
//! there yet, when the map started.
//!
//! # Contract
//! - A queue to a path that is not open submits nothing to the file: its
//!   ring's fixed file is an empty slot, so the kernel fails each I/O
//!   with `EBADF`, a lost connection, and the path stays failed.
//! - Each submission to such a queue (the checker's probe each round)
//!   asks for the file to be opened again, on a thread of its own: an
//!   `open` of a device in trouble may block, and neither an I/O thread
//!   nor the checker waits on one. At most one attempt per path runs at
//!   a time.
//! - An attempt succeeds only if the file opens, reads, holds the map
//!   and takes what the map's block devices send. It
//!   then installs the file once for good and bumps the switch count:
//!   each queue registers the file at its next submission or poll, and
//!   the next probe that reads it lets the checker reinstate the path.
//!   A failed attempt records why, for `show paths` and the log.

use super::{FilePath, Opened};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl FilePath {
    /// Tries to open the file again in the background, unless it is open
    /// or an attempt already runs (see the module docs).
    pub(crate) fn open_later(self: &Arc<Self>) {
        if self.opened.get().is_some() {
            return;
        }
        // Acquire pairs with the Release that ends an attempt: the next
        // one sees what it recorded.
        if self.opening.swap(true, Ordering::Acquire) {
            return;
        }
        let path = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("mpio-open".into())
            .spawn(move || path.try_open());
        if let Err(error) = spawned {
            self.unready
                .note(format!("cannot start a thread to open it: {error}"));
            self.opening.store(false, Ordering::Release);
        }
    }

    /// Whether an attempt to open the file runs now.
    pub fn is_opening(&self) -> bool {
        // Acquire: as in `open_later`.
        self.opening.load(Ordering::Acquire)
    }

    /// One attempt: opens, checks against the path's needs, installs.
    fn try_open(&self) {
        let outcome = Opened::open(&self.path, self.direct)
            .map_err(|error| error.to_string())
            .and_then(|opened| {
                match self
                    .too_small(&opened)
                    .or_else(|| self.served_as.refusal(&opened.limits))
                {
                    None => Ok(opened),
                    Some(why) => Err(why),
                }
            });
        match outcome {
            Ok(opened) => {
                let _ = self.opened.set(opened);
                // Release: a queue that sees the new count (Acquire in
                // `switch_state`) sees the opened file.
                self.switches.fetch_add(1, Ordering::Release);
                tracing::info!(file = %self.path.display(), "file path opened");
            }
            Err(why) => {
                if self.unready.note(why.clone()) {
                    tracing::info!(file = %self.path.display(), reason = %why, "file path still cannot be opened");
                }
            }
        }
        self.opening.store(false, Ordering::Release);
    }
}
