//! One deadline for a whole exchange with a client, shared by the control
//! socket and the metrics endpoint: each read and write may block only for
//! the time left, so a client that trickles its request a byte at a time,
//! or takes its answer as slowly, holds the server no longer than the
//! deadline in all (a per-call socket timeout would let it go on forever).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A stream whose blocking calls can be bounded.
pub(crate) trait Timed: Read + Write {
    /// Bounds the next reads.
    fn read_timeout(&self, timeout: Duration) -> io::Result<()>;
    /// Bounds the next writes.
    fn write_timeout(&self, timeout: Duration) -> io::Result<()>;
}

impl Timed for &UnixStream {
    fn read_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
    fn write_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(timeout))
    }
}

impl Timed for &TcpStream {
    fn read_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
    fn write_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(timeout))
    }
}

/// The end of the time a client has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// `time` from now.
    pub(crate) fn after(time: Duration) -> Deadline {
        Deadline(Instant::now() + time)
    }

    /// The time left, or `TimedOut` once there is none.
    fn left(self) -> io::Result<Duration> {
        let left = self.0.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }

    /// One read into `buf`, blocking at most until the deadline; past
    /// it, `TimedOut`.
    pub(crate) fn read(self, stream: &mut impl Timed, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            stream.read_timeout(self.left()?)?;
            match stream.read(buf) {
                // A socket timeout reads as `WouldBlock` (EAGAIN) on
                // Linux: go round, and `left` says `TimedOut` once the
                // deadline has passed.
                Err(error) if expired_or_interrupted(&error) => {}
                result => return result,
            }
        }
    }

    /// Writes all of `bytes`, finishing by the deadline.
    pub(crate) fn write_all(self, stream: &mut impl Timed, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            stream.write_timeout(self.left()?)?;
            match stream.write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => bytes = &bytes[written..],
                Err(error) if expired_or_interrupted(&error) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

/// A blocking call that ended for its socket timeout (`WouldBlock` on
/// Linux, `TimedOut` elsewhere) or a signal: the caller tries again with
/// the time left.
fn expired_or_interrupted(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
