//! Failing paths under a running fio job, the same way for every
//! frontend: each path in turn is failed while fio writes, carries no new
//! I/O while the other serves, and is reinstated.

use crate::daemon::{test_dir, Daemon};
use crate::devices::wait_until;
use crate::fio::{FioVerify, Target, BACKLOG};
use std::time::{Duration, Instant};

/// The bound on each wait for the daemon to act (a hang fails the test
/// instead of stalling it; nothing is asserted about speed).
pub const LIMIT: Duration = Duration::from_secs(300);

/// Path `name`'s row of `mpio show paths --json`.
pub fn path_row(daemon: &Daemon, name: &str) -> serde_json::Value {
    let paths = daemon.json(&["show", "paths"]);
    let row = paths
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == name);
    row.unwrap_or_else(|| panic!("no path {name} in {paths}"))
        .clone()
}

/// I/Os sent to path `name`.
pub fn path_ios(daemon: &Daemon, name: &str) -> u64 {
    path_row(daemon, name)["ios"].as_u64().unwrap()
}

/// A two-path round-robin table over `first` and `second`.
pub fn two_path_table(sectors: u64, first: &str, second: &str) -> String {
    format!("0 {sectors} multipath 0 0 1 1 round-robin 0 2 1 {first} 1 {second} 1")
}

/// Fails and reinstates each of the two `paths` in turn while `fio`
/// runs (until stopped: it cannot run out of work first).
fn fail_and_reinstate_each(daemon: &Daemon, paths: &[String; 2], fio: &mut FioVerify) {
    let limit = Duration::from_secs(300);
    for (failed, other) in [(&paths[0], &paths[1]), (&paths[1], &paths[0])] {
        let before = path_ios(daemon, other);
        wait_until("fio's I/O reaches the map", limit, || {
            path_ios(daemon, other) > before + 100
        });
        daemon.ok(&["message", "mpatha", "fail_path", failed]);
        let failed_ios = path_ios(daemon, failed);
        let before = path_ios(daemon, other);
        wait_until("the other path serves alone", limit, || {
            path_ios(daemon, other) > before + 300
        });
        assert!(fio.is_running(), "fio ended during the failover");
        // While failed, the path got no new I/O: at most fio's queue
        // depth was being dispatched as the failure was published. (The
        // checker may have found it healthy and reinstated it already,
        // as multipathd would; then it may serve again.)
        let row = path_row(daemon, failed);
        if row["state"] == "failed" {
            assert!(row["ios"].as_u64().unwrap() <= failed_ios + 16, "{row}");
        }
        daemon.ok(&["message", "mpatha", "reinstate_path", failed]);
    }
}

/// fio writes and verifies the first 128 MiB of `target` (with
/// `options`) while each of `paths` fails and returns, and until both
/// paths served [`BACKLOG`] more I/Os each after that: no error, no bad
/// block, each path failed once and served.
pub fn verify_while_paths_fail(
    daemon: &Daemon,
    target: Target<'_>,
    paths: &[String; 2],
    options: &[&str],
) {
    let log = daemon.dir.join("fio.log");
    let mut fio = FioVerify::start_until_stopped(target, 128, log, options);
    fail_and_reinstate_each(daemon, paths, &mut fio);
    for path in paths {
        wait_serves(daemon, path, BACKLOG, "the paths serve after the failovers");
    }
    finish_clean(fio);
    assert_each_path_failed_once_and_served(daemon, paths);
}

/// Each of `paths` failed once, is active again, and carried I/O.
fn assert_each_path_failed_once_and_served(daemon: &Daemon, paths: &[String]) {
    for path in paths {
        let row = path_row(daemon, path);
        assert_eq!(row["fail_count"], 1, "{row}");
        assert_eq!(row["state"], "active", "{row}");
        assert!(row["ios"].as_u64().unwrap() > 1000, "{row}");
    }
}

/// `mpio serve` over a map by `wwid`: one group of both paths
/// (round-robin), checked every 500 ms.
pub fn serve_by_wwid(name: &str, wwid: &str) -> Daemon {
    let dir = test_dir(name);
    let config = dir.join("mpio.toml");
    let socket = dir.join("nbd.sock");
    let text = format!(
        "[[map]]\nname = \"mpatha\"\nwwid = \"{wwid}\"\npath_grouping_policy = \"multibus\"\n\
         selector = \"round-robin\"\nchecker_interval_ms = 500\nfailback = \"immediate\"\n\
         [[map.export]]\nsocket = \"{}\"\n",
        socket.display()
    );
    std::fs::write(&config, text).unwrap();
    Daemon::start(dir, &["--config", config.to_str().unwrap()])
}

/// Waits until path `name` of the daemon's map shows `access`; returns
/// how long that took.
pub fn wait_for_access(daemon: &Daemon, name: &str, access: &str) -> Duration {
    let start = Instant::now();
    wait_until(&format!("{name} shows {access}"), LIMIT, || {
        path_row(daemon, name)["access"] == access
    });
    start.elapsed()
}

/// Path `quiet` gets no new I/O while path `busy` serves 300 more.
pub fn assert_only_one_serves(daemon: &Daemon, quiet: &str, busy: &str) {
    let quiet_ios = path_ios(daemon, quiet);
    wait_serves(daemon, busy, 300, &format!("{busy} serves alone"));
    // At most fio's queue depth was on its way as the state changed.
    assert!(
        path_ios(daemon, quiet) <= quiet_ios + 16,
        "{}",
        path_row(daemon, quiet)
    );
}

/// Starts fio verify (128 MiB written and read back over the daemon's
/// NBD export, until [`finish_clean`]) and waits until path `name`
/// carried 100 of its I/Os.
pub fn verify_running_through(daemon: &Daemon, name: &str) -> FioVerify {
    let log = daemon.dir.join("fio.log");
    let fio = FioVerify::start_until_stopped(Target::Nbd(&daemon.uris[0]), 128, log, &[]);
    wait_serves(daemon, name, 100, "both paths serve");
    fio
}

/// Waits until path `name` carried `count` more I/Os (`what`).
pub fn wait_serves(daemon: &Daemon, name: &str, count: u64, what: &str) {
    let before = path_ios(daemon, name);
    wait_until(what, LIMIT, || path_ios(daemon, name) > before + count);
}

/// fio, started until stopped, must still be running (it ends early
/// only on an error or a bad block); then it is stopped and must end
/// clean.
pub fn finish_clean(mut fio: FioVerify) {
    assert!(fio.is_running(), "fio ended before the steps were through");
    fio.stop(LIMIT).assert_clean();
}
