//! mpio's block device over each kind of path: RAM (`memory:`), a
//! regular file (`file:` with buffered I/O), and an NBD server (nbdkit's
//! memory plugin) — each under fio verify with flushes and FUA writes
//! while its paths fail and return, then write-zeroes read back as
//! zeroes and a discard answered; and over `null:` paths, which store
//! nothing.

use crate::daemon::{test_dir, Daemon, Nbdkit};
use crate::devices::{kernel_at_least, modprobe, run, NullBlk};
use crate::failover::{path_ios, path_row, two_path_table, verify_while_paths_fail};
use crate::fio::Target;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// Size of each map, MiB.
const SIZE_MIB: u64 = 128;

/// Serves `paths` (two words reaching one disk; a label, `#a`, tells
/// two words to one file or server apart) as a ublk device and runs the
/// checks.
fn check_paths(name: &str, paths: [String; 2]) {
    modprobe(&["ublk_drv"]);
    let sectors = SIZE_MIB << 11;
    let table = format!(
        "0 {sectors} multipath 0 0 1 1 round-robin 0 2 1 {} 1 {} 1",
        paths[0], paths[1]
    );
    let daemon = Daemon::start(test_dir(name), &["--table", &table, "--ublk"]);
    let device = daemon.devices[0].clone();
    // Every write O_DSYNC (FUA on the device, which says it honours
    // FUA) and a flush every 16.
    let options = ["--fsync=16", "--sync=dsync"];
    verify_while_paths_fail(&daemon, Target::Block(&device), &paths, &options);

    let range = ["-o", "67108864", "-l", "1048576"];
    std::fs::write(&device, vec![0x5au8; 64 << 20]).unwrap();
    run(
        "blkdiscard",
        &[&["-z"], &range[..], &[&device]].concat(),
        Duration::from_secs(120),
    );
    let read = std::fs::read(&device).unwrap();
    let zeroed = &read[64 << 20..(64 << 20) + (1 << 20)];
    assert!(
        zeroed.iter().all(|&byte| byte == 0),
        "{name}: write-zeroes left data"
    );
    assert!(
        read[..64 << 20].iter().all(|&byte| byte == 0x5a),
        "{name}: data before the range changed"
    );
    run(
        "blkdiscard",
        &[&range[..], &[&device]].concat(),
        Duration::from_secs(120),
    );
}

#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn memory_paths_behind_the_ublk_device() {
    check_paths(
        "ublk-memory",
        ["memory:kt#a".to_string(), "memory:kt#b".to_string()],
    );
}

#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn file_paths_behind_the_ublk_device() {
    let dir = test_dir("ublk-file-disk");
    let file = dir.join("disk.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(SIZE_MIB << 20)
        .unwrap();
    // /tmp in the guest is tmpfs, which has no O_DIRECT.
    let word = format!("file:{}?direct=0", file.display());
    check_paths("ublk-file", [format!("{word}#a"), format!("{word}#b")]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "kernel test: needs root, ublk_drv and nbdkit; run scripts/kernel-test.sh"]
fn nbd_paths_behind_the_ublk_device() {
    let dir = test_dir("ublk-nbd-server");
    let socket = dir.join("nbdkit.sock");
    let _server = Nbdkit::nbdkit(&socket, &["memory", &format!("{SIZE_MIB}M")]);
    let word = format!("nbd+unix:///?socket={}", socket.display());
    check_paths("ublk-nbd", [format!("{word}#a"), format!("{word}#b")]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Null paths, which store nothing and answer at once (the kernel
/// benchmark's ceiling, `mpio-ublk-null`). A null path touches no data,
/// so the device moves data by zero copy where the kernel registers the
/// requests' pages itself (6.16 and later) and copies elsewhere; fio's
/// reads, writes, flushes and FUA writes, a discard and a write-zeroes all
/// succeed over both paths; and a reload onto a disk keeps the device's
/// data mode and stores what is written next, and one back onto the null
/// paths is taken.
#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn null_paths_behind_the_ublk_device() {
    modprobe(&["ublk_drv"]);
    let sectors = SIZE_MIB << 11;
    let bytes = SIZE_MIB << 20;
    let paths = [format!("null:{bytes}#a"), format!("null:{bytes}#b")];
    let table = two_path_table(sectors, &paths[0], &paths[1]);
    let dir = test_dir("ublk-null");
    let daemon = Daemon::start(dir.clone(), &["--table", &table, "--ublk"]);
    let device = daemon.devices[0].clone();
    let mode = if kernel_at_least(6, 16) {
        "zero copy"
    } else {
        "get-data copy"
    };
    let data_mode = |daemon: &Daemon| {
        let topology = daemon.json(&["show", "topology", "mpatha"]);
        topology[0]["ublk"][0]["data_mode"].clone()
    };
    assert_eq!(data_mode(&daemon), mode);

    // fio fails on the first I/O error.
    run(
        "fio",
        &[
            "--name=null",
            &format!("--filename={device}"),
            "--rw=randrw",
            "--bs=4k",
            "--ioengine=libaio",
            "--iodepth=16",
            "--direct=1",
            "--io_size=16m",
            "--fsync=16",
            "--sync=dsync",
        ],
        Duration::from_secs(300),
    );
    for range in [
        &["-o", "0", "-l", "1048576"][..],
        &["-z", "-o", "0", "-l", "1048576"],
    ] {
        run(
            "blkdiscard",
            &[range, &[&device]].concat(),
            Duration::from_secs(120),
        );
    }
    for path in &paths {
        assert!(path_ios(&daemon, path) > 0, "{path} carried no I/O");
    }

    // Onto a disk (write-through, as the null paths: the device sends no
    // flushes): the device's pages now reach it.
    let disk = NullBlk::memory_backed("ublknull", SIZE_MIB);
    let word = format!("file:{}", disk.device.display());
    daemon.ok(&[
        "reload",
        "mpatha",
        &format!("0 {sectors} multipath 0 0 1 1 round-robin 0 1 1 {word} 1"),
    ]);
    assert_eq!(data_mode(&daemon), mode, "a reload keeps the data mode");
    let pattern: Vec<u8> = (0..1 << 20).map(|byte| (byte * 7 % 251) as u8).collect();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(&device)
        .unwrap();
    written.write_all_at(&pattern, 8 << 20).unwrap();
    written.sync_all().unwrap();
    let mut stored = vec![0; pattern.len()];
    std::fs::File::open(&disk.device)
        .unwrap()
        .read_exact_at(&mut stored, 8 << 20)
        .unwrap();
    assert!(stored == pattern, "the write reached the disk");
    // And back onto the null paths, which a zero-copy device takes too.
    daemon.ok(&["reload", "mpatha", &table]);
    for path in &paths {
        assert_eq!(path_row(&daemon, path)["state"], "active", "{path} is back");
    }
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
}
