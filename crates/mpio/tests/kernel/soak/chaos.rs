//! The soak's faults. Each step injects one fault, waits until the
//! daemon shows it has seen it, then undoes it and waits until the daemon
//! shows the path serving again: so every step starts and ends with all
//! four paths healthy, and at most one path of a map is down at a time
//! (a daemon restart takes none of them down: ublk holds the I/O). Every
//! wait is bounded only by [`crate::failover::LIMIT`], which only a hang
//! reaches.
//!
//! What "seen" means per fault is in [`Chaos::step`]: a state, access
//! state or fail count in `mpio show paths --json`, a path leaving or
//! joining the map, the selector in `mpio table`, or a daemon that
//! started again and serves both devices.

use super::rig::{set_scsi_state, Rig, Side, SELECTORS};
use super::workload::Rng;
use std::time::Instant;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// A SCSI disk's `device/state` set to `offline`, then `running`.
    ScsiOffline,
    /// The second LIO port's ALUA group set to a state, then back to
    /// active/optimized.
    AluaNonOptimized,
    AluaStandby,
    AluaUnavailable,
    /// An NVMe port's ANA group set to a state, then back to optimized.
    AnaNonOptimized,
    AnaInaccessible,
    /// An NVMe port unlinked (its controller and disk go), then linked
    /// and connected again (a new disk joins).
    NvmePortRemoved,
    /// `mpio message MAP fail_path`, then `reinstate_path`.
    FailPath(Side),
    /// `mpio reload MAP` with a config naming another selector.
    Reload(Side),
    /// SIGKILL to the daemon and a restart with the same config.
    Kill9,
    /// SIGTERM to the daemon (it keeps both devices for the next one) and
    /// a restart with the same config.
    SigtermRestart,
    /// The same with a SCSI disk offline across the restart: the new
    /// daemon starts its map with that path failed as unready.
    Kill9WithScsiOffline,
}

impl Fault {
    pub const ALL: [Fault; 14] = [
        Fault::ScsiOffline,
        Fault::AluaNonOptimized,
        Fault::AluaStandby,
        Fault::AluaUnavailable,
        Fault::AnaNonOptimized,
        Fault::AnaInaccessible,
        Fault::NvmePortRemoved,
        Fault::FailPath(Side::Scsi),
        Fault::FailPath(Side::Nvme),
        Fault::Reload(Side::Scsi),
        Fault::Reload(Side::Nvme),
        Fault::Kill9,
        Fault::Kill9WithScsiOffline,
        Fault::SigtermRestart,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Fault::ScsiOffline => "scsi offline",
            Fault::AluaNonOptimized => "alua non-optimized",
            Fault::AluaStandby => "alua standby",
            Fault::AluaUnavailable => "alua unavailable",
            Fault::AnaNonOptimized => "ana non-optimized",
            Fault::AnaInaccessible => "ana inaccessible",
            Fault::NvmePortRemoved => "nvme port removed",
            Fault::FailPath(Side::Scsi) => "fail_path scsi",
            Fault::FailPath(Side::Nvme) => "fail_path nvme",
            Fault::Reload(Side::Scsi) => "reload scsi",
            Fault::Reload(Side::Nvme) => "reload nvme",
            Fault::Kill9 => "kill -9 restart",
            Fault::Kill9WithScsiOffline => "kill -9 restart, scsi path down",
            Fault::SigtermRestart => "SIGTERM restart",
        }
    }

    /// The maps whose I/O the fault can hold.
    pub fn sides(self) -> &'static [Side] {
        match self {
            Fault::ScsiOffline
            | Fault::AluaNonOptimized
            | Fault::AluaStandby
            | Fault::AluaUnavailable
            | Fault::FailPath(Side::Scsi)
            | Fault::Reload(Side::Scsi) => &[Side::Scsi],
            Fault::AnaNonOptimized
            | Fault::AnaInaccessible
            | Fault::NvmePortRemoved
            | Fault::FailPath(Side::Nvme)
            | Fault::Reload(Side::Nvme) => &[Side::Nvme],
            Fault::Kill9 | Fault::Kill9WithScsiOffline | Fault::SigtermRestart => &Side::BOTH,
        }
    }

    /// The NVMe faults the kernel's native multipath meets the same way.
    pub fn has_native(self) -> bool {
        matches!(
            self,
            Fault::AnaNonOptimized | Fault::AnaInaccessible | Fault::NvmePortRemoved
        )
    }
}

/// One step as it ran.
pub struct Step {
    pub fault: Fault,
    pub start: Instant,
    pub end: Instant,
    /// What the daemon showed that proves it saw the fault.
    pub seen: String,
}

/// The seeded chaos over a rig.
pub struct Chaos {
    pub rng: Rng,
    pub steps: Vec<Step>,
    /// The maps whose workloads write throughout, so a restart is seen
    /// served when their devices complete writes again (the canary's raw
    /// job may end at any step).
    pub written: Vec<Side>,
}

impl Chaos {
    pub fn new(seed: u64, written: &[Side]) -> Chaos {
        Chaos {
            rng: Rng::new(seed),
            steps: Vec::new(),
            written: written.to_vec(),
        }
    }

    /// The next fault: every kind once in a seeded order first (so a
    /// short soak covers them all), then seeded picks.
    pub fn pick(&mut self, order: &mut Vec<Fault>) -> Fault {
        if order.is_empty() {
            return Fault::ALL[self.rng.below(Fault::ALL.len())];
        }
        let index = self.rng.below(order.len());
        order.swap_remove(index)
    }

