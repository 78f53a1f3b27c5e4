//! The client's command choice and its reply parser, against a fake
//! server on the other end of a socket pair (real servers are in
//! `tests/nbd_*.rs`).

mod hostile;

use super::connection::{classify, cover, POLL_BUDGET_REPLIES};
use super::*;
use mpio_core::io::Buffer;
use mpio_nbd::reply::{Chunk, SimpleReply};
use mpio_nbd::request::Request;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

fn export(flags: u16, structured_replies: bool) -> Export {
    Export {
        size_bytes: 1 << 20,
        flags: FLAG_HAS_FLAGS | flags,
        structured_replies,
        min_block: 512,
        max_payload: 64 * 1024,
    }
}

fn io(tag: u64, op: Op, offset: u64, len: u32) -> PathIo {
    let buf = match op {
        Op::Read | Op::Write => Buffer::zeroed(len as usize),
        _ => Buffer::empty(),
    };
    PathIo {
        tag,
        op,
        offset,
        len,
        buf,
        fua: false,
    }
}

#[test]
fn commands_follow_the_export_flags() {
    use PathOutcome::{Ok as Done, Target};
    let all = FLAG_SEND_FLUSH | FLAG_SEND_TRIM | FLAG_SEND_WRITE_ZEROES;
    let cases = [
        (all, io(1, Op::Read, 0, 4096), Ok(CMD_READ)),
        (all, io(1, Op::Write, 512, 512), Ok(CMD_WRITE)),
        (all, io(1, Op::Flush, 0, 0), Ok(CMD_FLUSH)),
        (0, io(1, Op::Flush, 0, 0), Err(Done)),
        (all, io(1, Op::Discard, 0, 4096), Ok(CMD_TRIM)),
        (
            0,
            io(1, Op::Discard, 0, 4096),
            Err(Target(TargetError::NotSupported)),
        ),
        (all, io(1, Op::WriteZeroes, 0, 4096), Ok(CMD_WRITE_ZEROES)),
        (
            0,
            io(1, Op::WriteZeroes, 0, 4096),
            Err(Target(TargetError::NotSupported)),
        ),
        (
            FLAG_READ_ONLY,
            io(1, Op::Write, 0, 512),
            Err(Target(TargetError::NotSupported)),
        ),
        (FLAG_READ_ONLY, io(1, Op::Read, 0, 512), Ok(CMD_READ)),
        (
            all,
            io(1, Op::Read, 100, 512),
            Err(Target(TargetError::Invalid)),
        ),
        (
            all,
            io(1, Op::Read, 0, 128 * 1024),
            Err(Target(TargetError::Invalid)),
        ),
        (
            all,
            io(1, Op::Read, (1 << 20) - 512, 1024),
            Err(Target(TargetError::OutOfRange)),
        ),
        (all, io(1, Op::Read, 0, 0), Err(Done)),
    ];
    for (flags, io, expected) in cases {
        assert_eq!(
            command_for(&io, &export(flags, true)),
            expected,
            "{:?} with flags {flags:#x}",
            io.op
        );
    }
}

#[test]
fn errors_are_classified_like_blk_path_error() {
    assert_eq!(classify(EIO), PathOutcome::Path(PathError::Transport));
    assert_eq!(classify(ESHUTDOWN), PathOutcome::Path(PathError::Transport));
    assert_eq!(classify(9999), PathOutcome::Path(PathError::Unknown));
    assert_eq!(classify(ENOSPC), PathOutcome::Target(TargetError::NoSpace));
    assert_eq!(
        classify(ENOTSUP),
        PathOutcome::Target(TargetError::NotSupported)
    );
    assert_eq!(classify(EINVAL), PathOutcome::Target(TargetError::Invalid));
}

/// A connection to a fake server: the test reads requests from `server`
/// and writes replies to it.
fn pair(structured_replies: bool) -> (Connection, UnixStream) {
    let (client, server) = UnixStream::pair().unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let connection = Connection::new(
        Stream::Unix(client),
        export(FLAG_SEND_FLUSH, structured_replies),
        8,
    )
    .unwrap();
    (connection, server)
}

