//! Reply headers, encoded into a fixed array so the fast path allocates
//! nothing; a read's data follows the header from the I/O's own buffer.
//!
//! Without structured replies every reply is simple. With them, a READ
//! is answered with one chunk carrying `DONE` (`OFFSET_DATA`, or `ERROR`
//! when it failed, or `NONE` for a read of 0 bytes), and every other
//! command with a simple reply, as the protocol allows.

use mpio_nbd::consts::*;
use mpio_nbd::reply::{ChunkHeader, SimpleReply};

/// Longest header: a chunk header (20) and an offset (8).
const MAX_LEN: usize = ChunkHeader::LEN + 8;

/// The header of one reply.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplyHeader {
    bytes: [u8; MAX_LEN],
    len: u8,
}

impl ReplyHeader {
    fn new(parts: &[&[u8]]) -> Self {
        let mut header = ReplyHeader {
            bytes: [0; MAX_LEN],
            len: 0,
        };
        for part in parts {
            let at = usize::from(header.len);
            header.bytes[at..at + part.len()].copy_from_slice(part);
            header.len += part.len() as u8;
        }
        header
    }

    /// A successful reply to a command other than READ.
    pub(crate) fn done(cookie: u64) -> Self {
        Self::new(&[&SimpleReply { error: 0, cookie }.encode()])
    }

    /// A successful reply to a READ of `length` bytes at `offset`; the
    /// data follows.
    pub(crate) fn read(cookie: u64, structured: bool, offset: u64, length: u32) -> Self {
        if !structured {
            return Self::done(cookie);
        }
        if length == 0 {
            let header = ChunkHeader {
                flags: REPLY_FLAG_DONE,
                reply_type: REPLY_TYPE_NONE,
                cookie,
                length: 0,
            };
            return Self::new(&[&header.encode()]);
        }
        let header = ChunkHeader {
            flags: REPLY_FLAG_DONE,
            reply_type: REPLY_TYPE_OFFSET_DATA,
            cookie,
            // A read is at most MAX_PAYLOAD (32 MiB) long: no overflow.
            length: 8 + length,
        };
        Self::new(&[&header.encode(), &offset.to_be_bytes()])
    }

    /// A failed command; `structured_read` when it was a READ on a
    /// connection with structured replies (which must get a chunk).
    pub(crate) fn error(cookie: u64, structured_read: bool, error: u32) -> Self {
        if !structured_read {
            return Self::new(&[&SimpleReply { error, cookie }.encode()]);
        }
        let header = ChunkHeader {
            flags: REPLY_FLAG_DONE,
            reply_type: REPLY_TYPE_ERROR,
            cookie,
            length: 6,
        };
        // An error value, then a message of 0 bytes.
        Self::new(&[&header.encode(), &error.to_be_bytes(), &[0, 0]])
    }

    /// The bytes to send.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpio_nbd::reply::Chunk;

    fn chunk(header: &ReplyHeader, data: &[u8]) -> (ChunkHeader, Vec<u8>) {
        let bytes = [header.as_bytes(), data].concat();
        let decoded = ChunkHeader::decode(&bytes).unwrap();
        (decoded, bytes[ChunkHeader::LEN..].to_vec())
    }

    #[test]
    fn headers_decode_as_the_client_reads_them() {
        let simple = SimpleReply::decode(ReplyHeader::done(7).as_bytes()).unwrap();
        assert_eq!((simple.error, simple.cookie), (0, 7));
        let failed = ReplyHeader::error(8, false, EIO);
        assert_eq!(SimpleReply::decode(failed.as_bytes()).unwrap().error, EIO);
        let plain_read = ReplyHeader::read(9, false, 4096, 512);
        assert_eq!(plain_read.as_bytes().len(), SimpleReply::LEN);

        let data = [0xa5; 512];
        let read = ReplyHeader::read(9, true, 4096, 512);
        let (header, payload) = chunk(&read, &data);
        assert!(header.is_done());
        assert_eq!(header.cookie, 9);
        assert_eq!(
            Chunk::decode(&header, &payload).unwrap(),
            Chunk::OffsetData {
                offset: 4096,
                data: &data
            }
        );
        let (header, payload) = chunk(&ReplyHeader::read(3, true, 0, 0), &[]);
        assert_eq!(Chunk::decode(&header, &payload).unwrap(), Chunk::None);
        let (header, payload) = chunk(&ReplyHeader::error(4, true, ENOSPC), &[]);
        assert!(header.is_done());
        assert_eq!(
            Chunk::decode(&header, &payload).unwrap(),
            Chunk::Error {
                error: ENOSPC,
                message: "",
                offset: None
            }
        );
    }
}
