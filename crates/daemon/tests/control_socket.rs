//! The control socket on its own: its mode, a stale socket replaced, a
//! path that is not a socket refused, requests that are too long or not
//! JSON answered with an error, a round trip through the client, a
//! directory others may change refused on both sides, silent clients
//! that delay no one, and a stop that needs nothing from the socket file.

use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{ReloadSource, Request, Response, MAX_REQUEST_BYTES};
use mpio_daemon::control::server::{ControlError, ControlServer, CONNECTION_TIMEOUT};
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
    assert!(answer.contains("at most 1048576 bytes"), "{answer}");
    assert!(client::call(&socket, &Request::Paths { map: None }).is_ok());
}

/// Once, stopping woke the accepting thread by connecting to the socket's
/// path: with the file removed or replaced, SIGTERM never ended the daemon.
#[test]
fn the_server_stops_whatever_happened_to_its_socket_file() {
    for replace in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("control.sock");
        let server = ControlServer::start(&socket, echo()).unwrap();
        std::fs::remove_file(&socket).unwrap();
        let other = replace.then(|| UnixListener::bind(&socket).unwrap());
        let (done, stopped) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            server.stop();
            let _ = done.send(());
        });
        stopped
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("stop hung (socket file replaced: {replace})"));
        assert_eq!(
            socket.exists(),
            other.is_some(),
            "a socket that is not the server's own is left alone"
        );
    }
}

/// Once one thread answered every client in turn: six silent clients
/// delayed `mpio status` by six connection timeouts.
#[test]
fn silent_clients_cannot_delay_another() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let _server = ControlServer::start(&socket, echo()).unwrap();
    let _silent: Vec<UnixStream> = (0..6)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let started = std::time::Instant::now();
    assert!(client::call(&socket, &Request::Paths { map: None }).is_ok());
    assert!(
        started.elapsed() < CONNECTION_TIMEOUT,
        "answered after {:?}, behind silent clients",
        started.elapsed()
    );
}

/// A request over the limit is refused with an error the client reads
/// (once the daemon closed with the request unread and the client's
/// write broke its pipe), and the CLI refuses to send one.
#[test]
fn an_oversize_request_gets_its_error_not_a_broken_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let _server = ControlServer::start(&socket, echo()).unwrap();
    let mut stream = UnixStream::connect(&socket).unwrap();
    let huge = vec![b' '; 2 * MAX_REQUEST_BYTES as usize];
    stream
        .write_all(&huge)
        .expect("the daemon reads what it refuses");
    stream.write_all(b"\n").unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    assert!(answer.contains("at most 1048576 bytes"), "{answer}");
    let reload = Request::Reload {
        map: "m".into(),
        source: ReloadSource::Table("x".repeat(MAX_REQUEST_BYTES as usize)),
    };
    let error = client::call(&socket, &reload).unwrap_err();
    assert!(error.contains("at most 1048576 bytes"), "{error}");
}

/// A directory another user may change is refused by the daemon and by
/// the CLI: whoever controls it can answer our commands in the daemon's
/// place.
#[test]
fn a_socket_directory_others_may_change_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = open.join("control.sock");
    let Err(error @ ControlError::Unsafe { .. }) = ControlServer::start(&socket, echo()) else {
        panic!("a world-writable directory must be refused");
    };
    assert!(
        error.to_string().contains("writable by other users"),
        "{error}"
    );
    // The CLI's side: a socket someone put there.
    let _listener = UnixListener::bind(&socket).unwrap();
    let error = client::call(&socket, &Request::Paths { map: None }).unwrap_err();
    assert!(error.contains("writable by other users"), "{error}");
    // A directory of another user, when we may make one (as root).
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), None).is_ok()
        && mpio_daemon::control::effective_uid() != 65534
    {
        let socket = theirs.join("control.sock");
        let Err(error) = ControlServer::start(&socket, echo()) else {
            panic!("another user's directory must be refused");
        };
        assert!(
            error.to_string().contains("belongs to user 65534"),
            "{error}"
        );
        let error = client::call(&socket, &Request::Paths { map: None }).unwrap_err();
        assert!(error.contains("belongs to user 65534"), "{error}");
    }
}
