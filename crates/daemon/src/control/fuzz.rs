//! The control fuzzer's check, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/control.rs`) and the corpus replay test, so both
//! hold every input to the same rules.
//!
//! The bytes go to the daemon's own connection code ([`super::server`])
//! over a socket pair, as a client's would: read under the deadline and
//! the size bound, decoded, handed to a handler, answered.

use super::protocol::{Request, Response, MAX_REQUEST_BYTES};
use super::server::{answer, Handler};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::{mpsc, Mutex};

/// Most input bytes used (a request up to the bound and some past it).
pub const MAX_INPUT: usize = MAX_REQUEST_BYTES as usize + 4096;

/// Sends `data` as a client would and panics unless the daemon keeps the
/// protocol's promises: it answers with exactly one line, which is a
/// [`Response`]; the handler sees a request exactly when the client's
/// first line (within [`MAX_REQUEST_BYTES`]) is one, and then sees that
/// request; anything else is answered with an error that says why.
///
/// # Panics
/// When a promise is broken, or a socket pair cannot be made.
pub fn check(data: &[u8]) {
    let input = &data[..data.len().min(MAX_INPUT)];
    let (client, server) = UnixStream::pair().expect("a socket pair");
    let (seen_sender, seen) = mpsc::channel();
    let seen_sender = Mutex::new(seen_sender);
    let handler: Handler = Box::new(move |request: Request| {
        let json = serde_json::to_value(&request).expect("a request encodes");
        let _ = mpio_transport::lock(&seen_sender).send(request);
        Response::Ok {
            text: String::new(),
            json,
        }
    });
    let handler = Mutex::new(handler);
    let daemon = std::thread::spawn(move || answer(&server, &handler));
    // The daemon may answer (and stop reading) before the input ends.
    let mut writer = &client;
    let _ = writer.write_all(input);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let mut line = String::new();
    BufReader::new(&client)
        .read_line(&mut line)
        .expect("the daemon answers");
    daemon.join().expect("the daemon's side does not panic");
    assert!(line.ends_with('\n'), "an answer is one line: {line:?}");
    let response: Response =
        serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line:?}"));
    let first = input
        .split(|byte| *byte == b'\n')
        .next()
        .unwrap_or_default();
    let complete = first.len() < input.len() && (first.len() as u64) < MAX_REQUEST_BYTES;
    let expected = complete
        .then(|| serde_json::from_slice::<Request>(first).ok())
        .flatten();
    match (expected, response, seen.try_recv()) {
        (Some(request), Response::Ok { json, .. }, Ok(seen)) => {
            assert_eq!(seen, request, "the handler saw another request");
            let decoded: Request = serde_json::from_value(json).expect("the echo decodes");
            assert_eq!(
                decoded, request,
                "a request does not survive its own encoding"
            );
        }
        (None, Response::Error { message }, Err(_)) => {
            assert!(!message.is_empty(), "an error says why");
        }
        (expected, response, seen) => panic!(
            "input {:?}: expected {expected:?}, answered {response:?}, handler saw {seen:?}",
            String::from_utf8_lossy(&input[..input.len().min(200)])
        ),
    }
}
