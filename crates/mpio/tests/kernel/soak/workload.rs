//! The soak's workloads: fio verify jobs that run until the test creates
//! their trigger file (so a job never ends on its own while faults come
//! and go), each logging the longest latency of every 100 ms; a writer of
//! files of seeded random data on a mounted file system, each file's
//! content a function of the seed, its slot and its generation, so the
//! test checks it by making it again; and the seeded generator both use.
//!
//! # Contract
//! A [`Job`] that ended by its trigger with status 0 and fio's error field
//! 0 saw no I/O error and no bad block. Its latency log is stamped with
//! the wall clock (`--log_unix_epoch`), read once when the job ends, and
//! refused unless every entry falls between the job's spawn and its exit:
//! a window the test takes on its own clock then finds fio's entries for
//! the same moments, whatever fio did before its first I/O. The [`Files`] writer stops at its
//! first failed write or fsync and reports it; the generations it returns
//! are those of files whose write and fsync succeeded.

use crate::fio::FioResult;
use mpio_test_support::{kill_within, wait_within};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// splitmix64: a small seeded generator, the same sequence on every
/// machine for one seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut value = self.0;
        value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        value ^ (value >> 31)
    }

    /// A number below `bound` (> 0); the modulo bias is irrelevant for
    /// picking among a handful of faults.
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }

    /// Fills `buffer` with the sequence's bytes.
    pub fn fill(&mut self, buffer: &mut [u8]) {
        for chunk in buffer.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// Writes a job's device completes before [`Job::start`] returns: 4 MiB,
/// a few hundred ms of the job even under emulation, so the no-fault
/// window before the first fault holds entries of fio's log.
const WARM_WRITES: u64 = 1024;

/// A fio verify job run until its trigger file appears.
pub struct Job {
    child: Child,
    /// What the job is (`raw`, `ext4`), naming its files.
    pub name: String,
    dir: PathBuf,
    /// The test's clock and the wall clock, read together as fio was
    /// spawned: they turn the test's instants into fio's log stamps.
    spawned: (Instant, SystemTime),
    /// The latency log once the job ended: (wall-clock ms, longest ns of
    /// the 100 ms before).
    latencies: Option<Vec<(u64, u64)>>,
}

/// Arguments common to every soak job: 4 KiB random writes stamped with
/// crc32c, each read back and checked once `verify_backlog` more were
/// written (the first bad block ends the job), for as long as the test
/// wants (`time_based` with a bound only a forgotten trigger reaches),
/// with the longest latency of each 100 ms logged.
fn soak_args(dir: &Path, name: &str, size_mib: u64) -> Vec<String> {
    [
        format!("--name={name}"),
        "--rw=randwrite".into(),
        "--bs=4k".into(),
        "--iodepth=8".into(),
        format!("--size={size_mib}M"),
        "--time_based".into(),
        "--runtime=86400".into(),
        "--verify=crc32c".into(),
        "--verify_backlog=1024".into(),
        "--verify_fatal=1".into(),
        "--verify_state_save=0".into(),
        format!(
            "--trigger-file={}",
            dir.join(format!("{name}.stop")).display()
        ),
        format!("--write_lat_log={}", dir.join(name).display()),
        "--log_avg_msec=100".into(),
        "--log_max_value=1".into(),
        "--log_unix_epoch=1".into(),
        "--output-format=terse".into(),
    ]
    .into()
}

impl Job {
    /// Starts job `name` on `target` (fio's `--filename` word, libaio,
    /// O_DIRECT) over its first `size_mib` MiB, writing its files under
    /// `dir`; returns once `writes()` (a count of writes completed where
    /// the job writes) grew by [`WARM_WRITES`], so the job has run with
    /// no fault before the caller injects one.
    pub fn start(
        dir: &Path,
        name: &str,
        target: &str,
        size_mib: u64,
        writes: impl Fn() -> u64,
    ) -> Job {
        let _ = std::fs::remove_file(dir.join(format!("{name}.stop")));
        let output = std::fs::File::create(dir.join(format!("{name}.out"))).unwrap();
        let before = writes();
        let spawned = (Instant::now(), SystemTime::now());
        let child = Command::new("fio")
            .args(soak_args(dir, name, size_mib))
            .args([
                "--ioengine=libaio",
                "--direct=1",
                &format!("--filename={target}"),
            ])
            .current_dir(dir)
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .stdin(Stdio::null())
            .spawn()
            .expect("fio runs");
        let mut job = Job {
            child,
            name: name.to_string(),
            dir: dir.to_path_buf(),
            spawned,
            latencies: None,
        };
        crate::devices::wait_until(
            &format!("fio job {name} writes"),
            crate::failover::LIMIT,
            || {
                assert!(job.is_running(), "fio job {name} ended at its start");
                writes() >= before + WARM_WRITES
            },
        );
        job
    }

    /// When fio was spawned: a window from here to the first fault holds
    /// the job's run with every path healthy.
    pub fn spawned(&self) -> Instant {
        self.spawned.0
    }

    /// `instant` as fio stamps its log: wall-clock milliseconds.
    fn unix_ms(&self, instant: Instant) -> u64 {
        let (at, wall) = self.spawned;
        let wall = match instant.checked_duration_since(at) {
            Some(after) => wall + after,
            None => wall - at.duration_since(instant),
        };
        wall.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    }

    /// Reads the job's latency log (fio writes it as the job ends) and
    /// checks its stamps lie between the spawn and `exited`.
    fn read_latencies(&self, exited: Instant) -> Vec<(u64, u64)> {
        let path = self.dir.join(format!("{}_lat.1.log", self.name));
        // A job that died at its start wrote no log: no entries, and the
        // caller's checks of fio's end and of each window speak.
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let entries: Vec<(u64, u64)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(',').map(str::trim);
                let time_ms: u64 = fields.next()?.parse().ok()?;
                let latency_ns: u64 = fields.next()?.parse().ok()?;
                Some((time_ms, latency_ns))
            })
            .collect();
        let (from, to) = (self.unix_ms(self.spawned.0), self.unix_ms(exited));
        if let Some(&(stray, _)) = entries.iter().find(|&&(ms, _)| ms < from || ms > to) {
            panic!(
                "{}: an entry stamped {stray} ms is outside the job's run, {from}..{to} ms \
                 (is fio's log stamped with the wall clock?)",
                path.display()
            );
        }
        entries
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Creates the trigger file and waits (at most `limit`) for fio to
    /// end; a job that already ended is judged as it ended.
    pub fn stop(&mut self, limit: Duration) -> FioResult {
        std::fs::write(self.dir.join(format!("{}.stop", self.name)), "").unwrap();
        let status = wait_within(&mut self.child, limit, "fio");
        self.latencies = Some(self.read_latencies(Instant::now()));
        FioResult::read(status, &self.dir.join(format!("{}.out", self.name)))
    }

    /// The longest latency (ns) fio logged for the 100 ms spans that
    /// overlap `[from, to]` (the test's clock); 0 when it logged nothing
    /// there. Asked after [`Job::stop`], which reads the log.
    pub fn longest_latency_ns(&self, from: Instant, to: Instant) -> u64 {
        let (from_ms, to_ms) = (self.unix_ms(from), self.unix_ms(to));
        self.latencies
            .as_ref()
            .expect("the job was stopped")
            .iter()
            // A logged value covers the 100 ms before its stamp.
            .filter(|&&(time_ms, _)| time_ms > from_ms && time_ms <= to_ms + 100)
            .map(|&(_, latency_ns)| latency_ns)
            .max()
            .unwrap_or(0)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // A test that failed leaves no fio behind for the next one.
        kill_within(&mut self.child, Duration::from_secs(60));
    }
}

