//! A daemon restart under a mounted filesystem: ext4 on `/dev/ublkbN`
//! (a fixed number, so the device is kept at a stop; above any number
//! the kernel gives the other tests' devices, which a killed daemon
//! leaves waiting), fio verify writing
//! a file on it, the daemon stopped with SIGTERM and started again, then
//! killed with SIGKILL and started again: the device stays, fio sees no
//! error, the kernel logs none, and `e2fsck -fn` is clean. Then a kept
//! device no daemon takes over: its I/O fails and the device goes once
//! the keep timeout has passed; one whose removal the kernel holds (its
//! char device open), which keeps no next daemon from starting;
//! `--ublk-on-stop remove`, which removes
//! a numbered device at a stop; and a SIGTERM restart in the middle of
//! an outage (every path's server gone): the device stays with its I/O
//! waiting, the new daemon starts with its paths down, and once the
//! server is back fio goes on clean. And two dozen SIGTERM restarts in a
//! row under fio, each taken over; and a kept device another map asks
//! for by its number, which only its own map takes over.

use crate::daemon::{test_dir, Daemon, Nbdkit};
use crate::devices::{modprobe, run, wait_until, Mount, NullBlk};
use crate::failover::{path_row, two_path_table, wait_serves, LIMIT};
use crate::fio::{FioVerify, Target, BACKLOG};
use crate::ublk::{serve_ublk, terminate, wait_for_more_writes};
use std::path::Path;
use std::time::Duration;

/// `daemon`, stopped, said it kept `device` for the next daemon, and
/// the device is still there.
fn assert_kept(daemon: &Daemon, device: &str) {
    let stopped = daemon.log();
    assert!(
        stopped.contains(&format!("{device} kept for the next daemon")),
        "{stopped}"
    );
    assert!(Path::new(device).exists(), "{device} went at SIGTERM");
}

/// A daemon `name` serving a null_blk disk of `mib` MiB over two paths
/// as `/dev/ublkb<number>`, with `args` besides; with the map's table
/// and the disk.
fn numbered(name: &str, mib: u64, number: &str, args: &[&str]) -> (Daemon, String, NullBlk) {
    modprobe(&["ublk_drv"]);
    let mut disk = NullBlk::memory_backed(&format!("mpio-kt-{name}"), mib);
    let paths = disk.two_paths();
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    let daemon = serve_ublk(name, &table, &[&["--ublk", number], args].concat());
    (daemon, table, disk)
}

/// [`numbered`] over 64 MiB, keeping the device 2 s for the next daemon
/// at a stop.
fn kept_for_two_seconds(name: &str, number: &str) -> (Daemon, String, NullBlk) {
    numbered(name, 64, number, &["--ublk-keep-timeout-ms", "2000"])
}

/// Kernel log lines that name `device` and an error.
fn kernel_errors(device: &str) -> Vec<String> {
    let name = device.trim_start_matches("/dev/");
    let output = run("dmesg", &[], LIMIT);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(name) && line.to_lowercase().contains("error"))
        .map(String::from)
        .collect()
}

#[test]
#[ignore = "kernel test: needs root, null_blk, ublk_drv and ext4; run scripts/kernel-test.sh"]
fn sigterm_and_kill_9_restarts_keep_a_mounted_ext4_under_fio_verify() {
    modprobe(&["ext4"]);
    let (mut daemon, table, _disk) = numbered("ublk-restart-1", 256, "1011", &[]);
    let args = ["--ublk", "1011"];
    let device = daemon.devices[0].clone();
    assert_eq!(device, "/dev/ublkb1011");
    let minutes = |count: u64| Duration::from_secs(60 * count);
    run("mkfs.ext4", &["-q", "-F", &device], minutes(5));
    let logs = crate::daemon::test_dir("ublk-restart-fs");
    let mount = Mount::new(Path::new(&device), "ext4", logs.join("mnt"));
    let file = mount.dir.join("verify");
    let mut fio = FioVerify::start_until_stopped(
        Target::Block(file.to_str().unwrap()),
        64,
        logs.join("fio.log"),
        &[],
    );
    wait_for_more_writes(&device, 1000);

    // SIGTERM: the daemon keeps the device and says so; its keeper sees
    // the next daemon take it over.
    terminate(&mut daemon);
    assert_kept(&daemon, &device);
    assert!(fio.is_running(), "fio ended while no daemon ran");
    let mut second = serve_ublk("ublk-restart-2", &table, &args);
    wait_until("the keeper sees the device taken over", LIMIT, || {
        daemon
            .log()
            .contains("/dev/ublkb1011 taken over by the next daemon")
    });
    wait_for_more_writes(&device, 2 * BACKLOG);

    // SIGKILL: the kernel keeps the device as after a crash.
    second.child.kill().unwrap();
    second.child.wait().unwrap();
    assert!(Path::new(&device).exists(), "{device} went with its server");
    assert!(fio.is_running(), "fio ended while no daemon ran");
    let mut third = serve_ublk(
        "ublk-restart-3",
        &table,
        &["--ublk", "1011", "--ublk-on-stop", "remove"],
    );
    wait_for_more_writes(&device, 2 * BACKLOG);
    assert!(fio.is_running(), "fio ended after the restarts");
    fio.stop(minutes(10)).assert_clean();
    mount.unmount();
    let check = run("e2fsck", &["-fn", &device], minutes(5));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "e2fsck -fn: {report}");
    assert_eq!(kernel_errors(&device), Vec::<String>::new());

    // `--ublk-on-stop remove`: the numbered device goes at SIGTERM.
    terminate(&mut third);
    let stopped = third.log();
    assert!(stopped.contains("/dev/ublkb1011 removed"), "{stopped}");
    assert!(!Path::new(&device).exists(), "{device} is still there");
    let _ = std::fs::remove_dir_all(&logs);
}

