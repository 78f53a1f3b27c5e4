//! The same NVMe faults under the kernel's native NVMe multipath, for
//! the soak's stall table: an nvmet subsystem on two nvme-loop ports with
//! `nvme_core multipath=Y` (one head device, `round-robin` iopolicy as
//! mpio's multibus round-robin map), ext4 on the head and the same fio
//! job as on mpio's NVMe map, each fault injected and undone as the soak
//! does, each wait for the kernel's own view (the path's `ana_state`,
//! its controller). A measurement: nothing here is asserted about speed,
//! and errors native multipath shows are printed, not asserted.

use super::chaos::Fault;
use super::rig::{writes, LUN_MIB};
use super::workload::{Job, Rng};
use crate::daemon::test_dir;
use crate::devices::{read_attribute, run, wait_until, Mount};
use crate::failover::LIMIT;
use crate::nvme::NvmeLoop;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// What the job saw under native multipath.
pub struct NativeStalls {
    /// The longest latency (ns) from its start to the first fault.
    pub baseline: Option<u64>,
    /// The longest latency (ns) around each fault.
    pub faults: BTreeMap<Fault, u64>,
}

/// The longest latency around each of `faults` (those with a native
/// counterpart) under native multipath, each run once, and before them.
pub fn stalls(faults: &[Fault], seed: u64) -> NativeStalls {
    let mut longest = BTreeMap::new();
    if faults.is_empty() {
        return NativeStalls {
            baseline: None,
            faults: longest,
        };
    }
    let target = NvmeLoop::with_native_multipath("mpio-kt-soak-native", LUN_MIB, [63, 64], true);
    let head = target.native_head("round-robin");
    let node = format!("/dev/{head}");
    let dir = test_dir("soak-native");
    run("mkfs.ext4", &["-q", "-F", &node], LIMIT);
    let mount = Mount::new(Path::new(&node), "ext4", dir.join("mnt"));
    let file = super::prepare_fio_file(&mount.dir);
    let mut job = Job::start(&dir, "native", &file, super::FS_FIO_MIB, || writes(&head));
    let mut rng = Rng::new(seed);
    let ana_state = |port: u32| {
        let path = target.namespace_of(port)?;
        read_attribute(&format!("/sys/block/{path}/ana_state"))
    };
    let mut windows = Vec::new();
    for &fault in faults {
        let port = target.ports[rng.below(2)];
        let start = Instant::now();
        match fault {
            Fault::AnaNonOptimized | Fault::AnaInaccessible => {
                let state = if fault == Fault::AnaNonOptimized {
                    "non-optimized"
                } else {
                    "inaccessible"
                };
                target.set_ana(port, state);
                wait_until(&format!("native path shows {state}"), LIMIT, || {
                    ana_state(port).as_deref() == Some(state)
                });
                target.set_ana(port, "optimized");
            }
            Fault::NvmePortRemoved => {
                target.remove_port(port);
                target.add_port(port);
            }
            _ => continue,
        }
        wait_until("native path optimized again", LIMIT, || {
            ana_state(port).as_deref() == Some("optimized")
        });
        windows.push((fault, start, Instant::now()));
    }
    // fio writes its latency log as the job ends.
    let ended = job.stop(LIMIT);
    let first_fault = windows
        .first()
        .map_or_else(Instant::now, |&(_, start, _)| start);
    let baseline = job.longest_latency_ns(job.spawned(), first_fault);
    for (fault, start, end) in windows {
        longest.insert(fault, job.longest_latency_ns(start, end));
    }
    if !ended.is_clean() {
        eprintln!(
            "NATIVE|fio on native multipath ended with errors|{:?}",
            ended.complaints()
        );
    }
    mount.unmount();
    let _ = std::fs::remove_dir_all(&dir);
    NativeStalls {
        baseline: Some(baseline),
        faults: longest,
    }
}