fn read_request(server: &mut UnixStream) -> Request {
    let mut header = [0; Request::LEN];
    server.read_exact(&mut header).unwrap();
    let request = Request::decode(&header).unwrap();
    let mut payload = vec![0; request.payload_len() as usize];
    server.read_exact(&mut payload).unwrap();
    request
}

/// Polls until `count` completions arrived or the connection broke.
fn collect(connection: &mut Connection, count: usize) -> Result<Vec<PathCompletion>, String> {
    let mut done = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while done.len() < count {
        connection.poll(&mut done).map_err(|broken| broken.0)?;
        assert!(std::time::Instant::now() < deadline, "no reply in 10 s");
        std::thread::yield_now();
    }
    Ok(done)
}

#[test]
fn simple_replies_complete_out_of_order() {
    let (mut connection, mut server) = pair(false);
    connection.send(CMD_READ, io(1, Op::Read, 0, 1024)).unwrap();
    connection
        .send(CMD_WRITE, io(2, Op::Write, 0, 512))
        .unwrap();
    let read = read_request(&mut server);
    let write = read_request(&mut server);
    assert_eq!((read.command, read.length), (CMD_READ, 1024));
    assert_eq!((write.command, write.length), (CMD_WRITE, 512));
    assert_ne!(read.cookie, write.cookie);
    server
        .write_all(
            &SimpleReply {
                error: 0,
                cookie: write.cookie,
            }
            .encode(),
        )
        .unwrap();
    let mut reply = SimpleReply {
        error: 0,
        cookie: read.cookie,
    }
    .encode()
    .to_vec();
    reply.extend(std::iter::repeat_n(0xAB, 1024));
    // Split mid-data: the parser waits for the rest.
    server.write_all(&reply[..500]).unwrap();
    let first = collect(&mut connection, 1).unwrap();
    assert_eq!(first[0].tag, 2);
    server.write_all(&reply[500..]).unwrap();
    let second = collect(&mut connection, 1).unwrap();
    assert_eq!(second[0].tag, 1);
    assert_eq!(second[0].outcome, PathOutcome::Ok);
    assert!(second[0].buf.as_slice().iter().all(|byte| *byte == 0xAB));
}

#[test]
fn structured_reads_assemble_data_holes_and_errors() {
    let (mut connection, mut server) = pair(true);
    connection
        .send(CMD_READ, io(1, Op::Read, 4096, 1024))
        .unwrap();
    connection.send(CMD_READ, io(2, Op::Read, 0, 512)).unwrap();
    let first = read_request(&mut server).cookie;
    let second = read_request(&mut server).cookie;
    let mut out = Vec::new();
    let data = [7u8; 512];
    Chunk::OffsetHole {
        offset: 4096 + 512,
        length: 512,
    }
    .encode(first, false, &mut out)
    .unwrap();
    Chunk::Error {
        error: ENOSPC,
        message: "full",
        offset: None,
    }
    .encode(second, true, &mut out)
    .unwrap();
    Chunk::OffsetData {
        offset: 4096,
        data: &data,
    }
    .encode(first, true, &mut out)
    .unwrap();
    server.write_all(&out).unwrap();
    let done = collect(&mut connection, 2).unwrap();
    assert_eq!(done[0].tag, 2);
    assert_eq!(done[0].outcome, PathOutcome::Target(TargetError::NoSpace));
    assert_eq!(done[1].tag, 1);
    assert_eq!(done[1].outcome, PathOutcome::Ok);
    assert!(done[1].buf.as_slice()[..512].iter().all(|byte| *byte == 7));
    assert!(done[1].buf.as_slice()[512..].iter().all(|byte| *byte == 0));
}

