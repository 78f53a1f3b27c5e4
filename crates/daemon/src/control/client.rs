//! The client side of the control socket, for the `mpio` CLI.

use super::protocol::{Request, Response, MAX_REQUEST_BYTES};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long the CLI waits for the daemon's answer (a reload may connect to
/// NBD servers).
const TIMEOUT: Duration = Duration::from_secs(60);

/// Sends `request` to the daemon listening on `socket` and returns its
/// response.
///
/// # Errors
/// The socket cannot be reached, or the daemon's answer is not a
/// response; the message names the socket.
pub fn call(socket: &Path, request: &Request) -> Result<Response, String> {
    let fail = |what: &str, error: &dyn std::fmt::Display| {
        format!("control socket {}: {what}: {error}", socket.display())
    };
    let mut line = serde_json::to_string(request).map_err(|error| fail("encode", &error))?;
    line.push('\n');
    if line.len() as u64 > MAX_REQUEST_BYTES {
        return Err(fail(
            "not sent",
            &super::protocol::too_long(line.len() as u64),
        ));
    }
    super::private_dir(socket).map_err(|reason| fail("refused", &reason))?;
    let mut stream = UnixStream::connect(socket).map_err(|error| {
        fail(
            "cannot connect (is `mpio serve` running? --control or MPIO_CONTROL name the socket)",
            &error,
        )
    })?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|error| fail("cannot set a timeout", &error))?;
    stream
        .write_all(line.as_bytes())
        .map_err(|error| fail("cannot send", &error))?;
    let mut answer = String::new();
    BufReader::new(stream)
        .read_line(&mut answer)
        .map_err(|error| fail("no answer", &error))?;
    serde_json::from_str(&answer).map_err(|error| fail("bad answer", &error))
}
