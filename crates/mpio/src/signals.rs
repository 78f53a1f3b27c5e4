//! SIGTERM and SIGINT for `mpio serve`, as a storage daemon takes them:
//! the first asks for a clean shutdown (the caller drains, flushes and
//! exits), a second one exits at once, whatever the drain is doing.
//! SIGHUP (what `systemctl reload` sends without `ExecReload=`) asks for
//! the config file to be read again, as often as it comes.
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
//! the thread waiting in [`ShutdownSignals::wait`]. SIGHUP only goes
//! through the self-pipe.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The signals that ask for a shutdown.
const SHUTDOWN: [i32; 2] = [SIGTERM, SIGINT];

/// What a signal asks of `mpio serve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A clean shutdown; the signal's name.
    Shutdown(&'static str),
    /// The config file read again (SIGHUP).
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, caught. See the module docs.
pub struct ShutdownSignals {
    signals: Signals,
}

impl ShutdownSignals {
    /// Catches SIGTERM, SIGINT and SIGHUP from now on (before the server starts,
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
            signals: Signals::new([SIGTERM, SIGINT, SIGHUP])?,
        })
    }

    /// Waits for the next signal; says what it asks.
    pub fn wait(&mut self) -> Asked {
        loop {
            match self.signals.forever().next() {
                Some(SIGHUP) => return Asked::Reload,
                Some(signal) => return Asked::Shutdown(name(signal)),
                None => {}
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
