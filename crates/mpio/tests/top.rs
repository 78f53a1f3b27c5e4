//! `mpio top` as a person sees it: in an 80x24 tmux pane against a
//! daemon whose map has two NBD paths to one file under fio's reads. The
//! screen shows both paths carrying I/O; when one path's server dies the
//! screen shows that path failed with no I/O and the other carrying it
//! all; `q` quits with status 0. A second view ends with an error and a
//! non-zero status when the daemon stops under it, and `mpio top` with
//! no daemon says so and fails.

mod common;

use common::{mpio_binary, Guard};
use mpio_test_support::{
    cleanup_within, output_within, require, wait_until, NbdServer, TempDir, HANG_BOUND,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A tmux server of the test's own (its socket in the test's directory),
/// killed when dropped.
struct Tmux(PathBuf);

impl Tmux {
    /// Starts `command` in an 80x24 pane of a server named `name`; the
    /// pane keeps its last screen after the command ends (and prints its
    /// status).
    fn start(dir: &Path, name: &str, command: &str) -> Tmux {
        let tmux = Tmux(dir.join(format!("{name}.tmux")));
        let shell = format!("{command}; echo EXIT=$?; sleep 3600");
        tmux.run(&["new-session", "-d", "-x", "80", "-y", "24", &shell]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let output = output_within(
            Command::new("tmux").arg("-S").arg(&self.0).args(args),
            HANG_BOUND,
        );
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    /// Waits for a screen `condition` holds for; returns it.
    fn wait_for(&self, what: &str, condition: impl Fn(&str) -> bool) -> String {
        let started = std::time::Instant::now();
        loop {
            let last = self.screen();
            if condition(&last) {
                return last;
            }
            assert!(
                started.elapsed() < HANG_BOUND,
                "{what}: not within {HANG_BOUND:?}; the screen:\n{last}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        cleanup_within(
            Command::new("tmux")
                .arg("-S")
                .arg(&self.0)
                .arg("kill-server"),
            HANG_BOUND,
        );
    }
}

/// The cells of the screen's row for the path whose name ends in `tail`
/// (the view shows a long name's end): DM state, IOPS.
fn path_row(screen: &str, tail: &str) -> Option<(String, f64)> {
    let line = screen.lines().find(|line| {
        line.split_whitespace()
            .next()
            .is_some_and(|name| name.ends_with(tail))
    })?;
    let cells: Vec<&str> = line.split_whitespace().collect();
    Some((cells.get(1)?.to_string(), cells.get(4)?.parse().ok()?))
}

/// A daemon serving `0 .. multipath` over `a` and `b`, round-robin, on
/// `dir/nbd.sock`, steered through `dir/control.sock`.
fn daemon(dir: &Path, a: &NbdServer, b: &NbdServer, sectors: u64) -> Guard {
    let table = format!(
        "0 {sectors} multipath 0 0 1 1 round-robin 0 2 1 {} 1 {} 1",
        a.uri(),
        b.uri()
    );
    let child = Command::new(mpio_binary())
        .args(["serve", "--table", &table, "--log-level", "warn"])
        .arg("--socket")
        .arg(dir.join("nbd.sock"))
        .arg("--control")
        .arg(dir.join("control.sock"))
        .stdout(Stdio::null())
        .spawn()
        .expect("mpio runs");
    let guard = Guard(child);
    wait_until("the daemon's control socket", || {
        dir.join("control.sock").exists()
    });
    guard
}

#[test]
fn top_shows_a_failing_path_s_io_move_to_the_other_and_quits() {
    require("fio", "fio");
    require("nbdkit", "nbdkit");
    let dir = TempDir::new("top");
    let bytes = 64 << 20;
    let file = dir.sparse_file("disk", bytes);
    let mut a = NbdServer::nbdkit_file(&dir.join("a.sock"), &file);
    let b = NbdServer::nbdkit_file(&dir.join("b.sock"), &file);
    let daemon = daemon(dir.path(), &a, &b, bytes / 512);
    let uri = format!("nbd+unix:///mpio?socket={}", dir.join("nbd.sock").display());
    let _fio = Guard(
        Command::new("fio")
            .args([
                "--name=top",
                "--ioengine=nbd",
                &format!("--uri={uri}"),
                "--rw=randread",
                "--bs=4k",
                "--iodepth=4",
                "--time_based",
                "--runtime=3600",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("fio runs"),
    );
    let control = dir.join("control.sock");
    let tmux = Tmux::start(
        dir.path(),
        "first",
        &format!("{} top --control {}", mpio_binary(), control.display()),
    );
    let both = tmux.wait_for("both paths carrying reads", |screen| {
        [path_row(screen, "a.sock"), path_row(screen, "b.sock")]
            .iter()
            .all(|row| {
                row.as_ref()
                    .is_some_and(|(state, iops)| state == "active" && *iops > 0.0)
            })
    });
    assert!(both.lines().count() <= 24, "{both}");
    assert!(both.contains("paths of mpatha"), "{both}");
    // --once: the same facts as plain text, one interval.
    let once = output_within(
        Command::new(mpio_binary())
            .args(["top", "--once", "--interval", "0.2", "--control"])
            .arg(&control),
        HANG_BOUND,
    );
    let text = String::from_utf8_lossy(&once.stdout);
    assert!(once.status.success(), "{text}");
    assert!(text.starts_with("MAP "), "{text}");
    let rows = text
        .lines()
        .filter(|line| line.starts_with("mpatha/"))
        .count();
    assert_eq!(rows, 2, "{text}");

    a.kill();
    let moved = tmux.wait_for("a failed and its reads on b", |screen| {
        path_row(screen, "a.sock").is_some_and(|(state, iops)| state == "failed" && iops == 0.0)
            && path_row(screen, "b.sock")
                .is_some_and(|(state, iops)| state == "active" && iops > 0.0)
    });
    assert!(
        moved.contains("1/2"),
        "the map row counts one path up:\n{moved}"
    );

    tmux.run(&["send-keys", "q"]);
    tmux.wait_for("top to quit with status 0", |screen| {
        screen.contains("EXIT=0")
    });
    drop(tmux);

    // A view whose daemon stops under it ends with the error.
    let tmux = Tmux::start(
        dir.path(),
        "second",
        &format!("{} top --control {}", mpio_binary(), control.display()),
    );
    tmux.wait_for("a second view", |screen| screen.contains("paths of mpatha"));
    drop(daemon);
    let ended = tmux.wait_for("top to end with an error", |screen| {
        screen.contains("EXIT=1")
    });
    assert!(ended.contains("mpio: the daemon at"), "{ended}");
}

#[test]
fn top_without_a_daemon_says_so_and_fails() {
    let dir = TempDir::new("top-none");
    let output = output_within(
        Command::new(mpio_binary())
            .args(["top", "--once", "--control"])
            .arg(dir.join("control.sock")),
        HANG_BOUND,
    );
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("the daemon at"), "{error}");
    let output = output_within(
        Command::new(mpio_binary())
            .args(["top", "--interval", "0", "--control"])
            .arg(dir.join("control.sock")),
        HANG_BOUND,
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("--interval 0"));
}
