//! What the server offers: one export (the map) under one name, its
//! transmission flags and block size limits, and how the map's errors
//! become NBD error values.
//!
//! # Size
//! The export's size is not here: it is the map's, and `mpio resize`
//! grows it while the export serves. A connection is told the size at
//! its handshake and keeps it (the protocol has no way to tell a client
//! of a new one), so requests are judged against the size its client
//! was told; connections made after a resize are told the new one.
//!
//! # Flags
//! Every export advertises `SEND_FLUSH`, `SEND_FUA`, `SEND_TRIM`,
//! `SEND_WRITE_ZEROES` and `CAN_MULTI_CONN` (plus `READ_ONLY` when asked).
//! Multi-conn is honest because a flush goes through the map like any
//! I/O and reaches the storage's cache, which every path and every
//! connection share: see `crate::request` for the flush contract.

use mpio_core::io::IoError;
use mpio_nbd::consts::*;

/// Smallest block the server accepts: any byte range works (the map has
/// no alignment rule of its own; a path that needs one answers EINVAL).
pub(crate) const MIN_BLOCK_SIZE: u32 = 1;
/// The block size clients should use: the map's buffers are 4 KiB aligned.
pub(crate) const PREFERRED_BLOCK_SIZE: u32 = 4096;
/// Largest payload of one READ or WRITE (32 MiB, the protocol's default
/// limit). A larger WRITE closes the connection: its payload is not
/// read. A larger READ is refused with `EINVAL`.
pub const MAX_PAYLOAD: u32 = DEFAULT_MAX_PAYLOAD;

/// One export: the map as NBD clients see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The export's name (`mpio` by default); the empty name, the
    /// protocol's default export, reaches it too.
    pub name: String,
    /// A one-line description for `OPT_LIST` and `INFO_DESCRIPTION`.
    pub description: String,
    /// Refuse writes, trims and write-zeroes with `EPERM`.
    pub read_only: bool,
}

impl Export {
    /// The transmission flags sent in `INFO_EXPORT` and after
    /// `EXPORT_NAME`.
    pub(crate) fn transmission_flags(&self) -> u16 {
        let mut flags = FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES
            | FLAG_CAN_MULTI_CONN;
        if self.read_only {
            flags |= FLAG_READ_ONLY;
        }
        flags
    }

    /// True when `name` chooses this export.
    pub(crate) fn answers_to(&self, name: &str) -> bool {
        name.is_empty() || name == self.name
    }
}

/// The NBD error value for a failed map I/O.
pub(crate) fn nbd_error(error: IoError) -> u32 {
    match error.errno() {
        1 => EPERM,
        12 => ENOMEM,
        22 => EINVAL,
        28 => ENOSPC,
        75 => EOVERFLOW,
        95 => ENOTSUP,
        108 => ESHUTDOWN,
        _ => EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpio_core::io::TargetError;

    #[test]
    fn flags_and_errors() {
        let mut export = Export {
            name: "mpio".into(),
            description: String::new(),
            read_only: false,
        };
        let flags = export.transmission_flags();
        assert_eq!(flags & FLAG_READ_ONLY, 0);
        assert_ne!(flags & FLAG_CAN_MULTI_CONN, 0);
        export.read_only = true;
        assert_ne!(export.transmission_flags() & FLAG_READ_ONLY, 0);
        assert!(export.answers_to("") && export.answers_to("mpio"));
        assert!(!export.answers_to("other"));
        assert_eq!(nbd_error(IoError::NoPath), EIO);
        assert_eq!(nbd_error(IoError::Invalid("x")), EINVAL);
        assert_eq!(nbd_error(IoError::Target(TargetError::NoSpace)), ENOSPC);
        assert_eq!(
            nbd_error(IoError::Target(TargetError::NotSupported)),
            ENOTSUP
        );
        assert_eq!(nbd_error(IoError::Target(TargetError::Medium)), EIO);
        // NBD has no reservation conflict: EIO, as for any other error.
        assert_eq!(
            nbd_error(IoError::Target(TargetError::ReservationConflict)),
            EIO
        );
    }
}