#[test]
fn protocol_violations_break_the_connection_and_lose_nothing() {
    // Each violation, given the cookie of the read in flight.
    type Violation = fn(u64) -> Vec<u8>;
    let violations: [(&str, Violation); 4] = [
        ("magic", |_| vec![0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]),
        ("not in flight", |read| {
            SimpleReply {
                error: 0,
                cookie: read + 99,
            }
            .encode()
            .to_vec()
        }),
        ("outside the request", |read| {
            let mut out = Vec::new();
            Chunk::OffsetData {
                offset: 0,
                data: &[1; 8],
            }
            .encode(read, true, &mut out)
            .unwrap();
            out
        }),
        ("missing chunks", |read| {
            let mut out = Vec::new();
            Chunk::None.encode(read, true, &mut out).unwrap();
            out
        }),
    ];
    for (reason, violation) in violations {
        let (mut connection, mut server) = pair(true);
        connection
            .send(CMD_READ, io(1, Op::Read, 4096, 512))
            .unwrap();
        connection.send(CMD_FLUSH, io(2, Op::Flush, 0, 0)).unwrap();
        let read = read_request(&mut server).cookie;
        server.write_all(&violation(read)).unwrap();
        let mut done = Vec::new();
        let broken = loop {
            if let Err(broken) = connection.poll(&mut done) {
                break broken;
            }
            std::thread::yield_now();
        };
        assert!(broken.0.contains(reason), "{reason}: {}", broken.0);
        connection.sever(&mut done);
        let mut tags: Vec<u64> = done.iter().map(|completion| completion.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, [1, 2], "{reason}: every I/O comes back once");
        assert!(done
            .iter()
            .all(|completion| matches!(completion.outcome, PathOutcome::Path(_))));
    }
}

#[test]
fn a_closed_connection_is_reported() {
    let (mut connection, server) = pair(false);
    drop(server);
    let mut done = Vec::new();
    let broken = connection.poll(&mut done).unwrap_err();
    assert!(broken.0.contains("closed"), "{}", broken.0);
}

/// One piece of a reply stream a fake server sends.
#[derive(Clone, Debug)]
enum Piece {
    Simple {
        cookie: u64,
        error: u32,
        data: usize,
    },
    Data {
        cookie: u64,
        at: u64,
        len: usize,
        done: bool,
    },
    Hole {
        cookie: u64,
        at: u64,
        len: u32,
        done: bool,
    },
    Error {
        cookie: u64,
        error: u32,
        done: bool,
    },
    None {
        cookie: u64,
    },
    Garbage(Vec<u8>),
}

fn piece() -> impl proptest::strategy::Strategy<Value = Piece> {
    use proptest::prelude::*;
    // Cookies 1..=4 are in flight; 99 never was.
    let cookie = prop_oneof![1u64..=4, Just(99u64)];
    // Near the reads at 4096, or anywhere a u64 reaches.
    let offset = prop_oneof![4000u64..5200, any::<u64>(), (u64::MAX - 2048)..=u64::MAX];
    prop_oneof![
        (
            cookie.clone(),
            prop_oneof![Just(0u32), Just(EIO), any::<u32>()],
            0usize..1100
        )
            .prop_map(|(cookie, error, data)| Piece::Simple {
                cookie,
                error,
                data
            }),
        (cookie.clone(), offset.clone(), 1usize..1100, any::<bool>()).prop_map(
            |(cookie, at, len, done)| Piece::Data {
                cookie,
                at,
                len,
                done
            }
        ),
        (cookie.clone(), offset, 0u32..1100, any::<bool>()).prop_map(|(cookie, at, len, done)| {
            Piece::Hole {
                cookie,
                at,
                len,
                done,
            }
        }),
        (
            cookie.clone(),
            prop_oneof![Just(0u32), Just(ENOSPC), any::<u32>()],
            any::<bool>()
        )
            .prop_map(|(cookie, error, done)| Piece::Error {
                cookie,
                error,
                done
            }),
        cookie.prop_map(|cookie| Piece::None { cookie }),
        proptest::collection::vec(any::<u8>(), 1..24).prop_map(Piece::Garbage),
    ]
}

