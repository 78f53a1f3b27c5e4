//! Block-device paths kept current: every round (the shortest checker
//! interval of the daemon's maps) each `file:` path on a block device has
//! its ALUA/ANA access state read and given to its map, and each map by
//! WWID is looked up again so that devices that appeared with its WWID
//! become paths and devices that vanished stop being paths (through a
//! reload, [`crate::daemon`]).
//!
//! # Access states
//! SCSI: sysfs `device/access_state`, kept by `scsi_dh_alua`. The handler
//! refuses I/O to a standby or unavailable path inside the kernel, so no
//! command reaches the target through it and the kernel would never learn
//! of the path's return; for such a path the round asks the kernel to
//! rescan the device (`device/rescan`), which makes `scsi_dh_alua` send
//! REPORT TARGET PORT GROUPS again; so does a SCSI disk that reports no
//! capacity (read while its port was unavailable, it keeps 0 after the
//! port returns until rescanned). NVMe with native multipath off: the
//! controller's ANA log page ([`mpio_transport::blockdev::ana`]). A path
//! whose state cannot be read keeps the one it has.
//!
//! # Threads
//! One thread for the daemon ([`Rounds`]), started after the maps and
//! stopped before they are; a round takes each map's lock only to set a
//! state (the control lock of [`mpio_core::map::Map`]) and holds no lock
//! of the daemon while it reads sysfs or asks a controller.

use mpio_core::map::Map;
use mpio_core::path::AccessState;
use mpio_transport::blockdev::{current_access, name_of_node, BlockDevice, Sysfs};
use mpio_transport::{lock, PathHandle};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Reads the access state of every block-device path of `map` (whose
/// path handles are `handles`) and sets it; asks the kernel to look again
/// at SCSI paths that cannot carry I/O (see the module docs).
pub(crate) fn refresh_access(map: &Map, handles: &[PathHandle], sysfs: &Sysfs) {
    for (index, handle) in handles.iter().enumerate() {
        let PathHandle::File(file) = handle else {
            continue;
        };
        // By its node, not its open file: a path that could not be
        // opened yet (a standby or unavailable port) is rescanned too.
        let Some(device) = name_of_node(sysfs, file.path()).and_then(|name| sysfs.device(&name))
        else {
            continue; // not a block device, or gone: the probe finds that out
        };
        let Some(state) = current_access(&device) else {
            continue;
        };
        map.set_access_state(index, state);
        if needs_rescan(&device, state) {
            rescan_scsi(sysfs, &device.name);
        }
    }
}

/// Whether the round asks the kernel to look again at `device`, whose
/// access state is `state`: a SCSI disk whose port cannot carry I/O (no
/// command reaches the target through it, so the kernel would never
/// learn of its return), or one that reports no capacity. A disk read
/// while its port was unavailable keeps the capacity 0 that READ CAPACITY
/// left it, after the port is back and its access state reads optimized:
/// every probe of the path finds the disk ending before the map does,
/// and the path could never return without this rescan.
fn needs_rescan(device: &BlockDevice, state: AccessState) -> bool {
    device.nvme.is_none() && (!state.carries_io() || device.size_bytes == 0)
}

/// Asks the kernel to rescan SCSI disk `name`, which re-reads its ALUA
/// state through the device handler.
fn rescan_scsi(sysfs: &Sysfs, name: &str) {
    let rescan = sysfs.block_path(name).join("device/rescan");
    if let Err(error) = std::fs::write(&rescan, "1") {
        tracing::debug!(device = name, %error, "cannot rescan");
    }
}

/// A thread that runs a round every interval until stopped.
#[derive(Debug)]
pub(crate) struct Rounds {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Rounds {
    /// Runs `round` now and then every `interval`, on a thread named
    /// `name`.
    ///
    /// # Errors
    /// The thread could not be started.
    pub(crate) fn spawn(
        name: &str,
        interval: Duration,
        mut round: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Rounds> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let (stopped, wake) = &*thread_stop;
                loop {
                    round();
                    let guard = lock(stopped);
                    let (guard, _) = wake
                        .wait_timeout_while(guard, interval, |stopped| !*stopped)
                        .unwrap_or_else(|_| panic!("a lock was poisoned"));
                    if *guard {
                        return;
                    }
                }
            })?;
        Ok(Rounds {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it (a round in progress finishes).
    pub(crate) fn stop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *lock(stopped) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Rounds {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpio_transport::blockdev::NvmeNamespace;

    fn disk(size_bytes: u64, nvme: bool) -> BlockDevice {
        BlockDevice {
            name: if nvme { "nvme1n1" } else { "sdb" }.into(),
            dev: "8:16".into(),
            transport: if nvme { "nvme:loop" } else { "scsi:tcm_loop" }.into(),
            wwid: None,
            size_bytes,
            numa_node: None,
            holders: Vec::new(),
            access: None,
            preferred: false,
            nvme: nvme.then(|| NvmeNamespace {
                controller: "nvme1".into(),
                nsid: 1,
            }),
        }
    }

    #[test]
    fn a_scsi_disk_is_rescanned_while_it_cannot_serve_or_reports_no_capacity() {
        use AccessState::*;
        let sized = 128 << 20;
        for (size_bytes, nvme, state, rescanned) in [
            (sized, false, Optimized, false),
            (sized, false, NonOptimized, false),
            (sized, false, Standby, true),
            (sized, false, Unavailable, true),
            // Optimized again, but still at the capacity the unavailable
            // port left it: only a rescan brings the path back.
            (0, false, Optimized, true),
            (0, false, NonOptimized, true),
            // NVMe has no rescan; its ANA state comes from the log page.
            (0, true, Optimized, false),
            (sized, true, Inaccessible, false),
        ] {
            assert_eq!(
                needs_rescan(&disk(size_bytes, nvme), state),
                rescanned,
                "{size_bytes} bytes, nvme {nvme}, {state:?}"
            );
        }
    }
}
