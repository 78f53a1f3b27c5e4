//! mpio's own block device: a map over two paths to one null_blk disk
//! served as `/dev/ublkbN` (`mpio serve --ublk`), under fio verify with
//! libaio while each path fails and returns; ext4 made, filled and
//! checked on it; write-zeroes read back as zeroes; SIGTERM under load,
//! which must end the daemon cleanly and remove a device the kernel
//! numbered (no daemon could take it over); `queue_if_no_path` holding
//! I/O with every path failed, and `mpio remove --force` then failing it
//! and returning; and
//! io-affinity choosing by the CPU that submitted each request while
//! each CPU's queue is served from the other CPU; and
//! sixty-four maps, each a ublk device and an NBD export, served by one
//! I/O thread per CPU.

use crate::daemon::Daemon;
use crate::devices::{block_stat, modprobe, run, threads, wait_until, Mount, NbdDevice, NullBlk};
use crate::failover::{path_ios, two_path_table, verify_while_paths_fail, LIMIT};
use crate::fio::{FioVerify, Target, BACKLOG};
use mpio_test_support::wait_within;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// `mpio serve --ublk` over two device nodes of a new null_blk disk of
/// `size_mib`; returns the daemon, its two path words and the disk.
fn ublk_daemon(name: &str, size_mib: u64) -> (Daemon, [String; 2], NullBlk) {
    modprobe(&["ublk_drv"]);
    let mut disk = NullBlk::memory_backed(&format!("mpio-kt-{name}"), size_mib);
    let paths = disk.two_paths();
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    let daemon = serve_ublk(name, &table, &["--ublk"]);
    (daemon, paths, disk)
}

/// `mpio serve --table TABLE ARGS`, which must print one ublk device and
/// no NBD URI.
pub fn serve_ublk(name: &str, table: &str, args: &[&str]) -> Daemon {
    let mut all = vec!["--table", table];
    all.extend(args);
    let daemon = Daemon::start(crate::daemon::test_dir(name), &all);
    assert_eq!(daemon.devices.len(), 1, "one ublk device printed");
    assert!(daemon.uris.is_empty(), "--ublk alone exports no NBD socket");
    assert!(Path::new(&daemon.devices[0]).exists());
    daemon
}

