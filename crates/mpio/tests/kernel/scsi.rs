//! SCSI disks for the kernel tests: a LIO loopback target (`tcm_loop`)
//! with two target ports to one iblock backstore over a memory-backed
//! null_blk disk, so the host has two `/dev/sd*` with one WWID, the
//! second port in an ALUA target port group of its own whose state the
//! test sets; and a `scsi_debug` disk that answers reads of some sectors
//! with a medium error. Each is undone when dropped.

use crate::devices::{
    clean_up, modprobe, modprobe_fresh, read_attribute, wait_until, write_attribute, NullBlk,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TARGET: &str = "/sys/kernel/config/target";

/// The SCSI disks (`sdb`) whose `device/<attribute>` reads `value`.
pub fn disks_where(attribute: &str, value: &str) -> Vec<String> {
    let mut disks: Vec<String> = std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with("sd"))
        .filter(|name| {
            read_attribute(&format!("/sys/block/{name}/device/{attribute}")).as_deref()
                == Some(value)
        })
        .collect();
    disks.sort();
    disks
}

/// The LIO loopback target with its two ports.
pub struct LioLoop {
    backstore: PathBuf,
    /// Each port's target WWN.
    ports: [String; 2],
    /// The backstore's disk, removed after the target (fields drop after
    /// `drop`).
    _disk: NullBlk,
}

impl LioLoop {
    /// A target named `name` over a `size_mib` MiB disk, both ports
    /// connected; the second port's LUN is in ALUA group `pg1`.
    pub fn new(name: &str, size_mib: u64) -> LioLoop {
        for module in [
            "scsi_dh_alua",
            "sd_mod",
            "target_core_mod",
            "target_core_iblock",
            "tcm_loop",
        ] {
            modprobe(&[module]);
        }
        let disk = NullBlk::memory_backed(name, size_mib);
        let backstore = Path::new(TARGET).join("core/iblock_0").join(name);
        std::fs::create_dir_all(&backstore).unwrap();
        write_attribute(
            &backstore.join("control"),
            &format!("udev_path={}", disk.device.display()),
        );
        write_attribute(&backstore.join("enable"), "1");
        // Without a unit serial LIO reports no VPD pages: no WWID, no ALUA.
        write_attribute(
            &backstore.join("wwn/vpd_unit_serial"),
            &format!("{name}-serial"),
        );
        std::fs::create_dir(backstore.join("alua/pg1")).unwrap();
        write_attribute(&backstore.join("alua/pg1/tg_pt_gp_id"), "1");
        let ports = [
            "naa.5001405000000a01".to_string(),
            "naa.5001405000000a02".to_string(),
        ];
        let target = LioLoop {
            backstore,
            ports,
            _disk: disk,
        };
        for (index, port) in target.ports.iter().enumerate() {
            let tpg = target.tpg(port);
            std::fs::create_dir_all(&tpg).unwrap();
            // The nexus first: tcm_loop scans a LUN as it is linked, and
            // a scan without a nexus finds no disk.
            write_attribute(
                &tpg.join("nexus"),
                &format!("naa.5001405000000b0{}", index + 1),
            );
            let lun = tpg.join("lun/lun_0");
            std::fs::create_dir_all(&lun).unwrap();
            std::os::unix::fs::symlink(&target.backstore, lun.join("backstore")).unwrap();
            if index == 1 {
                write_attribute(&lun.join("alua_tg_pt_gp"), "pg1");
            }
        }
        wait_until("both LIO disks appear", Duration::from_secs(60), || {
            target.devices().iter().all(Option::is_some)
        });
        target
    }

    fn tpg(&self, port: &str) -> PathBuf {
        Path::new(TARGET).join("loopback").join(port).join("tpgt_1")
    }

    /// Each port's disk name on the host (`sdb`), once it is there:
    /// the disk at the port's `host:0:target:` address.
    pub fn devices(&self) -> [Option<String>; 2] {
        self.ports.clone().map(|port| {
            let address = read_attribute(self.tpg(&port).join("address").to_str().unwrap())?;
            let prefix = format!("{address}:");
            std::fs::read_dir("/sys/block")
                .ok()?
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .find(|name| {
                    std::fs::canonicalize(format!("/sys/block/{name}/device"))
                        .ok()
                        .and_then(|path| Some(path.file_name()?.to_str()?.starts_with(&prefix)))
                        .unwrap_or(false)
                })
        })
    }

    /// Sets the ALUA state of the second port's group (`0` active/
    /// optimized, `1` active/non-optimized, `2` standby, `3`
    /// unavailable).
    pub fn set_second_port_state(&self, code: u8) {
        write_attribute(
            &self.backstore.join("alua/pg1/alua_access_state"),
            &code.to_string(),
        );
    }
}

impl Drop for LioLoop {
    fn drop(&mut self) {
        for port in &self.ports {
            let tpg = self.tpg(port);
            let _ = std::fs::remove_file(tpg.join("lun/lun_0/backstore"));
            let _ = std::fs::remove_dir(tpg.join("lun/lun_0"));
            let _ = std::fs::remove_dir(&tpg);
            let _ = std::fs::remove_dir(tpg.parent().unwrap());
        }
        let _ = std::fs::remove_dir(self.backstore.join("alua/pg1"));
        let _ = std::fs::remove_dir(&self.backstore);
    }
}

/// A `scsi_debug` disk whose sectors from [`MEDIUM_ERROR_SECTOR`] on
/// (16 of them) answer reads with a medium error; unloaded when dropped.
pub struct ScsiDebug {
    /// Its device node.
    pub device: PathBuf,
}

/// The first sector `scsi_debug` fails with a medium error (its default
/// `medium_error_start`, 0x1234).
pub const MEDIUM_ERROR_SECTOR: u64 = 0x1234;

impl ScsiDebug {
    /// A 64 MiB disk with medium errors on (`opts=2`).
    pub fn with_medium_errors() -> ScsiDebug {
        modprobe(&["sd_mod"]);
        modprobe_fresh("scsi_debug", &["dev_size_mb=64", "opts=2"]);
        let mut disks = Vec::new();
        wait_until(
            "the scsi_debug disk appears",
            Duration::from_secs(60),
            || {
                disks = disks_where("model", "scsi_debug");
                !disks.is_empty()
            },
        );
        let device = Path::new("/dev").join(&disks[0]);
        wait_until("its node appears", Duration::from_secs(30), || {
            device.exists()
        });
        ScsiDebug { device }
    }
}

impl Drop for ScsiDebug {
    fn drop(&mut self) {
        clean_up("modprobe", &["-r", "scsi_debug"]);
    }
}
