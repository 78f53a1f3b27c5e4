//! The kernel's own NBD client on `mpio serve`: a map over two paths to
//! one null_blk disk attached as `/dev/nbdN` by `nbd-client`, ext4 made
//! and mounted on it, files written while a path fails and returns,
//! then `e2fsck -fn` clean and every file read back intact.

use crate::daemon::Daemon;
use crate::devices::{modprobe, run, Mount, NbdDevice, NullBlk};
use std::time::Duration;

/// Files written, and the size of each.
const FILES: u64 = 16;
const FILE_BYTES: usize = 1 << 20;

/// File `index`'s content: an xorshift stream seeded by its index, so
/// every file differs and a misplaced block shows.
fn content(index: u64) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15 ^ (index + 1);
    (0..FILE_BYTES / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect()
}

#[test]
#[ignore = "kernel test: needs root, null_blk, nbd and ext4; run scripts/kernel-test.sh"]
fn ext4_on_the_kernel_nbd_client_checks_clean_after_a_failover() {
    modprobe(&["ext4"]);
    let mut disk = NullBlk::memory_backed("mpio-kt-ext4", 256);
    let [first, second] = disk.two_paths();
    let table = format!(
        "0 {} multipath 0 0 1 1 round-robin 0 2 1 {first} 1 {second} 1",
        disk.sectors()
    );
    let daemon = Daemon::with_table("kernel-ext4", &table);
    let socket = daemon.dir.join("nbd.sock");
    let nbd = NbdDevice::attach(socket.to_str().unwrap(), "mpio");
    let device = nbd.device.to_str().unwrap();
    let minutes = |count: u64| Duration::from_secs(60 * count);
    run("mkfs.ext4", &["-q", "-F", device], minutes(5));

    let mount = Mount::new(&nbd.device, "ext4", daemon.dir.join("mnt"));
    for index in 0..FILES {
        if index == FILES / 2 {
            daemon.ok(&["message", "mpatha", "fail_path", &first]);
        }
        std::fs::write(mount.dir.join(format!("file{index}")), content(index)).unwrap();
        // Each file reaches the disk before the next, so the writes
        // cross the failover.
        run("sync", &[], minutes(2));
    }
    daemon.ok(&["message", "mpatha", "reinstate_path", &first]);
    mount.unmount();
    let check = run("e2fsck", &["-fn", device], minutes(5));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("clean") || report.contains("files"),
        "{report}"
    );

    let mount = Mount::new(&nbd.device, "ext4", daemon.dir.join("mnt"));
    for index in 0..FILES {
        let read = std::fs::read(mount.dir.join(format!("file{index}"))).unwrap();
        assert!(
            read == content(index),
            "file{index} differs after the round trip"
        );
    }
    mount.unmount();
    let rows = daemon.json(&["show", "paths"]);
    assert_eq!(rows[0]["fail_count"], 1, "{rows}");
}