/// The bytes of `piece`, encoded by hand so that invalid chunks (empty
/// holes, error 0) can be sent too; cookie `n` of 1..=4 stands for the
/// `n`th request's cookie in `cookies`, any other for itself.
fn piece_bytes(piece: &Piece, cookies: &[u64]) -> Vec<u8> {
    let real = |cookie: u64| {
        cookies
            .get((cookie as usize).wrapping_sub(1))
            .copied()
            .unwrap_or(cookie)
    };
    let chunk = |cookie: u64, reply_type: u16, done: bool, payload: &[u8]| {
        let header = mpio_nbd::reply::ChunkHeader {
            flags: if done { REPLY_FLAG_DONE } else { 0 },
            reply_type,
            cookie,
            length: payload.len() as u32,
        };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(payload);
        out
    };
    match piece {
        Piece::Simple {
            cookie,
            error,
            data,
        } => {
            let mut out = SimpleReply {
                error: *error,
                cookie: real(*cookie),
            }
            .encode()
            .to_vec();
            out.extend(std::iter::repeat_n(0x5A, *data));
            out
        }
        Piece::Data {
            cookie,
            at,
            len,
            done,
        } => {
            let mut payload = at.to_be_bytes().to_vec();
            payload.extend(std::iter::repeat_n(0x33, *len));
            chunk(real(*cookie), REPLY_TYPE_OFFSET_DATA, *done, &payload)
        }
        Piece::Hole {
            cookie,
            at,
            len,
            done,
        } => {
            let mut payload = at.to_be_bytes().to_vec();
            payload.extend_from_slice(&len.to_be_bytes());
            chunk(real(*cookie), REPLY_TYPE_OFFSET_HOLE, *done, &payload)
        }
        Piece::Error {
            cookie,
            error,
            done,
        } => {
            let mut payload = error.to_be_bytes().to_vec();
            payload.extend_from_slice(&2u16.to_be_bytes());
            payload.extend_from_slice(b"no");
            chunk(real(*cookie), REPLY_TYPE_ERROR, *done, &payload)
        }
        Piece::None { cookie } => chunk(real(*cookie), REPLY_TYPE_NONE, true, &[]),
        Piece::Garbage(bytes) => bytes.clone(),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Whatever a server sends (valid replies, replies for unknown
    /// cookies, data outside the request, garbage, cut anywhere), the
    /// client never panics, and once the connection ends every I/O comes
    /// back exactly once.
    #[test]
    fn any_reply_stream_returns_every_io_exactly_once(
        pieces in proptest::collection::vec(piece(), 0..10),
        split in 1usize..200,
        structured_replies in proptest::prelude::any::<bool>(),
    ) {
        let (mut connection, mut server) = pair(structured_replies);
        connection.send(CMD_READ, io(1, Op::Read, 4096, 1024)).unwrap();
        connection.send(CMD_READ, io(2, Op::Read, 4096, 1024)).unwrap();
        connection.send(CMD_WRITE, io(3, Op::Write, 0, 512)).unwrap();
        connection.send(CMD_FLUSH, io(4, Op::Flush, 0, 0)).unwrap();
        let cookies: Vec<u64> = (0..4).map(|_| read_request(&mut server).cookie).collect();
        let bytes: Vec<u8> = pieces
            .iter()
            .flat_map(|piece| piece_bytes(piece, &cookies))
            .collect();
        let mut done = Vec::new();
        let mut broken = false;
        for part in bytes.chunks(split) {
            server.write_all(part).unwrap();
            if connection.poll(&mut done).is_err() {
                broken = true;
                break;
            }
        }
        drop(server);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !broken {
            broken = connection.poll(&mut done).is_err();
            proptest::prop_assert!(std::time::Instant::now() < deadline);
        }
        connection.sever(&mut done);
        let mut tags: Vec<u64> = done.iter().map(|completion| completion.tag).collect();
        tags.sort_unstable();
        proptest::prop_assert_eq!(tags, vec![1, 2, 3, 4]);
    }
}

/// Polls a cut connection until it has nothing left to wait for.
fn poll_cut_until_done(connection: &mut Connection, done: &mut Vec<PathCompletion>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !connection.poll_cut(done) {
        assert!(
            std::time::Instant::now() < deadline,
            "the cut connection never ended"
        );
        std::thread::yield_now();
    }
}

#[test]
fn a_cut_connection_hands_reads_back_at_once_and_holds_writes_until_answered() {
    let (mut connection, mut server) = pair(false);
    connection.send(CMD_READ, io(1, Op::Read, 0, 512)).unwrap();
    connection
        .send(CMD_WRITE, io(2, Op::Write, 512, 512))
        .unwrap();
    let read = read_request(&mut server);
    let write = read_request(&mut server);
    let mut done = Vec::new();
    connection.cut(&mut done);
    let lost = PathOutcome::Path(PathError::ConnectionLost);
    assert_eq!(done.len(), 1, "the read at once");
    assert_eq!(
        (done[0].tag, done[0].outcome, done[0].buf.len()),
        (1, lost, 512)
    );
    assert!(connection.holds_requests(), "the write waits");
    // Our side is half-closed: the server reads end of file...
    let mut byte = [0u8; 1];
    assert_eq!(server.read(&mut byte).unwrap(), 0);
    // ...and still answers: the read's reply is dropped, the write's
    // completes it normally.
    let mut replies = SimpleReply {
        error: 0,
        cookie: read.cookie,
    }
    .encode()
    .to_vec();
    replies.extend_from_slice(&[7; 512]);
    replies.extend_from_slice(
        &SimpleReply {
            error: 0,
            cookie: write.cookie,
        }
        .encode(),
    );
    server.write_all(&replies).unwrap();
    done.clear();
    poll_cut_until_done(&mut connection, &mut done);
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].tag, done[0].outcome), (2, PathOutcome::Ok));
}

