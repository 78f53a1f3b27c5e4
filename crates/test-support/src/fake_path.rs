//! A path queue a test scripts: it holds every attempt it is given and
//! answers them as its fields say, on the test's clock.

use mpio_core::io::PathOutcome;
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};

/// A fake path for the core's [`mpio_core::queue::Queue`].
///
/// At each poll it answers, with `outcome`, every attempt held at least
/// `delay_ns` (all of them at delay 0), unless it `hangs`: then it answers
/// nothing, except that a `release` set by the test answers everything
/// held, once, with that outcome. It never takes an attempt back on
/// `abort`, and gives one up on `abandon` only if `gives_up`.
#[derive(Debug)]
pub struct FakePath {
    /// The attempts held, with the time each was submitted, oldest first.
    pub held: Vec<(u64, PathIo)>,
    /// How long an attempt is held before it is answered.
    pub delay_ns: u64,
    /// What an attempt is answered with.
    pub outcome: PathOutcome,
    /// Answers nothing (a paused or hung server) until `release`.
    pub hangs: bool,
    /// While it hangs: at the next poll, answer everything held with this.
    pub release: Option<PathOutcome>,
    /// Gives a held attempt back when the queue abandons it.
    pub gives_up: bool,
}

impl Default for FakePath {
    /// Answers every attempt at the next poll, successfully.
    fn default() -> Self {
        FakePath {
            held: Vec::new(),
            delay_ns: 0,
            outcome: PathOutcome::Ok,
            hangs: false,
            release: None,
            gives_up: false,
        }
    }
}

impl FakePath {
    /// A path that holds every attempt and answers none (until released).
    pub fn hung() -> Self {
        FakePath {
            hangs: true,
            ..FakePath::default()
        }
    }
}

impl PathQueue for FakePath {
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        self.held.push((now_ns, io));
    }

    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        let (outcome, delay_ns) = match (self.hangs, self.release.take()) {
            (false, _) => (self.outcome, self.delay_ns),
            (true, Some(outcome)) => (outcome, 0),
            (true, None) => return,
        };
        let mut index = 0;
        while index < self.held.len() {
            if self.held[index].0.saturating_add(delay_ns) <= now_ns {
                let (_, io) = self.held.remove(index);
                completions.push(PathCompletion {
                    tag: io.tag,
                    buf: io.buf,
                    outcome,
                });
            } else {
                index += 1;
            }
        }
    }

    fn abort(&mut self, _tag: u64) -> Option<PathIo> {
        None
    }

    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        if !self.gives_up {
            return None;
        }
        let at = self.held.iter().position(|(_, io)| io.tag == tag)?;
        Some(self.held.remove(at).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poll_outcomes;
    use mpio_core::io::{Buffer, PathError};

    fn io(tag: u64) -> PathIo {
        PathIo::read(tag, 0, Buffer::zeroed(512))
    }

    #[test]
    fn answers_after_its_delay_in_order() {
        let mut path = FakePath {
            delay_ns: 10,
            ..FakePath::default()
        };
        path.submit(io(1), 0);
        path.submit(io(2), 5);
        assert_eq!(poll_outcomes(&mut path, 0), []);
        assert_eq!(poll_outcomes(&mut path, 9), []);
        assert_eq!(poll_outcomes(&mut path, 10), [(1, PathOutcome::Ok)]);
        assert_eq!(poll_outcomes(&mut path, 15), [(2, PathOutcome::Ok)]);
    }

    #[test]
    fn a_hung_path_answers_only_when_released_and_gives_up_if_told() {
        let mut path = FakePath::hung();
        path.submit(io(1), 0);
        path.submit(io(2), 0);
        assert_eq!(poll_outcomes(&mut path, 1_000), []);
        assert!(path.abandon(1).is_none(), "does not give up unless told");
        path.gives_up = true;
        assert_eq!(path.abandon(1).map(|io| io.tag), Some(1));
        assert!(path.abort(2).is_none());
        let lost = PathOutcome::Path(PathError::ConnectionLost);
        path.release = Some(lost);
        assert_eq!(poll_outcomes(&mut path, 1_000), [(2, lost)]);
        path.submit(io(3), 0);
        assert_eq!(poll_outcomes(&mut path, 1_000), [], "released once");
    }
}
