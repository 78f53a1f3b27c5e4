//! A reload may take seconds (it connects to each NBD path of the new
//! table); it must not hold up a metrics scrape meanwhile (once it held
//! the lock every scrape takes for its whole length).

use mpio_daemon::config::DaemonConfig;
use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{ReloadSource, Request, Response};
use mpio_daemon::daemon::{Daemon, ServerSettings};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

#[test]
fn a_scrape_does_not_wait_behind_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("control.sock");
    let config = DaemonConfig::parse(
        "[metrics]\nlisten = '127.0.0.1:0'\n[[map]]\nname = 'm'\n\
         table = '0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1'\n",
    )
    .unwrap();
    let daemon = Daemon::start(config, Some(&control), ServerSettings::default()).unwrap();
    let metrics = daemon.metrics_address().unwrap();
    // An NBD server that takes the connection and never answers: the
    // reload's probe of it lasts until we close it (or its timeout).
    let silent = dir.path().join("silent.sock");
    let listener = UnixListener::bind(&silent).unwrap();
    let table = format!(
        "0 2048 multipath 0 0 1 1 round-robin 0 2 1 memory:d#a 1 nbd+unix:///?socket={} 1",
        silent.display()
    );
    let reload_control = control.clone();
    let reload = std::thread::spawn(move || {
        client::call(
            &reload_control,
            &Request::Reload {
                map: "m".into(),
                source: ReloadSource::Table(table),
            },
        )
    });
    let (probe, _) = listener.accept().unwrap();
    // The reload is now building its map. A scrape is answered meanwhile.
    let mut stream = TcpStream::connect(metrics).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    let started = Instant::now();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(
        !reload.is_finished(),
        "the scrape waited {:?}, until the reload ended",
        started.elapsed()
    );
    drop(probe);
    // The server that never answered is a path that cannot serve yet:
    // the reload takes the table, with that path failed.
    let answer = reload.join().unwrap().unwrap();
    assert!(matches!(&answer, Response::Ok { .. }), "{answer:?}");
    daemon.stop();
}
