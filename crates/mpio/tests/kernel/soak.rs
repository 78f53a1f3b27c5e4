//! The soak: mpio's block devices under a seeded stream of faults, in
//! the spirit of multipath-tools' mptest, over real kernel paths (the
//! rig: a LIO/ALUA LUN and an NVMe/ANA LUN, two paths each, one daemon
//! serving a map by each WWID as `/dev/ublkb40` and `/dev/ublkb41`).
//!
//! While fio writes and verifies crc32c-stamped blocks on the raw SCSI
//! map's device, and on the NVMe map's device ext4 carries a second fio
//! verify job (on a file) and a writer of seeded files, the chaos loop
//! (`chaos.rs`) runs every fault kind once in a seeded order, then seeded
//! picks until `SOAK_SECS` (default [`DEFAULT_SECS`]) have passed; the seed
//! is `SOAK_SEED` or derived from the clock, printed either way.
//!
//! # The bar (asserted)
//! - fio never stops during the soak, and ends (by its trigger file) with
//!   status 0, no I/O error and no bad block, on both maps;
//! - every seeded file written reads back as its last generation after
//!   the file system is unmounted, checked with `e2fsck -fn` (clean) and
//!   mounted again;
//! - each map's device reads equal to its LUN read through a path device,
//!   both read from the disks (page caches dropped);
//! - every fault the loop ran was seen by the daemon (each step waits for
//!   it, bounded only by what a hang reaches) and healed;
//! - the daemon ends cleanly on SIGTERM, removing its devices (the
//!   loop's SIGTERM restarts keep them).
//!
//! The canary (`soak_canary_...`) runs the same loop while it writes
//! garbage over blocks of the raw map's LUN through a path device,
//! behind mpio's back: fio's verify must catch it, or the harness above
//! could not fail.
//!
//! Each step's window on the raw map's job holds a logged latency: the
//! job writes throughout, so an empty window means the log and the
//! test's clock disagree, and the table below would mean nothing.
//!
//! # Measured, not asserted
//! The longest fio latency (of any 100 ms, from fio's log) during the
//! steps of each fault kind, and for the NVMe faults the same job under
//! the kernel's native NVMe multipath (`native.rs`), printed as
//! `STALL|kind|mpio ms|native ms` (`--nocapture` shows them). The first
//! row, `no fault`, is each side's ext4 job from its start (it writes
//! 4 MiB before any fault) to the first fault: what the same job sees
//! with every path healthy.

mod chaos;
mod native;
mod rig;
mod workload;

use crate::devices::{run, write_attribute, Mount};
use crate::failover::LIMIT;
use crate::fio::FioResult;
use chaos::{Chaos, Fault};
use rig::{writes, Rig, Side};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};
use workload::{Files, Job, Rng};

/// The chaos loop's length when `SOAK_SECS` is not set: short enough for
/// every kernel test run; every kind runs once whatever it is.
const DEFAULT_SECS: u64 = 45;

/// The raw fio job's span of the SCSI map's device.
const RAW_FIO_MIB: u64 = 64;

/// The size of the fio job's file on the ext4 file systems.
pub const FS_FIO_MIB: u64 = 32;

/// Makes the fio job's file under `dir` at its full size, so fio lays
/// nothing out and its first write starts its clock; returns its path.
fn prepare_fio_file(dir: &Path) -> String {
    let path = dir.join("fio.data");
    let chunk = vec![0x5au8; 1 << 20];
    let mut file = std::fs::File::create(&path).unwrap();
    for _ in 0..FS_FIO_MIB {
        std::io::Write::write_all(&mut file, &chunk).unwrap();
    }
    file.sync_all().unwrap();
    path.display().to_string()
}

/// `SOAK_SEED` if set, else one from the clock.
fn seed() -> u64 {
    match std::env::var("SOAK_SEED") {
        Ok(text) => text.trim().parse().expect("SOAK_SEED is a number"),
        Err(_) => {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap();
            Rng::new(now.as_nanos() as u64).next_u64() >> 1
        }
    }
}

fn soak_secs() -> u64 {
    std::env::var("SOAK_SECS")
        .map(|text| text.trim().parse().expect("SOAK_SECS is a number"))
        .unwrap_or(DEFAULT_SECS)
}

/// Writes garbage over 64 random 4 KiB blocks of the raw fio job's span
/// through SCSI disk `name`, bypassing mpio.
fn corrupt_behind_mpio(name: &str, rng: &mut Rng) {
    let device = std::fs::OpenOptions::new()
        .write(true)
        .open(Path::new("/dev").join(name))
        .unwrap();
    let mut garbage = vec![0u8; 4096];
    for _ in 0..64 {
        rng.fill(&mut garbage);
        let block = rng.next_u64() % (RAW_FIO_MIB * 256);
        device.write_all_at(&garbage, block * 4096).unwrap();
    }
    device.sync_all().unwrap();
}

