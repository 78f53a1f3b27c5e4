//! `mpio serve` under a service manager: this test plays systemd's side
//! of the notify protocol. It binds the datagram socket `NOTIFY_SOCKET`
//! names, starts the daemon with a config of memory paths and
//! `WATCHDOG_USEC`, and reads, in order: `READY=1` with a `STATUS=` of
//! the maps, paths and exports; `WATCHDOG=1`; after the file changed (a
//! map removed, one added, one given another selector) and SIGHUP,
//! `RELOADING=1` with `MONOTONIC_USEC` and `READY=1`, the change seen
//! through the control socket; after a broken file and SIGHUP,
//! `READY=1` with a `STATUS=` saying `reload failed` while the maps
//! still serve; `mpio reload` refusing the broken file with its error,
//! then applying a fixed one; SIGTERM: `STOPPING=1` and exit 0. Without
//! `--config` or a map's flag, the daemon runs the default config file
//! (`$MPIO_CONFIG` standing in for `/etc/mpio/mpio.toml`). Every wait is
//! a socket read bounded by `HANG_BOUND`.

mod common;

use common::{signal, Guard};
use mpio_test_support::{output_within, wait_within, TempDir, HANG_BOUND};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The service manager's end of the notify socket.
struct Manager {
    socket: UnixDatagram,
}

impl Manager {
    /// The notify socket in `dir`, and its path.
    fn bind(dir: &TempDir) -> (Manager, std::path::PathBuf) {
        let notify = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&notify).expect("bind the notify socket");
        socket
            .set_read_timeout(Some(HANG_BOUND))
            .expect("a read timeout");
        (Manager { socket }, notify)
    }

    /// The next datagram, whatever it says.
    fn next(&self) -> String {
        let mut buffer = vec![0u8; 4096];
        let length = self
            .socket
            .recv(&mut buffer)
            .unwrap_or_else(|error| panic!("no notify message within {HANG_BOUND:?}: {error}"));
        String::from_utf8(buffer[..length].to_vec()).expect("a UTF-8 notify message")
    }

    /// The next datagram other than `WATCHDOG=1` (which comes between the
    /// others on its own clock).
    fn next_event(&self) -> String {
        loop {
            let message = self.next();
            if message != "WATCHDOG=1" {
                return message;
            }
        }
    }
}

/// The value of `key` in a notify message, if present.
fn field<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
}

/// A config of the maps `maps`: (name, selector), each over two memory
/// paths and exported on a unix socket in `dir`.
fn config(dir: &Path, maps: &[(&str, &str)]) -> String {
    let mut text = String::new();
    for (name, selector) in maps {
        text.push_str(&format!(
            "[[map]]\nname = \"{name}\"\ntable = \"0 8192 multipath 0 0 1 1 {selector} 0 2 1 \
             memory:{name}#a 1 memory:{name}#b 1\"\n[[map.export]]\nsocket = \"{}\"\n",
            dir.join(format!("{name}.sock")).display()
        ));
    }
    text
}

/// Writes the config of `maps` (see [`config`]) to `dir`'s `mpio.toml`.
fn write_config(dir: &TempDir, maps: &[(&str, &str)]) {
    std::fs::write(dir.join("mpio.toml"), config(dir.path(), maps)).expect("write the config");
}

/// `mpio ARGS --control CONTROL`, run to its end.
fn mpio(control: &Path, args: &[&str]) -> Output {
    output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args(args)
            .arg("--control")
            .arg(control),
        HANG_BOUND,
    )
}

/// `mpio serve ARGS --control CONTROL` told of the notify socket at
/// `notify`, with `env` set and no watchdog unless `env` asks for one.
fn serve(notify: &Path, control: &Path, args: &[&str], env: &[(&str, &str)]) -> Guard {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mpio"));
    command
        .arg("serve")
        .args(args)
        .arg("--control")
        .arg(control)
        .env("NOTIFY_SOCKET", notify)
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (key, value) in env {
        command.env(key, value);
    }
    Guard(command.spawn().expect("mpio runs"))
}

/// SIGTERM to `child`: `STOPPING=1`, then exit 0.
fn stop(manager: &Manager, child: &mut Guard) {
    signal(&child.0, "TERM");
    let stopping = manager.next_event();
    assert_eq!(field(&stopping, "STOPPING"), Some("1"), "{stopping:?}");
    let exit = wait_within(&mut child.0, HANG_BOUND, "mpio after SIGTERM");
    assert!(exit.success(), "{exit:?}");
}

/// Reads the `RELOADING=1` and the `READY=1` around a reload; returns the
/// latter's `STATUS=`.
fn reload_seen(manager: &Manager) -> String {
    let reloading = manager.next_event();
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading:?}");
    let usec: u64 = field(&reloading, "MONOTONIC_USEC")
        .and_then(|usec| usec.parse().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {reloading:?}"));
    assert!(usec > 0);
    let ready = manager.next_event();
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready:?}");
    field(&ready, "STATUS")
        .unwrap_or_else(|| panic!("no STATUS with {ready:?}"))
        .to_string()
}

