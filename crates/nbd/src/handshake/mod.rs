//! The fixed newstyle handshake: the server's greeting, the client's
//! flags, option requests and replies, and the payloads of the options
//! mpio uses (`GO`, `INFO`, `EXPORT_NAME`, `LIST`, `STRUCTURED_REPLY`,
//! `ABORT`).
//!
//! The sequence: the server sends a [`Greeting`]; the client answers
//! with its flags ([`encode_client_flags`]); the client sends options
//! ([`OptionHeader`] and a payload) and the server answers each with one
//! or more replies ([`OptionReplyHeader`] and a payload) until `GO`
//! (or `EXPORT_NAME`, answered by an [`ExportNameReply`]) starts the
//! transmission phase.

use crate::bytes::{exact, magic, Reader};
use crate::consts::*;
use crate::WireError;

/// The server's first message: the magics and its handshake flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Greeting {
    /// `FLAG_FIXED_NEWSTYLE`, `FLAG_NO_ZEROES`.
    pub handshake_flags: u16,
}

impl Greeting {
    /// Bytes on the wire.
    pub const LEN: usize = 18;

    /// The greeting's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..8].copy_from_slice(&INIT_MAGIC.to_be_bytes());
        out[8..16].copy_from_slice(&OPTION_MAGIC.to_be_bytes());
        out[16..].copy_from_slice(&self.handshake_flags.to_be_bytes());
        out
    }

    /// Decodes the first [`Greeting::LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// Too few bytes, or a magic that is not newstyle's (an oldstyle
    /// server sends `0x00420281861253` as its second magic).
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("server greeting", bytes);
        magic("server greeting", reader.u64()?, INIT_MAGIC)?;
        magic("server greeting (newstyle)", reader.u64()?, OPTION_MAGIC)?;
        Ok(Greeting {
            handshake_flags: reader.u16()?,
        })
    }
}

/// The client's flags, answered to the greeting.
pub fn encode_client_flags(flags: u32) -> [u8; 4] {
    flags.to_be_bytes()
}

/// Decodes the client's flags from the first 4 bytes of `bytes`.
///
/// # Errors
/// Too few bytes, or flags the protocol does not define (a server must
/// then end the session).
pub fn decode_client_flags(bytes: &[u8]) -> Result<u32, WireError> {
    let flags = Reader::new("client flags", bytes).u32()?;
    let known = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
    if flags & !known != 0 {
        return Err(WireError::Invalid {
            what: "client flags",
            reason: format!("unknown bits {:#x}", flags & !known),
        });
    }
    Ok(flags)
}

/// The header of an option request; `length` payload bytes follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionHeader {
    /// The option (`OPT_*`).
    pub option: u32,
    /// Payload bytes that follow.
    pub length: u32,
}

impl OptionHeader {
    /// Bytes on the wire.
    pub const LEN: usize = 16;

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..8].copy_from_slice(&OPTION_MAGIC.to_be_bytes());
        out[8..12].copy_from_slice(&self.option.to_be_bytes());
        out[12..].copy_from_slice(&self.length.to_be_bytes());
        out
    }

    /// Decodes the first [`OptionHeader::LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// Too few bytes, a wrong magic, or a payload longer than
    /// [`MAX_OPTION_LEN`].
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("option request", bytes);
        magic("option request", reader.u64()?, OPTION_MAGIC)?;
        let option = reader.u32()?;
        let length = reader.u32()?;
        check_option_len("option request payload", length)?;
        Ok(OptionHeader { option, length })
    }
}

/// The header of an option reply; `length` payload bytes follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionReplyHeader {
    /// The option this answers.
    pub option: u32,
    /// `REP_*`.
    pub reply_type: u32,
    /// Payload bytes that follow.
    pub length: u32,
}

impl OptionReplyHeader {
    /// Bytes on the wire.
    pub const LEN: usize = 20;

    /// The header's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..8].copy_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
        out[8..12].copy_from_slice(&self.option.to_be_bytes());
        out[12..16].copy_from_slice(&self.reply_type.to_be_bytes());
        out[16..].copy_from_slice(&self.length.to_be_bytes());
        out
    }

    /// Decodes the first [`OptionReplyHeader::LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// Too few bytes, a wrong magic, or a payload longer than
    /// [`MAX_OPTION_LEN`].
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("option reply", bytes);
        magic("option reply", reader.u64()?, OPTION_REPLY_MAGIC)?;
        let option = reader.u32()?;
        let reply_type = reader.u32()?;
        let length = reader.u32()?;
        check_option_len("option reply payload", length)?;
        Ok(OptionReplyHeader {
            option,
            reply_type,
            length,
        })
    }

    /// True for the `REP_ERR_*` replies.
    pub fn is_error(&self) -> bool {
        self.reply_type & REP_FLAG_ERROR != 0
    }
}

