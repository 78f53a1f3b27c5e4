//! SCSI paths: two LIO loopback ports to one backstore are two
//! `/dev/sd*` with one WWID; a map by that WWID under fio verify follows
//! the second port's ALUA state (non-optimized, standby, back to
//! active/optimized, the last seen only through a rescan that bypasses
//! `scsi_dh_alua`'s refusal of I/O to a standby path). And a medium
//! error from `scsi_debug` goes back to the caller and fails no path.

use crate::common::{mpio, stdout};
use crate::daemon::Daemon;
use crate::devices::read_attribute;
use crate::failover::{
    assert_only_one_serves, finish_clean, path_row, serve_by_wwid, two_path_table,
    verify_running_through, wait_for_access, wait_serves,
};
use crate::scsi::{LioLoop, ScsiDebug, MEDIUM_ERROR_SECTOR};
use mpio_test_support::wait_within;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
#[ignore = "kernel test: needs root, LIO (tcm_loop) and scsi_dh_alua; run scripts/kernel-test.sh"]
fn a_map_by_wwid_of_lio_paths_follows_alua_states_under_fio_verify() {
    let target = LioLoop::new("mpio-kt-alua", 256);
    let [first, second] = target.devices().map(Option::unwrap);
    let wwid = read_attribute(&format!("/sys/block/{first}/device/wwid")).expect("a WWID");
    assert_eq!(
        read_attribute(&format!("/sys/block/{second}/device/wwid")).as_deref(),
        Some(wwid.as_str()),
        "two ports, one LUN"
    );
    // LIO writes an NAA designator; discover shows it in udev's form too.
    let udev = format!("3{}", wwid.strip_prefix("naa.").expect("an NAA WWID"));
    let listing = stdout(&mpio(&["discover"]));
    assert!(
        listing.contains(&format!("{wwid} ({udev}) size=256M paths=2")),
        "{listing}"
    );
    let daemon = serve_by_wwid("kernel-alua", &wwid);
    let fio = verify_running_through(&daemon, &second);
    for (code, state) in [(1, "non-optimized"), (2, "standby")] {
        target.set_second_port_state(code);
        wait_for_access(&daemon, &second, state);
        assert_only_one_serves(&daemon, &second, &first);
    }
    target.set_second_port_state(0);
    wait_for_access(&daemon, &second, "optimized");
    wait_serves(&daemon, &second, 100, "the path serves again");
    finish_clean(fio);
}

/// fio reads `len` bytes at `offset` of `uri`; true if it succeeded.
fn fio_read(uri: &str, offset: u64, len: u64) -> bool {
    let mut child = Command::new("fio")
        .args([
            "--name=read",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=read",
            "--bs=4k",
            &format!("--offset={offset}"),
            &format!("--size={len}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("fio runs");
    wait_within(&mut child, Duration::from_secs(300), "fio").success()
}

#[test]
#[ignore = "kernel test: needs root and scsi_debug; run scripts/kernel-test.sh"]
fn a_medium_error_reaches_the_caller_and_fails_no_path() {
    let disk = ScsiDebug::with_medium_errors();
    let device = disk.device.display();
    let paths = [format!("file:{device}#a"), format!("file:{device}#b")];
    let sectors = 64 * 2048;
    let daemon = Daemon::with_table(
        "kernel-medium",
        &two_path_table(sectors, &paths[0], &paths[1]),
    );
    let uri = &daemon.uris[0];
    assert!(fio_read(uri, 0, 1 << 20), "reads elsewhere succeed");
    assert!(
        !fio_read(uri, MEDIUM_ERROR_SECTOR * 512, 4096),
        "the medium error reaches the caller"
    );
    for path in &paths {
        let row = path_row(&daemon, path);
        assert_eq!(row["state"], "active", "{row}");
        assert_eq!(row["fail_count"], 0, "{row}");
    }
    assert!(fio_read(uri, 0, 1 << 20), "the map still serves");
}
