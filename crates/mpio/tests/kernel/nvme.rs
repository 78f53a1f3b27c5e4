//! An NVMe-oF loop target with native multipath off: one nvmet
//! subsystem whose namespace 1 is a memory-backed null_blk disk, exported
//! on two loop ports, each connected by its own host controller, so the
//! host has two block devices (`/dev/nvmeXn1`) with one WWID: two paths
//! to one LUN, as two NVMe controllers give a host. Each port's ANA group
//! 1 state is set through nvmet's configfs; a port can be taken away and
//! given back. Undone when dropped.

use crate::devices::{clean_up, modprobe, read_attribute, wait_until, write_attribute, NullBlk};
use mpio_test_support::output_within;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    /// connected, with the kernel's native multipath off: two block
    /// devices.
    pub fn new(name: &str, size_mib: u64, ports: [u32; 2]) -> NvmeLoop {
        NvmeLoop::with_native_multipath(name, size_mib, ports, false)
    }

    /// As [`NvmeLoop::new`], with the kernel's native multipath `native`
    /// (on: one block device, the subsystem's head). Reloads the NVMe
    /// modules with that setting if they are loaded with the other one
    /// and not in use, and fails if it cannot.
    pub fn with_native_multipath(
        name: &str,
        size_mib: u64,
        ports: [u32; 2],
        native: bool,
    ) -> NvmeLoop {
        let wanted = if native { "Y" } else { "N" };
        let parameter = "/sys/module/nvme_core/parameters/multipath";
        if read_attribute(parameter).is_some_and(|now| now != wanted) {
            // Refused while in use: the check of the parameter below says so.
            output_within(
                Command::new("modprobe").args(["-r", "nvme_loop", "nvme_fabrics", "nvme_core"]),
                Duration::from_secs(120),
            );
        }
        modprobe(&["nvme_core", &format!("multipath={wanted}")]);
        assert_eq!(
            read_attribute(parameter).as_deref(),
            Some(wanted),
            "nvme_core is loaded with the other multipath setting and in use"
        );
        for module in ["nvme_fabrics", "nvmet", "nvme_loop"] {
            modprobe(&[module]);
        }
        let disk = NullBlk::memory_backed(name, size_mib);
        let nqn = format!("nqn.2026-11.io.mpio:{name}");
        let target = NvmeLoop { nqn, ports, disk };
        let subsystem = target.subsystem();
        std::fs::create_dir(&subsystem).unwrap();
        write_attribute(&subsystem.join("attr_allow_any_host"), "1");
        std::fs::create_dir(subsystem.join("namespaces/1")).unwrap();
        write_attribute(
            &subsystem.join("namespaces/1/device_path"),
            target.disk.device.to_str().unwrap(),
        );
        write_attribute(&subsystem.join("namespaces/1/enable"), "1");
        for port in ports {
            let directory = port_dir(port);
            std::fs::create_dir(&directory).unwrap();
            write_attribute(&directory.join("addr_trtype"), "loop");
            // nvme-loop picks the port by its traddr.
            write_attribute(&directory.join("addr_traddr"), &port.to_string());
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
        write_attribute(Path::new("/dev/nvme-fabrics"), &options);
        // The namespace shows under its controller a moment before its
        // block device does; with native multipath the path's namespace
        // is hidden and has none.
        let native = read_attribute("/sys/module/nvme_core/parameters/multipath")
            .is_some_and(|setting| setting == "Y");
        wait_until(
            "the new controller's block device appears",
            Duration::from_secs(60),
            || {
                self.namespace_of(port)
                    .is_some_and(|name| native || Path::new("/sys/block").join(name).exists())
            },
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
            || self.controller_of(port).is_none(),
        );
    }

    /// Sets the ANA state of `port`'s group 1 (`optimized`,
    /// `non-optimized`, `inaccessible`, ...).
    pub fn set_ana(&self, port: u32, state: &str) {
        write_attribute(&port_dir(port).join("ana_groups/1/ana_state"), state);
    }

    /// The host's controller (`nvme1`) to `port`, if connected.
    pub fn controller_of(&self, port: u32) -> Option<String> {
        self.controllers().into_iter().find(|controller| {
            read_attribute(&format!("/sys/class/nvme/{controller}/address"))
                .is_some_and(|address| address.contains(&format!("traddr={port}")))
        })
    }

    /// The namespace's node under `port`'s controller: its block device
    /// (`nvme1n1`) with native multipath off, its hidden path device
    /// (`nvme0c1n1`) with it on.
    pub fn namespace_of(&self, port: u32) -> Option<String> {
        let controller = self.controller_of(port)?;
        std::fs::read_dir(format!("/sys/class/nvme/{controller}"))
            .ok()?
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .find(|name| name.starts_with("nvme") && name.contains('n') && name != &controller)
    }

    /// The block device name (`nvme1n1`) of the namespace on the host's
    /// controller to `port`, if connected (native multipath off).
    pub fn device_of(&self, port: u32) -> Option<String> {
        self.namespace_of(port)
            .filter(|name| Path::new("/sys/block").join(name).exists())
    }

    /// The subsystem's head device (`/dev/nvme0n1`) with native
    /// multipath on.
    pub fn head(&self) -> Option<String> {
        let path = self.namespace_of(self.ports[0])?;
        let (subsystem, rest) = path.split_once('c')?;
        let namespace = rest.split_once('n')?.1;
        Some(format!("{subsystem}n{namespace}"))
    }

    /// With native multipath on: the head device's name (`nvme0n1`), once
    /// its node is there, its subsystem's I/O policy set to `iopolicy`
    /// (`numa`, `round-robin`, `queue-depth`).
    pub fn native_head(&self, iopolicy: &str) -> String {
        let head = self.head().expect("the subsystem's head device");
        let node = format!("/dev/{head}");
        wait_until("the head's node appears", Duration::from_secs(300), || {
            Path::new(&node).exists()
        });
        let subsystem = std::fs::read_dir("/sys/class/nvme-subsystem")
            .unwrap()
            .flatten()
            .find(|entry| entry.path().join(&head).exists())
            .expect("the head's subsystem")
            .path();
        write_attribute(&subsystem.join("iopolicy"), iopolicy);
        head
    }

    /// The host's controllers to this subsystem.
    fn controllers(&self) -> Vec<String> {
        std::fs::read_dir("/sys/class/nvme")
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .filter(|controller| {
                        read_attribute(&format!("/sys/class/nvme/{controller}/subsysnqn"))
                            .as_deref()
                            == Some(self.nqn.as_str())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The namespace's WWID as the host reads it.
    pub fn wwid(&self) -> String {
        let device = self.device_of(self.ports[0]).expect("port connected");
        read_attribute(&format!("/sys/block/{device}/wwid")).expect("the namespace has a wwid")
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
        clean_up("sync", &[]);
    }
}

fn port_dir(port: u32) -> PathBuf {
    Path::new(NVMET).join("ports").join(port.to_string())
}
