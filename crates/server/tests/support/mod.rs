//! Shared by the server's tests: an in-process server over a memory map
//! (so the test drives the ports' fault switches and the map's messages
//! while a client runs), a private temporary directory, external client
//! processes bounded in time and killed when dropped, and a minimal raw
//! NBD client for protocol tests.
//!
//! The clients (nbdinfo, nbdcopy, qemu-img, fio) come from Debian
//! packages the test script installs; where one is missing, `require`
//! panics naming the package: these tests must not pass by skipping.

#![allow(dead_code)] // each test binary uses its own part of this module

use mpio_core::io::{PathError, PathOutcome};
use mpio_core::map::{Map, MapOptions};
use mpio_core::message::Message;
use mpio_core::table::Table;
use mpio_nbd::consts::*;
use mpio_nbd::handshake::{GoRequest, OptionHeader, OptionReplyHeader};
use mpio_nbd::reply::SimpleReply;
use mpio_nbd::request::Request;
use mpio_server::{Server, ServerConfig};
use mpio_transport::{DeviceSlot, Transports};
// Each test binary uses its own part of these.
#[allow(unused_imports)]
pub use mpio_test_support::{require, wait_until, NbdServer, TempDir, HANG_BOUND};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bound on any one client run or wait.
pub const TIMEOUT: Duration = Duration::from_secs(120);
/// Size of the test map (64 MiB).
pub const MAP_BYTES: u64 = 64 << 20;

/// A server over a map of three memory ports on one disk: `a` and `b`
/// in group 1 (round-robin), `c` in group 2.
pub struct TestServer {
    pub server: Server,
    pub transports: Transports,
    /// The map the server started with.
    pub map: Arc<Map>,
    /// The device served (its map changes with reloads).
    pub device: Arc<DeviceSlot>,
    pub dir: TempDir,
}

/// The map's table.
pub fn table_text(disk: &str) -> String {
    format!(
        "0 {} multipath 0 0 2 1 round-robin 0 2 1 memory:{disk}#a 1 memory:{disk}#b 1 round-robin 0 1 1 memory:{disk}#c 1",
        MAP_BYTES / 512
    )
}

impl TestServer {
    /// Starts a server with `config` (its unix socket set here) on a new
    /// memory map.
    pub fn start(config: ServerConfig) -> TestServer {
        TestServer::on_disk(config, MAP_BYTES)
    }

    /// As [`TestServer::start`], on a memory disk of `disk_bytes` (at
    /// least the map's): room for the map to grow.
    pub fn on_disk(mut config: ServerConfig, disk_bytes: u64) -> TestServer {
        mpio_test_support::log_to_test_output();
        let dir = TempDir::new("serve");
        config.unix_socket = Some(dir.join("nbd.sock"));
        let transports = Transports::new();
        transports.disk("disk", disk_bytes);
        let table = Table::parse(&table_text("disk")).unwrap();
        let device = transports.build(&table, MapOptions::default()).unwrap();
        let map = Arc::clone(&device.map);
        let device = device.into_slot();
        let server = Server::start(&config, Arc::clone(&device)).unwrap();
        TestServer {
            server,
            transports,
            map,
            device,
            dir,
        }
    }

    /// A server with default settings and two event loops.
    pub fn default_two_loops() -> TestServer {
        TestServer::start(ServerConfig {
            loops: 2,
            ..ServerConfig::default()
        })
    }

    /// The unix socket.
    pub fn socket(&self) -> &Path {
        self.server.unix_socket().unwrap()
    }

    /// The NBD URI of the export.
    pub fn uri(&self) -> String {
        self.server.uris()[0].clone()
    }

