//! A ublk export on a machine that cannot make one (no `ublk_drv`, as on
//! the build machines, or not root): the daemon says what to do and
//! serves its other exports. Where ublk devices can be made, the kernel
//! tests (`scripts/kernel-test.sh`) cover them instead.

mod common;
mod daemon;

use daemon::{test_dir, Daemon};
use mpio_test_support::{output_within, HANG_BOUND};
use std::path::Path;
use std::process::Command;

#[test]
fn a_ublk_export_that_cannot_be_made_leaves_the_nbd_export_serving() {
    let can_make = Path::new("/dev/ublk-control").exists() && is_root();
    if can_make {
        eprintln!("skipped: this machine can make ublk devices (the kernel tests cover them)");
        return;
    }
    let dir = test_dir("ublk-missing");
    let socket = dir.join("nbd.sock").display().to_string();
    let table = "0 8192 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1";
    let daemon = Daemon::start(dir, &["--table", table, "--ublk", "--socket", &socket]);
    assert!(daemon.devices.is_empty(), "{:?}", daemon.devices);
    assert_eq!(daemon.uris.len(), 1, "{:?}", daemon.uris);
    let log = daemon.log();
    let hint = if Path::new("/dev/ublk-control").exists() {
        "needs root"
    } else {
        "modprobe ublk_drv"
    };
    assert!(
        log.contains("no ublk device") && log.contains(hint),
        "{log}"
    );
    let info = output_within(Command::new("nbdinfo").arg(&daemon.uris[0]), HANG_BOUND);
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
}

/// Whether this process runs as root.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
}
