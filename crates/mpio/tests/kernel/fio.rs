//! fio verify jobs for the kernel tests: crc32c-stamped writes read back
//! and checked, run in the background so a test can fail paths under
//! them, and judged from fio's exit status and terse output.
//!
//! A test that acts under I/O runs a job that ends when the test says so
//! ([`FioVerify::start_until_stopped`], [`FioVerify::stop`]), never one
//! whose amount of work must outlast the test's steps: a faster device
//! would finish it first, a slower machine would only take longer.

use mpio_test_support::wait_within;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// Blocks written between the checks of a job that runs until stopped.
pub const BACKLOG: u64 = 256;

/// The runtime of a job that runs until stopped: a bound that only a
/// test hung past the guest's own limit reaches.
pub const RUNTIME_BOUND_S: u64 = 1800;

/// A running fio verify job.
pub struct FioVerify {
    child: Child,
    log: PathBuf,
    /// The trigger file that ends a job started until stopped.
    stop_file: Option<PathBuf>,
}

/// How a job ended.
pub struct FioResult {
    /// How fio exited: a code, or the signal that ended it.
    pub status: ExitStatus,
    /// The error count of each job (terse field 5), 0 when clean.
    pub job_errors: Vec<String>,
    /// Everything fio printed.
    pub log: String,
}

/// What a job does with the blocks it stamps.
#[derive(Clone, Copy)]
pub enum Phase {
    /// Writes them, then reads them all back and verifies them.
    WriteAndVerify,
    /// Only writes them.
    Write,
    /// Only reads back and verifies what a `Write` job of the same size
    /// wrote (fio regenerates the same offsets and stamps).
    Verify,
}

/// Where a job does its I/O.
pub enum Target<'a> {
    /// fio's NBD engine at this URI.
    Nbd(&'a str),
    /// This block device, with libaio and O_DIRECT.
    Block(&'a str),
}

impl FioVerify {
    /// Writes `size_mib` MiB in random 4 KiB blocks to `target`, each
    /// block stamped with a crc32c, and (per `phase`) reads them back and
    /// verifies them; the first bad block ends the job. fio's output goes
    /// to `log`.
    pub fn start(target: Target<'_>, size_mib: u64, phase: Phase, log: PathBuf) -> FioVerify {
        FioVerify::start_with(target, size_mib, phase, log, &[])
    }

    /// [`FioVerify::start`] with more fio options (`--fsync=16`, ...).
    pub fn start_with(
        target: Target<'_>,
        size_mib: u64,
        phase: Phase,
        log: PathBuf,
        options: &[&str],
    ) -> FioVerify {
        FioVerify::spawn(target, size_mib, phase, log, options, None)
    }

    /// Writes and verifies over the first `size_mib` MiB of `target`
    /// (with `options`) again and again until [`FioVerify::stop`]: each
    /// block is read back and checked after at most [`BACKLOG`] more
    /// writes (`--verify_backlog`), so the check runs all along, and the
    /// job ends on its own only on an error, a bad block or its bound
    /// ([`RUNTIME_BOUND_S`], which only a hang reaches).
    pub fn start_until_stopped(
        target: Target<'_>,
        size_mib: u64,
        log: PathBuf,
        options: &[&str],
    ) -> FioVerify {
        let stop_file = log.with_extension("stop");
        let _ = std::fs::remove_file(&stop_file);
        let mut all = vec![
            "--time_based=1".to_string(),
            format!("--runtime={RUNTIME_BOUND_S}"),
            format!("--verify_backlog={BACKLOG}"),
            format!("--trigger-file={}", stop_file.display()),
        ];
        all.extend(options.iter().map(|option| option.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let phase = Phase::WriteAndVerify;
        FioVerify::spawn(target, size_mib, phase, log, &all, Some(stop_file))
    }

    fn spawn(
        target: Target<'_>,
        size_mib: u64,
        phase: Phase,
        log: PathBuf,
        options: &[&str],
        stop_file: Option<PathBuf>,
    ) -> FioVerify {
        let output = std::fs::File::create(&log).unwrap();
        let mut args = match target {
            Target::Nbd(uri) => vec!["--ioengine=nbd".to_string(), format!("--uri={uri}")],
            Target::Block(device) => vec![
                "--ioengine=libaio".to_string(),
                "--direct=1".to_string(),
                format!("--filename={device}"),
            ],
        };
        let phase = match phase {
            Phase::WriteAndVerify => "--do_verify=1",
            Phase::Write => "--do_verify=0",
            Phase::Verify => "--verify_only",
        };
        args.extend(
            [
                "--name=verify",
                "--rw=randwrite",
                "--bs=4k",
                "--iodepth=16",
                &format!("--size={size_mib}M"),
                "--verify=crc32c",
                phase,
                "--verify_fatal=1",
                "--verify_state_save=0",
                "--output-format=terse",
            ]
            .map(String::from),
        );
        args.extend(options.iter().map(|option| option.to_string()));
        let child = Command::new("fio")
            .args(&args)
            .current_dir(log.parent().unwrap())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .stdin(Stdio::null())
            .spawn()
            .expect("fio runs (Debian package fio)");
        FioVerify {
            child,
            log,
            stop_file,
        }
    }

    /// Whether the job is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Ends a job started by [`FioVerify::start_until_stopped`]: fio
    /// sees its trigger file (it looks every few hundred milliseconds),
    /// stops its I/O and exits 0 unless it saw an error or a bad block.
    /// Waits at most `limit`. Blocks written in the last
    /// [`BACKLOG`] writes may end unverified: call this once the steps
    /// under test are followed by more I/O than that.
    pub fn stop(self, limit: Duration) -> FioResult {
        let stop_file = self
            .stop_file
            .as_ref()
            .expect("a job started until stopped");
        std::fs::write(stop_file, b"").unwrap();
        self.finish(limit)
    }

    /// Waits for the end of the job, at most `limit`.
    pub fn finish(mut self, limit: Duration) -> FioResult {
        let status = wait_within(&mut self.child, limit, "fio");
        FioResult::read(status, &self.log)
    }
}

impl FioResult {
    /// Judges a job that exited with `status` from the output it left in
    /// `log` (terse format).
    pub fn read(status: ExitStatus, log: &Path) -> FioResult {
        let log = std::fs::read_to_string(log).unwrap_or_default();
        // Terse version 3 lines: "3;fio-3.33;<job>;0;<error>;...".
        let job_errors = log
            .lines()
            .filter(|line| line.starts_with("3;"))
            .map(|line| line.split(';').nth(4).unwrap_or("?").to_string())
            .collect();
        FioResult {
            status,
            job_errors,
            log,
        }
    }

    /// fio saw no I/O error and no bad block.
    pub fn is_clean(&self) -> bool {
        self.status.success()
            && !self.job_errors.is_empty()
            && self.job_errors.iter().all(|e| e == "0")
    }

    /// fio's lines that name a bad block or an I/O error.
    pub fn complaints(&self) -> Vec<&str> {
        self.log
            .lines()
            .filter(|line| {
                line.contains("verify") || line.contains("err=") || line.contains("error=")
            })
            .collect()
    }

    /// Panics unless the job is clean, with how fio exited and what it
    /// printed.
    pub fn assert_clean(&self) {
        assert!(
            self.is_clean(),
            "fio verify failed ({}):\n{}",
            self.status,
            self.log
        );
    }
}
