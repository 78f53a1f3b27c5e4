//! `mpio serve` as the README runs it: with no arguments it serves the
//! demo map, prints a URI and an example, and `nbdinfo` pointed at that
//! URI sees the map; a bad table fails with a message naming it. SIGTERM
//! after I/O drains, flushes and exits 0 with the socket file removed; a
//! second signal while a read holds the drain exits at once (143). A
//! stdout nobody reads does not stop it.

mod common;

use common::{signal, Guard};
use mpio_test_support::{output_within, wait_until, HANG_BOUND};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

#[test]
fn serve_without_arguments_serves_the_demo_map_to_nbdinfo() {
    let dir = std::env::temp_dir().join(format!("mpio-serve-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Guard(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .arg("serve")
            // The default socket goes in the temporary directory.
            .env("TMPDIR", &dir)
            .env("MPIO_CONTROL", dir.join("control.sock"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("mpio runs"),
    );
    let receiver = stdout_lines(&mut child.0);
    let mut lines = Vec::new();
    let example = loop {
        let line = receiver
            .recv_timeout(HANG_BOUND)
            .unwrap_or_else(|_| panic!("no example line; printed {lines:?}"));
        if line.starts_with("try: ") {
            break line;
        }
        lines.push(line);
    };
    assert!(lines[0].contains("demo map"), "{lines:?}");
    let uri = lines[1].trim();
    assert!(uri.starts_with("nbd+unix:///mpio?socket="), "{uri}");
    assert!(uri.contains(dir.to_str().unwrap()), "{uri}");
    assert_eq!(example, format!("try: nbdinfo '{uri}'"));
    let info = output_within(Command::new("nbdinfo").args(["--json", uri]), HANG_BOUND);
    let json = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success(), "{json}");
    assert!(json.contains("\"export-size\": 268435456"), "{json}");
    assert!(json.contains("\"can_multi_conn\": true"), "{json}");
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_names_a_bad_table() {
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio")).args([
            "serve",
            "--socket",
            "/nonexistent/x.sock",
            "--table",
            "0 8 multipath 0 0 1 1 round-robin 0 2 0 a",
        ]),
        HANG_BOUND,
    );
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("--table"), "{message}");
}

/// `mpio serve` with `args`, its stdout read up to the example line;
/// returns the process, the NBD URI and its stderr.
fn serve(args: &[&str]) -> (Guard, String, Stderr) {
    let mut child = Guard(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mpio runs"),
    );
    let errors = Stderr::read(&mut child.0);
    let receiver = stdout_lines(&mut child.0);
    let mut uri = None;
    loop {
        let line = receiver
            .recv_timeout(HANG_BOUND)
            .expect("mpio serve prints its example line");
        if line.starts_with("  nbd") && uri.is_none() {
            uri = Some(line.trim().to_string());
        }
        if line.starts_with("try: ") {
            break;
        }
    }
    (child, uri.expect("a URI line"), errors)
}

