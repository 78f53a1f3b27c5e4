//! Shared by the `nbd_*` tests: real NBD servers (nbdkit, qemu-nbd)
//! started on unix sockets in a private temporary directory, waited for
//! with a bound, and killed when dropped; and a driver that runs a map's
//! queue on the real clock until its I/O completes, with a bound.
//!
//! The servers come from Debian packages the test script installs. Where
//! a server binary is missing, `require` panics with the package to
//! install: these tests must not pass by skipping on a machine that was
//! meant to run them.

#![allow(dead_code)] // each test binary uses its own part of this module

use mpio_core::io::{Buffer, Completion, Io, Op};
use mpio_core::map::MapOptions;
use mpio_core::queue::Queue;
use mpio_core::table::Table;
use mpio_transport::{clock, AnyQueue, Device, Transports};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A private temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory named after `label`.
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only makes names unique within this process.
        let index = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("mpio-{label}-{}-{index}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// A new sparse file `name` of `bytes` (reads as zeroes) inside the
    /// directory.
    pub fn sparse_file(&self, name: &str, bytes: u64) -> PathBuf {
        let path = self.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Panics with the Debian package to install if `program` is missing.
pub fn require(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "{program} not found: install the Debian package {package} (scripts/test.sh does)"
    );
}

/// Where a test server listens.
#[derive(Debug)]
enum Listen {
    Unix(PathBuf),
    Tcp(u16),
}

/// A running NBD server process; killed and reaped when dropped.
pub struct Server {
    child: Option<Child>,
    listen: Listen,
    command: Vec<String>,
    /// nbdkit writes its pid file once it accepts connections: waiting
    /// for it spares the server a probe connection (and its log line).
    pid_file: Option<PathBuf>,
    /// The pause filter's control socket ([`Server::nbdkit_pausable`]).
    pause_control: Option<PathBuf>,
}

impl Server {
    /// `nbdkit` in the foreground on `socket` with `args` (filters, the
    /// plugin and its parameters), waited for until it accepts a
    /// connection.
    pub fn nbdkit(socket: &Path, args: &[&str]) -> Server {
        require("nbdkit", "nbdkit");
        let pid_file = PathBuf::from(format!("{}.pid", socket.display()));
        let mut command = vec![
            "nbdkit".to_string(),
            "--foreground".into(),
            "--exit-with-parent".into(),
            "--unix".into(),
            socket.display().to_string(),
            "--pidfile".into(),
            pid_file.display().to_string(),
        ];
        command.extend(args.iter().map(|arg| arg.to_string()));
        Server::start(Listen::Unix(socket.to_path_buf()), command, Some(pid_file))
    }

    /// `nbdkit file` serving `file` on `socket` behind the pause filter:
    /// [`Server::pause`] makes it hold every request until
    /// [`Server::resume`].
    ///
    /// One thread per connection: nbdkit 1.32 aborts (`raw_send_socket:
    /// Assertion 'sock >= 0' failed`) when a worker thread replies to a
    /// paused request after another thread saw the client close the
    /// connection. With one thread, the reply to the resumed request
    /// meets a broken pipe and the server lives on.
    pub fn nbdkit_pausable(socket: &Path, file: &Path) -> Server {
        let control = PathBuf::from(format!("{}.ctl", socket.display()));
        let mut server = Server::nbdkit(
            socket,
            &[
                "--threads=1",
                "--filter=pause",
                "file",
                &file.display().to_string(),
                &format!("pause-control={}", control.display()),
            ],
        );
        server.pause_control = Some(control);
        server
    }

    /// `nbdkit file` serving `file` on `socket`.
    pub fn nbdkit_file(socket: &Path, file: &Path) -> Server {
        Server::nbdkit(socket, &["file", &file.display().to_string()])
    }

    /// Pauses a [`Server::nbdkit_pausable`] server: it holds every
    /// request from now on, and those it is handling.
    pub fn pause(&self) {
        pause_control(self.control(), b'p');
    }

    /// Resumes a paused [`Server::nbdkit_pausable`] server.
    pub fn resume(&self) {
        pause_control(self.control(), b'r');
    }

    fn control(&self) -> &Path {
        self.pause_control
            .as_deref()
            .expect("only a server made by Server::nbdkit_pausable pauses")
    }

    /// `nbdkit` on a free TCP port of 127.0.0.1, otherwise as
    /// [`Server::nbdkit`].
    pub fn nbdkit_tcp(args: &[&str]) -> Server {
        require("nbdkit", "nbdkit");
        // The kernel picks a free port and nbdkit binds it right after:
        // another process may take it in between on a shared machine, and
        // then nbdkit exits at start; another port is tried.
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            match Server::try_nbdkit_tcp(args) {
                Ok(server) => return server,
                Err(why) if attempt < ATTEMPTS => eprintln!("{why}; trying another port"),
                Err(why) => panic!("{why} ({ATTEMPTS} ports tried)"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn try_nbdkit_tcp(args: &[&str]) -> Result<Server, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pid_file =
            std::env::temp_dir().join(format!("mpio-nbdkit-{}-{port}.pid", std::process::id()));
        let mut command = vec![
            "nbdkit".to_string(),
            "--foreground".into(),
            "--exit-with-parent".into(),
            "--ipaddr".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--pidfile".into(),
            pid_file.display().to_string(),
        ];
        command.extend(args.iter().map(|arg| arg.to_string()));
        let mut server = Server {
            child: None,
            listen: Listen::Tcp(port),
            command,
            pid_file: Some(pid_file),
            pause_control: None,
        };
        server.try_spawn()?;
        Ok(server)
    }

    /// `qemu-nbd` serving raw file `file` on `socket` with `args`, to any
    /// number of clients, staying up when they leave.
    pub fn qemu_nbd(socket: &Path, file: &Path, args: &[&str]) -> Server {
        require("qemu-nbd", "qemu-utils");
        let mut command = vec![
            "qemu-nbd".to_string(),
            "--format=raw".into(),
            "--persistent".into(),
            "--shared=64".into(),
            "--socket".into(),
            socket.display().to_string(),
        ];
        command.extend(args.iter().map(|arg| arg.to_string()));
        command.push(file.display().to_string());
        Server::start(Listen::Unix(socket.to_path_buf()), command, None)
    }

    fn start(listen: Listen, command: Vec<String>, pid_file: Option<PathBuf>) -> Server {
        let mut server = Server {
            child: None,
            listen,
            command,
            pid_file,
            pause_control: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        self.try_spawn().unwrap_or_else(|why| panic!("{why}"));
    }

    /// Starts the command and waits until it listens; an error if it
    /// exited at start.
    fn try_spawn(&mut self) -> Result<(), String> {
        self.remove_files();
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {:?}: {error}", self.command));
        self.child = Some(child);
        self.wait_listening()
    }

    fn wait_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let listening = match (&self.pid_file, &self.listen) {
                (Some(pid_file), _) => {
                    std::fs::read_to_string(pid_file).is_ok_and(|pid| pid.ends_with('\n'))
                }
                (None, Listen::Unix(socket)) => UnixStream::connect(socket).is_ok(),
                (None, Listen::Tcp(port)) => {
                    std::net::TcpStream::connect(("127.0.0.1", *port)).is_ok()
                }
            };
            if listening {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!("{:?} exited at start: {status}", self.command));
                }
            }
            assert!(
                Instant::now() < deadline,
                "{:?} not listening after {START_TIMEOUT:?}",
                self.command
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The path word of this server's default export.
    pub fn uri(&self) -> String {
        self.export_uri("")
    }

    /// The path word of this server's export `export`.
    pub fn export_uri(&self, export: &str) -> String {
        match &self.listen {
            Listen::Unix(socket) => format!("nbd+unix:///{export}?socket={}", socket.display()),
            Listen::Tcp(port) => format!("nbd://127.0.0.1:{port}/{export}"),
        }
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.remove_files();
    }

    fn remove_files(&self) {
        if let Listen::Unix(socket) = &self.listen {
            let _ = std::fs::remove_file(socket);
        }
        if let Some(pid_file) = &self.pid_file {
            let _ = std::fs::remove_file(pid_file);
        }
    }

    /// How the server process ended, if it did (without waiting): tells a
    /// crash of the server itself (nbdkit 1.32's `raw_send_socket`
    /// assertion, killed by SIGABRT) apart from what mpio did.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Starts the same command again, listening where it did.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `command` (`p` pause, `r` resume) to an nbdkit pause filter's
/// control socket and waits for its upper-case echo.
fn pause_control(control: &Path, command: u8) {
    let mut stream = UnixStream::connect(control).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(&[command]).unwrap();
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(answer[0], command.to_ascii_uppercase());
}

/// A map over `words` as one round-robin group.
pub fn one_group_table(
    size_bytes: u64,
    words: &[impl AsRef<str>],
    queue_if_no_path: bool,
) -> Table {
    let features = if queue_if_no_path {
        "1 queue_if_no_path"
    } else {
        "0"
    };
    let mut text = format!(
        "0 {} multipath {features} 0 1 1 round-robin 0 {} 0",
        size_bytes / 512,
        words.len()
    );
    for word in words {
        text.push(' ');
        text.push_str(word.as_ref());
    }
    Table::parse(&text).unwrap()
}

/// A device over `words` (one round-robin group).
pub fn build(size_bytes: u64, words: &[String], options: MapOptions) -> Device {
    Transports::new()
        .build(&one_group_table(size_bytes, words, false), options)
        .unwrap_or_else(|error| panic!("building the map: {error}"))
}

/// A device over `words` (one round-robin group) and one queue on it.
pub fn device(size_bytes: u64, words: &[String], options: MapOptions) -> (Device, Queue<AnyQueue>) {
    let device = build(size_bytes, words, options);
    let queue = device.queue(64, 0);
    (device, queue)
}

/// An I/O of `op` on `len` bytes at `offset`; writes carry `data`.
pub fn io(user_data: u64, op: Op, offset: u64, len: u32, data: Option<&[u8]>) -> Io {
    let buf = match (op, data) {
        (Op::Write, Some(data)) => {
            let mut buf = Buffer::zeroed(data.len());
            buf.as_mut_slice().copy_from_slice(data);
            buf
        }
        (Op::Read, _) => Buffer::zeroed(len as usize),
        _ => Buffer::empty(),
    };
    Io {
        user_data,
        op,
        offset,
        len,
        buf,
        fua: false,
    }
}

/// Submits `ios` (as fast as the queue takes them) and polls `queue` on
/// the real clock until every one completed; panics after `bound`.
pub fn run(queue: &mut Queue<AnyQueue>, ios: Vec<Io>, bound: Duration) -> Vec<Completion> {
    run_with(queue, ios, bound, |_| {})
}

/// [`run`], calling `between_polls` after every poll (to inject a fault
/// while the I/O is in flight).
pub fn run_with(
    queue: &mut Queue<AnyQueue>,
    ios: Vec<Io>,
    bound: Duration,
    mut between_polls: impl FnMut(&mut Queue<AnyQueue>),
) -> Vec<Completion> {
    let count = ios.len();
    let deadline = Instant::now() + bound;
    let mut ios = ios.into_iter();
    let mut next = ios.next();
    let mut done = Vec::new();
    while done.len() < count {
        while let Some(io) = next.take() {
            match queue.submit(io, clock::now_ns()) {
                Ok(()) => next = ios.next(),
                Err(io) => {
                    next = Some(io);
                    break;
                }
            }
        }
        queue.poll(clock::now_ns(), &mut |completion| done.push(completion));
        between_polls(queue);
        assert!(
            Instant::now() < deadline,
            "{} of {count} I/Os completed within {bound:?}",
            done.len()
        );
        if done.len() < count {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    done.sort_by_key(|completion| completion.user_data);
    for pair in done.windows(2) {
        assert_ne!(
            pair[0].user_data, pair[1].user_data,
            "an I/O completed twice"
        );
    }
    done
}

/// [`run`], then panics unless every I/O succeeded.
pub fn run_ok(queue: &mut Queue<AnyQueue>, ios: Vec<Io>, bound: Duration) -> Vec<Completion> {
    let done = run(queue, ios, bound);
    for completion in &done {
        assert_eq!(
            completion.result,
            Ok(()),
            "I/O {} failed",
            completion.user_data
        );
    }
    done
}

/// A deterministic byte pattern for block `block` in round `round`.
pub fn block_data(block: u64, round: u64, len: usize) -> Vec<u8> {
    let mut state =
        (block + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Writes of blocks `0..blocks` of `block_len` bytes with round `round`'s
/// data ([`block_data`]), and that data, block by block, to check reads
/// against.
pub fn block_writes(blocks: u64, block_len: u32, round: u64) -> (Vec<Io>, Vec<Vec<u8>>) {
    let reference: Vec<Vec<u8>> = (0..blocks)
        .map(|block| block_data(block, round, block_len as usize))
        .collect();
    let writes = (0..blocks)
        .map(|block| {
            io(
                block,
                Op::Write,
                block * u64::from(block_len),
                block_len,
                Some(&reference[block as usize]),
            )
        })
        .collect();
    (writes, reference)
}

/// Reads blocks `0..blocks` of `block_len` through a fresh one-path map
/// over `word` and asserts they equal `expected`.
pub fn verify_through(word: &str, block_len: u32, expected: &[Vec<u8>]) {
    let size_bytes = expected.len() as u64 * u64::from(block_len);
    let (_device, mut queue) = device(size_bytes, &[word.to_string()], MapOptions::default());
    let ios = (0..expected.len() as u64)
        .map(|block| {
            io(
                block,
                Op::Read,
                block * u64::from(block_len),
                block_len,
                None,
            )
        })
        .collect();
    let done = run_ok(&mut queue, ios, Duration::from_secs(60));
    for completion in done {
        let block = completion.user_data as usize;
        assert!(
            completion.buf.as_slice() == expected[block].as_slice(),
            "block {block} reads back wrong through {word}"
        );
    }
}
