//! `mpio serve` as the README runs it: with no arguments it serves the
//! demo map, prints a URI and an example, and `nbdinfo` pointed at that
//! URI sees the map; a bad table fails with a message naming it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A child process killed and reaped when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
    let stdout = child.0.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if sender.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    let example = loop {
        let line = receiver
            .recv_timeout(Duration::from_secs(60))
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
    let info = Command::new("nbdinfo")
        .args(["--json", uri])
        .output()
        .expect("nbdinfo runs (Debian package libnbd-bin; scripts/test.sh installs it)");
    let json = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success(), "{json}");
    assert!(json.contains("\"export-size\": 268435456"), "{json}");
    assert!(json.contains("\"can_multi_conn\": true"), "{json}");
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_names_a_bad_table() {
    let output = Command::new(env!("CARGO_BIN_EXE_mpio"))
        .args([
            "serve",
            "--socket",
            "/nonexistent/x.sock",
            "--table",
            "0 8 multipath 0 0 1 1 round-robin 0 2 0 a",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("--table"), "{message}");
}
