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

    /// One read into `buf`, blocking at most until the deadline.
    pub(crate) fn read(self, stream: &mut impl Timed, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            stream.read_timeout(self.left()?)?;
            match stream.read(buf) {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
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
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}
