//! The server's side of the fixed newstyle handshake, as a state machine
//! over bytes: no socket, so the event loop drives it from whatever it
//! has read and the fuzzer drives it from arbitrary input.
//!
//! The server sends the greeting ([`Handshake::new`]); [`Handshake::feed`]
//! takes the client's bytes, appends the replies to an output buffer and
//! says how many bytes it used and whether the session goes on, moves to
//! transmission, or ends.
//!
//! # Options
//! `STRUCTURED_REPLY`, `LIST`, `INFO`, `GO`, `EXPORT_NAME` and `ABORT` are
//! answered; any other option gets `ERR_UNSUP` and the session goes on.
//! `INFO` and `GO` always describe the export with `INFO_EXPORT` and
//! `INFO_BLOCK_SIZE` (and `INFO_NAME` / `INFO_DESCRIPTION` when asked).
//!
//! # Errors
//! A wrong magic, an option payload over [`MAX_OPTION_LEN`], client flags
//! without fixed newstyle or with unknown bits, an `EXPORT_NAME` for an
//! export that does not exist (the protocol's only answer is to close),
//! or more than [`MAX_OPTIONS`] options end the session with a
//! [`HandshakeError`] naming the fault. Malformed payloads of known
//! options get `ERR_INVALID` and the session goes on.

use crate::export::{Export, MAX_PAYLOAD, MIN_BLOCK_SIZE, PREFERRED_BLOCK_SIZE};
use mpio_nbd::consts::*;
use mpio_nbd::handshake::{
    decode_client_flags, ExportNameReply, GoRequest, Greeting, Info, OptionHeader,
    OptionReplyHeader, ServerEntry,
};
use mpio_nbd::WireError;

/// Most options one client may send before it must choose an export: a
/// bound on how long a client can keep a connection in the handshake.
pub(crate) const MAX_OPTIONS: u32 = 256;

/// Why a handshake ended without an export.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The client's bytes are not valid NBD (magic, lengths, flags).
    #[error("handshake: {0}")]
    Wire(#[from] WireError),
    /// The client does not speak fixed newstyle, the only style served.
    #[error("handshake: client flags {0:#x} lack FIXED_NEWSTYLE")]
    NotFixedNewstyle(u32),
    /// `EXPORT_NAME` named an export that does not exist: the name as
    /// quoted for the log, cut if long ([`mpio_core::table::quote`]: a
    /// client may send 64 KiB of it).
    #[error("handshake: EXPORT_NAME for unknown export {0}")]
    UnknownExport(String),
    /// The client sent more than [`MAX_OPTIONS`] options.
    #[error("handshake: more than {MAX_OPTIONS} options")]
    TooManyOptions,
}

/// What the session does after [`Handshake::feed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The handshake goes on: more bytes are needed.
    NeedMore,
    /// The export was chosen; the bytes after the consumed ones are
    /// transmission requests.
    Transmission {
        /// The client negotiated structured replies.
        structured: bool,
    },
    /// The client aborted: send the output, then close.
    Close,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    ClientFlags,
    Options,
    Finished,
}

/// One connection's handshake.
#[derive(Debug)]
pub(crate) struct Handshake {
    state: State,
    structured: bool,
    no_zeroes: bool,
    options_seen: u32,
}

impl Handshake {
    /// Starts a handshake: appends the server's greeting to `out`.
    pub(crate) fn new(out: &mut Vec<u8>) -> Self {
        let greeting = Greeting {
            handshake_flags: FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES,
        };
        out.extend_from_slice(&greeting.encode());
        Handshake {
            state: State::ClientFlags,
            structured: false,
            no_zeroes: false,
            options_seen: 0,
        }
    }

