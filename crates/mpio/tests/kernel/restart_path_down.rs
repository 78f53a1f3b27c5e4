//! Crash recovery while a path is down: a map by WWID over two LIO ports
//! serves `/dev/ublkb5` under fio verify; the second port goes offline,
//! into ALUA standby, or unavailable (its capacity then reads 0 after the
//! daemon's rescans), the daemon is killed (-9) and started again with
//! the same config. The new daemon must start (the path down is a failed
//! path, with why), take the device over with its waiting I/O, serve
//! through the healthy port, and bring the second back once it heals;
//! fio ends with no error and no bad block, and the map's size never
//! follows a device that reports 0.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{modprobe, read_attribute, wait_until, write_attribute};
use crate::failover::{assert_only_one_serves, finish_clean, path_row, wait_serves, LIMIT};
use crate::fio::{FioVerify, Target};
use crate::scsi::LioLoop;
use std::path::{Path, PathBuf};

const DEVICE: &str = "/dev/ublkb5";
const SIZE_MIB: u64 = 256;

/// How the second port is taken down, and healed.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The SCSI device's state set to `offline`: opens and I/O fail.
    Offline,
    /// The port's ALUA group in standby: reads fail, the path must not
    /// carry I/O.
    Standby,
    /// The port's ALUA group unavailable: as standby, and the kernel
    /// reads the LUN's capacity as 0 at the next rescan.
    Unavailable,
}

impl Fault {
    fn apply(self, target: &LioLoop, disk: &str) {
        match self {
            Fault::Offline => write_attribute(&state_file(disk), "offline\n"),
            Fault::Standby => target.set_second_port_state(2),
            Fault::Unavailable => target.set_second_port_state(3),
        }
    }

    fn heal(self, target: &LioLoop, disk: &str) {
        match self {
            Fault::Offline => write_attribute(&state_file(disk), "running\n"),
            Fault::Standby | Fault::Unavailable => target.set_second_port_state(0),
        }
    }

    /// Whether `row` (the second path's) shows the fault as the daemon
    /// sees it: failed, or in an access state that carries no I/O.
    fn seen_in(self, row: &serde_json::Value) -> bool {
        match self {
            Fault::Offline => row["state"] == "failed",
            Fault::Standby => row["state"] == "failed" || row["access"] == "standby",
            Fault::Unavailable => row["state"] == "failed" || row["access"] == "unavailable",
        }
    }
}

/// The SCSI device's `state`: the kernel takes a state's name only with
/// its newline.
fn state_file(disk: &str) -> PathBuf {
    Path::new("/sys/block").join(disk).join("device/state")
}

/// The daemon's config: a map by `wwid` (multibus, round-robin, checked
/// every 500 ms, I/O queued while no path serves) exported as
/// [`DEVICE`].
fn write_config(dir: &Path, wwid: &str) -> PathBuf {
    let config = dir.join("mpio.toml");
    let text = format!(
        "[[map]]\nname = \"mpatha\"\nwwid = \"{wwid}\"\npath_grouping_policy = \"multibus\"\n\
         selector = \"round-robin\"\nchecker_interval_ms = 500\nfailback = \"immediate\"\n\
         no_path_retry = \"queue\"\n\
         [[map.export]]\nublk = 5\n"
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// The map's size, as the daemon reports it.
fn map_bytes(daemon: &Daemon) -> u64 {
    daemon.json(&["status", "mpatha"])["size_bytes"]
        .as_u64()
        .unwrap()
}

#[test]
#[ignore = "kernel test: needs root, LIO (tcm_loop), scsi_dh_alua and ublk_drv; run scripts/kernel-test.sh"]
fn kill_9_with_a_path_offline_in_standby_or_unavailable_then_a_restart_loses_nothing() {
    modprobe(&["ublk_drv"]);
    let target = LioLoop::new("mpio-kt-restart", SIZE_MIB);
    let [first, second] = target.devices().map(Option::unwrap);
    let wwid = read_attribute(&format!("/sys/block/{first}/device/wwid")).expect("a WWID");
    let config_dir = test_dir("restart-config");
    let config = write_config(&config_dir, &wwid);
    let start = |round: usize| {
        let daemon = Daemon::start(
            test_dir(&format!("restart-{round}")),
            &["--config", config.to_str().unwrap()],
        );
        assert_eq!(daemon.devices, [DEVICE], "the map's device");
        daemon
    };
    let mut daemon = start(0);
    let fio =
        FioVerify::start_until_stopped(Target::Block(DEVICE), 128, config_dir.join("fio.log"), &[]);
    wait_serves(&daemon, &first, 100, "the first path serves");
    wait_serves(&daemon, &second, 100, "the second path serves");
    for (round, fault) in [Fault::Offline, Fault::Standby, Fault::Unavailable]
        .into_iter()
        .enumerate()
    {
        fault.apply(&target, &second);
        wait_until(&format!("{fault:?} seen"), LIMIT, || {
            fault.seen_in(&path_row(&daemon, &second))
        });
        daemon.child.kill().unwrap();
        daemon.child.wait().unwrap();
        assert!(Path::new(DEVICE).exists(), "{DEVICE} went with its server");
        daemon = start(round + 1);
        let row = path_row(&daemon, &second);
        assert!(fault.seen_in(&row), "{fault:?} after the restart: {row}");
        assert_only_one_serves(&daemon, &second, &first);
        if matches!(fault, Fault::Unavailable) {
            // Several checker rounds (each rescans the idle path, which
            // reads its capacity as 0) leave the map's size alone.
            let probes = |daemon: &Daemon| path_row(daemon, &second)["probes"].as_u64().unwrap();
            let before = probes(&daemon);
            wait_until("five more checker rounds", LIMIT, || {
                probes(&daemon) >= before + 5
            });
            assert_eq!(map_bytes(&daemon), SIZE_MIB << 20);
            let log = daemon.log();
            assert!(
                !log.contains("rescan by wwid: the map keeps its paths"),
                "{log}"
            );
        }
        fault.heal(&target, &second);
        wait_serves(&daemon, &second, 100, "the second path serves again");
    }
    wait_serves(&daemon, &first, 300, "both paths serve after the faults");
    finish_clean(fio);
    drop(daemon);
    let _ = std::fs::remove_dir_all(&config_dir);
}
