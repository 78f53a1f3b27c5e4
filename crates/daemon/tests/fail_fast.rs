//! The failure policy: once installed, a panic on any thread aborts the
//! process with the panic logged (a daemon with a dead event loop or
//! checker once ran on, half alive). The panic happens in a child: this
//! test binary run again with [`CHILD`] set.

use mpio_test_support::{output_within, HANG_BOUND};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

/// Set in the child's environment: be the process that panics.
const CHILD: &str = "MPIO_FAIL_FAST_CHILD";

#[test]
fn a_panic_on_any_thread_aborts_the_process() {
    if std::env::var_os(CHILD).is_some() {
        mpio_daemon::fail_fast::install();
        let worker = std::thread::Builder::new()
            .name("mpio-serve-0".into())
            .spawn(|| panic!("an event loop's bug"))
            .unwrap();
        // Without the policy the panic ends only its thread and the
        // process runs on: it exits 0 here.
        let _ = worker.join();
        return;
    }
    let output = output_within(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_panic_on_any_thread_aborts_the_process",
                "--nocapture",
            ])
            .env(CHILD, "1"),
        HANG_BOUND,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.signal(),
        Some(6),
        "the process was not aborted ({:?}): {stderr}",
        output.status
    );
    assert!(stderr.contains("an event loop's bug"), "{stderr}");
    assert!(stderr.contains("mpio-serve-0"), "{stderr}");
}

#[test]
fn a_poisoned_lock_is_not_taken() {
    let mutex = std::sync::Arc::new(std::sync::Mutex::new(0));
    let holder = std::sync::Arc::clone(&mutex);
    let _ = std::thread::spawn(move || {
        let _guard = mpio_transport::lock(&holder);
        panic!("poisoning");
    })
    .join();
    let taken = std::panic::catch_unwind(|| *mpio_transport::lock(&mutex));
    assert!(taken.is_err(), "a poisoned lock was taken");
}