    /// Consumes as many whole client messages from `input` as it holds,
    /// appending the replies to `out`. Returns the bytes consumed and
    /// what comes next; after [`Step::Transmission`] or [`Step::Close`]
    /// nothing more is consumed. The export is described as holding
    /// `size_bytes`.
    ///
    /// # Errors
    /// See the module docs; after an error the connection must close.
    pub(crate) fn feed(
        &mut self,
        export: &Export,
        size_bytes: u64,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Step), HandshakeError> {
        let mut consumed = 0;
        loop {
            let rest = &input[consumed..];
            match self.state {
                State::Finished => return Ok((consumed, Step::Close)),
                State::ClientFlags => {
                    if rest.len() < 4 {
                        return Ok((consumed, Step::NeedMore));
                    }
                    let flags = decode_client_flags(rest)?;
                    if flags & FLAG_C_FIXED_NEWSTYLE == 0 {
                        return Err(HandshakeError::NotFixedNewstyle(flags));
                    }
                    self.no_zeroes = flags & FLAG_C_NO_ZEROES != 0;
                    self.state = State::Options;
                    consumed += 4;
                }
                State::Options => {
                    if rest.len() < OptionHeader::LEN {
                        return Ok((consumed, Step::NeedMore));
                    }
                    let header = OptionHeader::decode(rest)?;
                    let total = OptionHeader::LEN + header.length as usize;
                    if rest.len() < total {
                        return Ok((consumed, Step::NeedMore));
                    }
                    self.options_seen += 1;
                    if self.options_seen > MAX_OPTIONS {
                        return Err(HandshakeError::TooManyOptions);
                    }
                    consumed += total;
                    let payload = &rest[OptionHeader::LEN..total];
                    match self.option(export, size_bytes, header.option, payload, out)? {
                        Step::NeedMore => {}
                        step => {
                            self.state = State::Finished;
                            return Ok((consumed, step));
                        }
                    }
                }
            }
        }
    }

    /// Answers one option.
    fn option(
        &mut self,
        export: &Export,
        size_bytes: u64,
        option: u32,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Step, HandshakeError> {
        match option {
            OPT_ABORT => {
                reply(out, option, REP_ACK, &[]);
                Ok(Step::Close)
            }
            OPT_STRUCTURED_REPLY | OPT_LIST if !payload.is_empty() => {
                reply(out, option, REP_ERR_INVALID, &[]);
                Ok(Step::NeedMore)
            }
            OPT_STRUCTURED_REPLY => {
                self.structured = true;
                reply(out, option, REP_ACK, &[]);
                Ok(Step::NeedMore)
            }
            OPT_LIST => {
                let mut entry = Vec::new();
                ServerEntry {
                    name: &export.name,
                    description: &export.description,
                }
                .encode(&mut entry)?;
                reply(out, option, REP_SERVER, &entry);
                reply(out, option, REP_ACK, &[]);
                Ok(Step::NeedMore)
            }
            OPT_INFO | OPT_GO => {
                let Ok(request) = GoRequest::decode(payload) else {
                    reply(out, option, REP_ERR_INVALID, &[]);
                    return Ok(Step::NeedMore);
                };
                if !export.answers_to(request.name) {
                    reply(out, option, REP_ERR_UNKNOWN, &[]);
                    return Ok(Step::NeedMore);
                }
                let mut infos = vec![
                    Info::Export {
                        size: size_bytes,
                        flags: export.transmission_flags(),
                    },
                    Info::BlockSize {
                        min: MIN_BLOCK_SIZE,
                        preferred: PREFERRED_BLOCK_SIZE,
                        max: MAX_PAYLOAD,
                    },
                ];
                if request.info_requests.contains(&INFO_NAME) {
                    infos.push(Info::Name(&export.name));
                }
                if request.info_requests.contains(&INFO_DESCRIPTION) {
                    infos.push(Info::Description(&export.description));
                }
                let mut bytes = Vec::new();
                for info in infos {
                    bytes.clear();
                    info.encode(&mut bytes);
                    reply(out, option, REP_INFO, &bytes);
                }
                reply(out, option, REP_ACK, &[]);
                if option == OPT_GO {
                    Ok(Step::Transmission {
                        structured: self.structured,
                    })
                } else {
                    Ok(Step::NeedMore)
                }
            }
            OPT_EXPORT_NAME => {
                let name = std::str::from_utf8(payload).unwrap_or("\u{fffd}");
                if !export.answers_to(name) {
                    return Err(HandshakeError::UnknownExport(mpio_core::table::quote(name)));
                }
                ExportNameReply {
                    size: size_bytes,
                    flags: export.transmission_flags(),
                }
                .encode(self.no_zeroes, out);
                Ok(Step::Transmission {
                    structured: self.structured,
                })
            }
            _ => {
                reply(out, option, REP_ERR_UNSUP, &[]);
                Ok(Step::NeedMore)
            }
        }
    }
}

/// Appends one option reply with `payload` (at most [`MAX_OPTION_LEN`]
/// bytes by construction: infos and list entries are bounded by
/// [`MAX_NAME_LEN`]).
fn reply(out: &mut Vec<u8>, option: u32, reply_type: u32, payload: &[u8]) {
    let header = OptionReplyHeader {
        option,
        reply_type,
        length: payload.len() as u32,
    };
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests;
