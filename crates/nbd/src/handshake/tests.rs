use super::*;

#[test]
fn greeting_round_trips_and_refuses_oldstyle() {
    let greeting = Greeting {
        handshake_flags: FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES,
    };
    let bytes = greeting.encode();
    assert_eq!(&bytes[..8], b"NBDMAGIC");
    assert_eq!(&bytes[8..16], b"IHAVEOPT");
    assert_eq!(Greeting::decode(&bytes), Ok(greeting));
    let mut oldstyle = bytes;
    oldstyle[8..16].copy_from_slice(&0x0000_4202_8186_1253_u64.to_be_bytes());
    assert!(matches!(
        Greeting::decode(&oldstyle),
        Err(WireError::BadMagic {
            what: "server greeting (newstyle)",
            ..
        })
    ));
    assert!(matches!(
        Greeting::decode(&bytes[..17]),
        Err(WireError::Truncated { need: 18, .. })
    ));
}

#[test]
fn client_flags_refuse_unknown_bits() {
    let flags = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
    assert_eq!(decode_client_flags(&encode_client_flags(flags)), Ok(flags));
    assert!(decode_client_flags(&encode_client_flags(1 << 5)).is_err());
}

#[test]
fn option_headers_round_trip_and_bound_their_length() {
    let header = OptionHeader {
        option: OPT_GO,
        length: 12,
    };
    assert_eq!(OptionHeader::decode(&header.encode()), Ok(header));
    let huge = OptionHeader {
        option: OPT_GO,
        length: MAX_OPTION_LEN + 1,
    };
    assert!(matches!(
        OptionHeader::decode(&huge.encode()),
        Err(WireError::TooLong { .. })
    ));
    let reply = OptionReplyHeader {
        option: OPT_GO,
        reply_type: REP_ERR_UNKNOWN,
        length: 0,
    };
    let decoded = OptionReplyHeader::decode(&reply.encode()).unwrap();
    assert_eq!(decoded, reply);
    assert!(decoded.is_error());
    assert_eq!(
        reply_type_name(decoded.reply_type),
        "ERR_UNKNOWN (no such export)"
    );
    assert!(OptionReplyHeader::decode(&header.encode()).is_err());
}

#[test]
fn go_request_round_trips() {
    let request = GoRequest {
        name: "disk0",
        info_requests: vec![INFO_EXPORT, INFO_BLOCK_SIZE],
    };
    let mut bytes = Vec::new();
    request.encode(&mut bytes).unwrap();
    assert_eq!(bytes.len(), 4 + 5 + 2 + 4);
    assert_eq!(GoRequest::decode(&bytes), Ok(request));
    // A name length beyond the payload, a missing count, trailing bytes.
    let mut long_name = bytes.clone();
    long_name[3] = 200;
    assert!(GoRequest::decode(&long_name).is_err());
    assert!(GoRequest::decode(&bytes[..9]).is_err());
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(GoRequest::decode(&trailing).is_err());
    let name = "x".repeat(MAX_NAME_LEN + 1);
    let too_long = GoRequest {
        name: &name,
        info_requests: vec![],
    };
    assert!(too_long.encode(&mut Vec::new()).is_err());
}

#[test]
fn infos_round_trip_and_block_sizes_are_checked() {
    let infos = [
        Info::Export {
            size: 1 << 30,
            flags: FLAG_HAS_FLAGS | FLAG_SEND_FLUSH,
        },
        Info::Name("disk0"),
        Info::Description("a disk"),
        Info::BlockSize {
            min: 512,
            preferred: 4096,
            max: 32 << 20,
        },
    ];
    for info in infos {
        let mut bytes = Vec::new();
        info.encode(&mut bytes);
        assert_eq!(Info::decode(&bytes), Ok(info));
        bytes.push(0);
        if !matches!(info, Info::Name(_) | Info::Description(_)) {
            assert!(
                Info::decode(&bytes).is_err(),
                "{info:?} with a trailing byte"
            );
        }
    }
    let mut bad = Vec::new();
    Info::BlockSize {
        min: 3,
        preferred: 4096,
        max: 4096,
    }
    .encode(&mut bad);
    assert!(matches!(
        Info::decode(&bad),
        Err(WireError::Invalid {
            what: "INFO_BLOCK_SIZE reply",
            ..
        })
    ));
    assert_eq!(
        Info::decode(&[0, 99, 1, 2]),
        Ok(Info::Unknown { info_type: 99 })
    );
    assert!(Info::decode(&[0]).is_err());
}

#[test]
fn export_name_reply_and_server_entry_round_trip() {
    let reply = ExportNameReply {
        size: 4096,
        flags: FLAG_HAS_FLAGS,
    };
    let mut bytes = Vec::new();
    reply.encode(false, &mut bytes);
    assert_eq!(bytes.len(), ExportNameReply::LEN + ExportNameReply::PADDING);
    assert_eq!(ExportNameReply::decode(&bytes), Ok(reply));
    assert!(ExportNameReply::decode(&bytes[..9]).is_err());
    let entry = ServerEntry {
        name: "disk0",
        description: "the first",
    };
    let mut bytes = Vec::new();
    entry.encode(&mut bytes).unwrap();
    assert_eq!(ServerEntry::decode(&bytes), Ok(entry));
    assert!(ServerEntry::decode(&bytes[..6]).is_err());
    assert_eq!(option_name(OPT_STRUCTURED_REPLY), "STRUCTURED_REPLY");
}
