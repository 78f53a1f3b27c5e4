//! Running the `mpio` binary from a test, and reading what it printed.

use std::process::{Command, Output};

/// The `mpio` binary under test: `$MPIO_BIN` where set (the kernel test
/// VM runs the test binaries away from the build tree), else the one
/// cargo built beside this test.
pub fn mpio_binary() -> String {
    std::env::var("MPIO_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mpio").to_string())
}

/// Runs `mpio` with `args` to its end.
pub fn mpio(args: &[&str]) -> Output {
    Command::new(mpio_binary())
        .args(args)
        .output()
        .expect("mpio runs")
}

/// What the run printed on stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the run printed on stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
