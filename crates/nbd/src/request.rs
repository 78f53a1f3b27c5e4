//! Transmission requests: the 28-byte header every command starts with
//! (a write's data follows it).

use crate::bytes::Reader;
use crate::consts::*;
use crate::WireError;

/// One request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// `CMD_FLAG_*`.
    pub flags: u16,
    /// `CMD_*`.
    pub command: u16,
    /// The client's handle; the server returns it in the reply.
    pub cookie: u64,
    /// Byte offset.
    pub offset: u64,
    /// Byte length (a write's payload length).
    pub length: u32,
}

impl Request {
    /// Bytes on the wire.
    pub const LEN: usize = 28;

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.command.to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..24].copy_from_slice(&self.offset.to_be_bytes());
        out[24..].copy_from_slice(&self.length.to_be_bytes());
        out
    }

    /// Decodes the first [`Request::LEN`] bytes of `bytes`. Checks the
    /// magic only: whether the command, flags and range suit the export
    /// is the server's judgement (it answers with an error, not a
    /// disconnect).
    ///
    /// # Errors
    /// Too few bytes, or a wrong magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("request", bytes);
        let found = reader.u32()?;
        if found != REQUEST_MAGIC {
            return Err(WireError::BadMagic {
                what: "request",
                found: u64::from(found),
                expected: u64::from(REQUEST_MAGIC),
            });
        }
        Ok(Request {
            flags: reader.u16()?,
            command: reader.u16()?,
            cookie: reader.u64()?,
            offset: reader.u64()?,
            length: reader.u32()?,
        })
    }

    /// Bytes of data that follow this header on the wire (a write's).
    pub fn payload_len(&self) -> u32 {
        if self.command == CMD_WRITE {
            self.length
        } else {
            0
        }
    }
}

/// The protocol's name for command `command`, for messages.
pub fn command_name(command: u16) -> &'static str {
    match command {
        CMD_READ => "READ",
        CMD_WRITE => "WRITE",
        CMD_DISC => "DISC",
        CMD_FLUSH => "FLUSH",
        CMD_TRIM => "TRIM",
        CMD_WRITE_ZEROES => "WRITE_ZEROES",
        _ => "unknown command",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_checks_the_magic() {
        let request = Request {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            cookie: 0x0102_0304_0506_0708,
            offset: 1 << 40,
            length: 4096,
        };
        let bytes = request.encode();
        assert_eq!(&bytes[..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(Request::decode(&bytes), Ok(request));
        assert_eq!(request.payload_len(), 4096);
        let mut bad = bytes;
        bad[0] ^= 1;
        assert!(matches!(
            Request::decode(&bad),
            Err(WireError::BadMagic {
                what: "request",
                ..
            })
        ));
        for len in 0..Request::LEN {
            assert!(matches!(
                Request::decode(&bytes[..len]),
                Err(WireError::Truncated { need, .. }) if need <= Request::LEN && need > len
            ));
        }
        let read = Request {
            command: CMD_READ,
            ..request
        };
        assert_eq!(read.payload_len(), 0);
        assert_eq!(command_name(CMD_TRIM), "TRIM");
    }
}
