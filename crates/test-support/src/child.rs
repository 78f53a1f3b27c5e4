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

/// The status of `child` once it ends before `deadline`; `None` if it
/// did not, when it was killed and reaped.
fn wait_ended(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("the child can be waited for") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(POLL);
    }
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
