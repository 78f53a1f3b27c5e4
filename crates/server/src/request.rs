//! What the server does with one transmission request header: a pure
//! judgement, made before anything reaches the map, so that bad input
//! never reaches a path.
//!
//! # Flush contract
//! `CMD_FLUSH` becomes one map flush. The map sends it down one path, as
//! dm-multipath does with a `REQ_PREFLUSH`: every path reaches the same
//! storage, and a flush empties the storage's volatile cache, which holds
//! the writes of every path alike. So a flush covers every write that
//! completed before it was received, on any connection and any path;
//! this is what makes `CAN_MULTI_CONN` honest. A write with
//! `CMD_FLAG_FUA` (and a trim or write-zeroes with it) goes to the map as
//! a FUA I/O ([`mpio_core::io::Io::fua`]): the path it takes makes it
//! durable before it completes, and the reply waits for that.
//!
//! # Errors
//! A command the server does not know, flags it does not accept, a
//! write to a read-only export, a range beyond the export, a READ longer
//! than [`MAX_PAYLOAD`] and a flush with a range are answered with an
//! error value (the payload of a refused WRITE is read and dropped). A
//! WRITE whose payload exceeds [`MAX_PAYLOAD`] closes the connection: its
//! payload is never read.

use crate::export::{Export, MAX_PAYLOAD};
use mpio_core::io::Op;
use mpio_nbd::consts::*;
use mpio_nbd::request::Request;

/// The server's judgement of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send `op` to the map and reply.
    Io {
        /// The map's operation.
        op: Op,
        /// Force unit access: durable before the reply.
        fua: bool,
    },
    /// `CMD_DISC`: stop reading, answer what is in flight, close.
    Disconnect,
    /// Reply with this error value without touching the map; a WRITE's
    /// payload is read and dropped first.
    Refuse {
        /// The NBD error value.
        error: u32,
        /// What was wrong, for the log.
        reason: &'static str,
    },
    /// Close the connection: the request cannot be answered safely.
    Close {
        /// What was wrong, for the log.
        reason: &'static str,
    },
}

