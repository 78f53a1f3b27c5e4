//! Running the `mpio` binary from a test, reading what it printed, and
//! a guard that ends a child process with the test.

#![allow(dead_code)] // each test binary uses its own part of this module

use mpio_test_support::{kill_within, output_within, HANG_BOUND};
use std::process::{Child, Command, Output};

/// The `mpio` binary under test: `$MPIO_BIN` where set (the kernel test
/// VM runs the test binaries away from the build tree), else the one
/// cargo built beside this test.
pub fn mpio_binary() -> String {
    std::env::var("MPIO_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mpio").to_string())
}

/// Runs `mpio` with `args` to its end.
pub fn mpio(args: &[&str]) -> Output {
    output_within(Command::new(mpio_binary()).args(args), HANG_BOUND)
}

/// What the run printed on stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the run printed on stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A child process killed and reaped when dropped, so a failing test
/// leaves no daemon behind.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        kill_within(&mut self.0, HANG_BOUND);
    }
}

/// Sends `signal` (a name `kill` takes: `TERM`, `HUP`) to `child`.
pub fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {}", child.id());
}
