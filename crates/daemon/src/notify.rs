//! The service manager's notify protocol (`sd_notify`), spoken by hand:
//! no libsystemd.
//!
//! # Contract
//! - `NOTIFY_SOCKET` names a unix datagram socket: a path, or an abstract
//!   name written `@name`. Each [`Notifier::send`] is one datagram of
//!   newline-separated `KEY=VALUE` lines (`READY=1`, `STATUS=...`,
//!   `RELOADING=1` with `MONOTONIC_USEC`, `STOPPING=1`, `WATCHDOG=1`).
//! - Without `NOTIFY_SOCKET` the daemon was not started by a service
//!   manager that listens: every send does nothing. That is the
//!   protocol, not a fallback.
//! - `WATCHDOG_USEC` asks for `WATCHDOG=1` at least that often;
//!   [`Notifier::watchdog_interval`] is half of it, as `sd_watchdog_enabled`
//!   advises. A `WATCHDOG_PID` other than ours means the request is for
//!   another process.
//! - A datagram that cannot be sent is logged at debug and dropped: the
//!   service manager decides what silence means.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The daemon's side of the notify socket. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    /// The socket to send to and the unbound socket to send from; `None`
    /// without `NOTIFY_SOCKET`.
    target: Option<(UnixDatagram, SocketAddr)>,
    /// How often to send `WATCHDOG=1`, if asked.
    watchdog: Option<Duration>,
}

impl Notifier {
    /// The notifier the environment asks for (see the module docs).
    ///
    /// # Errors
    /// `NOTIFY_SOCKET`, `WATCHDOG_USEC` or `WATCHDOG_PID` set to what is
    /// not a socket address or a number, named.
    pub(crate) fn from_env() -> Result<Notifier, String> {
        let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
            return Ok(Notifier::default());
        };
        let socket = socket
            .into_string()
            .map_err(|_| "NOTIFY_SOCKET is not UTF-8".to_string())?;
        let address = match socket.strip_prefix('@') {
            Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
            None => SocketAddr::from_pathname(&socket),
        }
        .map_err(|error| format!("NOTIFY_SOCKET={socket}: {error}"))?;
        let sender = UnixDatagram::unbound()
            .map_err(|error| format!("NOTIFY_SOCKET={socket}: no socket to send from: {error}"))?;
        Ok(Notifier {
            target: Some((sender, address)),
            watchdog: watchdog_from_env()?,
        })
    }

    /// How often `WATCHDOG=1` is to be sent: half the interval the
    /// service manager asked for, or `None` if it asked for none.
    pub(crate) fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends `message` (newline-separated `KEY=VALUE` lines), if a service
    /// manager listens.
    pub(crate) fn send(&self, message: &str) {
        let Some((sender, address)) = &self.target else {
            return;
        };
        if let Err(error) = sender.send_to_addr(message.as_bytes(), address) {
            tracing::debug!(%error, "notify socket: cannot send {message:?}");
        }
    }

    /// `READY=1` with a `STATUS=` line.
    pub(crate) fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// `RELOADING=1` with the reload's start on `CLOCK_MONOTONIC`.
    pub(crate) fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the config",
            monotonic_usec()
        ));
    }

    /// `STOPPING=1`.
    pub(crate) fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=shutting down");
    }

    /// `WATCHDOG=1`.
    pub(crate) fn watchdog(&self) {
        self.send("WATCHDOG=1");
    }
}

/// `WATCHDOG_USEC` halved, when meant for us (`WATCHDOG_PID` unset or
/// ours).
fn watchdog_from_env() -> Result<Option<Duration>, String> {
    if let Some(pid) = std::env::var_os("WATCHDOG_PID") {
        let pid = pid.to_string_lossy();
        let pid: u32 = pid
            .parse()
            .map_err(|_| format!("WATCHDOG_PID={pid}: not a process id"))?;
        if pid != std::process::id() {
            return Ok(None);
        }
    }
    let Some(usec) = std::env::var_os("WATCHDOG_USEC") else {
        return Ok(None);
    };
    let usec = usec.to_string_lossy();
    match usec.parse::<u64>() {
        Ok(0) | Err(_) => Err(format!(
            "WATCHDOG_USEC={usec}: not a positive number of microseconds"
        )),
        Ok(usec) => Ok(Some(Duration::from_micros(usec / 2))),
    }
}

/// `text` on one line: a `STATUS=` value ends at the first newline.
fn one_line(text: &str) -> String {
    text.replace('\n', "; ")
}

/// Microseconds on `CLOCK_MONOTONIC`, the clock `MONOTONIC_USEC` is read
/// on (the service manager compares it with its own).
#[allow(unsafe_code)] // one clock_gettime, below
fn monotonic_usec() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call's
    // duration, and CLOCK_MONOTONIC is a clock every Linux has.
    let result = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if result != 0 {
        return 0;
    }
    (now.tv_sec as u64)
        .saturating_mul(1_000_000)
        .saturating_add(now.tv_nsec as u64 / 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_stays_on_one_line() {
        assert_eq!(one_line("reload failed: a\nb"), "reload failed: a; b");
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let first = monotonic_usec();
        assert!(first > 0);
        assert!(monotonic_usec() >= first);
    }

    #[test]
    fn a_notifier_sends_datagrams_to_its_socket() {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).expect("bind");
        let notifier = Notifier {
            target: Some((
                UnixDatagram::unbound().expect("socket"),
                SocketAddr::from_pathname(&path).expect("address"),
            )),
            watchdog: None,
        };
        notifier.ready("maps: 1");
        let mut buffer = [0u8; 256];
        let length = listener.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..length], b"READY=1\nSTATUS=maps: 1");
    }
}