    /// Runs paths failing and recovering under the map until the returned
    /// guard is dropped: each round fails one port (by error, disconnect,
    /// then both ports of group 1 so group 2 serves), lets I/O fail over,
    /// heals it and reinstates the path, then switches back to group 1. At
    /// least one path stays usable.
    pub fn faults(&self) -> Faults {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let ports = ["a", "b", "c"].map(|port| self.transports.port("disk", port));
        let map = Arc::clone(&self.map);
        let switch_back = Message::parse("switch_group 1").unwrap();
        let thread = {
            let (stop, rounds) = (Arc::clone(&stop), Arc::clone(&rounds));
            std::thread::spawn(move || {
                let pause = || std::thread::sleep(Duration::from_millis(20));
                // Relaxed: a flag polled between rounds; no data rides on it.
                while !stop.load(Ordering::Relaxed) {
                    ports[0].fail(PathOutcome::Path(PathError::Transport));
                    pause();
                    ports[0].heal();
                    map.reinstate_path(0);
                    ports[1].disconnect();
                    pause();
                    ports[1].heal();
                    map.reinstate_path(1);
                    map.fail_path(0, PathError::Transport);
                    map.fail_path(1, PathError::Transport);
                    pause();
                    map.reinstate_path(0);
                    map.reinstate_path(1);
                    // Failback is manual (dm's default): without this,
                    // I/O would stay on group 2 from here on.
                    map.message(&switch_back).unwrap();
                    pause();
                    rounds.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Faults {
            stop,
            rounds,
            thread: Some(thread),
        }
    }
}

/// Faults running under a map; stopped (and every path healthy) on drop.
pub struct Faults {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Faults {
    /// Stops the faults; returns how many rounds ran.
    pub fn stop(mut self) -> u64 {
        self.halt()
    }

    fn halt(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.rounds.load(Ordering::Relaxed)
    }
}

impl Drop for Faults {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs `program` with `args`, bounded by [`TIMEOUT`]; returns its output
/// (panics on timeout, killing it).
pub fn run(program: &str, args: &[&str]) -> Output {
    mpio_test_support::output_within(Command::new(program).args(args), TIMEOUT)
}

/// Runs `program` and panics with its output unless it succeeds.
pub fn run_ok(program: &str, args: &[&str]) -> String {
    let output = run(program, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A file of `len` bytes of a position-dependent pattern.
pub fn pattern_file(path: &Path, len: usize, seed: u64) {
    let mut state = seed | 1;
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            // xorshift64: cheap, deterministic, no repeats at this length.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(path, bytes).unwrap();
}

/// fio's NBD engine, [`FIO_JOBS`] jobs at depth 32, writing crc32c-stamped 4k
/// blocks at random over 16 MiB each and verifying them; any error or
/// bad block fails it.
pub fn fio_verify(uri: &str) {
    fio_verify_with(uri, &[]);
}

/// As [`fio_verify`], but writing and verifying (each block checked
/// after at most 64 more writes) again and again until the file `stop`
/// exists: a job that ends when the test says so, not when its work
/// runs out. Its runtime bound (an hour) is one only a hang reaches.
pub fn fio_verify_until(uri: &str, stop: &Path) {
    let trigger = format!("--trigger-file={}", stop.display());
    fio_verify_with(
        uri,
        &[
            "--time_based=1",
            "--runtime=3600",
            "--verify_backlog=64",
            &trigger,
        ],
    );
}

/// Jobs [`fio_verify`] runs, each over its own 16 MiB.
const FIO_JOBS: usize = 2;

fn fio_verify_with(uri: &str, more: &[&str]) {
    let uri = format!("--uri={uri}");
    let numjobs = format!("--numjobs={FIO_JOBS}");
    let mut args = vec![
        "--name=verify",
        "--ioengine=nbd",
        &uri,
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=32",
        &numjobs,
        "--size=16M",
        "--offset_increment=16M",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        // No verify state files left in the working directory.
        "--verify_state_save=0",
        "--output-format=terse",
    ];
    args.extend_from_slice(more);
    let output = run_ok("fio", &args);
    // Terse output, one line per job: a run that reported fewer jobs
    // than it started checked less than it was asked to.
    let jobs: Vec<&str> = output
        .lines()
        .filter(|line| line.starts_with("3;"))
        .collect();
    assert_eq!(jobs.len(), FIO_JOBS, "fio's job results:\n{output}");
    for line in jobs {
        let fields: Vec<&str> = line.split(';').collect();
        // Terse v3: field 5 is the job's error number, field 6 the KiB it
        // read (the verification), field 47 the KiB it wrote.
        assert_eq!(fields[4], "0", "fio job failed: {line}");
        assert_ne!(fields[5], "0", "fio verified nothing: {line}");
        assert_ne!(fields[46], "0", "fio wrote nothing: {line}");
    }
}

/// A raw NBD client over a unix socket, for protocol tests.
pub struct RawClient {
    pub stream: UnixStream,
}

impl RawClient {
    /// Connects (reads and times out within [`TIMEOUT`]).
    pub fn connect(socket: &Path) -> RawClient {
        let stream = UnixStream::connect(socket).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        RawClient { stream }
    }

    /// Reads the greeting and sends fixed-newstyle flags.
    pub fn greet(&mut self) {
        let mut greeting = [0; 18];
        self.stream.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting[..8], b"NBDMAGIC");
        self.send(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes());
    }

    /// Sends `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Sends option `option` with `payload`.
    pub fn option(&mut self, option: u32, payload: &[u8]) {
        let header = OptionHeader {
            option,
            length: payload.len() as u32,
        };
        self.send(&header.encode());
        self.send(payload);
    }

    /// Reads one option reply: its type and payload.
    pub fn option_reply(&mut self) -> (u32, Vec<u8>) {
        let mut header = [0; OptionReplyHeader::LEN];
        self.stream.read_exact(&mut header).unwrap();
        let header = OptionReplyHeader::decode(&header).unwrap();
        let mut payload = vec![0; header.length as usize];
        self.stream.read_exact(&mut payload).unwrap();
        (header.reply_type, payload)
    }

    /// `OPT_GO` for the default export, replies read up to the ACK.
    pub fn go(&mut self) {
        let mut payload = Vec::new();
        GoRequest {
            name: "",
            info_requests: vec![],
        }
        .encode(&mut payload)
        .unwrap();
        self.option(OPT_GO, &payload);
        loop {
            let (reply_type, _) = self.option_reply();
            if reply_type == REP_ACK {
                return;
            }
            assert_eq!(reply_type, REP_INFO);
        }
    }

    /// A connected client in transmission (simple replies).
    pub fn ready(socket: &Path) -> RawClient {
        let mut client = RawClient::connect(socket);
        client.greet();
        client.go();
        client
    }

    /// Sends one request header (and `payload`).
    pub fn request(&mut self, command: u16, cookie: u64, offset: u64, length: u32, payload: &[u8]) {
        let request = Request {
            flags: 0,
            command,
            cookie,
            offset,
            length,
        };
        self.send(&request.encode());
        self.send(payload);
    }

    /// Reads one simple reply (and `data_len` bytes of data if it
    /// succeeded): (error, cookie, data).
    pub fn simple_reply(&mut self, data_len: usize) -> (u32, u64, Vec<u8>) {
        let mut header = [0; SimpleReply::LEN];
        self.stream.read_exact(&mut header).unwrap();
        let reply = SimpleReply::decode(&header).unwrap();
        let mut data = Vec::new();
        if reply.error == 0 {
            data.resize(data_len, 0);
            self.stream.read_exact(&mut data).unwrap();
        }
        (reply.error, reply.cookie, data)
    }

    /// True when the server closed the connection (end of file, or a
    /// reset), within 30 s; false if it sent a byte instead. A server
    /// that keeps the connection open past that fails the test: a read
    /// timeout is not a close.
    pub fn closed_by_server(&mut self) -> bool {
        let mut byte = [0; 1];
        self.stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => true,
            Err(error) => panic!("the server did not close the connection: {error}"),
        }
    }
}

/// Proves the server still serves: a new client writes and reads back.
pub fn still_serves(socket: &Path) {
    let mut client = RawClient::ready(socket);
    let data = vec![0x5a; 4096];
    client.request(CMD_WRITE, 1, 8192, 4096, &data);
    assert_eq!(client.simple_reply(0).0, 0);
    client.request(CMD_READ, 2, 8192, 4096, &[]);
    let (error, cookie, read) = client.simple_reply(4096);
    assert_eq!((error, cookie), (0, 2));
    assert_eq!(read, data);
    client.request(CMD_DISC, 3, 0, 0, &[]);
    assert!(client.closed_by_server());
}

/// Runs `hosted` as a host thread does (waits on its descriptor, never
/// longer than its wait hint, then one turn without waiting), each turn
/// under `gate` so that whoever holds the gate holds the loop between two
/// turns; when a turn says it ends, ends it and returns the turns taken.
pub fn host(mut hosted: Box<dyn mpio_io_loop::HostedLoop>, gate: &Mutex<()>) -> u64 {
    use mio::unix::SourceFd;
    use mio::{Events, Interest, Poll, Token};
    let mut poll = Poll::new().unwrap();
    let descriptor = hosted.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&descriptor), Token(0), Interest::READABLE)
        .unwrap();
    let mut events = Events::with_capacity(8);
    let mut turns = 0;
    loop {
        if let Err(error) = poll.poll(&mut events, hosted.wait_hint()) {
            assert_eq!(error.kind(), std::io::ErrorKind::Interrupted, "{error}");
        }
        turns += 1;
        let _turn = gate.lock().unwrap();
        if hosted.step(Some(Duration::ZERO)) == mpio_io_loop::Step::Ends {
            hosted.quit();
            return turns;
        }
    }
}