#[test]
fn serve_speaks_the_notify_protocol_and_reloads_its_config_file() {
    let dir = TempDir::new("systemd-notify");
    let (manager, notify) = Manager::bind(&dir);
    let file = dir.join("mpio.toml");
    let control = dir.join("control.sock");
    write_config(&dir, &[("keep", "round-robin"), ("gone", "round-robin")]);
    // WATCHDOG=1 every 100 ms.
    let mut child = serve(
        &notify,
        &control,
        &["--config", file.to_str().expect("a UTF-8 path")],
        &[("WATCHDOG_USEC", "200000")],
    );

    let ready = manager.next_event();
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready:?}");
    assert_eq!(
        field(&ready, "STATUS"),
        Some("2 maps, paths: 4 up, 0 down, exports: 2 NBD, 0 ublk"),
        "{ready:?}"
    );
    // Two: the first round's, and one after a round that compared every
    // loop's heartbeat with the one before.
    for _ in 0..2 {
        while manager.next() != "WATCHDOG=1" {}
    }

    // A map removed, one added, one given another selector.
    write_config(&dir, &[("keep", "queue-length"), ("fresh", "round-robin")]);
    signal(&child.0, "HUP");
    let status = reload_seen(&manager);
    assert_eq!(
        status, "2 maps, paths: 4 up, 0 down, exports: 2 NBD, 0 ublk",
        "after the reload"
    );
    let tables = mpio(&control, &["table", "--json"]);
    assert!(tables.status.success(), "{tables:?}");
    let tables: serde_json::Value = serde_json::from_slice(&tables.stdout).expect("JSON");
    let names: Vec<&str> = tables
        .as_array()
        .expect("a list of maps")
        .iter()
        .map(|map| map["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["keep", "fresh"], "{tables}");
    let keep = tables[0]["table"].as_str().expect("a table");
    assert!(keep.contains("queue-length"), "{keep}");
    assert!(dir.join("fresh.sock").exists(), "the added map's export");
    assert!(!dir.join("gone.sock").exists(), "the removed map's export");

    // A broken file: refused whole, the daemon serves on.
    std::fs::write(&file, "[[map]]\nname = \"keep\"\nsurprise = 1\n").unwrap();
    signal(&child.0, "HUP");
    let status = reload_seen(&manager);
    assert!(status.starts_with("reload failed: "), "{status}");
    assert!(status.contains("surprise"), "{status}");
    assert!(status.ends_with("2 maps, paths: 4 up, 0 down, exports: 2 NBD, 0 ublk"));
    let maps = mpio(&control, &["status"]);
    assert!(maps.status.success(), "{maps:?}");

    // The control verb: the broken file's error, then a fixed file applied.
    let refused = mpio(&control, &["reload"]);
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("surprise"), "{error}");
    let status = reload_seen(&manager);
    assert!(status.starts_with("reload failed: "), "{status}");
    write_config(
        &dir,
        &[
            ("keep", "queue-length"),
            ("fresh", "round-robin"),
            ("third", "round-robin"),
        ],
    );
    let applied = mpio(&control, &["reload"]);
    assert!(applied.status.success(), "{applied:?}");
    assert_eq!(String::from_utf8_lossy(&applied.stdout), "added third\n");
    let status = reload_seen(&manager);
    assert_eq!(
        status,
        "3 maps, paths: 6 up, 0 down, exports: 3 NBD, 0 ublk"
    );

    stop(&manager, &mut child);
}

#[test]
fn the_installed_example_config_checks() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/mpio.toml");
    let config = mpio_daemon::config::DaemonConfig::load(Path::new(example))
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(config.maps.len(), 1);
}

#[test]
fn serve_without_a_map_flag_runs_the_default_config_file() {
    let dir = TempDir::new("systemd-default");
    let (manager, notify) = Manager::bind(&dir);
    write_config(&dir, &[("only", "round-robin")]);
    let control = dir.join("control.sock");
    // In place of /etc/mpio/mpio.toml.
    let config = dir.join("mpio.toml");
    let mut child = serve(
        &notify,
        &control,
        &[],
        &[("MPIO_CONFIG", config.to_str().expect("a UTF-8 path"))],
    );
    let ready = manager.next_event();
    assert_eq!(
        field(&ready, "STATUS"),
        Some("1 map, paths: 2 up, 0 down, exports: 1 NBD, 0 ublk"),
        "{ready:?}"
    );
    let tables = mpio(&control, &["table", "--json"]);
    let tables: serde_json::Value = serde_json::from_slice(&tables.stdout).expect("JSON");
    assert_eq!(tables[0]["name"], "only", "{tables}");
    stop(&manager, &mut child);
}
