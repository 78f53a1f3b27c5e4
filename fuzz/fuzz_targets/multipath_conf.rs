//! Fuzzes `mpio import-multipath-conf`'s reader: any bytes give either an
//! error naming a line of the input, or a config the daemon's loader
//! reads (see `mpio_daemon::config::import::fuzz::check`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mpio_daemon::config::import::fuzz::check(data));