/// Slots the writer cycles through, and each file's size.
const SLOTS: u64 = 16;
const FILE_BYTES: usize = 256 << 10;

/// File `slot`'s content at `generation` under `seed`.
fn content(seed: u64, slot: u64, generation: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ (slot << 48) ^ generation.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut data = vec![0u8; FILE_BYTES];
    rng.fill(&mut data);
    data
}

/// A thread writing seeded files on a mounted file system, each with an
/// fsync, until stopped.
pub struct Files {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<BTreeMap<u64, u64>, String>>>,
    seed: u64,
}

impl Files {
    pub fn start(dir: &Path, seed: u64) -> Files {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, written, dir) = (Arc::clone(&stop), Arc::clone(&written), dir.to_owned());
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed);
                let mut generations = BTreeMap::new();
                // Relaxed: the flag only ends the loop; the join orders
                // everything after it.
                while !stop.load(Ordering::Relaxed) {
                    let slot = rng.next_u64() % SLOTS;
                    let generation = generations.get(&slot).copied().unwrap_or(0) + 1;
                    let path = dir.join(format!("file{slot}"));
                    std::fs::File::create(&path)
                        .and_then(|mut file| {
                            file.write_all(&content(seed, slot, generation))?;
                            file.sync_all()
                        })
                        .map_err(|error| {
                            format!("{} generation {generation}: {error}", path.display())
                        })?;
                    generations.insert(slot, generation);
                    // Relaxed: a progress count read for reports only.
                    written.fetch_add(1, Ordering::Relaxed);
                }
                Ok(generations)
            })
        };
        Files {
            stop,
            written,
            thread: Some(thread),
            seed,
        }
    }

    /// Files written and synced so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether the writer still runs (it ends only when stopped or at an
    /// error).
    pub fn is_running(&self) -> bool {
        self.thread
            .as_ref()
            .is_some_and(|thread| !thread.is_finished())
    }

    /// Stops the writer; returns each slot's last generation written, or
    /// the first error.
    pub fn stop(&mut self) -> Result<BTreeMap<u64, u64>, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("stopped once")
            .join()
            .expect("the writer does not panic")
    }

    /// Every file under `dir` (the same file system, mounted again) holds
    /// the content of its last generation.
    pub fn check(&self, dir: &Path, generations: &BTreeMap<u64, u64>) -> Result<(), String> {
        for (&slot, &generation) in generations {
            let path = dir.join(format!("file{slot}"));
            let read =
                std::fs::read(&path).map_err(|error| format!("{}: {error}", path.display()))?;
            if read != content(self.seed, slot, generation) {
                return Err(format!(
                    "{} differs from generation {generation}",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        // Not joined: a writer held by a hung device must not hang the
        // failing test's unwinding too.
        self.stop.store(true, Ordering::Relaxed);
    }
}
