//! An NVMe-oF loop target with native multipath off: one nvmet
//! subsystem whose namespace 1 is a memory-backed null_blk disk, exported
//! on two loop ports, each connected by its own host controller, so the
//! host has two block devices (`/dev/nvmeXn1`) with one WWID: two paths
//! to one LUN, as two NVMe controllers give a host. Each port's ANA group
//! 1 state is set through nvmet's configfs; a port can be taken away and
//! given back. Undone when dropped.

use crate::devices::{modprobe, run, wait_until, NullBlk};
use std::path::{Path, PathBuf};
use std::time::Duration;

const NVMET: &str = "/sys/kernel/config/nvmet";

/// The target and the host's controllers to it.
pub struct NvmeLoop {
    nqn: String,
    /// The loop ports (nvmet port ids, also their `traddr`).
    pub ports: [u32; 2],
    disk: NullBlk,
}

impl NvmeLoop {
    /// A target named `name` over a `size_mib` MiB disk on `ports`, both
    /// connected. Loads `nvme_core` with `multipath=N` first, and fails if
    /// it was already loaded with native multipath on.
    pub fn new(name: &str, size_mib: u64, ports: [u32; 2]) -> NvmeLoop {
        modprobe(&["nvme_core", "multipath=N"]);
        let multipath = std::fs::read_to_string("/sys/module/nvme_core/parameters/multipath")
            .expect("nvme_core is loaded");
        assert_eq!(
            multipath.trim(),
            "N",
            "nvme_core was loaded with native multipath on before this test"
        );
        for module in ["nvme_fabrics", "nvmet", "nvme_loop"] {
            modprobe(&[module]);
        }
        let disk = NullBlk::memory_backed(name, size_mib);
        let nqn = format!("nqn.2026-11.io.mpio:{name}");
        let target = NvmeLoop { nqn, ports, disk };
        let subsystem = target.subsystem();
        std::fs::create_dir(&subsystem).unwrap();
        write(&subsystem.join("attr_allow_any_host"), "1");
        std::fs::create_dir(subsystem.join("namespaces/1")).unwrap();
        write(
            &subsystem.join("namespaces/1/device_path"),
            target.disk.device.to_str().unwrap(),
        );
        write(&subsystem.join("namespaces/1/enable"), "1");
        for port in ports {
            let directory = port_dir(port);
            std::fs::create_dir(&directory).unwrap();
            write(&directory.join("addr_trtype"), "loop");
            // nvme-loop picks the port by its traddr.
            write(&directory.join("addr_traddr"), &port.to_string());
            target.add_port(port);
        }
        target
    }

    fn subsystem(&self) -> PathBuf {
        Path::new(NVMET).join("subsystems").join(&self.nqn)
    }

    /// Links the subsystem to `port` and connects a host controller to
    /// it; waits for its namespace's block device.
    pub fn add_port(&self, port: u32) {
        let link = port_dir(port).join("subsystems").join(&self.nqn);
        std::os::unix::fs::symlink(self.subsystem(), link).unwrap();
        let options = format!("transport=loop,traddr={port},nqn={}", self.nqn);
        write(Path::new("/dev/nvme-fabrics"), &options);
        wait_until(
            "the new controller's namespace appears",
            Duration::from_secs(60),
            || self.device_of(port).is_some(),
        );
    }

    /// Unlinks the subsystem from `port`: the host's controller on it and
    /// its block device go away.
    pub fn remove_port(&self, port: u32) {
        let link = port_dir(port).join("subsystems").join(&self.nqn);
        std::fs::remove_file(link).unwrap();
        wait_until(
            "the port's controller goes away",
            Duration::from_secs(120),
            || self.device_of(port).is_none(),
        );
    }

    /// Sets the ANA state of `port`'s group 1 (`optimized`,
    /// `non-optimized`, `inaccessible`, ...).
    pub fn set_ana(&self, port: u32, state: &str) {
        write(&port_dir(port).join("ana_groups/1/ana_state"), state);
    }

    /// The block device name (`nvme1n1`) of the namespace on the host's
    /// controller to `port`, if connected.
    pub fn device_of(&self, port: u32) -> Option<String> {
        self.controllers()
            .into_iter()
            .find(|controller| {
                read(&format!("/sys/class/nvme/{controller}/address"))
                    .is_some_and(|address| address.contains(&format!("traddr={port}")))
            })
            .and_then(|controller| {
                let prefix = format!("{controller}n");
                std::fs::read_dir(format!("/sys/class/nvme/{controller}"))
                    .ok()?
                    .flatten()
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .find(|name| name.starts_with(&prefix))
            })
    }

    /// The host's controllers to this subsystem.
    fn controllers(&self) -> Vec<String> {
        std::fs::read_dir("/sys/class/nvme")
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .filter(|controller| {
                        read(&format!("/sys/class/nvme/{controller}/subsysnqn")).as_deref()
                            == Some(self.nqn.as_str())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The namespace's WWID as the host reads it.
    pub fn wwid(&self) -> String {
        let device = self.device_of(self.ports[0]).expect("port connected");
        read(&format!("/sys/block/{device}/wwid")).expect("the namespace has a wwid")
    }
}

impl Drop for NvmeLoop {
    fn drop(&mut self) {
        for controller in self.controllers() {
            let _ = std::fs::write(
                format!("/sys/class/nvme/{controller}/delete_controller"),
                "1",
            );
        }
        for port in self.ports {
            let _ = std::fs::remove_file(port_dir(port).join("subsystems").join(&self.nqn));
            let _ = std::fs::remove_dir(port_dir(port));
        }
        let subsystem = self.subsystem();
        let _ = std::fs::write(subsystem.join("namespaces/1/enable"), "0");
        let _ = std::fs::remove_dir(subsystem.join("namespaces/1"));
        let _ = std::fs::remove_dir(subsystem);
        let _ = run("sync", &[], Duration::from_secs(60));
    }
}

fn port_dir(port: u32) -> PathBuf {
    Path::new(NVMET).join("ports").join(port.to_string())
}

fn write(path: &Path, value: &str) {
    std::fs::write(path, value)
        .unwrap_or_else(|error| panic!("{} = {value}: {error}", path.display()));
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
}
