//! Regression tests for replies a hostile or broken server sends: offsets
//! that overflow, chunks that overlap, a reply that never ends. Each
//! must end the connection (or the poll) without a panic and without a
//! read passing for good.

use super::*;

/// Polls until the connection breaks; its reason and what completed.
fn until_broken(connection: &mut Connection) -> (String, Vec<PathCompletion>) {
    let mut done = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Err(broken) = connection.poll(&mut done) {
            return (broken.0, done);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the connection did not break in 10 s"
        );
        std::thread::yield_now();
    }
}

#[test]
fn overlapping_chunks_break_the_connection_and_never_pass_for_a_read() {
    // Two chunks over the same half of a read add up to its length.
    for order in [[0u64, 0], [512, 512], [0, 256]] {
        let (mut connection, mut server) = pair(true);
        let mut read = io(1, Op::Read, 4096, 1024);
        read.buf.as_mut_slice().fill(0xEE);
        connection.send(CMD_READ, read).unwrap();
        let cookie = read_request(&mut server).cookie;
        let mut out = Vec::new();
        Chunk::OffsetData {
            offset: 4096 + order[0],
            data: &[7; 512],
        }
        .encode(cookie, false, &mut out)
        .unwrap();
        Chunk::OffsetHole {
            offset: 4096 + order[1],
            length: 512,
        }
        .encode(cookie, true, &mut out)
        .unwrap();
        server.write_all(&out).unwrap();
        let (reason, mut done) = until_broken(&mut connection);
        assert!(reason.contains("overlaps"), "{order:?}: {reason}");
        connection.sever(&mut done);
        assert_eq!(done.len(), 1, "{order:?}: the read comes back once");
        assert_eq!(
            done[0].outcome,
            PathOutcome::Path(PathError::ConnectionLost),
            "{order:?}"
        );
    }
}

#[test]
fn chunks_in_any_order_that_cover_the_read_once_complete_it() {
    let (mut connection, mut server) = pair(true);
    connection
        .send(CMD_READ, io(1, Op::Read, 4096, 1536))
        .unwrap();
    let cookie = read_request(&mut server).cookie;
    let mut out = Vec::new();
    for (offset, done) in [(1024, false), (0, false), (512, true)] {
        Chunk::OffsetData {
            offset: 4096 + offset,
            data: &[(offset / 512 + 1) as u8; 512],
        }
        .encode(cookie, done, &mut out)
        .unwrap();
    }
    server.write_all(&out).unwrap();
    let done = collect(&mut connection, 1).unwrap();
    assert_eq!(done[0].outcome, PathOutcome::Ok);
    let bytes = done[0].buf.as_slice();
    for (block, expected) in bytes.chunks(512).zip(1u8..) {
        assert!(block.iter().all(|byte| *byte == expected));
    }
}

#[test]
fn a_chunk_offset_near_u64_max_breaks_the_connection_without_panicking() {
    for (at, length) in [(u64::MAX, 8u32), (u64::MAX - 3, 8), (u64::MAX - 4095, 4096)] {
        for hole in [false, true] {
            let (mut connection, mut server) = pair(true);
            connection.send(CMD_READ, io(1, Op::Read, 0, 4096)).unwrap();
            let cookie = read_request(&mut server).cookie;
            let mut out = Vec::new();
            let data = vec![1u8; length as usize];
            let chunk = if hole {
                Chunk::OffsetHole { offset: at, length }
            } else {
                Chunk::OffsetData {
                    offset: at,
                    data: &data,
                }
            };
            chunk.encode(cookie, true, &mut out).unwrap();
            server.write_all(&out).unwrap();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                until_broken(&mut connection).0
            }));
            let reason = result.unwrap_or_else(|_| {
                panic!("offset {at:#x} (hole: {hole}): the client panicked on the peer's bytes")
            });
            assert!(reason.contains("outside"), "offset {at:#x}: {reason}");
        }
    }
}

