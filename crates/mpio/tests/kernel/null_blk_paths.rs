//! A map over two paths to one memory-backed null_blk disk (two device
//! nodes, so two file descriptions, as two HBAs to one LUN), exported by
//! `mpio serve`, under fio verify while each path is failed and
//! reinstated in turn; blocks written through both paths read back
//! through one, also with the paths named as dm names them; and the
//! canary that proves that check can fail: blocks
//! written to one disk and read back from another must be caught.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{block_stat, NullBlk};
use crate::failover::{path_ios, path_row, two_path_table, verify_while_paths_fail};
use crate::fio::{FioResult, FioVerify, Phase, Target};
use std::time::Duration;

#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn fio_verify_holds_while_null_blk_paths_fail_and_return() {
    let mut disk = NullBlk::memory_backed("mpio-kt-failover", 256);
    let paths = disk.two_paths();
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    let daemon = Daemon::with_table("kernel-failover", &table);
    verify_while_paths_fail(&daemon, Target::Nbd(&daemon.uris[0]), &paths, &[]);
}

/// Writes through both paths of `table`'s map (`first` and `second`,
/// each of which must carry some of it), fails `first`, and verifies
/// everything through the other path alone.
fn write_then_verify_through_one_path(
    name: &str,
    table: &str,
    [first, second]: [&str; 2],
) -> FioResult {
    let daemon = Daemon::with_table(name, table);
    let uri = &daemon.uris[0];
    let run = |phase, log: &str| {
        FioVerify::start(Target::Nbd(uri), 32, phase, daemon.dir.join(log))
            .finish(Duration::from_secs(600))
    };
    run(Phase::Write, "write.log").assert_clean();
    for path in [first, second] {
        assert!(path_ios(&daemon, path) > 0, "{path} carried none of it");
    }
    daemon.ok(&["message", "mpatha", "fail_path", first]);
    run(Phase::Verify, "verify.log")
}

#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn blocks_written_through_both_paths_read_back_through_one() {
    let mut disk = NullBlk::memory_backed("mpio-kt-one-path", 64);
    let [first, second] = disk.two_paths();
    let table = two_path_table(disk.sectors(), &first, &second);
    write_then_verify_through_one_path("kernel-one-path", &table, [&first, &second]).assert_clean();
}

/// dm's own path words, as `dmsetup table` prints them: the disk's
/// numbers (`MAJ:MIN`, which this guest, without udev, has no
/// `/dev/block` link for: mpio finds the node through sysfs) and a bare
/// device path. Both carry data, and the numbers name the path in
/// messages as in dm.
#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn dm_path_words_serve_as_dmsetup_prints_them() {
    let mut disk = NullBlk::memory_backed("mpio-kt-dm-words", 64);
    let name = disk
        .device
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let numbers = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
    let numbers = numbers.trim().to_string();
    assert!(
        !std::path::Path::new("/dev/block").join(&numbers).exists(),
        "this guest has no udev links: the numbers must be found through sysfs"
    );
    let second = disk.second_node().display().to_string();
    let table = two_path_table(disk.sectors(), &numbers, &second);
    write_then_verify_through_one_path("kernel-dm-words", &table, [&numbers, &second])
        .assert_clean();
}

/// The canary: fio verify must catch two paths that reach *different*
/// disks, or the verify above could not catch a path that lost or
/// misplaced what was written through it. It does not leave the outcome
/// to routing: every block is written with the second path failed (so
/// all of them land on the first disk, which the second disk's write
/// count confirms), then read back with the first path failed (so every
/// read comes from the second disk, which holds none of them).
#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn fio_verify_catches_paths_that_reach_different_disks() {
    let first_disk = NullBlk::memory_backed("mpio-kt-canary-a", 64);
    let second_disk = NullBlk::memory_backed("mpio-kt-canary-b", 64);
    let first = format!("file:{}", first_disk.device.display());
    let second = format!("file:{}", second_disk.device.display());
    let second_device = second_disk.device.display().to_string();
    let table = two_path_table(first_disk.sectors(), &first, &second);
    // The checker runs once an hour: no round reinstates the path the
    // test failed, so each phase runs on the one path the test chose.
    let dir = test_dir("kernel-canary");
    let config = dir.join("mpio.toml");
    let text = format!(
        "[[map]]\nname = \"mpatha\"\ntable = \"{table}\"\nchecker_interval_ms = 3600000\n\
         [[map.export]]\nsocket = \"{}\"\n",
        dir.join("nbd.sock").display()
    );
    std::fs::write(&config, text).unwrap();
    let daemon = Daemon::start(dir, &["--config", config.to_str().unwrap()]);
    let uri = &daemon.uris[0];
    let run = |phase, log: &str| {
        FioVerify::start(Target::Nbd(uri), 32, phase, daemon.dir.join(log))
            .finish(Duration::from_secs(600))
    };

    daemon.ok(&["message", "mpatha", "fail_path", &second]);
    let second_writes = block_stat(&second_device, 4).expect("the second disk's write count");
    let second_ios = path_ios(&daemon, &second);
    run(Phase::Write, "write.log").assert_clean();
    assert_eq!(
        path_ios(&daemon, &second),
        second_ios,
        "{}",
        path_row(&daemon, &second)
    );
    assert_eq!(
        block_stat(&second_device, 4),
        Some(second_writes),
        "a write reached the second disk"
    );

    daemon.ok(&["message", "mpatha", "reinstate_path", &second]);
    daemon.ok(&["message", "mpatha", "fail_path", &first]);
    let result = run(Phase::Verify, "verify.log");
    assert!(
        !result.is_clean() && result.log.contains("verify"),
        "fio verify passed though every block was read from a disk that holds none:\n{}",
        result.log
    );
    assert!(
        path_ios(&daemon, &second) > second_ios,
        "the reads went to the second disk: {}",
        path_row(&daemon, &second)
    );
}
