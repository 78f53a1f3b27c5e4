//! Transmission replies: simple replies (16 bytes, a read's data after
//! them) and structured reply chunks (a 20-byte header and a payload).
//!
//! A reader of a reply stream looks at the first four bytes
//! ([`header_len`]) to learn which header follows, decodes it, then (for
//! a chunk) decodes its payload with [`Chunk::decode`].

use crate::bytes::Reader;
use crate::consts::*;
use crate::WireError;

/// Longest error message an error chunk may carry.
pub const MAX_ERROR_MESSAGE: usize = 4096;

/// A simple reply header. After one to a successful `READ`, the data
/// follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimpleReply {
    /// 0, or an error value (`EIO`, ...).
    pub error: u32,
    /// The request's cookie.
    pub cookie: u64,
}

impl SimpleReply {
    /// Bytes on the wire.
    pub const LEN: usize = 16;

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        out[4..8].copy_from_slice(&self.error.to_be_bytes());
        out[8..].copy_from_slice(&self.cookie.to_be_bytes());
        out
    }

    /// Decodes the first [`SimpleReply::LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// Too few bytes, or a wrong magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("simple reply", bytes);
        check_magic("simple reply", reader.u32()?, SIMPLE_REPLY_MAGIC)?;
        Ok(SimpleReply {
            error: reader.u32()?,
            cookie: reader.u64()?,
        })
    }
}

/// A structured reply chunk header; `length` payload bytes follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// `REPLY_FLAG_DONE` on the last chunk of a reply.
    pub flags: u16,
    /// `REPLY_TYPE_*`.
    pub reply_type: u16,
    /// The request's cookie.
    pub cookie: u64,
    /// Payload bytes that follow.
    pub length: u32,
}

impl ChunkHeader {
    /// Bytes on the wire.
    pub const LEN: usize = 20;

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.reply_type.to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..].copy_from_slice(&self.length.to_be_bytes());
        out
    }

    /// Decodes the first [`ChunkHeader::LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// Too few bytes, or a wrong magic.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("structured reply chunk", bytes);
        check_magic(
            "structured reply chunk",
            reader.u32()?,
            STRUCTURED_REPLY_MAGIC,
        )?;
        Ok(ChunkHeader {
            flags: reader.u16()?,
            reply_type: reader.u16()?,
            cookie: reader.u64()?,
            length: reader.u32()?,
        })
    }

    /// True on the last chunk of a reply.
    pub fn is_done(&self) -> bool {
        self.flags & REPLY_FLAG_DONE != 0
    }
}

/// The length of the reply header that starts `bytes`: `Ok(None)` while
/// fewer than 4 bytes are there to tell.
///
/// # Errors
/// The first four bytes are neither reply magic.
pub fn header_len(bytes: &[u8]) -> Result<Option<usize>, WireError> {
    let Some(magic) = bytes.get(..4) else {
        return Ok(None);
    };
    let mut field = [0; 4];
    field.copy_from_slice(magic);
    match u32::from_be_bytes(field) {
        SIMPLE_REPLY_MAGIC => Ok(Some(SimpleReply::LEN)),
        STRUCTURED_REPLY_MAGIC => Ok(Some(ChunkHeader::LEN)),
        found => Err(WireError::BadMagic {
            what: "reply",
            found: u64::from(found),
            expected: u64::from(SIMPLE_REPLY_MAGIC),
        }),
    }
}

fn check_magic(what: &'static str, found: u32, expected: u32) -> Result<(), WireError> {
    if found != expected {
        return Err(WireError::BadMagic {
            what,
            found: u64::from(found),
            expected: u64::from(expected),
        });
    }
    Ok(())
}

/// The payload of one structured reply chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// `REPLY_TYPE_NONE`: the reply is complete (with `DONE`).
    None,
    /// `REPLY_TYPE_OFFSET_DATA`: `data` read at `offset`.
    OffsetData {
        /// Byte offset of the data.
        offset: u64,
        /// The data (never empty).
        data: &'a [u8],
    },
    /// `REPLY_TYPE_OFFSET_HOLE`: `length` bytes at `offset` read as zeroes.
    OffsetHole {
        /// Byte offset of the hole.
        offset: u64,
        /// Its length (never 0).
        length: u32,
    },
    /// `REPLY_TYPE_ERROR` or `REPLY_TYPE_ERROR_OFFSET`.
    Error {
        /// The error value (never 0).
        error: u32,
        /// A message for people (may be empty).
        message: &'a str,
        /// Where the error is, for `ERROR_OFFSET`.
        offset: Option<u64>,
    },
    /// A type this crate does not know. The protocol says a client treats
    /// an unknown error type (high bit set) as an error and may ignore
    /// the others.
    Unknown {
        /// The type.
        reply_type: u16,
    },
}

