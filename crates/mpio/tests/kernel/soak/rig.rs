//! The soak's rig: two LUNs, each reached by two kernel paths — a LIO
//! loopback target (two `tcm_loop` ports, the second in ALUA group
//! `pg1`) and an nvmet subsystem on two nvme-loop ports (native multipath
//! off) — and one `mpio serve --config` with a map by each LUN's WWID,
//! exported as `/dev/ublkb40` (`scsi`) and `/dev/ublkb41` (`nvme`),
//! queueing while no path serves, checked every 250 ms. The daemon can
//! be killed with SIGKILL, or stopped with SIGTERM (it keeps both
//! devices), and started again with the same config (ublk user recovery
//! keeps both devices and their waiting I/O).
//!
//! # Drop order
//! The daemon goes first (SIGTERM: its config removes its devices), then
//! the targets, whose disks it held open.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{block_stat, clean_up, modprobe, read_attribute, wait_until};
use crate::failover::LIMIT;
use crate::nvme::NvmeLoop;
use crate::scsi::LioLoop;
use crate::ublk::terminate;
use mpio_test_support::wait_within;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The config's first lines: devices removed at a stop.
const REMOVE_AT_STOP: &str = "[ublk]\non_stop = \"remove\"\n";

/// Each LUN's size.
pub const LUN_MIB: u64 = 128;

/// One of the rig's two maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Scsi,
    Nvme,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Scsi, Side::Nvme];

    /// The map's name in the config.
    pub fn map(self) -> &'static str {
        match self {
            Side::Scsi => "scsi",
            Side::Nvme => "nvme",
        }
    }

    /// The map's block device.
    pub fn device(self) -> &'static str {
        match self {
            Side::Scsi => "/dev/ublkb40",
            Side::Nvme => "/dev/ublkb41",
        }
    }

    fn ublk_number(self) -> u32 {
        match self {
            Side::Scsi => 40,
            Side::Nvme => 41,
        }
    }
}

/// The selectors a reload picks from.
pub const SELECTORS: [&str; 3] = ["round-robin", "queue-length", "service-time"];

pub struct Rig {
    /// The running daemon; `None` only between a kill and its restart.
    daemon: Option<Daemon>,
    /// How many daemons were started, naming each one's directory.
    started: u32,
    /// The soak's own directory: configs, fio's files, every daemon's
    /// log (kept across restarts).
    pub dir: PathBuf,
    /// The config every daemon starts with.
    pub config: PathBuf,
    wwids: [String; 2],
    /// The SCSI paths' disks (`sdb`), in port order: the second is the
    /// one whose ALUA state the soak sets.
    pub scsi: [String; 2],
    pub lio: LioLoop,
    pub nvme: NvmeLoop,
}

impl Rig {
    pub fn new() -> Rig {
        modprobe(&["ublk_drv"]);
        modprobe(&["ext4"]);
        let lio = LioLoop::new("mpio-kt-soak-scsi", LUN_MIB);
        let scsi = lio.devices().map(Option::unwrap);
        let scsi_wwid =
            read_attribute(&format!("/sys/block/{}/device/wwid", scsi[0])).expect("a WWID");
        let nvme = NvmeLoop::new("mpio-kt-soak-nvme", LUN_MIB, [61, 62]);
        let dir = test_dir("soak");
        let config = dir.join("mpio.toml");
        let mut rig = Rig {
            daemon: None,
            started: 0,
            dir,
            config,
            wwids: [scsi_wwid, nvme.wwid()],
            scsi,
            lio,
            nvme,
        };
        std::fs::write(&rig.config, rig.config_text(None)).unwrap();
        rig.start_daemon();
        rig
    }

    /// The config: both maps, `multibus` round-robin, except `side`'s
    /// selector where one is given.
    pub fn config_text(&self, selector: Option<(Side, &str)>) -> String {
        // A stop removes the devices, so that the rig's end (a panic's
        // too) leaves none waiting for a daemon; a SIGTERM restart reads
        // the config again with `keep` first (`terminate_and_restart`).
        let mut text = String::from(REMOVE_AT_STOP);
        for (side, wwid) in Side::BOTH.into_iter().zip(&self.wwids) {
            let chosen = match selector {
                Some((which, selector)) if which == side => selector,
                _ => "round-robin",
            };
            text.push_str(&format!(
                "[[map]]\nname = \"{}\"\nwwid = \"{wwid}\"\npath_grouping_policy = \"multibus\"\n\
                 selector = \"{chosen}\"\nno_path_retry = \"queue\"\nchecker_interval_ms = 250\n\
                 failback = \"immediate\"\n[[map.export]]\nublk = {}\n",
                side.map(),
                side.ublk_number()
            ));
        }
        text
    }

    fn start_daemon(&mut self) {
        self.started += 1;
        let dir = test_dir(&format!("soak-daemon-{}", self.started));
        let daemon = Daemon::start(dir, &["--config", self.config.to_str().unwrap()]);
        let mut devices = daemon.devices.clone();
        devices.sort();
        assert_eq!(
            devices,
            Side::BOTH.map(|side| side.device().to_string()),
            "the daemon serves both maps' devices"
        );
        self.daemon = Some(daemon);
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("a daemon runs")
    }