/// Waits for `child` to exit (only a hang reaches [`HANG_BOUND`]); its
/// exit status.
fn exit_status(child: &mut Child) -> std::process::ExitStatus {
    let mut status = None;
    wait_until("mpio serve exits after the signal", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.unwrap()
}

#[test]
fn sigterm_drains_flushes_and_exits_0_removing_the_socket() {
    let dir = tempfile_dir("sigterm");
    let socket = dir.join("s.sock");
    let control = dir.join("control.sock");
    let (mut child, uri, errors) = serve(&[
        "--socket",
        socket.to_str().unwrap(),
        "--control",
        control.to_str().unwrap(),
    ]);
    let data = dir.join("data");
    std::fs::write(&data, vec![0x5au8; 1 << 20]).unwrap();
    let copy = output_within(Command::new("nbdcopy").arg(&data).arg(&uri), HANG_BOUND);
    assert!(
        copy.status.success(),
        "{}",
        String::from_utf8_lossy(&copy.stderr)
    );
    assert!(socket.exists());
    signal(&child.0, "TERM");
    let status = exit_status(&mut child.0);
    let errors = errors.join();
    assert_eq!(status.code(), Some(0), "{errors}");
    assert!(errors.contains("SIGTERM: shutting down"), "{errors}");
    assert!(errors.contains("shut down: drained"), "{errors}");
    assert!(errors.contains("flushed"), "{errors}");
    assert!(!socket.exists(), "the socket file stays");
    assert!(!control.exists(), "the control socket stays");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM once never ended a daemon whose control socket file was
/// removed or replaced: stopping woke the control thread by connecting
/// to that path. It must exit whatever happened to the file.
#[test]
fn sigterm_ends_the_daemon_whose_control_socket_file_is_gone() {
    for replace in [false, true] {
        let dir = tempfile_dir(if replace {
            "control-replaced"
        } else {
            "control-removed"
        });
        let control = dir.join("control.sock");
        let (mut child, _uri, errors) = serve(&[
            "--socket",
            dir.join("s.sock").to_str().unwrap(),
            "--control",
            control.to_str().unwrap(),
        ]);
        std::fs::remove_file(&control).unwrap();
        let _other = replace.then(|| std::os::unix::net::UnixListener::bind(&control).unwrap());
        signal(&child.0, "TERM");
        let status = exit_status(&mut child.0);
        let errors = errors.join();
        assert_eq!(status.code(), Some(0), "{errors}");
        assert_eq!(
            control.exists(),
            replace,
            "a socket not the daemon's own stays"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_second_signal_exits_at_once() {
    let dir = tempfile_dir("two-signals");
    let socket = dir.join("s.sock");
    // Every read takes an hour, and so may the drain: a client's read
    // holds the drain past any wait of this test, so only the second
    // signal can end the daemon before the hang bound.
    let control = dir.join("control.sock");
    let (mut child, uri, errors) = serve(&[
        "--socket",
        socket.to_str().unwrap(),
        "--control",
        control.to_str().unwrap(),
        "--shutdown-timeout",
        "3600",
        "--table",
        "0 2048 multipath 0 0 1 1 round-robin 0 1 1 null:1M?latency_ns=3600000000000 1",
    ]);
    let reader = Guard(
        Command::new("nbdcopy")
            .arg(&uri)
            .arg("null:")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nbdcopy runs (Debian package libnbd-bin; scripts/test.sh installs it)"),
    );
    wait_until("a read is in flight on the path", || path_ios(&control) > 0);
    signal(&child.0, "INT");
    errors.wait_for("SIGINT: shutting down");
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "mpio serve ended while a read was in flight"
    );
    signal(&child.0, "TERM");
    let status = exit_status(&mut child.0);
    let errors = errors.join();
    assert_eq!(status.code(), Some(143), "{errors}");
    drop(reader);
    let _ = std::fs::remove_dir_all(&dir);
}

/// I/Os the daemon on `control` sent to its map's paths.
fn path_ios(control: &std::path::Path) -> u64 {
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args(["show", "paths", "--json", "--control"])
            .arg(control),
        HANG_BOUND,
    );
    assert!(output.status.success(), "{output:?}");
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    rows.iter().map(|row| row["ios"].as_u64().unwrap()).sum()
}

/// The lines `child` prints to stdout, read to its end by a thread: the
/// pipe stays open (and drained) however few of them the test wants.
fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    receiver
}

/// What a child prints to stderr, read by a thread: each line as it
/// comes, and all of it once the child exits.
struct Stderr {
    lines: mpsc::Receiver<String>,
    all: std::thread::JoinHandle<String>,
}

impl Stderr {
    fn read(child: &mut Child) -> Stderr {
        let stderr = child.stderr.take().unwrap();
        let (sender, lines) = mpsc::channel();
        let all = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
                let _ = sender.send(line);
            }
            text
        });
        Stderr { lines, all }
    }

    /// Waits until a line contains `text` (only a hang reaches
    /// [`HANG_BOUND`]).
    fn wait_for(&self, text: &str) {
        loop {
            let line = self
                .lines
                .recv_timeout(HANG_BOUND)
                .unwrap_or_else(|error| panic!("no line with {text:?}: {error}"));
            if line.contains(text) {
                return;
            }
        }
    }

    /// All of it, once the child has exited.
    fn join(self) -> String {
        self.all.join().unwrap()
    }
}

#[test]
fn a_closed_stdout_does_not_stop_the_daemon() {
    let dir = tempfile_dir("closed-stdout");
    let control = dir.join("control.sock");
    let mut child = Guard(
        Command::new(env!("CARGO_BIN_EXE_mpio"))
            .args(["serve", "--socket"])
            .arg(dir.join("s.sock"))
            .arg("--control")
            .arg(&control)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mpio runs"),
    );
    // Nobody will read the banner: the pipe's read end is gone before
    // the daemon writes it.
    drop(child.0.stdout.take());
    let errors = Stderr::read(&mut child.0);
    wait_until("the control socket opens", || {
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "mpio serve ended before it served"
        );
        control.exists()
    });
    // The banner comes after the control socket, and the wait for a
    // signal after the banner: whenever the signal lands, the daemon
    // writes the banner into the closed pipe first, and only one that
    // went on past it logs the shutdown and exits 0.
    signal(&child.0, "TERM");
    let status = exit_status(&mut child.0);
    let errors = errors.join();
    assert_eq!(status.code(), Some(0), "{errors}");
    assert!(errors.contains("SIGTERM: shutting down"), "{errors}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A new directory for one test's files.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mpio-serve-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
