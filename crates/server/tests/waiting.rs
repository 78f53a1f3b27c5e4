//! `Server::waiting_for_path`, the gauge behind the daemon's metric: with
//! `queue_if_no_path` and every path failed, a client's requests wait and
//! are counted; a path reinstated answers them and the count falls to 0.

mod support;

use mpio_core::io::PathError;
use mpio_core::message::Message;
use mpio_nbd::consts::CMD_WRITE;
use support::*;

/// Waits until `server` counts `count` I/Os waiting for a path.
fn wait_for(server: &TestServer, count: u64) {
    wait_until(&format!("{count} I/Os wait for a path"), || {
        server.server.waiting_for_path() == count
    });
}

#[test]
fn io_held_for_lack_of_a_path_is_counted_until_a_path_returns() {
    let server = TestServer::default_two_loops();
    let map = &server.map;
    map.message(&Message::parse("queue_if_no_path").unwrap())
        .unwrap();
    for path in 0..3 {
        map.fail_path(path, PathError::Transport);
    }
    let mut client = RawClient::ready(server.socket());
    for cookie in 0..4u64 {
        client.request(CMD_WRITE, cookie, cookie * 4096, 4096, &[7; 4096]);
    }
    wait_for(&server, 4);
    map.reinstate_path(1);
    for _ in 0..4 {
        assert_eq!(client.simple_reply(0).0, 0);
    }
    wait_for(&server, 0);
}