    /// SIGKILL to the daemon (its devices stay, their I/O waiting), then
    /// a new one with the same config, which recovers both devices.
    /// `between` runs while no daemon runs.
    pub fn kill_and_restart(&mut self, between: impl FnOnce(&Rig)) {
        let mut daemon = self.daemon.take().expect("a daemon runs");
        daemon.child.kill().unwrap();
        wait_within(&mut daemon.child, LIMIT, "the killed daemon");
        self.keep_log(&daemon);
        drop(daemon);
        for side in Side::BOTH {
            assert!(
                Path::new(side.device()).exists(),
                "{} went with its daemon",
                side.device()
            );
        }
        between(self);
        self.start_daemon();
    }

    /// Stops the daemon with SIGTERM, which must end it cleanly with
    /// both devices kept (its config read again with `keep` first), and
    /// starts it again with the same config.
    pub fn terminate_and_restart(&mut self) {
        let mut daemon = self.daemon.take().expect("a daemon runs");
        let config = std::fs::read_to_string(&self.config).unwrap();
        let keep = config.replacen(REMOVE_AT_STOP, "[ublk]\non_stop = \"keep\"\n", 1);
        std::fs::write(&self.config, keep).unwrap();
        daemon.ok(&["reload"]);
        terminate(&mut daemon);
        std::fs::write(&self.config, config).unwrap();
        self.keep_log(&daemon);
        let log = daemon.log();
        drop(daemon);
        for side in Side::BOTH {
            assert!(
                log.contains(&format!("{} kept for the next daemon", side.device())),
                "{log}"
            );
            assert!(
                Path::new(side.device()).exists(),
                "{} went at SIGTERM",
                side.device()
            );
        }
        self.start_daemon();
    }

    fn keep_log(&self, daemon: &Daemon) {
        let _ = std::fs::copy(
            daemon.dir.join("mpio.log"),
            self.dir.join(format!("mpio-{}.log", self.started)),
        );
    }

    /// `show paths --json`'s row of path `name` (a kernel disk name,
    /// unique across both maps), if the daemon has such a path.
    pub fn row(&self, name: &str) -> Option<Value> {
        let rows = self.daemon().json(&["show", "paths"]);
        rows.as_array()?
            .iter()
            .find(|row| row["name"] == name)
            .cloned()
    }

    /// Waits until path `name`'s row (or its absence) satisfies `holds`;
    /// returns the row then.
    pub fn wait_path(
        &self,
        name: &str,
        what: &str,
        mut holds: impl FnMut(Option<&Value>) -> bool,
    ) -> Option<Value> {
        let mut last = None;
        wait_until(&format!("{name}: {what}"), LIMIT, || {
            last = self.row(name);
            holds(last.as_ref())
        });
        last
    }

    /// Waits until path `name` is active and optimized.
    pub fn wait_healthy(&self, name: &str) {
        self.wait_path(name, "active and optimized", |row| {
            row.is_some_and(|row| row["state"] == "active" && row["access"] == "optimized")
        });
    }

    /// Path `name`'s fail count (0 if the map has no such path).
    pub fn fail_count(&self, name: &str) -> u64 {
        self.row(name)
            .and_then(|row| row["fail_count"].as_u64())
            .unwrap_or(0)
    }

    /// The NVMe paths' disks (`nvme1n1`), in port order, while connected.
    pub fn nvme_paths(&self) -> [String; 2] {
        self.nvme
            .ports
            .map(|port| self.nvme.device_of(port).expect("port connected"))
    }

    /// The two paths of `side`'s map.
    pub fn paths(&self, side: Side) -> [String; 2] {
        match side {
            Side::Scsi => self.scsi.clone(),
            Side::Nvme => self.nvme_paths(),
        }
    }

    /// The selector in `side`'s map's table now.
    pub fn selector(&self, side: Side) -> String {
        let table = self.daemon().ok(&["table", side.map()]);
        SELECTORS
            .into_iter()
            .find(|selector| table.contains(selector))
            .unwrap_or_else(|| panic!("no known selector in {table}"))
            .to_string()
    }

    /// Waits until each of `sides`' devices completes more writes: the
    /// daemon serves those maps (their workloads write all the time).
    pub fn wait_serving(&self, sides: &[Side]) {
        let before: Vec<u64> = sides.iter().map(|side| writes(side.device())).collect();
        wait_until("the devices complete writes", LIMIT, || {
            sides
                .iter()
                .zip(&before)
                .all(|(side, &before)| writes(side.device()) > before)
        });
    }

    /// Stops the daemon with SIGTERM, which must end it cleanly and
    /// remove both devices.
    pub fn stop(&mut self) {
        let Some(mut daemon) = self.daemon.take() else {
            return;
        };
        terminate(&mut daemon);
        self.keep_log(&daemon);
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(daemon) = &self.daemon {
            // SIGTERM first: the daemon removes its devices; the guard's
            // own drop kills what is left.
            clean_up("kill", &["-TERM", &daemon.child.id().to_string()]);
            if let Some(daemon) = self.daemon.as_mut() {
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while daemon.child.try_wait().ok().flatten().is_none()
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        self.daemon = None;
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Writes completed on block device `device`.
pub fn writes(device: &str) -> u64 {
    block_stat(device, 4).unwrap_or(0)
}

/// Sets SCSI disk `name`'s device state (`offline`, `running`).
pub fn set_scsi_state(name: &str, state: &str) {
    // The kernel takes a state name only with its newline.
    crate::devices::write_attribute(
        &Path::new("/sys/block").join(name).join("device/state"),
        &format!("{state}\n"),
    );
}
