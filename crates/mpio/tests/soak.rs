//! Failover soaks in the spirit of dm-multipath's mptest suite: fio writes
//! with crc32c verification through the daemon's NBD export while one
//! loop fails and reinstates every path in turn and another disables,
//! enables and switches groups (over memory ports, and again while the
//! nbdkit servers behind the paths are killed and restarted), or while
//! `mpio reload` swaps selectors and adds and removes paths, all through
//! the CLI. Nothing may show:
//! zero fio I/O errors and zero verify errors. Each soak runs fio for at
//! least `MPIO_SOAK_SECONDS` (default 10; raise it for a long soak), and
//! on until the churn beside it did what the test checks.

mod common;
mod daemon;

use daemon::{Daemon, Nbdkit};
use mpio_test_support::{output_within, pause_control, wait_until, HANG_BOUND};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// 64 MiB over two groups of two memory ports, queueing while no path is
/// usable.
const TABLE: &str = "0 131072 multipath 1 queue_if_no_path 0 2 1 \
                     round-robin 0 2 1 memory:soak#a 1 memory:soak#b 1 \
                     round-robin 0 2 1 memory:soak#c 1 memory:soak#d 1";

/// Paths in [`TABLE`].
const TABLE_PATHS: usize = 4;

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
/// `mib` MiB each, verified as they go (`verify_backlog`) and again at the
/// end, `loops` times. Returns fio's terse output after checking that
/// every job ended with error 0.
fn fio_verify(uri: &str, loops: u32, mib: u32) -> String {
    let output = output_within(
        Command::new("fio").args([
            "--name=soak",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=16",
            "--numjobs=2",
            &format!("--size={mib}M"),
            &format!("--offset_increment={mib}M"),
            &format!("--loops={loops}"),
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_backlog=512",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--output-format=terse",
        ]),
        HANG_BOUND,
    );
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

/// Runs verified fio passes against `uri` until the soak time is up
/// and `enough` says the churn beside fio did what the test checks
/// (the soak time sets how long a soak lasts, never a verdict: a slow
/// machine soaks until the events happened, bounded by [`HANG_BOUND`]);
/// returns the number of passes.
fn fio_soak(uri: &str, enough: impl Fn() -> bool) -> u32 {
    fio_soak_region(uri, 2, 16, enough)
}

/// [`fio_soak`] with `loops` loops over regions of `mib` MiB per pass.
fn fio_soak_region(uri: &str, loops: u32, mib: u32, enough: impl Fn() -> bool) -> u32 {
    let started = std::time::Instant::now();
    let mut passes = 0;
    while passes == 0 || started.elapsed() < soak_time() || !enough() {
        assert!(
            started.elapsed() < soak_time() + HANG_BOUND,
            "the churn beside fio did not do its rounds within {HANG_BOUND:?} of the soak"
        );
        fio_verify(uri, loops, mib);
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

/// Sends `messages` to map `mpatha` in turn, `pause` apart, over and over
/// on its own thread until `stop`, counting rounds.
fn send_in_turn(
    daemon: &Arc<Daemon>,
    stop: &Arc<AtomicBool>,
    rounds: &Arc<AtomicU64>,
    messages: Vec<String>,
    pause: Duration,
) -> std::thread::JoinHandle<()> {
    let daemon = Arc::clone(daemon);
    churn(stop, rounds, move || {
        for message in &messages {
            daemon.ok(&["message", "mpatha", message]);
            std::thread::sleep(pause);
        }
    })
}

/// `fail_path P` then `reinstate_path P` for each of `paths` in turn.
fn fail_in_turn(paths: &[&str]) -> Vec<String> {
    paths
        .iter()
        .flat_map(|path| {
            [
                format!("fail_path {path}"),
                format!("reinstate_path {path}"),
            ]
        })
        .collect()
}

/// Owned copies of `messages`.
fn owned(messages: &[&str]) -> Vec<String> {
    messages.iter().map(|message| message.to_string()).collect()
}

#[test]
fn fio_verifies_while_paths_fail_and_groups_toggle() {
    require_fio();
    let daemon = Arc::new(Daemon::with_table("soak-memory", TABLE));
    let uri = daemon.uris[0].clone();
    let stop = Arc::new(AtomicBool::new(false));
    let path_rounds = Arc::new(AtomicU64::new(0));
    let group_rounds = Arc::new(AtomicU64::new(0));
    let paths = send_in_turn(
        &daemon,
        &stop,
        &path_rounds,
        fail_in_turn(&[
            "memory:soak#a",
            "memory:soak#b",
            "memory:soak#c",
            "memory:soak#d",
        ]),
        Duration::from_millis(20),
    );
    let groups = send_in_turn(
        &daemon,
        &stop,
        &group_rounds,
        owned(&[
            "disable_group 1",
            "enable_group 1",
            "switch_group 2",
            "disable_group 2",
            "enable_group 2",
            "switch_group 1",
        ]),
        Duration::from_millis(15),
    );
    // fio goes on until both loops did two rounds and every path
    // carried I/O while it ran.
    let passes = fio_soak(&uri, || {
        path_rounds.load(Ordering::Relaxed) >= 2
            && group_rounds.load(Ordering::Relaxed) >= 2
            && every_path_carried_io(&daemon, TABLE_PATHS)
    });
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
    for row in path_rows(&daemon, TABLE_PATHS) {
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

/// Every one of the daemon's `paths` paths was sent I/O.
fn every_path_carried_io(daemon: &Daemon, paths: usize) -> bool {
    path_rows(daemon, paths)
        .iter()
        .all(|row| row["ios"].as_u64().unwrap() > 0)
}

/// `mpio show paths`' rows, which must be one for each of the daemon's
/// `paths` paths: a check over every row of fewer rows checks less than
/// it says, and over none, nothing.
fn path_rows(daemon: &Daemon, paths: usize) -> Vec<serde_json::Value> {
    let rows = daemon.json(&["show", "paths"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), paths, "{rows:?}");
    rows.clone()
}

/// Waits until `path` of map `mpatha` is active again (only a hang
/// reaches the bound).
fn wait_active(daemon: &Daemon, path: &str) {
    wait_until(&format!("{path} reinstated"), || {
        let rows = daemon.json(&["show", "paths", "mpatha"]);
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["name"] == path)
            .cloned()
            .unwrap();
        row["state"] == "active" && row["checker"] == "ready"
    });
}

/// A sparse 64 MiB `disk.img` in `dir`, for nbdkit servers to share.
fn disk_file(dir: &Path) -> PathBuf {
    let file = dir.join("disk.img");
    std::fs::File::create(&file)
        .and_then(|disk| disk.set_len(64 << 20))
        .unwrap();
    file
}

/// A `[[map.path]]` entry named `name` for `server`'s socket.
fn nbd_path(name: &str, server: &Nbdkit) -> String {
    format!(
        "[[map.path]]\nname = \"{name}\"\nuri = \"nbd+unix:///?socket={}\"\n",
        server.socket().display()
    )
}

/// Starts the daemon in `dir` on `config` (the map and its paths),
/// exporting the map on `dir`'s `nbd.sock`.
fn start_exporting(dir: PathBuf, mut config: String) -> Daemon {
    config.push_str(&format!(
        "[[map.export]]\nsocket = \"{}\"\n",
        dir.join("nbd.sock").display()
    ));
    let config_file = dir.join("mpio.toml");
    std::fs::write(&config_file, config).unwrap();
    Daemon::start(dir, &["--config", config_file.to_str().unwrap()])
}

#[test]
fn fio_verifies_while_nbdkit_servers_die_and_return() {
    require_fio();
    let dir = daemon::test_dir("soak-nbdkit");
    let file = disk_file(&dir);
    let names = ["s1", "s2", "s3", "s4"];
    let servers: Vec<Nbdkit> = names
        .iter()
        .map(|name| {
            Nbdkit::nbdkit(
                &dir.join(format!("{name}.sock")),
                &["file", file.to_str().unwrap()],
            )
        })
        .collect();
    // Four paths to one file: s1 and s2 preferred, s3 and s4 behind them.
    let mut config = String::from(
        "[[map]]\nname = \"mpatha\"\nsize = \"64M\"\nselector = \"round-robin\"\n\
         path_grouping_policy = \"group_by_prio\"\nno_path_retry = \"queue\"\n\
         failback = \"manual\"\nchecker_interval_ms = 100\nchecker_timeout_ms = 2000\n\
         io_timeout_ms = 10000\n",
    );
    for (name, server) in names.iter().zip(&servers) {
        let prio = if matches!(*name, "s1" | "s2") { 2 } else { 1 };
        config.push_str(&nbd_path(name, server));
        config.push_str(&format!("prio = {prio}\n"));
    }
    let daemon = Arc::new(start_exporting(dir, config));
    let uri = daemon.uris[0].clone();

    let stop = Arc::new(AtomicBool::new(false));
    let path_rounds = Arc::new(AtomicU64::new(0));
    let group_rounds = Arc::new(AtomicU64::new(0));
    let paths = send_in_turn(
        &daemon,
        &stop,
        &path_rounds,
        fail_in_turn(&names),
        Duration::from_millis(20),
    );
    let groups = send_in_turn(
        &daemon,
        &stop,
        &group_rounds,
        owned(&[
            "disable_group 1",
            "enable_group 1",
            "switch_group 2",
            "switch_group 1",
        ]),
        Duration::from_millis(25),
    );
    // fio runs on a thread of its own and the servers are killed and
    // restarted from this one: nbdkit's --exit-with-parent ends a server
    // when the thread that started it ends, so they must all be started by
    // a thread that lives to the end of the test.
    let fio = {
        let daemon = Arc::clone(&daemon);
        std::thread::spawn(move || fio_soak(&uri, || every_path_carried_io(&daemon, names.len())))
    };
    let mut servers = servers;
    let mut kill_rounds = 0;
    while !fio.is_finished() {
        for (name, server) in names.iter().zip(&mut servers) {
            server.kill();
            std::thread::sleep(Duration::from_millis(100));
            server.restart();
            wait_active(&daemon, name);
        }
        kill_rounds += 1;
    }
    let passes = fio.join().expect("fio ran");
    stop.store(true, Ordering::Relaxed);
    paths.join().expect("the path loop ran");
    groups.join().expect("the group loop ran");
    assert!(kill_rounds >= 1, "no server was killed while fio ran");
    // Every server is back: the checker reinstates every path.
    for name in names {
        wait_active(&daemon, name);
    }
    for row in path_rows(&daemon, names.len()) {
        assert!(row["ios"].as_u64().unwrap() > 0, "{row}");
    }
    eprintln!(
        "soak: {passes} verified fio passes, {kill_rounds} rounds of server kills, {} of path \
         failures, {} of group toggles",
        path_rounds.load(Ordering::Relaxed),
        group_rounds.load(Ordering::Relaxed)
    );
}

#[test]
fn fio_verifies_while_reloads_swap_selectors_and_paths() {
    require_fio();
    let daemon = Arc::new(Daemon::with_table("soak-reload", TABLE));
    let uri = daemon.uris[0].clone();
    // The same 64 MiB disk through other selectors and other port sets: a
    // port added (e), ports removed, one group or two.
    let tables = [
        "0 131072 multipath 1 queue_if_no_path 0 1 1 queue-length 0 3 1 \
         memory:soak#a 1 memory:soak#b 1 memory:soak#e 1",
        "0 131072 multipath 1 queue_if_no_path 0 2 1 service-time 0 1 2 memory:soak#c 1 1 \
         historical-service-time 0 2 1 memory:soak#d 1 memory:soak#e 1",
        "0 131072 multipath 1 queue_if_no_path 0 1 1 io-affinity 0 2 1 \
         memory:soak#b 1 memory:soak#d 1",
        TABLE,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let reloads = Arc::new(AtomicU64::new(0));
    let reloader = {
        let daemon = Arc::clone(&daemon);
        churn(&stop, &reloads, move || {
            for table in tables {
                daemon.ok(&["reload", "mpatha", table]);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // fio goes on until the reloader did two rounds (eight reloads).
    let passes = fio_soak(&uri, || reloads.load(Ordering::Relaxed) >= 2);
    stop.store(true, Ordering::Relaxed);
    reloader.join().expect("the reload loop ran");
    let reloads = reloads.load(Ordering::Relaxed) * tables.len() as u64;
    assert!(reloads >= 8, "{reloads} reloads");
    eprintln!("soak: {passes} verified fio passes, {reloads} reloads");
}

/// The fencing soak: fio verifies while two of three nbdkit paths over one
/// file are paused in turn, for less and for more than the I/O timeout.
/// A write a paused server holds must not be retried elsewhere until the
/// server answers or closes (else the resumed server lands the stale copy
/// over newer data and fio's verification reads it); reads it holds go
/// down another path after the hedge delay.
#[test]
fn fio_verifies_while_paths_pause_shorter_and_longer_than_the_timeout() {
    require_fio();
    let dir = daemon::test_dir("soak-pause");
    let file = disk_file(&dir).to_str().unwrap().to_string();
    let names = ["p1", "p2", "p3"];
    let controls: Vec<PathBuf> = names
        .iter()
        .map(|name| dir.join(format!("{name}.ctl")))
        .collect();
    // One thread per server: see nbd_hang.rs for nbdkit 1.32's assertion
    // when a held request finishes after its connection closed.
    let servers: Vec<Nbdkit> = names
        .iter()
        .zip(&controls)
        .map(|(name, control)| {
            let control = format!("pause-control={}", control.display());
            Nbdkit::nbdkit(
                &dir.join(format!("{name}.sock")),
                &["--threads=1", "--filter=pause", "file", &file, &control],
            )
        })
        .collect();
    let mut config = String::from(
        "[[map]]\nname = \"mpatha\"\nsize = \"64M\"\nselector = \"round-robin\"\n\
         path_grouping_policy = \"multibus\"\nno_path_retry = \"queue\"\n\
         failback = \"immediate\"\nchecker_interval_ms = 100\nchecker_timeout_ms = 5000\n\
         io_timeout_ms = 1000\nfence_timeout_ms = 30000\n",
    );
    for (name, server) in names.iter().zip(&servers) {
        config.push_str(&nbd_path(name, server));
    }
    let daemon = start_exporting(dir, config);
    let uri = daemon.uris[0].clone();
    // Small regions written over and over: a block is written again
    // while an older write to it is still held by a paused server.
    let fio = std::thread::spawn(move || fio_soak_region(&uri, 8, 1, || true));
    let mut pauses = 0;
    // Shorter than the timeout on p1, longer on p2, never both at once.
    let plan = [(0, 300), (1, 3_000)];
    while !fio.is_finished() {
        for (path, ms) in plan {
            pause_control(&controls[path], b'p');
            std::thread::sleep(Duration::from_millis(ms));
            pause_control(&controls[path], b'r');
            pauses += 1;
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let passes = fio.join().expect("fio ran");
    assert!(pauses >= 2, "no path was paused while fio ran");
    eprintln!("soak: {passes} verified fio passes, {pauses} pauses (0.3 s and 3 s)");
    drop(servers);
}
