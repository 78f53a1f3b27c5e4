//! Fuzzes the control socket: any bytes a client sends get exactly one
//! answer line, a response, and the handler sees a request exactly when
//! the first line is one (see `mpio_daemon::control::fuzz::check`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mpio_daemon::control::fuzz::check(data));
