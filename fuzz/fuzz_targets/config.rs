//! Fuzzes the daemon's TOML config: any bytes give either a config whose
//! tables print and parse back, or an error naming a line and column
//! inside the text (see `mpio_daemon::config::fuzz::check`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mpio_daemon::config::fuzz::check(data));
