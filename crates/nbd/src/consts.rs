//! The protocol's numbers: magics, handshake and transmission flags,
//! options, option replies, info types, commands, command flags, reply
//! chunk types and error values, named as `doc/proto.md` names them
//! (without the `NBD_` prefix).

/// `NBDMAGIC`: the first eight bytes a newstyle server sends.
pub(crate) const INIT_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: follows [`INIT_MAGIC`], and starts every option request.
pub(crate) const OPTION_MAGIC: u64 = 0x4948_4156_454f_5054;
/// Starts every option reply.
pub(crate) const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Starts every transmission request.
pub(crate) const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Starts every simple reply.
pub(crate) const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Starts every structured reply chunk.
pub(crate) const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flag: the server speaks fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: the server may omit the 124 zero bytes after
/// `EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: the client speaks fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: the server shall omit the 124 zero bytes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag: always set by a server.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: the export is read-only.
pub const FLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag: the server accepts `CMD_FLUSH`.
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: the server accepts `CMD_FLAG_FUA`.
pub const FLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: the server accepts `CMD_TRIM`.
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag: the server accepts `CMD_WRITE_ZEROES`.
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag: connections share one consistent view, flush
/// included.
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Option: choose the export and end the handshake, old style.
pub const OPT_EXPORT_NAME: u32 = 1;
/// Option: end the session.
pub const OPT_ABORT: u32 = 2;
/// Option: list the exports.
pub const OPT_LIST: u32 = 3;
/// Option: describe an export without choosing it.
pub const OPT_INFO: u32 = 6;
/// Option: choose the export and end the handshake.
pub const OPT_GO: u32 = 7;
/// Option: use structured replies.
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply: done.
pub const REP_ACK: u32 = 1;
/// Option reply: one export of a list.
pub const REP_SERVER: u32 = 2;
/// Option reply: one piece of information about the export.
pub const REP_INFO: u32 = 3;
/// Bit set in every option error reply.
pub(crate) const REP_FLAG_ERROR: u32 = 1 << 31;
/// Option error: the option is not supported.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// Option error: forbidden by policy.
pub(crate) const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// Option error: syntactically or semantically invalid.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// Option error: not supported on this platform.
pub(crate) const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// Option error: TLS required.
pub(crate) const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// Option error: no such export.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// Option error: the server is shutting down.
pub(crate) const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// Option error: the client must ask for block sizes.
pub(crate) const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// Option error: the request is too big.
pub(crate) const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

/// Info: size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Info: the export's canonical name.
pub const INFO_NAME: u16 = 1;
/// Info: a description of the export.
pub const INFO_DESCRIPTION: u16 = 2;
/// Info: minimum, preferred and maximum block sizes.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Command: read.
pub const CMD_READ: u16 = 0;
/// Command: write.
pub const CMD_WRITE: u16 = 1;
/// Command: disconnect.
pub const CMD_DISC: u16 = 2;
/// Command: flush.
pub const CMD_FLUSH: u16 = 3;
/// Command: trim (discard).
pub const CMD_TRIM: u16 = 4;
/// Command: write zeroes.
pub const CMD_WRITE_ZEROES: u16 = 6;

/// Command flag: force unit access (durable before the reply).
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag (write zeroes): do not punch a hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag (read): reply in one data chunk.
pub const CMD_FLAG_DF: u16 = 1 << 2;

/// Structured reply flag: the last chunk of the reply.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
/// Chunk: no payload; only valid with [`REPLY_FLAG_DONE`].
pub const REPLY_TYPE_NONE: u16 = 0;
/// Chunk: data at an offset.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// Chunk: a range that reads as zeroes.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// Bit set in every error chunk type.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// Chunk: an error for the whole request.
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
/// Chunk: an error at an offset.
pub(crate) const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

/// Error: operation not permitted (e.g. a write to a read-only export).
pub const EPERM: u32 = 1;
/// Error: input/output error.
pub const EIO: u32 = 5;
/// Error: out of memory.
pub const ENOMEM: u32 = 12;
/// Error: invalid argument.
pub const EINVAL: u32 = 22;
/// Error: no space left.
pub const ENOSPC: u32 = 28;
/// Error: the request is too large.
pub const EOVERFLOW: u32 = 75;
/// Error: the command is not supported.
pub const ENOTSUP: u32 = 95;
/// Error: the server is shutting down.
pub const ESHUTDOWN: u32 = 108;

/// Default port of NBD over TCP.
pub const DEFAULT_PORT: u16 = 10809;
/// Longest export name the protocol allows.
pub const MAX_NAME_LEN: usize = 4096;
/// Longest option payload decoders accept: a name, a description and
/// their length fields, with room to spare.
pub const MAX_OPTION_LEN: u32 = 64 * 1024;
/// Largest payload a client may send when the server gave no block
/// sizes, and the maximum a server should accept.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32 << 20;
