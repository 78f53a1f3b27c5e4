//! Running the `mpio` binary from a test, and reading what it printed.

use std::process::{Command, Output};

/// Runs `mpio` with `args` to its end.
pub fn mpio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mpio"))
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
