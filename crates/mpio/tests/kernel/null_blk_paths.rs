//! A map over two paths to one memory-backed null_blk disk (two device
//! nodes, so two file descriptions, as two HBAs to one LUN), exported by
//! `mpio serve`, under fio verify while each path is failed and
//! reinstated in turn; blocks written through both paths read back
//! through one; and the canary that proves that check can fail: the
//! same steps over two paths to *different* disks must be caught.

use crate::daemon::Daemon;
use crate::devices::NullBlk;
use crate::failover::{two_path_table, verify_while_paths_fail};
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

/// Writes `size_mib` MiB through both paths of `table`'s map, fails
/// `first`, and verifies everything through the other path alone.
fn write_then_verify_through_one_path(name: &str, table: &str, first: &str) -> FioResult {
    let daemon = Daemon::with_table(name, table);
    let uri = &daemon.uris[0];
    let run = |phase, log: &str| {
        FioVerify::start(Target::Nbd(uri), 32, phase, daemon.dir.join(log))
            .finish(Duration::from_secs(600))
    };
    run(Phase::Write, "write.log").assert_clean();
    daemon.ok(&["message", "mpatha", "fail_path", first]);
    run(Phase::Verify, "verify.log")
}

#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn blocks_written_through_both_paths_read_back_through_one() {
    let mut disk = NullBlk::memory_backed("mpio-kt-one-path", 64);
    let [first, second] = disk.two_paths();
    let table = two_path_table(disk.sectors(), &first, &second);
    write_then_verify_through_one_path("kernel-one-path", &table, &first).assert_clean();
}

/// The canary: the same steps over two paths that reach *different*
/// disks must fail, or the verify above could not catch a path that
/// lost or misplaced what was written through it.
#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn fio_verify_catches_paths_that_reach_different_disks() {
    let first_disk = NullBlk::memory_backed("mpio-kt-canary-a", 64);
    let second_disk = NullBlk::memory_backed("mpio-kt-canary-b", 64);
    let first = format!("file:{}", first_disk.device.display());
    let second = format!("file:{}", second_disk.device.display());
    let table = two_path_table(first_disk.sectors(), &first, &second);
    let result = write_then_verify_through_one_path("kernel-canary", &table, &first);
    assert!(
        !result.is_clean() && result.log.contains("verify"),
        "fio verify passed though half the blocks were written to another disk:\n{}",
        result.log
    );
}
