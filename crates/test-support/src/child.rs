//! Programs a test runs to their end (`mpio`'s verbs, nbdcopy, fio),
//! each bounded in time: one that hangs is killed and the test fails
//! naming it, with what it printed, instead of holding the suite until
//! CI's own limit ends it with nothing to go on.
//!
//! Output is read while the program runs, so one that prints more than
//! a pipe holds is never mistaken for one that hangs.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a wait looks whether the program ended.
const POLL: Duration = Duration::from_millis(2);

/// Runs `command` to its end with its output captured (its standard
/// input closed), as [`Command::output`] does, within `limit`.
///
/// # Panics
/// If it cannot be started, or has not ended within `limit`: it is then
/// killed, and the panic names it and gives what it printed.
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    let what = describe(command);
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{what} does not start: {error}"));
    output_of(child, limit, &what)
}

/// The output of `child`, started with its standard output and error
/// piped (others are read as empty), once it ends within `limit`.
///
/// # Panics
/// As [`output_within`], naming the program `what`; also if something
/// it started keeps its output open past `limit`.
pub fn output_of(mut child: Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_ended(&mut child, deadline);
    // Once it ended (or was killed) its pipes close, unless a process it
    // started holds them: read until the deadline, and a little past it
    // for what a killed program printed.
    let deadline = deadline.max(Instant::now() + Duration::from_secs(1));
    match (status, stdout.until(deadline), stderr.until(deadline)) {
        (Some(status), Some(stdout), Some(stderr)) => Output {
            status,
            stdout,
            stderr,
        },
        (status, stdout, stderr) => {
            let text = |bytes: Option<Vec<u8>>| {
                bytes.map_or("(still open)\n".into(), |bytes| {
                    String::from_utf8_lossy(&bytes).into_owned()
                })
            };
            let printed = format!("{}{}", text(stdout), text(stderr));
            match status {
                None => panic!("{what} did not end within {limit:?}; it printed:\n{printed}"),
                Some(_) => panic!(
                    "{what} ended, but something it started kept its output open for \
                     {limit:?}; it printed:\n{printed}"
                ),
            }
        }
    }
}

/// Waits for `child` to end within `limit`.
///
/// # Panics
/// Past `limit`, having killed it, naming it `what`.
pub fn wait_within(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    wait_ended(child, Instant::now() + limit)
        .unwrap_or_else(|| panic!("{what} did not end within {limit:?}"))
}

/// Runs `command` to its end within `limit`, for a guard's clean-up as
/// a test ends, passed or failed (unmounting, detaching a device,
/// unloading a module): it never panics, since a panic while a failed
/// test unwinds aborts the whole test binary. Its input and output are
/// closed; what it says on standard error goes to the test's, with a
/// line naming it if it fails. One that has not ended by then is killed
/// as [`kill_within`] does, and named too. Its status, or `None` if it
/// did not start or end.
pub fn cleanup_within(command: &mut Command, limit: Duration) -> Option<ExitStatus> {
    let what = describe(command);
    let mut child = match command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            eprintln!("clean-up: {what} does not start: {error}");
            return None;
        }
    };
    let status = ended_by(&mut child, Instant::now() + limit);
    match status {
        Some(status) if !status.success() => eprintln!("clean-up: {what}: {status}"),
        Some(_) => {}
        None => {
            eprintln!("clean-up: {what} did not end within {limit:?}; killed");
            kill_within(&mut child, KILL_GRACE);
        }
    }
    status
}

/// Kills `child` (if it still runs) and reaps it, waiting at most
/// `limit` for it to end, for a guard's clean-up: never panics. A
/// process asleep in the kernel on a hung device ends only when the
/// device answers, if ever; past `limit` it is left unreaped (standard
/// error says so) rather than holding the test with it. Its status, or
/// `None`.
pub fn kill_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let _ = child.kill();
    let status = ended_by(child, Instant::now() + limit);
    if status.is_none() {
        eprintln!(
            "clean-up: process {} did not end within {limit:?} of SIGKILL; left unreaped",
            child.id()
        );
    }
    status
}

/// How long a killed program may take to end in a clean-up.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// The status of `child` once it ends before `deadline`, or `None`.
fn ended_by(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// The status of `child` once it ends before `deadline`; `None` if it
/// did not, when it was killed and reaped.
fn wait_ended(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let status = ended_by(child, deadline);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// What a pipe gave, read to its end on a thread of its own.
struct Drained(mpsc::Receiver<Vec<u8>>);

impl Drained {
    /// Everything the pipe gave, if it closed before `deadline`.
    fn until(&self, deadline: Instant) -> Option<Vec<u8>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.0.recv_timeout(wait).ok()
    }
}

/// Reads `pipe` (none: nothing) to its end on a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> Drained {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        let _ = sender.send(bytes);
    });
    Drained(receiver)
}

/// `program arg...`, for messages.
fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|word| word.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_ends_gives_its_output_however_much_it_prints() {
        // More than a pipe holds, on both streams.
        let output = output_within(
            Command::new("sh").args([
                "-c",
                "head -c 200000 /dev/zero; head -c 100000 /dev/zero >&2",
            ]),
            Duration::from_secs(60),
        );
        assert!(output.status.success());
        assert_eq!(
            (output.stdout.len(), output.stderr.len()),
            (200_000, 100_000)
        );
    }

    #[test]
    fn a_clean_up_gives_the_status_of_a_program_that_ends() {
        let status = cleanup_within(
            Command::new("sh").args(["-c", "exit 3"]),
            Duration::from_secs(60),
        );
        assert_eq!(status.and_then(|status| status.code()), Some(3));
        assert_eq!(
            cleanup_within(
                &mut Command::new("/nonexistent/program"),
                Duration::from_secs(60)
            ),
            None
        );
    }

    #[test]
    fn a_clean_up_that_hangs_gives_none_without_a_panic() {
        let limit = Duration::from_millis(200);
        let started = Instant::now();
        let status = cleanup_within(Command::new("sleep").arg("1000"), limit);
        assert_eq!(status, None);
        // It ran to its limit: a program that never started returns at once.
        assert!(started.elapsed() >= limit);
    }

    #[test]
    fn a_killed_process_is_reaped() {
        use std::os::unix::process::ExitStatusExt;
        let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
        let process = std::path::Path::new("/proc").join(child.id().to_string());
        let status = kill_within(&mut child, Duration::from_secs(60));
        assert_eq!(status.and_then(|status| status.signal()), Some(9));
        // Reaped: no process, not even a zombie, is left.
        assert!(!process.exists(), "{} is still there", process.display());
    }

    #[test]
    fn a_program_that_hangs_is_killed_and_named_with_what_it_printed() {
        let panic = std::panic::catch_unwind(|| {
            output_within(
                Command::new("sh").args(["-c", "echo started; exec sleep 1000"]),
                Duration::from_millis(200),
            )
        })
        .expect_err("it hangs");
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(
            message.starts_with("sh -c echo started; exec sleep 1000 did not end within")
                && message.ends_with("it printed:\nstarted\n"),
            "{message}"
        );
    }
}
