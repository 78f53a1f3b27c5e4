//! After `kill -9`, a crash, or the second SIGTERM (which exits at once and
//! leaves the unix socket files), restarting the daemon must work: a stale
//! export socket is replaced, as a stale control socket is; a live one is
//! refused.

use mpio_daemon::config::DaemonConfig;
use mpio_daemon::daemon::{Daemon, ServerSettings};
use std::os::unix::net::UnixListener;

#[test]
fn a_stale_export_socket_from_a_dead_daemon_does_not_block_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("mpatha.sock");
    // What a killed daemon leaves behind: a socket file nobody listens on.
    drop(UnixListener::bind(&export).unwrap());
    assert!(export.exists());
    let text = format!(
        "[[map]]\nname = 'mpatha'\ntable = '0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1'\n\
         [[map.export]]\nsocket = '{}'\n",
        export.display()
    );
    let config = DaemonConfig::parse(&text).unwrap();
    let started = Daemon::start(
        config,
        Some(&dir.path().join("control.sock")),
        ServerSettings::default(),
    );
    match started {
        Ok(daemon) => daemon.stop(),
        Err(error) => panic!("restart after a crash refused: {error}"),
    }
}

#[test]
fn a_live_export_socket_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("mpatha.sock");
    let _live = UnixListener::bind(&export).unwrap();
    let text = format!(
        "[[map]]\nname = 'mpatha'\ntable = '0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1'\n\
         [[map.export]]\nsocket = '{}'\n",
        export.display()
    );
    let config = DaemonConfig::parse(&text).unwrap();
    let error = Daemon::start(
        config,
        Some(&dir.path().join("control.sock")),
        ServerSettings::default(),
    )
    .expect_err("another process listens on the export's socket");
    assert!(
        error
            .to_string()
            .contains("another process is listening there"),
        "{error}"
    );
    assert!(export.exists(), "the live socket is left alone");
}
