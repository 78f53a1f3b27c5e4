//! Real NBD servers (nbdkit, qemu-nbd) as child processes: started on a
//! unix socket (or a loopback TCP port), waited for with a bound, and
//! killed when dropped.
//!
//! nbdkit runs with `--exit-with-parent`, which ends it when the *thread*
//! that started it ends: start and restart it from a thread that outlives
//! it.

use crate::require;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a test server listens.
#[derive(Debug)]
enum Listen {
    Unix(PathBuf),
    Tcp(u16),
}

/// A running NBD server process; killed and reaped when dropped.
pub struct NbdServer {
    child: Option<Child>,
    listen: Listen,
    command: Vec<String>,
    /// nbdkit writes its pid file once it accepts connections: waiting
    /// for it spares the server a probe connection (and its log line).
    pid_file: Option<PathBuf>,
    /// The pause filter's control socket ([`NbdServer::nbdkit_pausable`]).
    pause_control: Option<PathBuf>,
}

impl NbdServer {
    /// `nbdkit` in the foreground on `socket` with `args` (filters, the
    /// plugin and its parameters), waited for until it accepts a
    /// connection.
    pub fn nbdkit(socket: &Path, args: &[&str]) -> NbdServer {
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
        NbdServer::start(Listen::Unix(socket.to_path_buf()), command, Some(pid_file))
    }

    /// `nbdkit file` serving `file` on `socket` behind the pause filter:
    /// [`NbdServer::pause`] makes it hold every request until
    /// [`NbdServer::resume`].
    ///
    /// One thread per connection: nbdkit 1.32 aborts (`raw_send_socket:
    /// Assertion 'sock >= 0' failed`) when a worker thread replies to a
    /// paused request after another thread saw the client close the
    /// connection. With one thread, the reply to the resumed request
    /// meets a broken pipe and the server lives on.
    pub fn nbdkit_pausable(socket: &Path, file: &Path) -> NbdServer {
        let control = PathBuf::from(format!("{}.ctl", socket.display()));
        let mut server = NbdServer::nbdkit(
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
    pub fn nbdkit_file(socket: &Path, file: &Path) -> NbdServer {
        NbdServer::nbdkit(socket, &["file", &file.display().to_string()])
    }

    /// Pauses a [`NbdServer::nbdkit_pausable`] server: it holds every
    /// request from now on, and those it is handling.
    pub fn pause(&self) {
        pause_control(self.control(), b'p');
    }

    /// Resumes a paused [`NbdServer::nbdkit_pausable`] server.
    pub fn resume(&self) {
        pause_control(self.control(), b'r');
    }

    fn control(&self) -> &Path {
        self.pause_control
            .as_deref()
            .expect("only a server made by NbdServer::nbdkit_pausable pauses")
    }

    /// `nbdkit` on a free TCP port of 127.0.0.1, otherwise as
    /// [`NbdServer::nbdkit`].
    pub fn nbdkit_tcp(args: &[&str]) -> NbdServer {
        require("nbdkit", "nbdkit");
        // The kernel picks a free port and nbdkit binds it right after:
        // another process may take it in between on a shared machine, and
        // then nbdkit exits at start; another port is tried.
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            match NbdServer::try_nbdkit_tcp(args) {
                Ok(server) => return server,
                Err(why) if attempt < ATTEMPTS => eprintln!("{why}; trying another port"),
                Err(why) => panic!("{why} ({ATTEMPTS} ports tried)"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn try_nbdkit_tcp(args: &[&str]) -> Result<NbdServer, String> {
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
        let mut server = NbdServer {
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
    pub fn qemu_nbd(socket: &Path, file: &Path, args: &[&str]) -> NbdServer {
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
        NbdServer::start(Listen::Unix(socket.to_path_buf()), command, None)
    }

    fn start(listen: Listen, command: Vec<String>, pid_file: Option<PathBuf>) -> NbdServer {
        let mut server = NbdServer {
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

    /// The unix socket the server listens on.
    ///
    /// # Panics
    /// If it listens on TCP ([`NbdServer::nbdkit_tcp`]).
    pub fn socket(&self) -> &Path {
        match &self.listen {
            Listen::Unix(socket) => socket,
            Listen::Tcp(port) => panic!("the server listens on TCP port {port}"),
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

impl Drop for NbdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `command` (`p` pause, `r` resume) to an nbdkit pause filter's
/// control socket and waits for its upper-case echo.
pub fn pause_control(control: &Path, command: u8) {
    let mut stream = UnixStream::connect(control).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(&[command]).unwrap();
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(answer[0], command.to_ascii_uppercase());
}