/// Judges `request` against `export`, whose client was told it holds
/// `size_bytes`.
pub(crate) fn judge(request: &Request, export: &Export, size_bytes: u64) -> Verdict {
    let refuse = |error, reason| Verdict::Refuse { error, reason };
    // FUA on every command: proto.md says a server that advertises
    // SEND_FUA must accept it anywhere (clients set it on reads and
    // flushes too); the core ignores it where it means nothing.
    let (op, allowed_flags) = match request.command {
        CMD_READ => (Op::Read, CMD_FLAG_FUA),
        CMD_WRITE => (Op::Write, CMD_FLAG_FUA),
        CMD_FLUSH => (Op::Flush, CMD_FLAG_FUA),
        CMD_TRIM => (Op::Discard, CMD_FLAG_FUA),
        CMD_WRITE_ZEROES => (Op::WriteZeroes, CMD_FLAG_FUA | CMD_FLAG_NO_HOLE),
        CMD_DISC => return Verdict::Disconnect,
        _ => return refuse(EINVAL, "unknown command"),
    };
    if request.command == CMD_WRITE && request.length > MAX_PAYLOAD {
        return Verdict::Close {
            reason: "WRITE payload above the 32 MiB limit",
        };
    }
    if request.flags & !allowed_flags != 0 {
        return refuse(EINVAL, "flags the command does not accept");
    }
    if op.is_write() && export.read_only {
        return refuse(EPERM, "write to a read-only export");
    }
    if op == Op::Flush {
        if request.offset != 0 || request.length != 0 {
            return refuse(EINVAL, "a flush with an offset or length");
        }
    } else if request
        .offset
        .checked_add(u64::from(request.length))
        .is_none_or(|end| end > size_bytes)
    {
        let error = if op.is_write() { ENOSPC } else { EINVAL };
        return refuse(error, "range beyond the end of the export");
    }
    if op == Op::Read && request.length > MAX_PAYLOAD {
        return refuse(EINVAL, "READ above the 32 MiB limit");
    }
    Verdict::Io {
        op,
        fua: request.flags & CMD_FLAG_FUA != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size the tests' clients were told.
    const SIZE: u64 = 1 << 20;

    fn export(read_only: bool) -> Export {
        Export {
            name: "mpio".into(),
            description: String::new(),
            read_only,
        }
    }

    fn request(command: u16, flags: u16, offset: u64, length: u32) -> Request {
        Request {
            flags,
            command,
            cookie: 1,
            offset,
            length,
        }
    }

    #[test]
    fn judges_each_case() {
        let rw = export(false);
        let ro = export(true);
        let io = |op, fua| Verdict::Io { op, fua };
        let refused = |verdict: Verdict| match verdict {
            Verdict::Refuse { error, .. } => error,
            other => panic!("{other:?} is not a refusal"),
        };
        let cases = [
            (
                request(CMD_READ, 0, 0, 4096),
                &rw,
                Some(io(Op::Read, false)),
            ),
            (
                request(CMD_WRITE, CMD_FLAG_FUA, 4096, 4096),
                &rw,
                Some(io(Op::Write, true)),
            ),
            (request(CMD_FLUSH, 0, 0, 0), &rw, Some(io(Op::Flush, false))),
            (
                request(CMD_TRIM, 0, 0, 1 << 20),
                &rw,
                Some(io(Op::Discard, false)),
            ),
            (
                request(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 0, 512),
                &rw,
                Some(io(Op::WriteZeroes, false)),
            ),
            (
                request(CMD_READ, 0, 0, 4096),
                &ro,
                Some(io(Op::Read, false)),
            ),
            (request(CMD_DISC, 0, 0, 0), &rw, Some(Verdict::Disconnect)),
        ];
        for (request, export, expected) in cases {
            assert_eq!(Some(judge(&request, export, SIZE)), expected, "{request:?}");
        }
        assert_eq!(refused(judge(&request(99, 0, 0, 0), &rw, SIZE)), EINVAL);
        assert_eq!(
            refused(judge(&request(CMD_WRITE, 0, 0, 512), &ro, SIZE)),
            EPERM
        );
        assert_eq!(
            refused(judge(&request(CMD_TRIM, 0, 0, 512), &ro, SIZE)),
            EPERM
        );
        assert_eq!(
            judge(&request(CMD_READ, CMD_FLAG_FUA, 0, 512), &rw, SIZE),
            Verdict::Io {
                op: Op::Read,
                fua: true
            },
            "FUA is accepted on every command"
        );
        assert_eq!(
            refused(judge(&request(CMD_READ, CMD_FLAG_DF, 0, 512), &rw, SIZE)),
            EINVAL
        );
        assert_eq!(
            refused(judge(
                &request(CMD_READ, 0, (1 << 20) - 511, 512),
                &rw,
                SIZE
            )),
            EINVAL
        );
        assert_eq!(
            refused(judge(&request(CMD_WRITE, 0, 1 << 20, 1), &rw, SIZE)),
            ENOSPC
        );
        assert_eq!(
            refused(judge(&request(CMD_READ, 0, u64::MAX, 1), &rw, SIZE)),
            EINVAL
        );
        assert_eq!(
            refused(judge(&request(CMD_FLUSH, 0, 0, 1), &rw, SIZE)),
            EINVAL
        );
        assert_eq!(
            refused(judge(
                &request(CMD_READ, 0, 0, MAX_PAYLOAD + 1),
                &rw,
                u64::MAX
            )),
            EINVAL
        );
        assert!(matches!(
            judge(&request(CMD_WRITE, 0, 0, MAX_PAYLOAD + 1), &rw, u64::MAX),
            Verdict::Close { .. }
        ));
        // A trim may be far larger than a payload.
        assert_eq!(
            judge(&request(CMD_TRIM, 0, 0, u32::MAX), &rw, u64::MAX),
            io(Op::Discard, false)
        );
    }
}
