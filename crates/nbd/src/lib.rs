//! The NBD wire format, as `doc/proto.md` of NetworkBlockDevice/nbd
//! defines it: the fixed newstyle handshake, transmission requests, simple
//! replies and structured reply chunks.
//!
//! Pure byte-level code with no sockets, so that mpio's NBD client (the
//! `nbd` transport) and its NBD server both use it. Every decoder takes a
//! byte slice, checks its length and every field it can check, and returns
//! a [`WireError`] naming what was wrong; nothing here panics on bad
//! input. Encoders write big-endian (network order) fields into a caller's
//! buffer or return fixed-size arrays, so the fast path allocates nothing.
//!
//! Only the parts mpio uses are covered: no TLS, no meta contexts or block
//! status, no extended headers.

#![warn(unreachable_pub)]

mod bytes;
pub mod consts;
mod error;
pub mod handshake;
pub mod reply;
pub mod request;

pub use error::WireError;

#[cfg(test)]
mod properties;