/// SIGTERM restarts in a row, each as fio's writes flow: every stop
/// leaves the device to the next daemon, and the kernel quiesces it, so
/// every next daemon takes it over. A daemon whose threads closed their
/// rings while they ran could be handed a request after the kernel's
/// abort of the queue, and on 6.12 the device then stayed live for good
/// (the next daemon never started); the more restarts, the likelier.
#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn sigterm_restarts_in_a_row_under_fio_each_take_the_device_over() {
    const RESTARTS: usize = 24;
    let (mut daemon, table, _disk) = numbered("ublk-restarts-0", 64, "1014", &[]);
    let args = ["--ublk", "1014"];
    let device = daemon.devices[0].clone();
    let logs = test_dir("ublk-restarts-fio");
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(&device), 32, logs.join("fio.log"), &[]);
    for restart in 1..=RESTARTS {
        wait_for_more_writes(&device, BACKLOG);
        terminate(&mut daemon);
        assert_kept(&daemon, &device);
        assert!(fio.is_running(), "fio ended while no daemon ran");
        // The last one removes the device as it stops.
        let last = ["--ublk-on-stop", "remove"];
        let args = [&args[..], if restart == RESTARTS { &last } else { &[] }].concat();
        daemon = serve_ublk(&format!("ublk-restarts-{restart}"), &table, &args);
    }
    wait_for_more_writes(&device, BACKLOG);
    fio.stop(Duration::from_secs(600)).assert_clean();
    assert_eq!(kernel_errors(&device), Vec::<String>::new());
    terminate(&mut daemon);
    assert!(!Path::new(&device).exists(), "{device} is still there");
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn a_kept_device_no_daemon_takes_over_fails_its_io_after_the_keep_timeout() {
    let (mut daemon, _table, _disk) = kept_for_two_seconds("ublk-orphan", "1012");
    let device = daemon.devices[0].clone();
    let logs = crate::daemon::test_dir("ublk-orphan-fio");
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(&device), 32, logs.join("fio.log"), &[]);
    wait_for_more_writes(&device, 1000);
    assert!(fio.is_running(), "fio ended before the signal");
    terminate(&mut daemon);
    let stopped = daemon.log();
    assert!(
        stopped.contains("/dev/ublkb1012 kept for the next daemon (its I/O waits up to 2000 ms"),
        "{stopped}"
    );
    // No daemon comes: the keeper removes the device, and fio's waiting
    // I/O fails.
    wait_until("the keeper removes the device", LIMIT, || {
        !Path::new(&device).exists()
    });
    wait_until("the keeper says so", LIMIT, || {
        daemon
            .log()
            .contains("/dev/ublkb1012 removed: no daemon took it over within 2000 ms")
    });
    let result = fio.finish(LIMIT);
    assert!(!result.is_clean(), "fio saw no error:\n{}", result.log);
    let _ = std::fs::remove_dir_all(&logs);
}

