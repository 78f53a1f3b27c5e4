//! The daemon's failure policy: fail fast. A panic on any thread (an
//! event loop, the acceptor, the checker, a control client) is logged and
//! then aborts the whole process, so that a supervisor (systemd's
//! `Restart=`) starts it again and, with ublk, recovery reattaches its
//! devices.
//!
//! # Why not carry on
//! Every thread of the daemon is load-bearing: an acceptor handing
//! connections to a dead event loop, or a map nobody checks, is a daemon
//! that looks alive and is not. Nothing a panic leaves behind can be
//! trusted either, so locks are not recovered from poisoning
//! ([`mpio_transport::lock`] panics on a poisoned lock, which aborts too).
//! Clients see their connections close and reconnect to the restarted
//! daemon; no acknowledged write is lost, since a write is acknowledged
//! only once its path completed it.

/// Makes every panic from now on log its message, place and thread (the
/// standard report on stderr, then a log event), and abort the process.
pub fn install() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        tracing::error!(
            thread,
            location = %info.location().map_or_else(String::new, ToString::to_string),
            "a thread panicked: aborting (fail fast; a supervisor restarts the daemon)"
        );
        std::process::abort();
    }));
}
