//! A tiny HTTP/1.1 server for Prometheus to scrape: `GET /metrics`
//! answers 200 with the body its closure renders (as
//! [`super::CONTENT_TYPE`]); any other path gets 404, any other method 405,
//! a request it cannot read 400, and every connection closes after one
//! answer.
//!
//! # Bounds
//! It binds loopback addresses only ([`MetricsError::NotLoopback`]): the
//! metrics name every path and map, and nothing here authenticates. Each
//! connection is answered on a thread of its own ([`crate::clients`]:
//! at most [`crate::clients::MAX_CLIENTS`] at once, the longest-connected
//! cut to make room), so a silent or slow client delays no scrape; a
//! request may be at most [`MAX_REQUEST_BYTES`] up to the end of its
//! headers, and a client gets [`CLIENT_TIMEOUT`] to send it and to take
//! the answer.
//!
//! # Stopping
//! [`MetricsServer::stop`] (or dropping the server) cuts every connection
//! and joins every thread.

use crate::clients::Clients;
use crate::deadline::Deadline;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Most bytes of a request read, up to the end of its headers.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client has to send its request, and to take the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Most bytes read and dropped after refusing an oversize request, before
/// closing.
const LINGER_BYTES: usize = 64 * 1024;

/// Why the metrics server could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address is not a loopback one.
    #[error(
        "metrics address {0} is not loopback: the metrics are served without authentication, \
         so only 127.0.0.0/8 or ::1 may be given"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen for metrics on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The socket could not be set up or the thread started.
    #[error("cannot start the metrics server: {0}")]
    Start(#[from] io::Error),
}

/// A running metrics server. Stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    address: SocketAddr,
    clients: Clients,
}

impl MetricsServer {
    /// Listens on `address` (loopback only; port 0 picks a free port) and
    /// answers `GET /metrics` with `body()`, called once per scrape on the
    /// client's thread.
    ///
    /// # Errors
    /// A non-loopback address, an address that cannot be bound, or a
    /// thread that cannot be started.
    pub fn start(
        address: SocketAddr,
        body: impl Fn() -> String + Send + Sync + 'static,
    ) -> Result<MetricsServer, MetricsError> {
        if !address.ip().is_loopback() {
            return Err(MetricsError::NotLoopback(address));
        }
        let listener =
            TcpListener::bind(address).map_err(|source| MetricsError::Bind { address, source })?;
        let address = listener.local_addr()?;
        let clients = Clients::start("mpio-metrics", listener, move |stream| {
            // A client that fails (resets, times out) only loses its own
            // answer.
            let _ = answer(stream, &body);
        })?;
        Ok(MetricsServer { address, clients })
    }

    /// The address listened on (with the port chosen, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Stops listening, cuts every connection and joins the threads.
    pub fn stop(mut self) {
        self.clients.stop();
    }
}

/// Reads one request from `stream` and answers it.
fn answer(stream: TcpStream, body: &dyn Fn() -> String) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut stream = &stream;
    let head = read_head(&mut stream, Deadline::after(CLIENT_TIMEOUT))?;
    let refused_unread = head.is_none();
    let (status, content) = match head {
        Some(head) => route(&head, body),
        None => (
            "400 Bad Request",
            format!("request line and headers must end within {MAX_REQUEST_BYTES} bytes\n"),
        ),
    };
    let content_type = if status.starts_with("200") {
        super::CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        content.len()
    );
    let deadline = Deadline::after(CLIENT_TIMEOUT);
    deadline.write_all(&mut stream, head.as_bytes())?;
    deadline.write_all(&mut stream, content.as_bytes())?;
    if refused_unread {
        // Closing with the client's bytes unread would make the kernel
        // reset the connection, and the client might lose the answer:
        // end our side, then read what it sends (bounded) until it closes.
        stream.shutdown(std::net::Shutdown::Write)?;
        let mut sink = [0; 4096];
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            match deadline.read(&mut stream, &mut sink) {
                Ok(0) | Err(_) => break,
                Ok(count) => discarded += count,
            }
        }
    }
    Ok(())
}

/// The request's head (request line and headers), or `None` if it does
/// not end within [`MAX_REQUEST_BYTES`] or before the client closes.
/// The whole read ends by `deadline`.
fn read_head(stream: &mut &TcpStream, deadline: Deadline) -> io::Result<Option<String>> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0; 1024];
    loop {
        let count = match deadline.read(stream, &mut chunk)? {
            0 => return Ok(None),
            count => count,
        };
        head.extend_from_slice(&chunk[..count]);
        if let Some(end) = head.windows(4).position(|window| window == b"\r\n\r\n") {
            head.truncate(end);
            return Ok(Some(String::from_utf8_lossy(&head).into_owned()));
        }
        if head.len() > MAX_REQUEST_BYTES {
            return Ok(None);
        }
    }
}

/// The status and body for a request head.
fn route(head: &str, body: &dyn Fn() -> String) -> (&'static str, String) {
    let request_line = head.lines().next().unwrap_or("");
    let mut words = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return ("400 Bad Request", "malformed request line\n".into());
    };
    if !version.starts_with("HTTP/1.") {
        return ("400 Bad Request", "HTTP/1.x only\n".into());
    }
    let path = target.split('?').next().unwrap_or(target);
    match (method, path) {
        ("GET", "/metrics") => ("200 OK", body()),
        (_, "/metrics") => ("405 Method Not Allowed", "GET /metrics only\n".into()),
        _ => ("404 Not Found", "metrics are at /metrics\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> String {
        "up 1\n".into()
    }

    #[test]
    fn requests_are_routed() {
        assert_eq!(route("GET /metrics HTTP/1.1\r\nHost: x", &body).0, "200 OK");
        assert_eq!(route("GET /metrics?x=1 HTTP/1.0", &body).0, "200 OK");
        assert_eq!(route("GET / HTTP/1.1", &body).0, "404 Not Found");
        assert_eq!(route("GET /metricsx HTTP/1.1", &body).0, "404 Not Found");
        assert_eq!(
            route("POST /metrics HTTP/1.1", &body).0,
            "405 Method Not Allowed"
        );
        assert_eq!(route("GET /metrics", &body).0, "400 Bad Request");
        assert_eq!(route("GET /metrics SPDY/3", &body).0, "400 Bad Request");
        assert_eq!(route("", &body).0, "400 Bad Request");
    }
}
