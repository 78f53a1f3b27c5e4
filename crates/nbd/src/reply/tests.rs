use super::*;

fn chunk_bytes(chunk: Chunk<'_>, done: bool) -> Vec<u8> {
    let mut out = Vec::new();
    chunk.encode(7, done, &mut out).unwrap();
    out
}

fn decode_whole(bytes: &[u8]) -> Result<(ChunkHeader, Chunk<'_>), WireError> {
    let header = ChunkHeader::decode(bytes)?;
    let chunk = Chunk::decode(&header, &bytes[ChunkHeader::LEN..])?;
    Ok((header, chunk))
}

#[test]
fn simple_reply_round_trips() {
    let reply = SimpleReply {
        error: EIO,
        cookie: u64::MAX,
    };
    let bytes = reply.encode();
    assert_eq!(header_len(&bytes), Ok(Some(SimpleReply::LEN)));
    assert_eq!(SimpleReply::decode(&bytes), Ok(reply));
    assert!(matches!(
        ChunkHeader::decode(&bytes),
        Err(WireError::BadMagic { .. })
    ));
    assert!(matches!(
        SimpleReply::decode(&bytes[..15]),
        Err(WireError::Truncated { need: 16, .. })
    ));
}

#[test]
fn every_chunk_type_round_trips() {
    let data = [1u8, 2, 3];
    let chunks = [
        (Chunk::None, true),
        (
            Chunk::OffsetData {
                offset: 4096,
                data: &data,
            },
            false,
        ),
        (
            Chunk::OffsetHole {
                offset: 8192,
                length: 512,
            },
            false,
        ),
        (
            Chunk::Error {
                error: EIO,
                message: "disk on fire",
                offset: None,
            },
            true,
        ),
        (
            Chunk::Error {
                error: ENOSPC,
                message: "",
                offset: Some(12),
            },
            true,
        ),
    ];
    for (chunk, done) in chunks {
        let bytes = chunk_bytes(chunk, done);
        assert_eq!(header_len(&bytes), Ok(Some(ChunkHeader::LEN)));
        let (header, decoded) = decode_whole(&bytes).unwrap();
        assert_eq!(decoded, chunk);
        assert_eq!(header.cookie, 7);
        assert_eq!(header.is_done(), done);
    }
}

#[test]
fn malformed_chunks_are_named() {
    let header = |reply_type, flags, length| ChunkHeader {
        flags,
        reply_type,
        cookie: 1,
        length,
    };
    let cases: [(ChunkHeader, &[u8], &str); 6] = [
        (header(REPLY_TYPE_NONE, 0, 0), &[], "NONE chunk"),
        (
            header(REPLY_TYPE_OFFSET_DATA, 0, 8),
            &[0; 8],
            "OFFSET_DATA chunk",
        ),
        (
            header(REPLY_TYPE_OFFSET_HOLE, 0, 12),
            &[0; 12],
            "OFFSET_HOLE chunk",
        ),
        (header(REPLY_TYPE_ERROR, 1, 6), &[0; 6], "error chunk"),
        (
            header(REPLY_TYPE_OFFSET_HOLE, 0, 13),
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9],
            "structured reply chunk",
        ),
        (
            header(REPLY_TYPE_OFFSET_DATA, 0, 10),
            &[0; 9],
            "structured reply chunk",
        ),
    ];
    for (header, payload, what) in cases {
        match Chunk::decode(&header, payload) {
            Err(WireError::Invalid { what: found, .. }) => assert_eq!(found, what),
            other => panic!("{header:?}: {other:?}"),
        }
    }
    // An error message longer than its payload.
    let header = header(REPLY_TYPE_ERROR, 1, 8);
    let payload = [0, 0, 0, 5, 0, 9, b'a', b'b'];
    assert!(matches!(
        Chunk::decode(&header, &payload),
        Err(WireError::Truncated { .. })
    ));
    assert!(header_len(&[0, 0]).unwrap().is_none());
    assert!(matches!(
        header_len(&[1, 2, 3, 4]),
        Err(WireError::BadMagic { what: "reply", .. })
    ));
}

#[test]
fn unknown_chunk_types_decode_for_the_caller_to_judge() {
    let header = ChunkHeader {
        flags: REPLY_FLAG_DONE,
        reply_type: REPLY_TYPE_FLAG_ERROR | 77,
        cookie: 1,
        length: 3,
    };
    assert_eq!(
        Chunk::decode(&header, &[1, 2, 3]),
        Ok(Chunk::Unknown {
            reply_type: REPLY_TYPE_FLAG_ERROR | 77
        })
    );
    assert!(Chunk::Unknown { reply_type: 5 }
        .encode(1, true, &mut Vec::new())
        .is_err());
}

#[test]
fn no_prefix_or_bit_flip_panics() {
    let bytes = chunk_bytes(
        Chunk::Error {
            error: EIO,
            message: "x",
            offset: Some(3),
        },
        true,
    );
    for len in 0..=bytes.len() {
        let _ = decode_whole(&bytes[..len]);
    }
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        if let Ok(header) = ChunkHeader::decode(&flipped) {
            let end = (ChunkHeader::LEN + header.length as usize).min(flipped.len());
            let _ = Chunk::decode(&header, &flipped[ChunkHeader::LEN..end]);
        }
    }
}