/// The first offset where block devices `left` and `right` differ over
/// `left`'s size, read in 1 MiB chunks.
fn first_difference(left: &str, right: &str) -> Option<u64> {
    let (mut left_file, mut right_file) = (
        std::fs::File::open(left).unwrap(),
        std::fs::File::open(right).unwrap(),
    );
    let sectors: u64 = crate::devices::read_attribute(&format!(
        "/sys/block/{}/size",
        left.trim_start_matches("/dev/")
    ))
    .and_then(|size| size.parse().ok())
    .expect("the device's size");
    let (mut left_chunk, mut right_chunk) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut offset = 0;
    while offset < sectors * 512 {
        left_file.read_exact(&mut left_chunk).unwrap();
        right_file.read_exact(&mut right_chunk).unwrap();
        if left_chunk != right_chunk {
            let within = (0..left_chunk.len())
                .find(|&index| left_chunk[index] != right_chunk[index])
                .unwrap();
            return Some(offset + within as u64);
        }
        offset += left_chunk.len() as u64;
    }
    None
}

/// What a soak run leaves for its test to judge.
struct Outcome {
    raw: FioResult,
    steps: usize,
}

/// Sets up the rig and the workloads, runs the chaos loop, quiesces and
/// checks the bar; with `canary`, corrupts the raw map's LUN behind
/// mpio's back before every step and stops once fio has ended (the raw
/// job's end is then the caller's to judge).
fn soak(canary: bool) -> Outcome {
    let (seed, secs) = (seed(), soak_secs());
    eprintln!("SOAK|seed {seed}|{secs} s|canary {canary}");
    let mut rig = Rig::new();
    let fs_device = Side::Nvme.device();
    run("mkfs.ext4", &["-q", "-F", fs_device], LIMIT);
    let mount = Mount::new(Path::new(fs_device), "ext4", rig.dir.join("mnt"));
    let fio_file = prepare_fio_file(&mount.dir);
    let files_dir = mount.dir.join("files");
    std::fs::create_dir(&files_dir).unwrap();
    let raw_device = Side::Scsi.device();
    let mut raw = Job::start(&rig.dir, "raw", raw_device, RAW_FIO_MIB, || {
        writes(raw_device)
    });
    let mut on_fs = Job::start(&rig.dir, "ext4", &fio_file, FS_FIO_MIB, || {
        writes(fs_device)
    });
    let mut files = Files::start(&files_dir, seed);

    let written: &[Side] = if canary { &[Side::Nvme] } else { &Side::BOTH };
    let mut chaos = Chaos::new(seed, written);
    let mut unrun = Fault::ALL.to_vec();
    let started = Instant::now();
    while !unrun.is_empty() || started.elapsed() < Duration::from_secs(secs) {
        if canary {
            corrupt_behind_mpio(&rig.scsi[0], &mut chaos.rng);
        }
        let fault = chaos.pick(&mut unrun);
        chaos.step(&mut rig, fault);
        let step = chaos.steps.last().unwrap();
        eprintln!(
            "SOAK|step {}|{}|{}|{} ms",
            chaos.steps.len(),
            fault.label(),
            step.seen,
            (step.end - step.start).as_millis()
        );
        if canary && !raw.is_running() {
            break;
        }
        assert!(
            canary || raw.is_running(),
            "fio on {raw_device} ended during the soak (seed {seed}, step {}): {:?}",
            chaos.steps.len(),
            raw.stop(LIMIT).complaints()
        );
        assert!(
            on_fs.is_running(),
            "fio on ext4 ended during the soak (seed {seed}, step {}): {:?}",
            chaos.steps.len(),
            on_fs.stop(LIMIT).complaints()
        );
        assert!(
            files.is_running(),
            "the file writer stopped (seed {seed}, step {}): {:?}",
            chaos.steps.len(),
            files.stop()
        );
    }

    let raw_ended = raw.stop(LIMIT);
    let fs_ended = on_fs.stop(LIMIT);
    let generations = files.stop();
    eprintln!(
        "SOAK|{} steps in {} s|{} files written",
        chaos.steps.len(),
        started.elapsed().as_secs(),
        files.written()
    );
    if canary {
        mount.unmount();
        rig.stop();
        return Outcome {
            raw: raw_ended,
            steps: chaos.steps.len(),
        };
    }
    assert!(
        raw_ended.is_clean(),
        "fio on {raw_device} (seed {seed}, {}): {:?}\n{}",
        raw_ended.status,
        raw_ended.complaints(),
        raw_ended.log
    );
    assert!(
        fs_ended.is_clean(),
        "fio on ext4 (seed {seed}, {}): {:?}\n{}",
        fs_ended.status,
        fs_ended.complaints(),
        fs_ended.log
    );
    let generations = generations.unwrap_or_else(|error| panic!("seed {seed}: {error}"));
    mount.unmount();
    run("e2fsck", &["-fn", fs_device], LIMIT);
    let mount = Mount::new(Path::new(fs_device), "ext4", rig.dir.join("mnt"));
    if let Err(error) = files.check(&files_dir, &generations) {
        panic!("seed {seed}: {error}");
    }
    mount.unmount();
    run("sync", &[], LIMIT);
    // Both sides read from the disks, not from a page cache.
    write_attribute(Path::new("/proc/sys/vm/drop_caches"), "3");
    for side in Side::BOTH {
        let path = format!("/dev/{}", rig.paths(side)[0]);
        assert_eq!(
            first_difference(side.device(), &path),
            None,
            "seed {seed}: {} and its LUN through {path} differ",
            side.device()
        );
    }

    let mut runs: BTreeMap<Fault, usize> = BTreeMap::new();
    for step in &chaos.steps {
        *runs.entry(step.fault).or_default() += 1;
    }
    for fault in Fault::ALL {
        assert!(runs.contains_key(&fault), "{} never ran", fault.label());
    }
    for (fault, count) in &runs {
        eprintln!("SOAK|ran and seen|{}|{count}", fault.label());
    }
    let mut stalls: BTreeMap<Fault, u64> = BTreeMap::new();
    for (index, step) in chaos.steps.iter().enumerate() {
        if step.fault.sides().contains(&Side::Scsi) {
            assert!(
                raw.longest_latency_ns(step.start, step.end) > 0,
                "seed {seed}: step {} ({}) has no latency in the raw job's log",
                index + 1,
                step.fault.label()
            );
        }
        let jobs: Vec<&Job> = step
            .fault
            .sides()
            .iter()
            .map(|side| match side {
                Side::Scsi => &raw,
                Side::Nvme => &on_fs,
            })
            .collect();
        let longest = jobs
            .iter()
            .map(|job| job.longest_latency_ns(step.start, step.end))
            .max()
            .unwrap_or(0);
        let entry = stalls.entry(step.fault).or_default();
        *entry = (*entry).max(longest);
    }
    let first_fault = chaos.steps.first().expect("the soak ran a step").start;
    let baseline = on_fs.longest_latency_ns(on_fs.spawned(), first_fault);
    rig.stop();
    drop(rig);

    let native_faults: Vec<Fault> = runs.keys().copied().filter(|f| f.has_native()).collect();
    let native = native::stalls(&native_faults, seed);
    let ms = |ns: u64| format!("{:.1}", ns as f64 / 1e6);
    eprintln!("STALL|kind|mpio ms|native ms");
    let native_baseline = native.baseline.map_or("-".to_string(), ms);
    eprintln!("STALL|no fault|{}|{native_baseline}", ms(baseline));
    for (fault, longest) in &stalls {
        let beside = native
            .faults
            .get(fault)
            .map_or("-".to_string(), |&ns| ms(ns));
        eprintln!("STALL|{}|{}|{beside}", fault.label(), ms(*longest));
    }
    Outcome {
        raw: raw_ended,
        steps: chaos.steps.len(),
    }
}

#[test]
#[ignore = "kernel test: needs root, LIO (tcm_loop), nvmet, nvme-loop, ublk_drv and ext4; run scripts/kernel-test.sh"]
fn soak_ublk_devices_over_scsi_and_nvme_paths_under_seeded_faults() {
    let outcome = soak(false);
    assert!(outcome.raw.is_clean());
}

#[test]
#[ignore = "kernel test: needs root, LIO (tcm_loop), nvmet, nvme-loop, ublk_drv and ext4; run scripts/kernel-test.sh"]
fn soak_canary_blocks_changed_behind_mpio_s_back_are_caught() {
    let outcome = soak(true);
    assert!(
        !outcome.raw.is_clean(),
        "the canary: {} steps of blocks changed behind mpio's back went unseen",
        outcome.steps
    );
    let complaints = outcome.raw.complaints();
    assert!(
        complaints.iter().any(|line| line.contains("verify")),
        "fio failed, but not on a bad block: {}",
        outcome.raw.log
    );
    for line in complaints {
        eprintln!("CANARY|caught|{line}");
    }
}