/// A kept device is its map's: a daemon whose map of another name asks
/// for its number does not take it over (the writes waiting in it are
/// not that map's), and says why; the map it served then does.
#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn a_kept_device_is_taken_over_by_its_own_map_only() {
    let (mut daemon, table, _disk) = numbered("ublk-own-map", 64, "1019", &["--map", "alpha"]);
    let device = daemon.devices[0].clone();
    terminate(&mut daemon);
    assert_kept(&daemon, &device);
    let beta = ["--table", &table, "--ublk", "1019", "--map", "beta"];
    let mut other = Daemon::start(test_dir("ublk-own-map-beta"), &beta);
    assert!(other.devices.is_empty(), "beta took {:?}", other.devices);
    wait_until("beta says whose the device is", LIMIT, || {
        let log = other.log();
        log.contains("/dev/ublkb1019 is map \"alpha\"'s") && log.contains("no ublk device")
    });
    terminate(&mut other);
    assert!(Path::new(&device).exists(), "{device} went with beta");
    // The map it served takes it over, and removes it as it stops.
    let alpha = [
        "--ublk",
        "1019",
        "--map",
        "alpha",
        "--ublk-on-stop",
        "remove",
    ];
    let mut own = serve_ublk("ublk-own-map-alpha", &table, &alpha);
    assert_eq!(own.devices, std::slice::from_ref(&device));
    wait_until("the keeper sees alpha take it over", LIMIT, || {
        daemon
            .log()
            .contains("/dev/ublkb1019 taken over by the next daemon")
    });
    terminate(&mut own);
    assert!(!Path::new(&device).exists(), "{device} is still there");
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn a_removal_the_kernel_holds_keeps_no_next_daemon_from_starting() {
    let (mut daemon, table, _disk) = kept_for_two_seconds("ublk-held", "1013");
    let device = daemon.devices[0].clone();
    // The test holds the servers' lock as a running server would, so the
    // keeper removes nothing until the test has the char device open.
    let server_lock = std::fs::OpenOptions::new()
        .write(true)
        .open(mpio_ublk::LOCK_FILE)
        .expect("the running daemon made the servers' lock file");
    server_lock
        .lock_shared()
        .expect("the servers' lock, shared");
    terminate(&mut daemon);
    assert_kept(&daemon, &device);
    // Hold the char device, once the ended daemon's hold is gone: the
    // keeper's DEL_DEV waits for its last close.
    let char_device = "/dev/ublkc1013";
    let mut held = None;
    wait_until("the test opens the kept char device", LIMIT, || {
        held = std::fs::File::open(char_device).ok();
        held.is_some()
    });
    drop(server_lock);
    wait_until("the keeper gives the held removal up", LIMIT, || {
        let log = daemon.log();
        log.contains("/dev/ublkb1013 not removed: ublk ") && log.contains("did not return within")
    });
    // The keeper let its lock go: the next daemon starts.
    let mut next = serve_ublk("ublk-held-next", &table, &["--ublk"]);
    terminate(&mut next);
    // Closed, the char device goes with the device.
    drop(held);
    wait_until("the held device goes once closed", LIMIT, || {
        !Path::new(char_device).exists()
    });
}

#[test]
#[ignore = "kernel test: needs root, ublk_drv and nbdkit; run scripts/kernel-test.sh"]
fn a_sigterm_restart_during_an_outage_keeps_the_device_and_its_waiting_io() {
    modprobe(&["ublk_drv"]);
    let dir = test_dir("ublk-outage-disk");
    let file = dir.join("disk.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let socket = dir.join("nbdkit.sock");
    let mut server = Nbdkit::nbdkit_file(&socket, &file);
    let word = format!("nbd+unix:///?socket={}", socket.display());
    let paths = [format!("{word}#a"), format!("{word}#b")];
    // I/O waits in mpio while no path serves.
    let table = format!(
        "0 {} multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 {} 1 {} 1",
        64 << 11,
        paths[0],
        paths[1]
    );
    let args = ["--ublk", "1016"];
    let mut daemon = serve_ublk("ublk-outage-1", &table, &args);
    let device = daemon.devices[0].clone();
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(&device), 32, dir.join("fio.log"), &[]);
    wait_for_more_writes(&device, 1000);

    // The outage: every path's server is gone; the daemon sees both fail.
    server.kill();
    wait_until("both paths failed", LIMIT, || {
        paths
            .iter()
            .all(|path| path_row(&daemon, path)["state"] == "failed")
    });
    terminate(&mut daemon);
    assert_kept(&daemon, &device);
    assert!(fio.is_running(), "fio ended in the outage");

    // The next daemon starts with both paths down and takes the device
    // over; the I/O waits on until the server returns.
    let second = serve_ublk("ublk-outage-2", &table, &args);
    for path in &paths {
        assert_eq!(path_row(&second, path)["state"], "failed", "{path}");
    }
    assert!(fio.is_running(), "fio ended in the outage");
    server.restart();
    for path in &paths {
        wait_serves(
            &second,
            path,
            2 * BACKLOG,
            "the path serves after the outage",
        );
    }
    fio.stop(LIMIT).assert_clean();
    assert_eq!(kernel_errors(&device), Vec::<String>::new());
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}