#[test]
fn a_held_write_comes_back_only_when_the_server_closes() {
    let (mut connection, mut server) = pair(true);
    connection
        .send(CMD_WRITE, io(1, Op::Write, 0, 512))
        .unwrap();
    read_request(&mut server);
    let mut done = Vec::new();
    connection.cut(&mut done);
    assert!(done.is_empty());
    assert!(!connection.poll_cut(&mut done), "held: not fenced yet");
    assert!(done.is_empty());
    drop(server);
    poll_cut_until_done(&mut connection, &mut done);
    let lost = PathOutcome::Path(PathError::ConnectionLost);
    assert_eq!(
        done.iter().map(|c| (c.tag, c.outcome)).collect::<Vec<_>>(),
        [(1, lost)]
    );
    assert!(connection.server_closed());
}

/// A receive or send error of our own side's (TCP's retransmission
/// timeout, which the kernel reports once, to whichever call comes
/// first) is no fence: the server may still apply the write. It stays
/// held even once the socket reads as ended (ours, not the server's
/// close), until the core abandons it; a reset, the server's host
/// tearing the connection down, is a fence.
#[test]
fn an_error_of_our_own_side_fences_nothing() {
    let timed_out = || std::io::Error::from_raw_os_error(libc::ETIMEDOUT);
    for on_send in [false, true] {
        let (mut connection, mut server) = pair(true);
        connection
            .send(CMD_WRITE, io(1, Op::Write, 0, 512))
            .unwrap();
        read_request(&mut server);
        let _ = if on_send {
            connection.send_failed(timed_out())
        } else {
            connection.read_ended(Some(timed_out()))
        };
        let mut done = Vec::new();
        connection.cut(&mut done);
        drop(server);
        for _ in 0..3 {
            assert!(
                !connection.poll_cut(&mut done),
                "still held (on send: {on_send})"
            );
        }
        assert!(done.is_empty() && !connection.server_closed());
        assert_eq!(connection.abandon(1).map(|io| io.tag), Some(1));
    }
    let (mut connection, _server) = pair(true);
    let _ = connection.read_ended(Some(std::io::Error::from_raw_os_error(libc::ECONNRESET)));
    assert!(connection.server_closed());
}

#[test]
fn an_abandoned_request_gives_its_buffer_back_and_its_reply_is_dropped() {
    let (mut connection, mut server) = pair(true);
    connection.send(CMD_READ, io(1, Op::Read, 0, 512)).unwrap();
    let read = read_request(&mut server);
    let given = connection.abandon(1).expect("held");
    assert_eq!((given.tag, given.buf.len()), (1, 512));
    assert!(connection.abandon(1).is_none(), "once");
    assert!(!connection.is_in_flight(1));
    let mut out = Vec::new();
    Chunk::OffsetData {
        offset: 0,
        data: &[9; 512],
    }
    .encode(read.cookie, true, &mut out)
    .unwrap();
    server.write_all(&out).unwrap();
    // The reply is parsed (the stream stays in step) and dropped.
    let mut done = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while connection.in_flight() > 0 {
        connection.poll(&mut done).unwrap();
        assert!(std::time::Instant::now() < deadline);
        std::thread::yield_now();
    }
    assert!(done.is_empty());
}

