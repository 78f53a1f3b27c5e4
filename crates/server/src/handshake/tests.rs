use super::*;

/// The size the export is described as holding.
const SIZE: u64 = 1 << 30;

fn export() -> Export {
    Export {
        name: "mpio".into(),
        description: "a map".into(),
        read_only: false,
    }
}

fn option(option: u32, payload: &[u8]) -> Vec<u8> {
    let header = OptionHeader {
        option,
        length: payload.len() as u32,
    };
    [&header.encode()[..], payload].concat()
}

fn go(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut payload = Vec::new();
    GoRequest {
        name,
        info_requests: infos.to_vec(),
    }
    .encode(&mut payload)
    .unwrap();
    payload
}

/// Splits `out` into (option, reply type, payload) triples.
fn replies(mut out: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
    let mut all = Vec::new();
    while !out.is_empty() {
        let header = OptionReplyHeader::decode(out).unwrap();
        let end = OptionReplyHeader::LEN + header.length as usize;
        all.push((
            header.option,
            header.reply_type,
            out[OptionReplyHeader::LEN..end].to_vec(),
        ));
        out = &out[end..];
    }
    all
}

fn started() -> (Handshake, Vec<u8>) {
    let mut out = Vec::new();
    let handshake = Handshake::new(&mut out);
    let greeting = Greeting::decode(&out).unwrap();
    assert_eq!(
        greeting.handshake_flags,
        FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES
    );
    (handshake, Vec::new())
}

#[test]
fn go_after_structured_reply_and_list_byte_by_byte() {
    let (mut handshake, mut out) = started();
    let mut input = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
    input.extend(option(OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(OPT_LIST, &[]));
    input.extend(option(OPT_GO, &go("mpio", &[INFO_NAME])));
    input.extend(b"requests follow");
    // Fed one byte more at a time: partial messages wait for the rest.
    let mut consumed = 0;
    let mut step = Step::NeedMore;
    for end in 1..=input.len() {
        let (used, now) = handshake
            .feed(&export(), SIZE, &input[consumed..end], &mut out)
            .unwrap();
        consumed += used;
        step = now;
        if step != Step::NeedMore {
            break;
        }
    }
    assert_eq!(step, Step::Transmission { structured: true });
    assert_eq!(&input[consumed..], b"requests follow");
    let replies = replies(&out);
    let types: Vec<(u32, u32)> = replies.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        types,
        [
            (OPT_STRUCTURED_REPLY, REP_ACK),
            (OPT_LIST, REP_SERVER),
            (OPT_LIST, REP_ACK),
            (OPT_GO, REP_INFO),
            (OPT_GO, REP_INFO),
            (OPT_GO, REP_INFO),
            (OPT_GO, REP_ACK),
        ]
    );
    assert_eq!(
        ServerEntry::decode(&replies[1].2).unwrap(),
        ServerEntry {
            name: "mpio",
            description: "a map"
        }
    );
    assert_eq!(
        Info::decode(&replies[3].2).unwrap(),
        Info::Export {
            size: SIZE,
            flags: export().transmission_flags()
        }
    );
    assert!(matches!(
        Info::decode(&replies[4].2).unwrap(),
        Info::BlockSize {
            max: MAX_PAYLOAD,
            ..
        }
    ));
    assert_eq!(Info::decode(&replies[5].2).unwrap(), Info::Name("mpio"));
}

#[test]
fn errors_keep_the_session_and_faults_end_it() {
    let (mut handshake, mut out) = started();
    let mut input = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
        .to_be_bytes()
        .to_vec();
    input.extend(option(99, b"whatever"));
    input.extend(option(OPT_INFO, &go("other", &[])));
    input.extend(option(OPT_INFO, b"\x00\x00"));
    input.extend(option(OPT_STRUCTURED_REPLY, b"x"));
    input.extend(option(OPT_EXPORT_NAME, b""));
    let (used, step) = handshake.feed(&export(), SIZE, &input, &mut out).unwrap();
    assert_eq!(used, input.len());
    assert_eq!(step, Step::Transmission { structured: false });
    let replies = replies(&out[..out.len() - ExportNameReply::LEN]);
    let types: Vec<u32> = replies.iter().map(|r| r.1).collect();
    assert_eq!(
        types,
        [
            REP_ERR_UNSUP,
            REP_ERR_UNKNOWN,
            REP_ERR_INVALID,
            REP_ERR_INVALID
        ]
    );
    let reply = ExportNameReply::decode(&out[out.len() - ExportNameReply::LEN..]).unwrap();
    assert_eq!(reply.size, 1 << 30);

    // Faults that end the session.
    let flags = FLAG_C_FIXED_NEWSTYLE.to_be_bytes();
    let cases: Vec<Vec<u8>> = vec![
        0u32.to_be_bytes().to_vec(),
        (1u32 << 7).to_be_bytes().to_vec(),
        [&flags[..], &[0u8; 16]].concat(),
        [&flags[..], &option(OPT_EXPORT_NAME, b"nope")].concat(),
        [
            &flags[..],
            &OptionHeader {
                option: OPT_GO,
                length: MAX_OPTION_LEN + 1,
            }
            .encode()[..],
        ]
        .concat(),
    ];
    for input in cases {
        let (mut handshake, mut out) = started();
        assert!(
            handshake.feed(&export(), SIZE, &input, &mut out).is_err(),
            "{input:?}"
        );
    }
}

#[test]
fn abort_and_the_option_bound() {
    let (mut handshake, mut out) = started();
    let mut input = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
    input.extend(option(OPT_ABORT, &[]));
    input.extend(option(OPT_LIST, &[]));
    let (_, step) = handshake.feed(&export(), SIZE, &input, &mut out).unwrap();
    assert_eq!(step, Step::Close);
    assert_eq!(replies(&out), [(OPT_ABORT, REP_ACK, vec![])]);

    let (mut handshake, mut out) = started();
    let mut input = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
    for _ in 0..=MAX_OPTIONS {
        input.extend(option(OPT_STRUCTURED_REPLY, &[]));
    }
    assert_eq!(
        handshake.feed(&export(), SIZE, &input, &mut out),
        Err(HandshakeError::TooManyOptions)
    );
}

/// An unknown export's name goes into the log line cut short: a client
/// may send 64 KiB of it (once logged in full).
#[test]
fn an_unknown_export_is_named_cut_short() {
    let (mut handshake, mut out) = started();
    let name = "x".repeat(60_000);
    let input = [
        &FLAG_C_FIXED_NEWSTYLE.to_be_bytes()[..],
        &option(OPT_EXPORT_NAME, name.as_bytes()),
    ]
    .concat();
    let error = handshake
        .feed(&export(), SIZE, &input, &mut out)
        .unwrap_err();
    let line = error.to_string();
    assert!(line.len() < 200, "{} bytes: {line:.200}", line.len());
    assert!(line.contains("(60000 bytes)"), "{line}");
}
