//! The control socket on its own: its mode, a stale socket replaced, a
//! path that is not a socket refused, requests that are too long or not
//! JSON answered with an error, and a round trip through the client.

use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{Request, Response, MAX_REQUEST_BYTES};
use mpio_daemon::control::server::{ControlError, ControlServer};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};

/// Answers every request with its own verb, as JSON.
fn echo() -> mpio_daemon::control::server::Handler {
    Box::new(|request: Request| Response::Ok {
        text: format!("{request:?}"),
        json: serde_json::to_value(&request).unwrap(),
    })
}

fn raw(socket: &std::path::Path, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).unwrap();
    // The daemon may answer (and close) before it read everything.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    answer
}

#[test]
fn requests_round_trip_through_a_socket_only_its_owner_may_use() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/mpio/control.sock");
    let server = ControlServer::start(&socket, echo()).unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(
        mode(socket.parent().unwrap()),
        0o700,
        "a directory it creates is private"
    );
    let request = Request::Status {
        map: Some("mpatha".into()),
    };
    let Response::Ok { json, .. } = client::call(&socket, &request).unwrap() else {
        panic!("the echo handler answers Ok");
    };
    assert_eq!(json["verb"], "status");
    assert_eq!(json["map"], "mpatha");
    server.stop();
    assert!(!socket.exists(), "the socket is removed at stop");
    let error = client::call(&socket, &request).unwrap_err();
    assert!(error.contains("cannot connect"), "{error}");
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_or_a_file_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    // A dead daemon's socket: bound, then its listener dropped.
    drop(UnixListener::bind(&socket).unwrap());
    let server = ControlServer::start(&socket, echo()).unwrap();
    let Err(ControlError::InUse(_)) = ControlServer::start(&socket, echo()) else {
        panic!("a live socket must be refused");
    };
    drop(server);
    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "data").unwrap();
    let Err(error @ ControlError::NotASocket(_)) = ControlServer::start(&file, echo()) else {
        panic!("a regular file must be refused");
    };
    assert!(error.to_string().contains("is not a socket"), "{error}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "data",
        "and left alone"
    );
}

#[test]
fn bad_requests_get_an_error_and_the_socket_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let _server = ControlServer::start(&socket, echo()).unwrap();
    let answer = raw(&socket, b"not json\n");
    assert!(
        answer.contains(r#""outcome":"error""#) && answer.contains("bad request"),
        "{answer}"
    );
    let answer = raw(&socket, br#"{"verb":"status","map":null,"extra":1}"#);
    assert!(answer.contains("not terminated by a newline"), "{answer}");
    let answer = raw(
        &socket,
        br#"{"verb":"status","map":null,"extra":1}
"#,
    );
    assert!(answer.contains("unknown field"), "{answer}");
    let long = vec![b' '; MAX_REQUEST_BYTES as usize + 10];
    let answer = raw(&socket, &long);
    assert!(answer.contains("longer than"), "{answer}");
    assert!(client::call(&socket, &Request::Paths { map: None }).is_ok());
}