fn check_option_len(what: &'static str, length: u32) -> Result<(), WireError> {
    if length > MAX_OPTION_LEN {
        return Err(WireError::TooLong {
            what,
            len: u64::from(length),
            max: u64::from(MAX_OPTION_LEN),
        });
    }
    Ok(())
}

fn check_name<'a>(what: &'static str, bytes: &'a [u8]) -> Result<&'a str, WireError> {
    if bytes.len() > MAX_NAME_LEN {
        return Err(WireError::TooLong {
            what,
            len: bytes.len() as u64,
            max: MAX_NAME_LEN as u64,
        });
    }
    std::str::from_utf8(bytes).map_err(|error| WireError::Invalid {
        what,
        reason: format!("not UTF-8: {error}"),
    })
}

/// The payload of `OPT_GO` and `OPT_INFO`: an export name and the info
/// types the client asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoRequest<'a> {
    /// The export's name (`""` is the default export).
    pub name: &'a str,
    /// `INFO_*` types requested.
    pub info_requests: Vec<u16>,
}

impl<'a> GoRequest<'a> {
    /// Appends the payload's bytes to `out`.
    ///
    /// # Errors
    /// A name longer than [`MAX_NAME_LEN`], or more info requests than a
    /// `u16` counts.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        check_name("export name", self.name.as_bytes())?;
        let count = u16::try_from(self.info_requests.len()).map_err(|_| WireError::TooLong {
            what: "info requests",
            len: self.info_requests.len() as u64,
            max: u64::from(u16::MAX),
        })?;
        out.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
        out.extend_from_slice(self.name.as_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        for info in &self.info_requests {
            out.extend_from_slice(&info.to_be_bytes());
        }
        Ok(())
    }

    /// Decodes a whole `GO` or `INFO` payload.
    ///
    /// # Errors
    /// Lengths that disagree with the payload, a name that is too long or
    /// not UTF-8, trailing bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("GO/INFO request", bytes);
        let name_len = reader.u32()? as usize;
        if name_len > MAX_NAME_LEN {
            return Err(WireError::TooLong {
                what: "export name",
                len: name_len as u64,
                max: MAX_NAME_LEN as u64,
            });
        }
        let name = check_name("export name", reader.take(name_len)?)?;
        let count = reader.u16()?;
        let info_requests = (0..count)
            .map(|_| reader.u16())
            .collect::<Result<Vec<_>, _>>()?;
        reader.finish()?;
        Ok(GoRequest {
            name,
            info_requests,
        })
    }
}

/// One `REP_INFO` payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Info<'a> {
    /// `INFO_EXPORT`: size in bytes and transmission flags.
    Export {
        /// Size in bytes.
        size: u64,
        /// `FLAG_*` transmission flags.
        flags: u16,
    },
    /// `INFO_NAME`: the canonical name.
    Name(&'a str),
    /// `INFO_DESCRIPTION`: a description.
    Description(&'a str),
    /// `INFO_BLOCK_SIZE`: the block size constraints, in bytes.
    BlockSize {
        /// Minimum: a power of two from 1 to 64 KiB.
        min: u32,
        /// Preferred: a power of two, at least `min`.
        preferred: u32,
        /// Maximum payload, at least `min` and `preferred`.
        max: u32,
    },
    /// An info type this crate does not know; a client ignores it.
    Unknown {
        /// The type.
        info_type: u16,
    },
}

impl Info<'_> {
    /// Appends the payload's bytes (type first) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Info::Export { size, flags } => {
                out.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                out.extend_from_slice(&size.to_be_bytes());
                out.extend_from_slice(&flags.to_be_bytes());
            }
            Info::Name(text) | Info::Description(text) => {
                let info_type = if matches!(self, Info::Name(_)) {
                    INFO_NAME
                } else {
                    INFO_DESCRIPTION
                };
                out.extend_from_slice(&info_type.to_be_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            Info::BlockSize {
                min,
                preferred,
                max,
            } => {
                out.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
                out.extend_from_slice(&min.to_be_bytes());
                out.extend_from_slice(&preferred.to_be_bytes());
                out.extend_from_slice(&max.to_be_bytes());
            }
            Info::Unknown { info_type } => out.extend_from_slice(&info_type.to_be_bytes()),
        }
    }

    /// Decodes a whole `REP_INFO` payload.
    ///
    /// # Errors
    /// A payload of the wrong length for its type, text that is not UTF-8,
    /// block sizes the protocol forbids.
    pub fn decode(bytes: &[u8]) -> Result<Info<'_>, WireError> {
        let mut reader = Reader::new("info reply", bytes);
        let info_type = reader.u16()?;
        let info = match info_type {
            INFO_EXPORT => {
                exact("INFO_EXPORT reply", bytes, 12)?;
                Info::Export {
                    size: reader.u64()?,
                    flags: reader.u16()?,
                }
            }
            INFO_NAME => Info::Name(check_name("INFO_NAME reply", reader.rest())?),
            INFO_DESCRIPTION => {
                Info::Description(check_name("INFO_DESCRIPTION reply", reader.rest())?)
            }
            INFO_BLOCK_SIZE => {
                exact("INFO_BLOCK_SIZE reply", bytes, 14)?;
                let (min, preferred, max) = (reader.u32()?, reader.u32()?, reader.u32()?);
                let valid = min.is_power_of_two()
                    && min <= 64 * 1024
                    && preferred.is_power_of_two()
                    && preferred >= min
                    && max >= min
                    && (max == u32::MAX || max % min == 0);
                if !valid {
                    return Err(WireError::Invalid {
                        what: "INFO_BLOCK_SIZE reply",
                        reason: format!(
                            "min {min}, preferred {preferred}, max {max} break the protocol's rules"
                        ),
                    });
                }
                Info::BlockSize {
                    min,
                    preferred,
                    max,
                }
            }
            info_type => {
                reader.rest();
                Info::Unknown { info_type }
            }
        };
        reader.finish()?;
        Ok(info)
    }
}