/// Sends SIGTERM to `daemon` and waits for its clean exit (status 0).
pub fn terminate(daemon: &mut Daemon) {
    run(
        "kill",
        &["-TERM", &daemon.child.id().to_string()],
        Duration::from_secs(10),
    );
    let status = wait_within(&mut daemon.child, LIMIT, "mpio serve");
    assert!(status.success(), "mpio serve exited with {status}");
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn fio_verify_on_the_ublk_device_holds_while_paths_fail_and_return() {
    let (daemon, paths, _disk) = ublk_daemon("ublk-failover", 256);
    verify_while_paths_fail(&daemon, Target::Block(&daemon.devices[0]), &paths, &[]);
}

#[test]
#[ignore = "kernel test: needs root, null_blk, ublk_drv and ext4; run scripts/kernel-test.sh"]
fn ext4_on_the_ublk_device_checks_clean() {
    modprobe(&["ext4"]);
    let (daemon, paths, _disk) = ublk_daemon("ublk-ext4", 256);
    let device = daemon.devices[0].clone();
    let minutes = |count: u64| Duration::from_secs(60 * count);
    run("mkfs.ext4", &["-q", "-F", &device], minutes(5));
    let mount = Mount::new(Path::new(&device), "ext4", daemon.dir.join("mnt"));
    let data: Vec<u8> = (0..4u32 << 20)
        .map(|index| (index * 7 % 251) as u8)
        .collect();
    for index in 0..8 {
        if index == 4 {
            daemon.ok(&["message", "mpatha", "fail_path", &paths[0]]);
        }
        std::fs::write(mount.dir.join(format!("file{index}")), &data).unwrap();
        run("sync", &[], minutes(2));
    }
    daemon.ok(&["message", "mpatha", "reinstate_path", &paths[0]]);
    mount.unmount();
    run("e2fsck", &["-fn", &device], minutes(5));
    let mount = Mount::new(Path::new(&device), "ext4", daemon.dir.join("mnt"));
    for index in 0..8 {
        let read = std::fs::read(mount.dir.join(format!("file{index}"))).unwrap();
        assert!(read == data, "file{index} differs after the round trip");
    }
    mount.unmount();
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn write_zeroes_on_the_ublk_device_read_back_as_zeroes() {
    let (daemon, _paths, _disk) = ublk_daemon("ublk-zeroes", 64);
    let device = &daemon.devices[0];
    let pattern = vec![0xa5u8; 1 << 20];
    std::fs::write(device, &pattern).unwrap();
    run(
        "blkdiscard",
        &["-z", "-o", "0", "-l", "1048576", device],
        Duration::from_secs(120),
    );
    let mut file = std::fs::File::open(device).unwrap();
    let mut read = vec![0xffu8; 1 << 20];
    std::io::Read::read_exact(&mut file, &mut read).unwrap();
    assert!(
        read.iter().all(|&byte| byte == 0),
        "zeroed range reads back non-zero"
    );
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn sigterm_under_fio_ends_cleanly_and_removes_the_device() {
    let (mut daemon, _paths, _disk) = ublk_daemon("ublk-sigterm", 64);
    let device = daemon.devices[0].clone();
    // fio runs until stopped (it never is): the signal comes once the
    // device has served some writes, and fio cannot have run out of work.
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(&device), 64, daemon.dir.join("fio.log"), &[]);
    wait_for_more_writes(&device, 1000);
    assert!(fio.is_running(), "fio ended before the signal");
    terminate(&mut daemon);
    assert!(!Path::new(&device).exists(), "{device} is still there");
    let log = daemon.log();
    assert!(
        log.contains("removed (the kernel chose its number"),
        "{log}"
    );
    // fio saw its device go: it may report errors for I/O after the
    // removal, but it must end.
    fio.finish(Duration::from_secs(120));
}

#[test]
#[ignore = "kernel test: needs root, 2 CPUs, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn io_affinity_sends_each_cpu_s_io_down_its_own_path() {
    modprobe(&["ublk_drv"]);
    let mut disk = NullBlk::memory_backed("mpio-kt-ublk-affinity", 64);
    let paths = disk.two_paths();
    // Path 1 serves CPU 0 (mask 1), path 2 CPU 1 (mask 2).
    let table = format!(
        "0 {} multipath 0 0 1 1 io-affinity 0 2 1 {} 1 {} 2",
        disk.sectors(),
        paths[0],
        paths[1]
    );
    let daemon = serve_ublk("ublk-affinity", &table, &["--ublk"]);
    let device = &daemon.devices[0];
    // The guest's two CPUs share a NUMA node: CPU 0's queue is served by
    // a thread running on CPU 1 and the other way round, and io-affinity
    // still picks by the CPU that submitted.
    for (thread, runs_on) in [("mpio-ublk-0", "1"), ("mpio-ublk-1", "0")] {
        assert_eq!(
            thread_cpus(daemon.child.id(), thread).as_deref(),
            Some(runs_on),
            "{thread} runs on the CPUs listed"
        );
    }
    for (cpu, own, other) in [(0, &paths[0], &paths[1]), (1, &paths[1], &paths[0])] {
        let (own_before, other_before) = (path_ios(&daemon, own), path_ios(&daemon, other));
        run(
            "fio",
            &[
                "--name=affinity",
                &format!("--filename={device}"),
                "--ioengine=libaio",
                "--direct=1",
                "--rw=randread",
                "--bs=4k",
                "--iodepth=8",
                "--number_ios=2000",
                &format!("--cpus_allowed={cpu}"),
            ],
            Duration::from_secs(300),
        );
        let own_ios = path_ios(&daemon, own) - own_before;
        let other_ios = path_ios(&daemon, other) - other_before;
        // The block layer submits on the CPU fio runs on (no I/O
        // scheduler moves it): every read goes down that CPU's path.
        assert!(own_ios >= 2000, "CPU {cpu}: its path got {own_ios} reads");
        assert_eq!(
            other_ios, 0,
            "CPU {cpu}: the other path got {other_ios} reads"
        );
    }
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn kill_9_under_fio_then_a_restart_loses_nothing() {
    modprobe(&["ublk_drv"]);
    let mut disk = NullBlk::memory_backed("mpio-kt-ublk-recovery", 256);
    let paths = disk.two_paths();
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    let mut first = serve_ublk("ublk-recovery-1", &table, &["--ublk", "7"]);
    let device = first.devices[0].clone();
    assert_eq!(device, "/dev/ublkb7");
    let logs = crate::daemon::test_dir("ublk-recovery-fio");
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(&device), 128, logs.join("fio.log"), &[]);
    wait_for_more_writes(&device, 1000);
    assert!(fio.is_running(), "fio ended before the kill");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    // The device stays, its I/O waiting for a server (had it gone, fio's
    // I/O would fail and the verdict below with it).
    assert!(Path::new(&device).exists(), "{device} went with its server");
    assert!(fio.is_running(), "fio ended while no server ran");
    let second = serve_ublk("ublk-recovery-2", &table, &["--ublk", "7"]);
    assert_eq!(second.devices[0], device);
    // The new server serves fio's I/O, more than fio's check backlog,
    // before fio stops.
    wait_for_more_writes(&device, 2 * BACKLOG);
    assert!(fio.is_running(), "fio ended after the restart");
    fio.stop(Duration::from_secs(600)).assert_clean();
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn reloads_under_fio_swap_the_map_without_an_error() {
    let (daemon, paths, disk) = ublk_daemon("ublk-reload", 256);
    let topology = daemon.ok(&["show", "topology"]);
    assert!(
        topology.starts_with(&format!("mpatha {} ", daemon.devices[0])),
        "{topology}"
    );
    let json = daemon.json(&["show", "topology"]);
    assert_eq!(
        json[0]["block_devices"][0],
        daemon.devices[0].as_str(),
        "{json}"
    );
    let device = &daemon.devices[0];
    // fio writes and verifies until stopped: the reloads, not fio's
    // amount of work, decide when it ends.
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(device), 128, daemon.dir.join("fio.log"), &[]);
    // Selector swaps, and one path taken out and put back, while fio
    // writes and verifies.
    let sectors = disk.sectors();
    let tables = [
        format!(
            "0 {sectors} multipath 0 0 1 1 queue-length 0 2 1 {} 1 {} 1",
            paths[0], paths[1]
        ),
        format!(
            "0 {sectors} multipath 0 0 1 1 service-time 0 1 2 {} 1 1",
            paths[1]
        ),
        two_path_table(sectors, &paths[0], &paths[1]),
    ];
    // Each reload comes once the device has served more writes since
    // the last (so under I/O, through the map the last one made).
    for round in 0..6 {
        wait_for_more_writes(device, 200);
        daemon.ok(&["reload", "mpatha", &tables[round % tables.len()]]);
    }
    // The last map serves, past fio's check backlog, before fio stops.
    wait_for_more_writes(device, 2 * BACKLOG);
    assert!(fio.is_running(), "fio ended during the reloads");
    fio.stop(Duration::from_secs(600)).assert_clean();
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn with_every_path_failed_queue_if_no_path_holds_the_io_in_mpio() {
    let (daemon, paths, _disk, fio) = queueing_with_every_path_failed("ublk-queueing");
    let device = &daemon.devices[0];
    let held = block_stat(device, 4).expect("the device's write count");
    for path in &paths {
        daemon.ok(&["message", "mpatha", "reinstate_path", path]);
    }
    wait_for_writes(device, held + 2 * BACKLOG);
    fio.stop(Duration::from_secs(600)).assert_clean();
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn remove_force_with_every_path_failed_fails_the_held_io_and_returns() {
    let (daemon, _paths, _disk, fio) = queueing_with_every_path_failed("ublk-remove-queueing");
    let device = daemon.devices[0].clone();
    // The disk cannot go while requests wait for a path that will not
    // come: the forced removal fails them, and returns.
    // The client waits a bounded time for the answer.
    let removed = daemon.ok(&["remove", "--force", "mpatha"]);
    assert!(removed.contains("removed"), "{removed}");
    let result = fio.finish(LIMIT);
    assert!(!result.is_clean(), "fio saw no error:\n{}", result.log);
    wait_until("the device goes once fio closed it", LIMIT, || {
        !Path::new(&device).exists()
    });
}

/// A daemon `name` serving a map that queues while no path is usable
/// (`queue_if_no_path`) as a ublk device, under fio verify, with both
/// its paths failed and fio's requests waiting in mpio; the checker
/// reinstates no path for an hour.
fn queueing_with_every_path_failed(name: &str) -> (Daemon, [String; 2], NullBlk, FioVerify) {
    modprobe(&["ublk_drv"]);
    let mut disk = NullBlk::memory_backed(&format!("mpio-kt-{name}"), 64);
    let paths = disk.two_paths();
    let table = format!(
        "0 {} multipath 1 queue_if_no_path 0 1 1 round-robin 0 2 1 {} 1 {} 1",
        disk.sectors(),
        paths[0],
        paths[1]
    );
    let dir = crate::daemon::test_dir(name);
    let config = format!(
        "[[map]]\nname = \"mpatha\"\ntable = \"{table}\"\nchecker_interval_ms = 3600000\n\
         [[map.export]]\nublk = true\n"
    );
    std::fs::write(dir.join("mpio.toml"), config).unwrap();
    let config_path = dir.join("mpio.toml").display().to_string();
    let daemon = Daemon::start(dir, &["--config", &config_path]);
    assert_eq!(daemon.devices.len(), 1, "one ublk device printed");
    let device = daemon.devices[0].clone();
    let mut fio =
        FioVerify::start_until_stopped(Target::Block(&device), 64, daemon.dir.join("fio.log"), &[]);
    wait_for_more_writes(&device, 1000);
    for path in &paths {
        daemon.ok(&["message", "mpatha", "fail_path", path]);
    }
    // No path: the map queues, and fio's requests (it always has some
    // outstanding) wait in mpio.
    let status = daemon.json(&["status", "mpatha"]);
    assert_eq!(status["queueing"], true, "{status}");
    wait_until("fio's requests wait on the device", LIMIT, || {
        block_stat(&device, 8).is_some_and(|in_flight| in_flight > 0)
    });
    assert!(fio.is_running(), "fio ended while no path was usable");
    (daemon, paths, disk, fio)
}

/// Waits (bounded) until block device `device` has completed `count`
/// writes: work under way, whatever the machine's speed.
fn wait_for_writes(device: &str, count: u64) {
    wait_until(&format!("{count} writes on {device}"), LIMIT, || {
        block_stat(device, 4).is_some_and(|writes| writes >= count)
    });
}

/// Waits (bounded) until block device `device` has completed `more`
/// writes past the ones it has now.
pub fn wait_for_more_writes(device: &str, more: u64) {
    let writes = block_stat(device, 4).expect("the device's write count");
    wait_for_writes(device, writes + more);
}

/// The CPUs `pid`'s thread named `name` may run on
/// (`Cpus_allowed_list`), if it has such a thread.
fn thread_cpus(pid: u32, name: &str) -> Option<String> {
    let (_, task) = threads(pid)
        .into_iter()
        .find(|(thread, _)| thread == name)?;
    let status = std::fs::read_to_string(task.join("status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|cpus| cpus.trim().to_string())
}

#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn sixty_four_maps_are_sixty_four_devices_and_exports_on_one_thread_per_cpu() {
    modprobe(&["ublk_drv"]);
    let dir = crate::daemon::test_dir("ublk-many");
    let mut config = String::new();
    for index in 0..64 {
        config.push_str(&format!(
            "[[map]]\nname = \"m{index}\"\nsize = \"16M\"\n\
             [[map.path]]\nname = \"a\"\nuri = \"memory:d{index}#a\"\n\
             [[map.path]]\nname = \"b\"\nuri = \"memory:d{index}#b\"\n\
             [[map.export]]\nname = \"m{index}\"\nublk = true\nsocket = \"{}\"\n",
            dir.join(format!("m{index}.sock")).display()
        ));
    }
    std::fs::write(dir.join("mpio.toml"), config).unwrap();
    let config_path = dir.join("mpio.toml").display().to_string();
    let daemon = Daemon::start(dir.clone(), &["--config", &config_path]);
    assert_eq!(daemon.devices.len(), 64, "{:?}", daemon.devices);
    assert_eq!(daemon.uris.len(), 64, "{:?}", daemon.uris);
    for device in &daemon.devices {
        assert!(Path::new(device).exists(), "{device}");
    }
    // Data through two of them, each its own disk, read back through the
    // kernel's nbd client on the same maps' NBD exports.
    let (first, last) = (&daemon.devices[0], &daemon.devices[63]);
    std::fs::write(first, vec![1u8; 4096]).unwrap();
    std::fs::write(last, vec![2u8; 4096]).unwrap();
    assert_eq!(std::fs::read(first).unwrap()[..4096], [1u8; 4096]);
    assert_eq!(std::fs::read(last).unwrap()[..4096], [2u8; 4096]);
    for (index, fill) in [(0, 1u8), (63, 2u8)] {
        let socket = dir.join(format!("m{index}.sock"));
        let nbd = NbdDevice::attach(socket.to_str().unwrap(), &format!("m{index}"));
        let mut data = vec![0u8; 4096];
        std::fs::File::open(&nbd.device)
            .and_then(|mut device| device.read_exact(&mut data))
            .unwrap();
        assert_eq!(data, vec![fill; 4096], "map m{index} through NBD");
    }
    // One I/O thread per CPU serves both kinds of export: the ublk
    // threads run the NBD loops; only the NBD acceptor is added.
    let names: Vec<String> = threads(daemon.child.id())
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let count = |prefix: &str| names.iter().filter(|name| name.starts_with(prefix)).count();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        count("mpio-ublk"),
        cpus,
        "one ublk thread per CPU, whatever the devices: {names:?}"
    );
    assert_eq!(
        count("mpio-serve"),
        1,
        "the NBD loops run on the ublk threads: {names:?}"
    );
}

#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn a_daemon_that_fails_to_start_leaves_no_device_behind() {
    modprobe(&["ublk_drv"]);
    // The ublk device is made, then the control socket is refused (its
    // directory is writable by others): the daemon exits, and the device
    // must go with it, not wait for a server that will not come.
    let dir = crate::daemon::test_dir("ublk-failed-start");
    let open = dir.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let control = open.join("control.sock").display().to_string();
    let output = crate::common::mpio(&[
        "serve",
        "--table",
        "0 8192 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1",
        "--ublk",
        "11",
        "--control",
        &control,
    ]);
    assert!(
        !output.status.success(),
        "mpio serve started with an open socket directory"
    );
    let message = crate::common::stderr(&output);
    assert!(message.contains("writable by other users"), "{message}");
    assert!(
        !Path::new("/dev/ublkb11").exists(),
        "/dev/ublkb11 was left behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
