//! How long I/O stalls when the controller of the path that carries it
//! goes away (its port unlinked on the target): mpio's map by WWID over
//! two nvme-loop controllers (native multipath off; `failover` grouping,
//! so one path carries the I/O) beside the kernel's native NVMe
//! multipath (`numa` iopolicy: one path carries it) on the same event.
//! Each runs fio 4k random reads at queue depth 1 with a latency log of
//! every I/O; the port goes at about a third of the run. It prints the
//! longest total latency (submission to completion: fio's `lat`, since
//! libaio's `clat` leaves out the time inside `io_submit`) of the I/Os
//! that ended around the removal (the stall), the longest of the others
//! (the noise) and the median; it asserts
//! only that fio saw no error (tests assert behaviour, not speed).
//! The numbers are in docs/BENCHMARKS.md.

use crate::daemon::{test_dir, Daemon};
use crate::devices::{block_stat, wait_until};
use crate::failover::{path_ios, LIMIT};
use crate::nvme::NvmeLoop;
use mpio_test_support::wait_within;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds fio runs.
const RUNTIME_S: u64 = 24;

/// Starts fio's random reads on `target_args`, logging every I/O's
/// latency under `dir`.
fn start_fio(dir: &Path, target_args: &[String]) -> Child {
    let log = std::fs::File::create(dir.join("fio-stall.out")).unwrap();
    Command::new("fio")
        .args(target_args)
        .args([
            "--name=stall",
            "--rw=randread",
            "--bs=4k",
            "--iodepth=1",
            "--size=64M",
            "--time_based",
            &format!("--runtime={RUNTIME_S}"),
            "--log_avg_msec=0",
            &format!("--write_lat_log={}", dir.join("stall").display()),
        ])
        .current_dir(dir)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("fio runs")
}

/// From fio's total latency log (µs, ms into the run): the longest
/// latency of an I/O that ended from 0.5 s before to 5 s after
/// `removed_ms` (the stall), the longest of the others (the noise), and
/// the median.
fn latencies(dir: &Path, removed_ms: u64) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(dir.join("stall_lat.1.log")).expect("fio's latency log");
    let mut samples: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(',').map(str::trim);
            let time_ms: u64 = fields.next()?.parse().ok()?;
            let latency_ns: u64 = fields.next()?.parse().ok()?;
            Some((latency_ns / 1000, time_ms))
        })
        .collect();
    assert!(samples.len() > 100, "fio logged {} I/Os", samples.len());
    let near =
        |time_ms: u64| time_ms + 500 >= removed_ms && time_ms <= removed_ms.saturating_add(5000);
    let longest = |want_near: bool| {
        samples
            .iter()
            .filter(|(_, time_ms)| near(*time_ms) == want_near)
            .map(|(latency_us, _)| *latency_us)
            .max()
            .unwrap_or(0)
    };
    let (stall_us, noise_us) = (longest(true), longest(false));
    samples.sort_unstable();
    (stall_us, noise_us, samples[samples.len() / 2].0)
}

/// Runs fio on `target_args`; once `reads` (a count of I/O done) moves,
/// waits a third of the run and calls `take_away`; reports the stall
/// as `label`.
fn measure(
    label: &str,
    dir: &Path,
    target_args: &[String],
    reads: impl Fn() -> u64,
    take_away: impl FnOnce(),
) {
    let mut fio = start_fio(dir, target_args);
    let before = reads();
    wait_until("fio's I/O flows", LIMIT, || reads() > before);
    // fio's log counts from its job's start, about when its I/O began.
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(RUNTIME_S / 3));
    let removed_ms = started.elapsed().as_millis() as u64;
    take_away();
    let status = wait_within(&mut fio, Duration::from_secs(RUNTIME_S * 20), "fio");
    let output = std::fs::read_to_string(dir.join("fio-stall.out")).unwrap_or_default();
    assert!(status.success() && !output.contains("error="), "{output}");
    let (stall_us, noise_us, median_us) = latencies(dir, removed_ms);
    eprintln!(
        "STALL|{label}|longest near the removal {stall_us} us|longest elsewhere {noise_us} us|median {median_us} us|removed at {removed_ms} ms"
    );
}

#[test]
#[ignore = "kernel test (measurement): needs root, nvmet and nvme-loop; run scripts/kernel-test.sh"]
fn io_stall_when_the_active_nvme_path_goes_mpio_beside_native_multipath() {
    {
        let target = NvmeLoop::new("mpio-kt-stall", 128, [41, 42]);
        let dir = test_dir("kernel-stall");
        let config = dir.join("mpio.toml");
        let text = format!(
            "[[map]]\nname = \"mpatha\"\nwwid = \"{}\"\npath_grouping_policy = \"failover\"\n\
             checker_interval_ms = 500\n[[map.export]]\nsocket = \"{}\"\n",
            target.wwid(),
            dir.join("nbd.sock").display()
        );
        std::fs::write(&config, text).unwrap();
        let daemon = Daemon::start(dir.clone(), &["--config", config.to_str().unwrap()]);
        let args = vec![
            "--ioengine=nbd".to_string(),
            format!("--uri={}", daemon.uris[0]),
        ];
        let ports = target.ports;
        let devices: Vec<String> = ports
            .iter()
            .filter_map(|&port| target.device_of(port))
            .collect();
        let reads = || devices.iter().map(|device| path_ios(&daemon, device)).sum();
        measure("mpio (map by wwid, failover)", &dir, &args, reads, || {
            let active = ports
                .into_iter()
                .find(|&port| {
                    target
                        .device_of(port)
                        .is_some_and(|device| path_ios(&daemon, &device) > 0)
                })
                .expect("a path carries the I/O");
            target.remove_port(active);
        });
    }
    let target = NvmeLoop::with_native_multipath("mpio-kt-stall-native", 128, [43, 44], true);
    let head = target.native_head("numa");
    let node = format!("/dev/{head}");
    let dir = test_dir("kernel-stall-native");
    let args = vec![
        "--ioengine=libaio".to_string(),
        "--direct=1".to_string(),
        format!("--filename={node}"),
    ];
    let ports = target.ports;
    let reads = || block_stat(&head, 0).unwrap_or(0);
    measure("native NVMe multipath (numa)", &dir, &args, reads, || {
        // The path that carries the I/O: its hidden device's read count.
        let reads = |port: u32| {
            let controller = target.controller_of(port)?;
            let path = std::fs::read_dir(format!("/sys/class/nvme/{controller}"))
                .ok()?
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .find(|name| name.contains('c') && name.starts_with("nvme"))?;
            block_stat(&path, 0)
        };
        let active = ports
            .into_iter()
            .max_by_key(|&port| reads(port).unwrap_or(0))
            .unwrap();
        target.remove_port(active);
    });
    let _ = std::fs::remove_dir_all(&dir);
}