/// A write of `len` bytes of `fill` at block `block`.
fn write_of(tag: u64, block: u64, len: u32, fill: u8) -> PathIo {
    let mut io = io(tag, Op::Write, block * u64::from(len), len);
    io.buf.as_mut_slice().fill(fill);
    io
}

#[test]
fn writes_go_out_from_their_buffers_in_step_when_the_socket_fills() {
    // 64 KiB writes mixed with reads, far more than the socket holds: the
    // vectored writes stop part-way through headers and payloads, and the
    // server must still see every header followed by its own payload.
    let (mut connection, mut server) = pair(false);
    let mut sent = Vec::new();
    for tag in 0..8u64 {
        let len = 64 * 1024;
        if tag % 3 == 2 {
            connection
                .send(CMD_READ, io(tag, Op::Read, tag * u64::from(len), 512))
                .unwrap();
        } else {
            connection
                .send(CMD_WRITE, write_of(tag, tag, len, tag as u8 + 1))
                .unwrap();
        }
        sent.push(tag);
    }
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..8 {
            let mut header = [0; Request::LEN];
            server.read_exact(&mut header).unwrap();
            let request = Request::decode(&header).unwrap();
            let mut payload = vec![0; request.payload_len() as usize];
            server.read_exact(&mut payload).unwrap();
            let fill = payload.first().copied();
            assert!(payload.iter().all(|&byte| Some(byte) == fill));
            seen.push((request.command, request.length, fill));
        }
        // Kept open: a close would break the client's next poll.
        (seen, server)
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !reader.is_finished() {
        connection.poll(&mut Vec::new()).unwrap();
        assert!(std::time::Instant::now() < deadline, "requests not sent");
        std::thread::yield_now();
    }
    let (seen, _server) = reader.join().unwrap();
    let expected: Vec<_> = sent
        .iter()
        .map(|&tag| {
            if tag % 3 == 2 {
                (CMD_READ, 512, None)
            } else {
                (CMD_WRITE, 64 * 1024, Some(tag as u8 + 1))
            }
        })
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn a_write_is_given_back_only_before_or_after_its_payload_goes_out() {
    let (mut connection, mut server) = pair(false);
    // Fill the socket so that later writes stay queued or part-written.
    let len = 64 * 1024;
    for tag in 0..8 {
        connection
            .send(CMD_WRITE, write_of(tag, tag, len, 7))
            .unwrap();
    }
    // The last one is still waiting to be encoded: given back whole.
    let last = connection.abandon(7).expect("not yet sent");
    assert_eq!((last.tag, last.buf.len()), (7, len as usize));
    assert!(last.buf.as_slice().iter().all(|&byte| byte == 7));
    // The write being written is refused (its bytes must follow its
    // header); the others are given back: those written whole (their
    // replies will be dropped) and those not yet encoded (never sent).
    let refused: Vec<u64> = (0..7)
        .filter(|&tag| connection.abandon(tag).is_none())
        .collect();
    assert!(!refused.is_empty(), "a write was being written");
    // Requests the server gets: the ones written or being written.
    let expected = connection.in_flight();
    let reader = std::thread::spawn(move || {
        for _ in 0..expected {
            let mut header = [0; Request::LEN];
            server.read_exact(&mut header).unwrap();
            let request = Request::decode(&header).unwrap();
            let mut payload = vec![0; request.payload_len() as usize];
            server.read_exact(&mut payload).unwrap();
            assert!(payload.iter().all(|&byte| byte == 7), "payload in step");
        }
        server
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !reader.is_finished() {
        connection.poll(&mut Vec::new()).unwrap();
        assert!(std::time::Instant::now() < deadline, "requests not sent");
        std::thread::yield_now();
    }
    let _server = reader.join().unwrap();
    for tag in refused {
        assert!(connection.abandon(tag).is_some(), "written now: given back");
    }
}

/// Writes `bytes` to `server` in pieces of `piece`, polling `connection`
/// after each until it has taken them.
fn trickle(
    connection: &mut Connection,
    server: &mut UnixStream,
    bytes: &[u8],
    piece: usize,
) -> Vec<PathCompletion> {
    let mut done = Vec::new();
    for part in bytes.chunks(piece) {
        server.write_all(part).unwrap();
        for _ in 0..4 {
            connection.poll(&mut done).unwrap();
        }
    }
    done
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|at| (at % 251) as u8 ^ seed).collect()
}

#[test]
fn read_data_lands_in_the_buffer_whatever_the_pieces() {
    const LEN: u32 = 64 * 1024;
    for (structured, piece) in [
        (false, 7),
        (false, 4096),
        (true, 13),
        (true, 5000),
        (true, 1 << 20),
    ] {
        let (mut connection, mut server) = pair(structured);
        connection.send(CMD_READ, io(1, Op::Read, 0, LEN)).unwrap();
        connection.send(CMD_READ, io(2, Op::Read, 0, 512)).unwrap();
        let first = read_request(&mut server).cookie;
        let second = read_request(&mut server).cookie;
        let data = pattern(LEN as usize, 1);
        let small = pattern(512, 2);
        let mut out = Vec::new();
        if structured {
            // Second half first, then the first half (done), then the
            // small read: data chunks out of order, each direct.
            let half = LEN as usize / 2;
            for (offset, done) in [(half, false), (0, true)] {
                let chunk = Chunk::OffsetData {
                    offset: offset as u64,
                    data: &data[offset..offset + half],
                };
                chunk.encode(first, done, &mut out).unwrap();
            }
            Chunk::OffsetData {
                offset: 0,
                data: &small,
            }
            .encode(second, true, &mut out)
            .unwrap();
        } else {
            out.extend_from_slice(
                &SimpleReply {
                    error: 0,
                    cookie: first,
                }
                .encode(),
            );
            out.extend_from_slice(&data);
            out.extend_from_slice(
                &SimpleReply {
                    error: 0,
                    cookie: second,
                }
                .encode(),
            );
            out.extend_from_slice(&small);
        }
        let mut done = trickle(&mut connection, &mut server, &out, piece);
        done.extend(collect(&mut connection, 2 - done.len()).unwrap());
        done.sort_by_key(|completion| completion.tag);
        assert_eq!(done.len(), 2, "structured {structured}, pieces of {piece}");
        assert_eq!(done[0].outcome, PathOutcome::Ok);
        assert!(
            done[0].buf.as_slice() == data.as_slice(),
            "structured {structured}, pieces of {piece}"
        );
        assert!(done[1].buf.as_slice() == small.as_slice());
    }
}

#[test]
fn a_read_given_back_while_its_data_streams_in_leaves_the_stream_in_step() {
    let (mut connection, mut server) = pair(false);
    connection.send(CMD_READ, io(1, Op::Read, 0, 8192)).unwrap();
    connection.send(CMD_READ, io(2, Op::Read, 0, 512)).unwrap();
    let first = read_request(&mut server).cookie;
    let second = read_request(&mut server).cookie;
    let mut out = SimpleReply {
        error: 0,
        cookie: first,
    }
    .encode()
    .to_vec();
    out.extend_from_slice(&[5; 1000]);
    let done = trickle(&mut connection, &mut server, &out, 1 << 20);
    assert!(done.is_empty());
    let given = connection.abandon(1).expect("held");
    assert_eq!(given.buf.len(), 8192);
    // The rest of its data, then the second reply.
    let mut out = vec![5; 8192 - 1000];
    out.extend_from_slice(
        &SimpleReply {
            error: 0,
            cookie: second,
        }
        .encode(),
    );
    out.extend_from_slice(&[6; 512]);
    let mut done = trickle(&mut connection, &mut server, &out, 3000);
    done.extend(collect(&mut connection, 1 - done.len()).unwrap());
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].tag, done[0].outcome), (2, PathOutcome::Ok));
    assert!(done[0].buf.as_slice().iter().all(|&byte| byte == 6));
    assert_eq!(connection.in_flight(), 0);
}
