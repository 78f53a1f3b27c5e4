//! Fuzzes the NBD server's parsers: any bytes a client may send — the
//! handshake, request headers, write payloads, truncation anywhere — go
//! through a real server connection, which must never panic, never hand
//! the map a request outside the export or with a mismatched buffer, and
//! always end once the client's bytes end. The body lives in
//! `mpio_server::fuzz` so that `crates/server/tests/fuzz_corpus.rs`
//! replays this corpus on stable.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mpio_server::fuzz::session(data);
});
