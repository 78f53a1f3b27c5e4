//! The client side of the fixed newstyle handshake, run blocking (the
//! caller bounds it: [`super::target::NbdTarget::connect`] gives the whole
//! handshake one deadline) before the connection turns non-blocking.
//!
//! The client asks for structured replies (`OPT_STRUCTURED_REPLY`; a
//! server that refuses gets simple replies), then `OPT_GO` with the export
//! name, asking for `INFO_EXPORT` and `INFO_BLOCK_SIZE`. A server that
//! does not know `GO` gets `OPT_EXPORT_NAME` instead.

use mpio_nbd::consts::*;
use mpio_nbd::handshake::{
    encode_client_flags, option_name, reply_type_name, ExportNameReply, GoRequest, Greeting, Info,
    OptionHeader, OptionReplyHeader,
};
use mpio_nbd::WireError;
use std::io::{self, Read, Write};

/// What the server told us about the export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    /// Size in bytes.
    pub size_bytes: u64,
    /// Transmission flags (`FLAG_*`).
    pub flags: u16,
    /// Whether the server agreed to structured replies.
    pub structured_replies: bool,
    /// Every offset and length must be a multiple of this.
    pub min_block: u32,
    /// Largest read or write payload.
    pub max_payload: u32,
}

impl Export {
    /// True if the transmission flags include `flag`.
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// Why a connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// A socket call failed (refused, reset, timed out).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The server sent bytes that are not the protocol.
    #[error("protocol error: {0}")]
    Wire(#[from] WireError),
    /// The server refused an option.
    #[error("server refused {option}: {reply}{message}")]
    Refused {
        /// The option.
        option: &'static str,
        /// The refusal.
        reply: &'static str,
        /// The server's message, if any, after ": ".
        message: String,
    },
    /// The server behaves in a way the protocol forbids.
    #[error("protocol error: {0}")]
    Protocol(String),
}

fn io_error(context: &'static str) -> impl FnOnce(io::Error) -> HandshakeError {
    move |source| HandshakeError::Io { context, source }
}

/// Runs the handshake on `stream` for export `name`.
///
/// # Errors
/// A [`HandshakeError`] naming the step and what went wrong.
pub(crate) fn handshake(
    stream: &mut (impl Read + Write),
    name: &str,
) -> Result<Export, HandshakeError> {
    let mut greeting = [0; Greeting::LEN];
    stream
        .read_exact(&mut greeting)
        .map_err(io_error("reading the server greeting"))?;
    let greeting = Greeting::decode(&greeting)?;
    if greeting.handshake_flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(HandshakeError::Protocol(
            "the server does not speak fixed newstyle".into(),
        ));
    }
    let no_zeroes = greeting.handshake_flags & FLAG_NO_ZEROES != 0;
    let client_flags = FLAG_C_FIXED_NEWSTYLE | if no_zeroes { FLAG_C_NO_ZEROES } else { 0 };
    stream
        .write_all(&encode_client_flags(client_flags))
        .map_err(io_error("sending client flags"))?;

    send_option(stream, OPT_STRUCTURED_REPLY, &[])?;
    let (reply, payload) = read_option_reply(stream, OPT_STRUCTURED_REPLY)?;
    let structured_replies = match reply.reply_type {
        REP_ACK => true,
        _ if reply.is_error() => false,
        other => {
            return Err(unexpected(OPT_STRUCTURED_REPLY, other, &payload));
        }
    };

    let mut request = Vec::new();
    GoRequest {
        name,
        info_requests: vec![INFO_EXPORT, INFO_BLOCK_SIZE],
    }
    .encode(&mut request)?;
    send_option(stream, OPT_GO, &request)?;
    let mut export = None;
    let mut block_size = (1, DEFAULT_MAX_PAYLOAD);
    loop {
        let (reply, payload) = read_option_reply(stream, OPT_GO)?;
        match reply.reply_type {
            REP_INFO => match Info::decode(&payload)? {
                Info::Export { size, flags } => export = Some((size, flags)),
                Info::BlockSize { min, max, .. } => block_size = (min, max),
                Info::Name(_) | Info::Description(_) | Info::Unknown { .. } => {}
            },
            REP_ACK => break,
            REP_ERR_UNSUP => {
                export = Some(export_name(stream, name, no_zeroes)?);
                break;
            }
            reply_type if reply.is_error() => {
                return Err(HandshakeError::Refused {
                    option: option_name(OPT_GO),
                    reply: reply_type_name(reply_type),
                    message: server_message(&payload),
                })
            }
            other => return Err(unexpected(OPT_GO, other, &payload)),
        }
    }
    let (size_bytes, flags) = export.ok_or_else(|| {
        HandshakeError::Protocol("GO ended without INFO_EXPORT (size and flags)".into())
    })?;
    Ok(Export {
        size_bytes,
        flags,
        structured_replies,
        min_block: block_size.0,
        max_payload: block_size.1.min(DEFAULT_MAX_PAYLOAD),
    })
}

/// `OPT_EXPORT_NAME`, for servers without `GO`: the server answers with
/// size and flags, or closes the connection.
fn export_name(
    stream: &mut (impl Read + Write),
    name: &str,
    no_zeroes: bool,
) -> Result<(u64, u16), HandshakeError> {
    send_option(stream, OPT_EXPORT_NAME, name.as_bytes())?;
    let len = ExportNameReply::LEN
        + if no_zeroes {
            0
        } else {
            ExportNameReply::PADDING
        };
    let mut reply = vec![0; len];
    stream
        .read_exact(&mut reply)
        .map_err(io_error("reading the EXPORT_NAME reply (no such export?)"))?;
    let reply = ExportNameReply::decode(&reply)?;
    Ok((reply.size, reply.flags))
}

fn send_option(stream: &mut impl Write, option: u32, payload: &[u8]) -> Result<(), HandshakeError> {
    let header = OptionHeader {
        option,
        length: payload.len() as u32,
    };
    let mut message = header.encode().to_vec();
    message.extend_from_slice(payload);
    stream
        .write_all(&message)
        .map_err(io_error("sending an option"))
}

fn read_option_reply(
    stream: &mut impl Read,
    option: u32,
) -> Result<(OptionReplyHeader, Vec<u8>), HandshakeError> {
    let mut header = [0; OptionReplyHeader::LEN];
    stream
        .read_exact(&mut header)
        .map_err(io_error("reading an option reply"))?;
    let header = OptionReplyHeader::decode(&header)?;
    if header.option != option {
        return Err(HandshakeError::Protocol(format!(
            "reply to option {} while {} was asked",
            header.option,
            option_name(option)
        )));
    }
    let mut payload = vec![0; header.length as usize];
    stream
        .read_exact(&mut payload)
        .map_err(io_error("reading an option reply payload"))?;
    Ok((header, payload))
}

fn unexpected(option: u32, reply_type: u32, payload: &[u8]) -> HandshakeError {
    HandshakeError::Protocol(format!(
        "unexpected reply {} ({reply_type:#x}) to {}{}",
        reply_type_name(reply_type),
        option_name(option),
        server_message(payload)
    ))
}

fn server_message(payload: &[u8]) -> String {
    if payload.is_empty() {
        String::new()
    } else {
        format!(": {}", String::from_utf8_lossy(payload))
    }
}
