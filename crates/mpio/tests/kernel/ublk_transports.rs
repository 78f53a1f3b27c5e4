//! mpio's block device over each kind of path: RAM (`memory:`), a
//! regular file (`file:` with buffered I/O), and an NBD server (nbdkit's
//! memory plugin) — each under fio verify with flushes and FUA writes
//! while its paths fail and return, then write-zeroes read back as
//! zeroes and a discard answered.

use crate::daemon::{test_dir, Daemon, Nbdkit};
use crate::devices::{modprobe, run};
use crate::failover::verify_while_paths_fail;
use crate::fio::Target;
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
