//! `mpio ublk-keeper` (hidden): what bounds the wait of the ublk devices
//! a stopping `mpio serve` kept for the next daemon (`[ublk] on_stop =
//! "keep"`). The daemon starts it as it ends; it watches the devices
//! until the next daemon takes each over, and removes those still waiting
//! after the timeout while no daemon runs (their waiting I/O fails:
//! [`mpio_ublk::keep`]). It writes one line per device to the daemon's
//! standard error (the journal, under systemd) and ends.

use clap::Args;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `mpio ublk-keeper`'s arguments.
#[derive(Args, Debug)]
pub struct KeeperArgs {
    /// The daemon that released the devices (its process id).
    #[arg(long, value_name = "PID")]
    released_by: i32,
    /// How long (ms) the devices' I/O may wait for the next daemon.
    #[arg(long, value_name = "MS")]
    timeout_ms: u64,
    /// The devices' numbers N (`/dev/ublkbN`).
    #[arg(required = true, value_name = "N")]
    devices: Vec<u32>,
}

/// Watches the devices until each is taken over or removed.
pub fn main(args: &KeeperArgs) -> Result<(), String> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let kept = mpio_ublk::keep(&args.devices, args.released_by, timeout)
        .map_err(|error| format!("ublk-keeper: {error}"))?;
    let mut lines = Vec::new();
    for id in &kept.taken_over {
        lines.push(format!("/dev/ublkb{id} taken over by the next daemon"));
    }
    for id in &kept.gone {
        lines.push(format!("/dev/ublkb{id} removed by another"));
    }
    for id in &kept.removed {
        lines.push(format!(
            "/dev/ublkb{id} removed: no daemon took it over within {} ms; its waiting I/O failed",
            args.timeout_ms
        ));
    }
    for (id, error) in &kept.not_removed {
        lines.push(format!("/dev/ublkb{id} not removed: {error}"));
    }
    let mut stderr = std::io::stderr().lock();
    for line in lines {
        // A closed standard error is no reason to fail the watch.
        let _ = writeln!(stderr, "mpio ublk-keeper: {line}");
    }
    if kept.not_removed.is_empty() {
        Ok(())
    } else {
        Err("ublk-keeper: devices left waiting".into())
    }
}

/// Starts the keeper of `devices`, released by this process, whose I/O
/// waits at most `timeout`: this binary again (`/proc/self/exe`, which
/// holds even when an upgrade replaced the file), in a process group of
/// its own, so that a terminal's Ctrl-C meant for the daemon spares it.
/// Returns its process id.
///
/// # Errors
/// It could not be started.
pub fn spawn(devices: &[u32], timeout: Duration) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    let child = Command::new("/proc/self/exe")
        .arg("ublk-keeper")
        .arg("--released-by")
        .arg(std::process::id().to_string())
        .arg("--timeout-ms")
        .arg(timeout.as_millis().to_string())
        .args(devices.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(child.id())
}
