//! Failover soaks in the spirit of dm-multipath's mptest suite: fio writes
//! with crc32c verification through the daemon's NBD export while one
//! loop fails and reinstates every path in turn and another disables,
//! enables and switches groups, all through the CLI. Nothing may show:
//! zero fio I/O errors and zero verify errors. Each soak runs fio for
//! `MPIO_SOAK_SECONDS` (default 10; raise it for a long soak).

mod common;
mod daemon;

use daemon::Daemon;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// 64 MiB over two groups of two memory ports, queueing while no path is
/// usable.
const TABLE: &str = "0 131072 multipath 1 queue_if_no_path 0 2 1 \
                     round-robin 0 2 1 memory:soak#a 1 memory:soak#b 1 \
                     round-robin 0 2 1 memory:soak#c 1 memory:soak#d 1";

fn require_fio() {
    let found = Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found,
        "fio not found: install the Debian package fio (scripts/test.sh does)"
    );
}

/// Runs fio against `uri`: two jobs of random 4 KiB writes over their own
/// 16 MiB each, verified as they go (`verify_backlog`) and again at the
/// end, `loops` times. Returns fio's terse output after checking that
/// every job ended with error 0.
fn fio_verify(uri: &str, loops: u32) -> String {
    let output = Command::new("fio")
        .args([
            "--name=soak",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=16",
            "--numjobs=2",
            "--size=16M",
            "--offset_increment=16M",
            &format!("--loops={loops}"),
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_backlog=512",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--output-format=terse",
        ])
        .output()
        .expect("fio runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "fio failed: {stderr}\n{stdout}");
    let jobs: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("3;"))
        .collect();
    assert_eq!(jobs.len(), 2, "{stdout}");
    for line in jobs {
        let fields: Vec<&str> = line.split(';').collect();
        // Terse v3: field 5 is the job's error number, field 6 the KiB it
        // read (the verification).
        assert_eq!(fields[4], "0", "fio job failed: {line}");
        assert_ne!(fields[5], "0", "fio verified nothing: {line}");
    }
    stdout
}

/// How long a soak keeps fio running: `MPIO_SOAK_SECONDS`, default 10.
fn soak_time() -> Duration {
    let seconds = std::env::var("MPIO_SOAK_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(seconds)
}

/// Runs verified fio passes against `uri` until the soak time is up;
/// returns the number of passes.
fn fio_soak(uri: &str) -> u32 {
    let deadline = std::time::Instant::now() + soak_time();
    let mut passes = 0;
    while passes == 0 || std::time::Instant::now() < deadline {
        fio_verify(uri, 2);
        passes += 1;
    }
    passes
}

/// Runs `step` over and over on its own thread until `stop`, counting
/// rounds.
fn churn(
    stop: &Arc<AtomicBool>,
    rounds: &Arc<AtomicU64>,
    mut step: impl FnMut() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (stop, rounds) = (Arc::clone(stop), Arc::clone(rounds));
    std::thread::spawn(move || {
        // Acquire/Release are not needed: the flag carries no data.
        while !stop.load(Ordering::Relaxed) {
            step();
            rounds.fetch_add(1, Ordering::Relaxed);
        }
    })
}

#[test]
fn fio_verifies_while_paths_fail_and_groups_toggle() {
    require_fio();
    let daemon = Arc::new(Daemon::with_table("soak-memory", TABLE));
    let uri = daemon.uris[0].clone();
    let stop = Arc::new(AtomicBool::new(false));
    let path_rounds = Arc::new(AtomicU64::new(0));
    let group_rounds = Arc::new(AtomicU64::new(0));
    let paths = {
        let daemon = Arc::clone(&daemon);
        churn(&stop, &path_rounds, move || {
            for path in [
                "memory:soak#a",
                "memory:soak#b",
                "memory:soak#c",
                "memory:soak#d",
            ] {
                daemon.ok(&["message", "mpatha", "fail_path", path]);
                std::thread::sleep(Duration::from_millis(20));
                daemon.ok(&["message", "mpatha", "reinstate_path", path]);
            }
        })
    };
    let groups = {
        let daemon = Arc::clone(&daemon);
        churn(&stop, &group_rounds, move || {
            for message in [
                "disable_group 1",
                "enable_group 1",
                "switch_group 2",
                "disable_group 2",
                "enable_group 2",
                "switch_group 1",
            ] {
                daemon.ok(&["message", "mpatha", message]);
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    };
    let passes = fio_soak(&uri);
    stop.store(true, Ordering::Relaxed);
    paths.join().expect("the path loop ran");
    groups.join().expect("the group loop ran");
    let path_rounds = path_rounds.load(Ordering::Relaxed);
    let group_rounds = group_rounds.load(Ordering::Relaxed);
    assert!(
        path_rounds >= 2 && group_rounds >= 2,
        "{path_rounds} path and {group_rounds} group rounds"
    );
    // Every path carried I/O and was failed while fio ran.
    let rows = daemon.json(&["show", "paths"]);
    for row in rows.as_array().unwrap() {
        assert!(row["ios"].as_u64().unwrap() > 0, "{row}");
        assert!(
            row["fail_count"].as_u64().unwrap() >= path_rounds.min(2),
            "{row}"
        );
        assert_eq!(row["state"], "active", "{row}");
    }
    eprintln!(
        "soak: {passes} verified fio passes, {path_rounds} rounds of path failures, \
         {group_rounds} of group toggles"
    );
}
