//! Properties over arbitrary bytes: no decoder panics on any input, and
//! every header round-trips through its encoder.

use crate::handshake::*;
use crate::reply::*;
use crate::request::Request;
use proptest::prelude::*;

proptest! {
    #[test]
    fn no_decoder_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Greeting::decode(&bytes);
        let _ = decode_client_flags(&bytes);
        let _ = OptionHeader::decode(&bytes);
        let _ = OptionReplyHeader::decode(&bytes);
        let _ = GoRequest::decode(&bytes);
        let _ = Info::decode(&bytes);
        let _ = ExportNameReply::decode(&bytes);
        let _ = ServerEntry::decode(&bytes);
        let _ = Request::decode(&bytes);
        let _ = SimpleReply::decode(&bytes);
        let _ = header_len(&bytes);
        if let Ok(header) = ChunkHeader::decode(&bytes) {
            let payload = &bytes[ChunkHeader::LEN..];
            let _ = Chunk::decode(&header, payload);
        }
    }

    #[test]
    fn chunk_payloads_of_any_type_never_panic(
        flags in any::<u16>(),
        reply_type in prop_oneof![0u16..4, Just(crate::consts::REPLY_TYPE_ERROR), Just(crate::consts::REPLY_TYPE_ERROR_OFFSET), any::<u16>()],
        payload in proptest::collection::vec(any::<u8>(), 0..48),
    ) {
        let header = ChunkHeader { flags, reply_type, cookie: 1, length: payload.len() as u32 };
        if let Ok(chunk) = Chunk::decode(&header, &payload) {
            // What decodes re-encodes to the same bytes.
            if !matches!(chunk, Chunk::Unknown { .. }) {
                let mut out = Vec::new();
                chunk.encode(1, header.is_done(), &mut out).unwrap();
                prop_assert_eq!(&out[ChunkHeader::LEN..], &payload[..]);
            }
        }
    }

    #[test]
    fn headers_round_trip(
        flags in any::<u16>(),
        command in any::<u16>(),
        cookie in any::<u64>(),
        offset in any::<u64>(),
        length in any::<u32>(),
    ) {
        let request = Request { flags, command, cookie, offset, length };
        prop_assert_eq!(Request::decode(&request.encode()), Ok(request));
        let simple = SimpleReply { error: length, cookie };
        prop_assert_eq!(SimpleReply::decode(&simple.encode()), Ok(simple));
        let chunk = ChunkHeader { flags, reply_type: command, cookie, length };
        prop_assert_eq!(ChunkHeader::decode(&chunk.encode()), Ok(chunk));
    }
}
