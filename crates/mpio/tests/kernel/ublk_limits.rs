//! What the ublk device takes from its paths: a null_blk disk of
//! 4096-byte blocks without a cache makes a device of 4096-byte blocks
//! whose cache is write-through; a reload to paths the device's limits
//! do not suit (a file with a cache the device never flushes) is refused
//! and the map keeps its table. And a target error, a file system out of
//! space, reaches the writer as ENOSPC and fails no path.

use crate::daemon::test_dir;
use crate::devices::{modprobe, run, wait_until, NullBlk};
use crate::failover::{path_row, two_path_table};
use crate::ublk::serve_ublk;
use mpio_test_support::{output_within, wait_within};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `/sys/block/DEVICE/queue/ATTRIBUTE` of a `/dev/...` node.
fn queue_attribute(device: &str, attribute: &str) -> String {
    let name = Path::new(device).file_name().unwrap().to_str().unwrap();
    std::fs::read_to_string(format!("/sys/block/{name}/queue/{attribute}"))
        .unwrap_or_else(|error| panic!("{name}/queue/{attribute}: {error}"))
        .trim()
        .to_string()
}

#[test]
#[ignore = "kernel test: needs root, null_blk and ublk_drv; run scripts/kernel-test.sh"]
fn the_ublk_device_takes_its_paths_blocks_and_cache() {
    modprobe(&["ublk_drv"]);
    let mut large = NullBlk::memory_backed_with("mpio-kt-limits-4k", 64, &[("blocksize", "4096")]);
    let paths = large.two_paths();
    assert_eq!(
        queue_attribute(paths[0].trim_start_matches("file:"), "write_cache"),
        "write through"
    );
    let table = two_path_table(large.sectors(), &paths[0], &paths[1]);
    let daemon = serve_ublk("ublk-limits", &table, &["--ublk"]);
    let device = daemon.devices[0].clone();
    assert_eq!(queue_attribute(&device, "logical_block_size"), "4096");
    assert_eq!(queue_attribute(&device, "physical_block_size"), "4096");
    assert_eq!(queue_attribute(&device, "write_cache"), "write through");

    // Data goes through in the device's blocks.
    let pattern: Vec<u8> = (0..1u32 << 20).map(|index| (index % 253) as u8).collect();
    std::fs::write(&device, &pattern).unwrap();
    run("sync", &[], Duration::from_secs(60));
    let read = std::fs::read(paths[1].trim_start_matches("file:")).unwrap();
    assert!(read[..pattern.len()] == pattern[..], "the disk differs");

    // A regular file has a cache: a device that sends no flushes cannot
    // be served by it.
    let dir = test_dir("ublk-limits-file");
    let file = dir.join("disk.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(large.sectors() << 9)
        .unwrap();
    let cached = format!(
        "0 {} multipath 0 0 1 1 round-robin 0 1 1 file:{}?direct=0 1",
        large.sectors(),
        file.display()
    );
    let refused = daemon.error(&["reload", "mpatha", &cached]);
    assert!(
        refused.contains("volatile write cache"),
        "reload not refused for the cache: {refused}"
    );
    assert!(daemon.ok(&["table", "mpatha"]).contains(&paths[0]));

    // Smaller blocks without a cache suit it.
    let mut small = NullBlk::memory_backed("mpio-kt-limits-512", 64);
    let smaller = small.two_paths();
    let table = two_path_table(large.sectors(), &smaller[0], &smaller[1]);
    daemon.ok(&["reload", "mpatha", &table]);
    std::fs::write(&device, &pattern).unwrap();
    run("sync", &[], Duration::from_secs(60));
    let read = std::fs::read(&small.device).unwrap();
    assert!(read[..pattern.len()] == pattern[..], "the new disk differs");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "kernel test: needs root and ublk_drv; run scripts/kernel-test.sh"]
fn a_full_file_system_reaches_the_writer_as_enospc_and_fails_no_path() {
    modprobe(&["ublk_drv"]);
    let dir = test_dir("ublk-enospc-fs");
    let mount = dir.join("small");
    std::fs::create_dir_all(&mount).unwrap();
    let limit = Duration::from_secs(60);
    run(
        "mount",
        &[
            "-t",
            "tmpfs",
            "-o",
            "size=4m",
            "tmpfs",
            mount.to_str().unwrap(),
        ],
        limit,
    );
    // A 64 MiB sparse file on a 4 MiB file system.
    let file = mount.join("disk.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let word = format!("file:{}?direct=0", file.display());
    let paths = [format!("{word}#a"), format!("{word}#b")];
    let table = two_path_table(64 << 11, &paths[0], &paths[1]);
    let daemon = serve_ublk("ublk-enospc", &table, &["--ublk"]);
    let device = &daemon.devices[0];
    let written = output_within(
        std::process::Command::new("dd").args([
            "if=/dev/zero",
            &format!("of={device}"),
            "bs=1M",
            "count=16",
            "oflag=direct",
        ]),
        Duration::from_secs(300),
    );
    let said = String::from_utf8_lossy(&written.stderr);
    assert!(!written.status.success(), "16 MiB fit in 4: {said}");
    assert!(
        said.contains("No space left on device"),
        "dd did not see ENOSPC: {said}"
    );
    for path in &paths {
        let row = path_row(&daemon, path);
        assert_eq!(row["fail_count"], 0, "a target error failed {path}: {row}");
        assert_eq!(row["state"], "active", "{path}: {row}");
    }
    // SIGTERM removes the device and closes the file; the file system
    // can go once the rings holding it are torn down.
    let mut daemon = daemon;
    run("kill", &["-TERM", &daemon.child.id().to_string()], limit);
    let status = wait_within(&mut daemon.child, limit, "mpio serve");
    assert!(status.success(), "mpio serve exited with {status}");
    wait_until("the small file system unmounts", limit, || {
        output_within(Command::new("umount").arg(&mount), limit)
            .status
            .success()
    });
    let _ = std::fs::remove_dir_all(&dir);
}
