//! A running `mpio serve` for tests that drive it through the CLI.

#![allow(dead_code)] // each test binary uses its own part of this module

use crate::common::{mpio, mpio_binary, stderr, stdout};
use mpio_test_support::kill_within;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running `mpio serve`, killed and reaped when dropped, with its
/// directory removed.
pub struct Daemon {
    pub child: Child,
    /// The test's own directory (sockets, configs).
    pub dir: PathBuf,
    /// The control socket.
    pub control: String,
    /// The NBD URIs the daemon printed.
    pub uris: Vec<String>,
    /// The block devices (ublk) the daemon printed.
    pub devices: Vec<String>,
    /// The metrics URL the daemon printed, if it serves metrics.
    pub metrics: Option<String>,
}

/// A fresh directory for test `name`.
pub fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpio-daemon-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Daemon {
    /// `mpio serve --table TABLE`, exporting on a socket in a fresh
    /// directory.
    pub fn with_table(name: &str, table: &str) -> Daemon {
        let dir = test_dir(name);
        let socket = dir.join("nbd.sock").display().to_string();
        Daemon::start(dir, &["--table", table, "--socket", &socket])
    }

    /// `mpio serve ARGS --control DIR/control.sock`, waited for until its
    /// control socket is open.
    pub fn start(dir: PathBuf, args: &[&str]) -> Daemon {
        Daemon::start_under(dir, &[], args)
    }

    /// [`Daemon::start`] with `mpio` run by `wrapper` (a program and its
    /// arguments, which then execs it: `prlimit --nofile=256:`).
    pub fn start_under(dir: PathBuf, wrapper: &[&str], args: &[&str]) -> Daemon {
        let control = dir.join("control.sock").display().to_string();
        // The daemon's log goes to a file, shown if the test fails.
        let log = std::fs::File::create(dir.join("mpio.log")).unwrap();
        let binary = mpio_binary();
        let (program, before) = match wrapper.split_first() {
            Some((program, arguments)) => (*program, [arguments, &[binary.as_str()]].concat()),
            None => (binary.as_str(), Vec::new()),
        };
        let mut child = Command::new(program)
            .args(before)
            .arg("serve")
            .args(args)
            .args(["--control", &control])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("mpio runs");
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if sender.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut daemon = Daemon {
            child,
            dir,
            control,
            uris: Vec::new(),
            devices: Vec::new(),
            metrics: None,
        };
        loop {
            match receiver.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line.starts_with("control socket: ") => break,
                Ok(line) if line.starts_with("  nbd") => daemon.uris.push(line.trim().to_string()),
                Ok(line) if line.starts_with("  /dev/") => {
                    daemon.devices.push(line.trim().to_string());
                }
                Ok(line) if line.starts_with("metrics: ") => {
                    daemon.metrics = Some(line["metrics: ".len()..].to_string());
                }
                Ok(_) => {}
                Err(_) => {
                    let status = daemon.child.try_wait();
                    // `daemon` prints its log as it drops in this panic.
                    panic!("mpio serve did not open its control socket ({status:?})");
                }
            }
        }
        daemon
    }

    /// What the daemon has logged so far (its standard error).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("mpio.log")).unwrap_or_default()
    }

    /// Runs a control verb against this daemon.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        let mut all = args.to_vec();
        all.extend(["--control", &self.control]);
        mpio(&all)
    }

    /// Runs a verb that must succeed; returns what it printed.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "mpio {args:?}: {}",
            stderr(&output)
        );
        stdout(&output)
    }

    /// Runs a verb that must fail; returns its error message.
    pub fn error(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            !output.status.success(),
            "mpio {args:?} succeeded: {}",
            stdout(&output)
        );
        stderr(&output)
    }

    /// Runs a read verb with `--json`.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.ok(&all)).expect("--json prints JSON")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            let mut text = String::from("--- the daemon's last log lines ---\n");
            for line in tail.iter().rev() {
                text.push_str(line);
                text.push('\n');
            }
            // Straight to the descriptor, past the harness's capture: the
            // rest of a failed test's cleanup may wait on a device this
            // daemon no longer serves.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
        }
        kill_within(&mut self.child, Duration::from_secs(60));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// nbdkit on a unix socket, killed with SIGKILL (no goodbye to its
/// clients) and restarted on the same socket.
#[allow(unused_imports)] // each test binary uses its own part of this module
pub use mpio_test_support::NbdServer as Nbdkit;
