//! Helpers shared by mpio's tests, a dev-dependency only (never
//! published): a private temporary directory ([`TempDir`]), programs a
//! test needs ([`require`]), real NBD servers as child processes
//! ([`NbdServer`]: nbdkit, qemu-nbd), a scripted fake path for the
//! core's queue ([`FakePath`]), the one-group table most tests map, and
//! the wait for a condition ([`wait_until`]), programs run to their end
//! within a bound ([`output_within`]; in a guard's clean-up,
//! [`cleanup_within`] and [`kill_within`]), and the code's own log in a
//! test's output ([`log_to_test_output`]).
//!
//! # Waiting
//! A test waits for the event it means (a condition, a counter, a
//! socket, a process's exit), never for a fixed time: [`wait_until`]
//! polls a condition and fails only past [`HANG_BOUND`], which a healthy
//! machine, however slow or busy, does not reach. A program a test runs
//! to its end is bounded the same way ([`output_within`]).
//!
//! Programs a test drives come from Debian packages that
//! `scripts/test.sh` installs. Where one is missing, [`require`] panics
//! naming the package: these tests must not pass by skipping on a machine
//! that was meant to run them.

#![warn(unreachable_pub)]

mod child;
mod fake_path;
mod nbd_server;

pub use child::{cleanup_within, kill_within, output_of, output_within, wait_within};
pub use fake_path::FakePath;
pub use nbd_server::{pause_control, NbdServer};

use mpio_core::io::PathOutcome;
use mpio_core::queue::PathQueue;
use mpio_core::table::Table;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sends the `tracing` log of the code under test (INFO and above) to
/// the test's captured output, shown when the test fails: a failure then
/// comes with the code's own account (why a connection was closed, what
/// a path reported). Threads a test spawns write to that test's output.
/// Only the first call in a process installs the writer; later ones do
/// nothing.
pub fn log_to_test_output() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .try_init();
}

/// The bound on a wait for something that must happen: only a hang
/// reaches it, never a slow or busy machine.
pub const HANG_BOUND: Duration = Duration::from_secs(120);

/// Waits until `condition` holds, polling every millisecond; panics
/// naming `what` if it still does not hold after [`HANG_BOUND`].
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_BOUND;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {HANG_BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A private temporary directory, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory named after `label` (and this process).
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only makes names unique within this process.
        let index = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mpio-{label}-{}-{index}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A new sparse file `name` of `bytes` (reads as zeroes) inside the
    /// directory.
    pub fn sparse_file(&self, name: &str, bytes: u64) -> PathBuf {
        let path = self.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `queue` at `now_ns`: the tag and outcome of each completion.
pub fn poll_outcomes(queue: &mut impl PathQueue, now_ns: u64) -> Vec<(u64, PathOutcome)> {
    let mut done = Vec::new();
    queue.poll(now_ns, &mut done);
    done.iter()
        .map(|completion| (completion.tag, completion.outcome))
        .collect()
}

/// Panics with the Debian package to install if `program` is missing.
pub fn require(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "{program} not found: install the Debian package {package} (scripts/test.sh does)"
    );
}

/// A map over `words` as one round-robin group.
pub fn one_group_table(
    size_bytes: u64,
    words: &[impl AsRef<str>],
    queue_if_no_path: bool,
) -> Table {
    let features = if queue_if_no_path {
        "1 queue_if_no_path"
    } else {
        "0"
    };
    let mut text = format!(
        "0 {} multipath {features} 0 1 1 round-robin 0 {} 0",
        size_bytes / 512,
        words.len()
    );
    for word in words {
        text.push(' ');
        text.push_str(word.as_ref());
    }
    Table::parse(&text).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dirs_are_apart_and_gone_when_dropped() {
        let first = TempDir::new("support");
        let second = TempDir::new("support");
        assert_ne!(first.path(), second.path());
        let file = first.sparse_file("disk", 1 << 20);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 1 << 20);
        let path = first.path().to_path_buf();
        drop(first);
        assert!(!path.exists());
        assert!(second.path().is_dir());
    }

    #[test]
    #[should_panic(expected = "install the Debian package no-such-package")]
    fn a_missing_program_names_its_package() {
        require("mpio-no-such-program", "no-such-package");
    }
}