/// The server's answer to `OPT_EXPORT_NAME`: size, flags and (unless both
/// sides agreed to `NO_ZEROES`) 124 zero bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportNameReply {
    /// Size in bytes.
    pub size: u64,
    /// Transmission flags.
    pub flags: u16,
}

impl ExportNameReply {
    /// Bytes without the zero padding.
    pub const LEN: usize = 10;
    /// Bytes of zero padding when `NO_ZEROES` was not agreed.
    pub const PADDING: usize = 124;

    /// Appends the reply's bytes to `out`, padded unless `no_zeroes`.
    pub fn encode(&self, no_zeroes: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        if !no_zeroes {
            out.extend_from_slice(&[0; Self::PADDING]);
        }
    }

    /// Decodes the first [`ExportNameReply::LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// Too few bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("EXPORT_NAME reply", bytes);
        Ok(ExportNameReply {
            size: reader.u64()?,
            flags: reader.u16()?,
        })
    }
}

/// One `REP_SERVER` payload, an answer to `OPT_LIST`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerEntry<'a> {
    /// The export's name.
    pub name: &'a str,
    /// Its description (may be empty).
    pub description: &'a str,
}

impl<'a> ServerEntry<'a> {
    /// Appends the payload's bytes to `out`.
    ///
    /// # Errors
    /// A name or description longer than [`MAX_NAME_LEN`].
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        check_name("export name", self.name.as_bytes())?;
        check_name("export description", self.description.as_bytes())?;
        out.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
        out.extend_from_slice(self.name.as_bytes());
        out.extend_from_slice(self.description.as_bytes());
        Ok(())
    }

    /// Decodes a whole `REP_SERVER` payload.
    ///
    /// # Errors
    /// A name length beyond the payload, text that is not UTF-8.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, WireError> {
        let mut reader = Reader::new("REP_SERVER reply", bytes);
        let name_len = reader.u32()? as usize;
        let name = check_name("export name", reader.take(name_len)?)?;
        let description = check_name("export description", reader.rest())?;
        Ok(ServerEntry { name, description })
    }
}

/// The protocol's name for option `option`, for messages.
pub fn option_name(option: u32) -> &'static str {
    match option {
        OPT_EXPORT_NAME => "EXPORT_NAME",
        OPT_ABORT => "ABORT",
        OPT_LIST => "LIST",
        OPT_INFO => "INFO",
        OPT_GO => "GO",
        OPT_STRUCTURED_REPLY => "STRUCTURED_REPLY",
        _ => "unknown option",
    }
}

/// What option reply type `reply_type` means, for messages.
pub fn reply_type_name(reply_type: u32) -> &'static str {
    match reply_type {
        REP_ACK => "ACK",
        REP_SERVER => "SERVER",
        REP_INFO => "INFO",
        REP_ERR_UNSUP => "ERR_UNSUP (option not supported)",
        REP_ERR_POLICY => "ERR_POLICY (forbidden by policy)",
        REP_ERR_INVALID => "ERR_INVALID (invalid option)",
        REP_ERR_PLATFORM => "ERR_PLATFORM (not supported on this platform)",
        REP_ERR_TLS_REQD => "ERR_TLS_REQD (TLS required)",
        REP_ERR_UNKNOWN => "ERR_UNKNOWN (no such export)",
        REP_ERR_SHUTDOWN => "ERR_SHUTDOWN (server shutting down)",
        REP_ERR_BLOCK_SIZE_REQD => "ERR_BLOCK_SIZE_REQD (block sizes required)",
        REP_ERR_TOO_BIG => "ERR_TOO_BIG (request too big)",
        _ if reply_type & REP_FLAG_ERROR != 0 => "unknown error",
        _ => "unknown reply",
    }
}

#[cfg(test)]
mod tests;