    /// Runs `fault` on `rig`: injects it, waits until the daemon saw it,
    /// undoes it, waits until every path it touched serves again.
    pub fn step(&mut self, rig: &mut Rig, fault: Fault) {
        let start = Instant::now();
        let seen = match fault {
            Fault::ScsiOffline => {
                let name = rig.scsi[self.rng.below(2)].clone();
                let before = rig.fail_count(&name);
                set_scsi_state(&name, "offline");
                let row = rig.wait_path(&name, "failed while offline", |row| {
                    row.is_some_and(|row| row["state"] == "failed")
                });
                set_scsi_state(&name, "running");
                rig.wait_healthy(&name);
                format!(
                    "{name} failed (fail_count {before} -> {})",
                    row.unwrap()["fail_count"]
                )
            }
            Fault::AluaNonOptimized => alua(rig, 1, "non-optimized"),
            Fault::AluaStandby => alua(rig, 2, "standby"),
            Fault::AluaUnavailable => alua(rig, 3, "unavailable"),
            Fault::AnaNonOptimized => self.ana(rig, "non-optimized"),
            Fault::AnaInaccessible => self.ana(rig, "inaccessible"),
            Fault::NvmePortRemoved => {
                let port = rig.nvme.ports[self.rng.below(2)];
                let gone = rig.nvme.device_of(port).expect("port connected");
                rig.nvme.remove_port(port);
                rig.wait_path(&gone, "left the map", |row| row.is_none());
                rig.nvme.add_port(port);
                let joined = rig.nvme.device_of(port).expect("port connected again");
                rig.wait_healthy(&joined);
                format!("{gone} left the map, {joined} joined it")
            }
            Fault::FailPath(side) => {
                let name = rig.paths(side)[self.rng.below(2)].clone();
                let before = rig.fail_count(&name);
                rig.daemon()
                    .ok(&["message", side.map(), "fail_path", &name]);
                rig.wait_path(&name, "counted as failed", |row| {
                    row.is_some_and(|row| row["fail_count"].as_u64() > Some(before))
                });
                // The checker may have reinstated it already, healthy as
                // it is; then this message has nothing to do.
                let _ = rig
                    .daemon()
                    .run(&["message", side.map(), "reinstate_path", &name]);
                rig.wait_healthy(&name);
                format!("{name} fail_count {before} -> {}", rig.fail_count(&name))
            }
            Fault::Reload(side) => {
                let current = rig.selector(side);
                let others: Vec<&str> = SELECTORS
                    .into_iter()
                    .filter(|selector| *selector != current)
                    .collect();
                let chosen = others[self.rng.below(others.len())];
                let config = rig.dir.join("reload.toml");
                std::fs::write(&config, rig.config_text(Some((side, chosen)))).unwrap();
                rig.daemon()
                    .ok(&["reload", side.map(), config.to_str().unwrap()]);
                crate::devices::wait_until(
                    &format!("{} runs {chosen}", side.map()),
                    crate::failover::LIMIT,
                    || rig.selector(side) == chosen,
                );
                for name in rig.paths(side) {
                    rig.wait_healthy(&name);
                }
                format!("{} went from {current} to {chosen}", side.map())
            }
            Fault::Kill9 | Fault::SigtermRestart => {
                if fault == Fault::Kill9 {
                    rig.kill_and_restart(|_| {});
                } else {
                    rig.terminate_and_restart();
                }
                rig.wait_serving(&self.written);
                for side in Side::BOTH {
                    for name in rig.paths(side) {
                        rig.wait_healthy(&name);
                    }
                }
                "a new daemon recovered both devices and serves them".to_string()
            }
            Fault::Kill9WithScsiOffline => {
                let name = rig.scsi[self.rng.below(2)].clone();
                set_scsi_state(&name, "offline");
                rig.wait_path(&name, "failed while offline", |row| {
                    row.is_some_and(|row| row["state"] == "failed")
                });
                rig.kill_and_restart(|_| {});
                let row = rig
                    .wait_path(&name, "failed at start", |row| {
                        row.is_some_and(|row| row["state"] == "failed")
                    })
                    .unwrap();
                rig.wait_serving(&self.written);
                set_scsi_state(&name, "running");
                rig.wait_healthy(&name);
                format!("restarted with {name} failed (unready: {})", row["unready"])
            }
        };
        self.steps.push(Step {
            fault,
            start,
            end: Instant::now(),
            seen,
        });
    }

    fn ana(&mut self, rig: &mut Rig, state: &str) -> String {
        let port = rig.nvme.ports[self.rng.below(2)];
        let name = rig.nvme.device_of(port).expect("port connected");
        rig.nvme.set_ana(port, state);
        rig.wait_path(&name, &format!("shows {state}"), |row| {
            row.is_some_and(|row| row["access"] == state)
        });
        rig.nvme.set_ana(port, "optimized");
        rig.wait_healthy(&name);
        format!("{name} showed {state}")
    }
}

/// The second SCSI port's ALUA group to `code` (`word` as mpio shows
/// it) and back to active/optimized.
fn alua(rig: &mut Rig, code: u8, word: &str) -> String {
    let name = rig.scsi[1].clone();
    rig.lio.set_second_port_state(code);
    rig.wait_path(&name, &format!("shows {word}"), |row| {
        row.is_some_and(|row| row["access"] == word)
    });
    rig.lio.set_second_port_state(0);
    rig.wait_healthy(&name);
    format!("{name} showed {word}")
}