impl<'a> Chunk<'a> {
    /// Decodes the payload of the chunk `header` announced; `payload` is
    /// exactly `header.length` bytes.
    ///
    /// # Errors
    /// A payload whose length disagrees with `header` or its type, a
    /// `NONE` chunk without `DONE`, an empty data chunk or hole, an error
    /// chunk with error 0 or a message length beyond its payload.
    pub fn decode(header: &ChunkHeader, payload: &'a [u8]) -> Result<Self, WireError> {
        if payload.len() as u64 != u64::from(header.length) {
            return Err(WireError::Invalid {
                what: "structured reply chunk",
                reason: format!(
                    "payload of {} bytes where the header says {}",
                    payload.len(),
                    header.length
                ),
            });
        }
        let invalid = |what, reason: &str| WireError::Invalid {
            what,
            reason: reason.to_string(),
        };
        let mut reader = Reader::new("structured reply chunk", payload);
        let chunk = match header.reply_type {
            REPLY_TYPE_NONE => {
                if !header.is_done() {
                    return Err(invalid("NONE chunk", "without the DONE flag"));
                }
                Chunk::None
            }
            REPLY_TYPE_OFFSET_DATA => {
                let offset = reader.u64()?;
                let data = reader.rest();
                if data.is_empty() {
                    return Err(invalid("OFFSET_DATA chunk", "carries no data"));
                }
                Chunk::OffsetData { offset, data }
            }
            REPLY_TYPE_OFFSET_HOLE => {
                let offset = reader.u64()?;
                let length = reader.u32()?;
                if length == 0 {
                    return Err(invalid("OFFSET_HOLE chunk", "hole of length 0"));
                }
                Chunk::OffsetHole { offset, length }
            }
            REPLY_TYPE_ERROR | REPLY_TYPE_ERROR_OFFSET => {
                let error = reader.u32()?;
                if error == 0 {
                    return Err(invalid("error chunk", "error value 0"));
                }
                let message_len = usize::from(reader.u16()?);
                if message_len > MAX_ERROR_MESSAGE {
                    return Err(WireError::TooLong {
                        what: "error chunk message",
                        len: message_len as u64,
                        max: MAX_ERROR_MESSAGE as u64,
                    });
                }
                let message = std::str::from_utf8(reader.take(message_len)?)
                    .map_err(|_| invalid("error chunk message", "not UTF-8"))?;
                let offset = if header.reply_type == REPLY_TYPE_ERROR_OFFSET {
                    Some(reader.u64()?)
                } else {
                    None
                };
                Chunk::Error {
                    error,
                    message,
                    offset,
                }
            }
            reply_type => {
                reader.rest();
                Chunk::Unknown { reply_type }
            }
        };
        reader.finish()?;
        Ok(chunk)
    }

    /// Appends the whole chunk, header and payload, to `out`.
    ///
    /// # Errors
    /// A payload longer than a `u32` counts, an empty data chunk, an error
    /// value of 0, a message longer than [`MAX_ERROR_MESSAGE`], or
    /// [`Chunk::Unknown`] (it has no payload to write).
    pub fn encode(&self, cookie: u64, done: bool, out: &mut Vec<u8>) -> Result<(), WireError> {
        let invalid = |reason: &str| WireError::Invalid {
            what: "chunk to encode",
            reason: reason.to_string(),
        };
        let (reply_type, length) = match *self {
            Chunk::None if !done => return Err(invalid("NONE without DONE")),
            Chunk::None => (REPLY_TYPE_NONE, 0u64),
            Chunk::OffsetData { data: [], .. } => return Err(invalid("OFFSET_DATA without data")),
            Chunk::OffsetData { data, .. } => (REPLY_TYPE_OFFSET_DATA, 8 + data.len() as u64),
            Chunk::OffsetHole { length: 0, .. } => return Err(invalid("hole of length 0")),
            Chunk::OffsetHole { .. } => (REPLY_TYPE_OFFSET_HOLE, 12),
            Chunk::Error { error: 0, .. } => return Err(invalid("error value 0")),
            Chunk::Error {
                message, offset, ..
            } => {
                if message.len() > MAX_ERROR_MESSAGE {
                    return Err(WireError::TooLong {
                        what: "error chunk message",
                        len: message.len() as u64,
                        max: MAX_ERROR_MESSAGE as u64,
                    });
                }
                let reply_type = if offset.is_some() {
                    REPLY_TYPE_ERROR_OFFSET
                } else {
                    REPLY_TYPE_ERROR
                };
                let offset_len = if offset.is_some() { 8 } else { 0 };
                (reply_type, 6 + message.len() as u64 + offset_len)
            }
            Chunk::Unknown { .. } => return Err(invalid("a chunk of unknown type")),
        };
        let length = u32::try_from(length).map_err(|_| WireError::TooLong {
            what: "chunk payload",
            len: length,
            max: u64::from(u32::MAX),
        })?;
        let header = ChunkHeader {
            flags: if done { REPLY_FLAG_DONE } else { 0 },
            reply_type,
            cookie,
            length,
        };
        out.extend_from_slice(&header.encode());
        match *self {
            Chunk::OffsetData { offset, data } => {
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(data);
            }
            Chunk::OffsetHole { offset, length } => {
                out.extend_from_slice(&offset.to_be_bytes());
                out.extend_from_slice(&length.to_be_bytes());
            }
            Chunk::Error {
                error,
                message,
                offset,
            } => {
                out.extend_from_slice(&error.to_be_bytes());
                out.extend_from_slice(&(message.len() as u16).to_be_bytes());
                out.extend_from_slice(message.as_bytes());
                if let Some(offset) = offset {
                    out.extend_from_slice(&offset.to_be_bytes());
                }
            }
            Chunk::None | Chunk::Unknown { .. } => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
