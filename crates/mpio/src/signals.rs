//! SIGTERM and SIGINT for `mpio serve`, as a storage daemon takes them:
//! the first asks for a clean shutdown (the caller drains, flushes and
//! exits), a second one exits at once, whatever the drain is doing.
//!
//! # Exit codes
//! The second signal ends the process from the signal handler with
//! `128 + signal`, the shell's convention for death by a signal: 130 for
//! SIGINT, 143 for SIGTERM. Nothing is flushed then; the unix socket file
//! stays.
//!
//! # Shape
//! Built on `signal-hook` (its handlers are async-signal-safe; no `unsafe`
//! here): per signal, first an action that exits if the shared flag is
//! already set, then one that sets it (the order matters: on the first
//! signal the exit is not armed yet), and a self-pipe iterator that wakes
//! the thread waiting in [`ShutdownSignals::wait`].

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The signals that ask for a shutdown.
const SHUTDOWN: [i32; 2] = [SIGTERM, SIGINT];

/// SIGTERM and SIGINT, caught. See the module docs.
pub struct ShutdownSignals {
    signals: Signals,
}

impl ShutdownSignals {
    /// Catches SIGTERM and SIGINT from now on (before the server starts,
    /// so that a signal during start-up is not lost).
    ///
    /// # Errors
    /// A handler or the self-pipe could not be set up.
    pub fn install() -> std::io::Result<ShutdownSignals> {
        let received = Arc::new(AtomicBool::new(false));
        for signal in SHUTDOWN {
            // First: exit at once if a signal came before (see the module
            // docs); then: note that one came.
            flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&received))?;
            flag::register(signal, Arc::clone(&received))?;
        }
        Ok(ShutdownSignals {
            signals: Signals::new(SHUTDOWN)?,
        })
    }

    /// Waits for the first SIGTERM or SIGINT; returns its name.
    pub fn wait(&mut self) -> &'static str {
        loop {
            if let Some(signal) = self.signals.forever().next() {
                return name(signal);
            }
        }
    }
}

/// The name of a shutdown signal.
fn name(signal: i32) -> &'static str {
    match signal {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        _ => "a signal",
    }
}