/// A server that keeps one reply open with error chunks (allowed without
/// `DONE`) gets at most a budget of chunks parsed per poll: the flush
/// answered after them is not reached by the first poll, though every
/// byte is already in the socket.
#[test]
fn one_poll_parses_at_most_its_budget() {
    let (mut connection, mut server) = pair(true);
    connection
        .send(CMD_READ, io(1, Op::Read, 4096, 1024))
        .unwrap();
    connection.send(CMD_FLUSH, io(2, Op::Flush, 0, 0)).unwrap();
    let read = read_request(&mut server).cookie;
    let flush = read_request(&mut server).cookie;
    let mut out = Vec::new();
    for _ in 0..POLL_BUDGET_REPLIES + 16 {
        Chunk::Error {
            error: EIO,
            message: "",
            offset: None,
        }
        .encode(read, false, &mut out)
        .unwrap();
    }
    Chunk::None.encode(flush, true, &mut out).unwrap();
    // Small enough for the socket buffer: all of it is there before the
    // first poll.
    assert!(out.len() < 64 * 1024);
    server.write_all(&out).unwrap();
    let mut done = Vec::new();
    connection.poll(&mut done).unwrap();
    assert!(done.is_empty(), "one poll parsed past its budget");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while done.is_empty() {
        connection.poll(&mut done).unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "no flush reply in 10 s"
        );
    }
    assert_eq!(done[0].tag, 2);
    assert_eq!(done[0].outcome, PathOutcome::Ok);
}

/// A send that fails (the server closed its end) does not hide the
/// replies the server sent before it went.
#[test]
fn replies_sent_before_the_server_went_are_delivered() {
    let (mut connection, mut server) = pair(false);
    connection.send(CMD_FLUSH, io(1, Op::Flush, 0, 0)).unwrap();
    let cookie = read_request(&mut server).cookie;
    server
        .write_all(&SimpleReply { error: 0, cookie }.encode())
        .unwrap();
    drop(server);
    // Queued after the server went: writing it fails.
    let _ = connection.send(CMD_WRITE, io(2, Op::Write, 0, 512));
    let mut done = Vec::new();
    let _ = connection.poll(&mut done);
    let _ = connection.poll(&mut done);
    assert!(
        done.iter()
            .any(|completion| completion.tag == 1 && completion.outcome == PathOutcome::Ok),
        "the flush answered before the close was lost: {done:?}"
    );
}

#[test]
fn coverage_merges_neighbours_and_refuses_overlaps() {
    let mut ranges = Vec::new();
    assert!(cover(&mut ranges, 10, 20));
    assert!(cover(&mut ranges, 30, 40));
    assert!(cover(&mut ranges, 0, 10));
    assert_eq!(ranges, [(0, 20), (30, 40)]);
    for (start, end) in [(19, 21), (29, 31), (0, 1), (5, 35), (39, 50), (35, 36)] {
        assert!(!cover(&mut ranges, start, end), "{start}..{end}");
    }
    assert_eq!(
        ranges,
        [(0, 20), (30, 40)],
        "a refused range changes nothing"
    );
    assert!(cover(&mut ranges, 20, 30));
    assert_eq!(ranges, [(0, 40)]);
    assert!(cover(&mut ranges, 40, 40), "empty ranges are nothing");
}

/// A read that a chunk partly covered and a simple reply then ended (a
/// server mixing reply kinds) hands its list of covered ranges back for the
/// next read: the list must come back empty, or the next read's good
/// chunks would be refused as overlaps.
#[test]
fn a_simple_reply_after_a_chunk_leaves_no_ranges_for_the_next_read() {
    let (mut connection, mut server) = pair(true);
    connection
        .send(CMD_READ, io(1, Op::Read, 4096, 1024))
        .unwrap();
    let cookie = read_request(&mut server).cookie;
    let mut out = Vec::new();
    Chunk::OffsetData {
        offset: 4096,
        data: &[7; 512],
    }
    .encode(cookie, false, &mut out)
    .unwrap();
    out.extend_from_slice(&SimpleReply { error: 5, cookie }.encode());
    server.write_all(&out).unwrap();
    let done = collect(&mut connection, 1).unwrap();
    assert_ne!(
        done[0].outcome,
        PathOutcome::Ok,
        "the read did not complete"
    );

    connection
        .send(CMD_READ, io(2, Op::Read, 4096, 1024))
        .unwrap();
    let cookie = read_request(&mut server).cookie;
    let mut out = Vec::new();
    Chunk::OffsetData {
        offset: 4096,
        data: &[9; 1024],
    }
    .encode(cookie, true, &mut out)
    .unwrap();
    server.write_all(&out).unwrap();
    let done = collect(&mut connection, 1).expect("the second read is not refused as an overlap");
    assert_eq!(done[0].outcome, PathOutcome::Ok);
    assert!(done[0].buf.as_slice().iter().all(|byte| *byte == 9));
}
