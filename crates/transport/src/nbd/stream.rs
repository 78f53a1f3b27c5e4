//! A connected socket to an NBD server, TCP or unix, behind one type.

use super::address::Socket;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A TCP or unix stream.
#[derive(Debug)]
pub enum Stream {
    /// A TCP connection (Nagle off: requests are small and latency-bound).
    Tcp(TcpStream),
    /// A unix socket connection.
    Unix(UnixStream),
}

impl Stream {
    /// Connects to `socket`, giving up on each TCP address after
    /// `timeout`. Name resolution uses the system resolver and is not
    /// bounded by `timeout`.
    pub fn connect(socket: &Socket, timeout: Duration) -> io::Result<Stream> {
        match socket {
            Socket::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path)?)),
            Socket::Tcp { host, port } => {
                let mut last_error = None;
                for address in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&address, timeout) {
                        Ok(stream) => {
                            stream.set_nodelay(true)?;
                            return Ok(Stream::Tcp(stream));
                        }
                        Err(error) => last_error = Some(error),
                    }
                }
                Err(last_error.unwrap_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{host} resolves to no address"),
                    )
                }))
            }
        }
    }

    /// Bounds each blocking read and write by `timeout` (`None`: no bound).
    pub(crate) fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => {
                stream.set_read_timeout(timeout)?;
                stream.set_write_timeout(timeout)
            }
            Stream::Unix(stream) => {
                stream.set_read_timeout(timeout)?;
                stream.set_write_timeout(timeout)
            }
        }
    }

    /// Makes reads and writes return `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_nonblocking(nonblocking),
            Stream::Unix(stream) => stream.set_nonblocking(nonblocking),
        }
    }

    /// Shuts both directions down: the server sees the connection end,
    /// and our next read returns end of file.
    pub fn shutdown(&self) {
        // An error means the socket is already shut down or disconnected,
        // which is what we want.
        let _ = match self {
            Stream::Tcp(stream) => stream.shutdown(Shutdown::Both),
            Stream::Unix(stream) => stream.shutdown(Shutdown::Both),
        };
    }

    /// Shuts our sending side down only: the server reads end of file
    /// after what we sent, and we go on reading what it still sends until
    /// it closes its side (the fence, see [`super::queue`]).
    pub(crate) fn shutdown_write(&self) {
        // An error means the socket is already shut down or disconnected.
        let _ = match self {
            Stream::Tcp(stream) => stream.shutdown(Shutdown::Write),
            Stream::Unix(stream) => stream.shutdown(Shutdown::Write),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.read(buf),
            Stream::Unix(stream) => stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write(buf),
            Stream::Unix(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
