//! A map over two paths to one memory-backed null_blk disk (two device
//! nodes, so two file descriptions, as two HBAs to one LUN), exported by
//! `mpio serve`, under fio verify while each path is failed and
//! reinstated in turn; blocks written through both paths read back
//! through one; and the canary that proves that check can fail: the
//! same steps over two paths to *different* disks must be caught.

use crate::daemon::Daemon;
use crate::devices::{wait_until, NullBlk};
use crate::fio::{FioResult, FioVerify, Phase};
use std::time::Duration;

/// Path `name`'s row of `mpio show paths --json`.
fn path_row(daemon: &Daemon, name: &str) -> serde_json::Value {
    let paths = daemon.json(&["show", "paths"]);
    let row = paths
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == name);
    row.unwrap_or_else(|| panic!("no path {name} in {paths}"))
        .clone()
}

/// I/Os sent to path `name`.
fn path_ios(daemon: &Daemon, name: &str) -> u64 {
    path_row(daemon, name)["ios"].as_u64().unwrap()
}

/// A two-path round-robin table over `first` and `second`.
fn two_path_table(sectors: u64, first: &str, second: &str) -> String {
    format!("0 {sectors} multipath 0 0 1 1 round-robin 0 2 1 {first} 1 {second} 1")
}

#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn fio_verify_holds_while_null_blk_paths_fail_and_return() {
    let mut disk = NullBlk::memory_backed("mpio-kt-failover", 256);
    let paths = [
        format!("file:{}", disk.device.display()),
        format!("file:{}", disk.second_node().display()),
    ];
    let table = two_path_table(disk.sectors(), &paths[0], &paths[1]);
    let daemon = Daemon::with_table("kernel-failover", &table);
    let mut fio = FioVerify::nbd(
        &daemon.uris[0],
        128,
        Phase::WriteAndVerify,
        daemon.dir.join("fio.log"),
    );
    let limit = Duration::from_secs(300);
    for (failed, other) in [(&paths[0], &paths[1]), (&paths[1], &paths[0])] {
        // Each path in turn is failed while fio writes, carries nothing
        // while the other serves a few hundred I/Os, and returns.
        let before = path_ios(&daemon, other);
        wait_until("fio's I/O reaches the map", limit, || {
            path_ios(&daemon, other) > before + 100
        });
        daemon.ok(&["message", "mpatha", "fail_path", failed]);
        let failed_ios = path_ios(&daemon, failed);
        let before = path_ios(&daemon, other);
        wait_until("the other path serves alone", limit, || {
            path_ios(&daemon, other) > before + 300
        });
        assert!(
            fio.is_running(),
            "fio ended before the failover was over: the test proved nothing"
        );
        // While failed, the path got no new I/O: at most fio's queue
        // depth was being dispatched as the failure was published. (The
        // checker may have found it healthy and reinstated it already,
        // as multipathd would; then it may serve again.)
        let row = path_row(&daemon, failed);
        if row["state"] == "failed" {
            assert!(row["ios"].as_u64().unwrap() <= failed_ios + 16, "{row}");
        }
        daemon.ok(&["message", "mpatha", "reinstate_path", failed]);
    }
    fio.finish(Duration::from_secs(1200)).assert_clean();
    let rows = daemon.json(&["show", "paths"]);
    for row in rows.as_array().unwrap() {
        assert_eq!(row["fail_count"], 1, "{rows}");
        assert_eq!(row["state"], "active", "{rows}");
        assert!(row["ios"].as_u64().unwrap() > 1000, "{rows}");
    }
}

/// Writes `size_mib` MiB through both paths of `table`'s map, fails
/// `first`, and verifies everything through the other path alone.
fn write_then_verify_through_one_path(name: &str, table: &str, first: &str) -> FioResult {
    let daemon = Daemon::with_table(name, table);
    let uri = &daemon.uris[0];
    let limit = Duration::from_secs(600);
    FioVerify::nbd(uri, 32, Phase::Write, daemon.dir.join("write.log"))
        .finish(limit)
        .assert_clean();
    daemon.ok(&["message", "mpatha", "fail_path", first]);
    FioVerify::nbd(uri, 32, Phase::Verify, daemon.dir.join("verify.log")).finish(limit)
}

#[test]
#[ignore = "kernel test: needs root and null_blk; run scripts/kernel-test.sh"]
fn blocks_written_through_both_paths_read_back_through_one() {
    let mut disk = NullBlk::memory_backed("mpio-kt-one-path", 64);
    let first = format!("file:{}", disk.device.display());
    let second = format!("file:{}", disk.second_node().display());
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
