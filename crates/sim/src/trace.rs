//! The run's trace: every I/O, attempt, fault and message in the order the
//! simulator saw them, stamped with simulated time.
//!
//! A run keeps a hash of its whole trace (so two runs of one seed can be
//! compared cheaply, and must be equal) and its last [`TAIL_EVENTS`]
//! events (printed when an invariant breaks); a replay keeps every event.

use crate::owner::Owner;
use mpio_core::io::{IoError, Op, PathOutcome};
use std::collections::VecDeque;
use std::fmt;
use std::hash::{Hash, Hasher};

/// How many of the last events a failure report shows.
pub(crate) const TAIL_EVENTS: usize = 30;

/// One thing that happened in a run.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum TraceEvent {
    /// A run phase began (`faults`, `liveness`, `verify path 3`, ...).
    Phase(String),
    /// The simulator submitted I/O `io` on queue `queue`.
    Submit {
        /// Queue (simulated I/O thread).
        queue: usize,
        /// I/O id (the caller's `user_data`).
        io: u64,
        /// Operation.
        op: Op,
        /// First block.
        block: u64,
        /// Blocks covered.
        blocks: u64,
    },
    /// I/O `io` completed to the caller.
    Complete {
        /// Queue.
        queue: usize,
        /// I/O id.
        io: u64,
        /// `ok` or the error's name.
        result: &'static str,
    },
    /// A queue sent one attempt down a path.
    Attempt {
        /// Queue.
        queue: usize,
        /// Path index.
        path: usize,
        /// The attempt's tag.
        tag: u64,
        /// False if the transport will refuse to abort it.
        abortable: bool,
    },
    /// A path ended an attempt.
    AttemptEnd {
        /// Queue.
        queue: usize,
        /// Path index.
        path: usize,
        /// The attempt's tag.
        tag: u64,
        /// `ok`, or the path or target error's name.
        outcome: &'static str,
        /// True if the attempt changed the disk.
        landed: bool,
    },
    /// A queue asked a path to take an attempt back.
    Abort {
        /// Queue.
        queue: usize,
        /// Path index.
        path: usize,
        /// The attempt's tag.
        tag: u64,
        /// True if the transport gave it back (it will never land).
        given_back: bool,
    },
    /// A queue abandoned an attempt past its fence timeout (a write's
    /// copy stays behind as a ghost that may still land).
    Abandon {
        /// Queue.
        queue: usize,
        /// Path index.
        path: usize,
        /// The attempt's tag.
        tag: u64,
    },
    /// A ghost write (an abandoned attempt's held copy) landed.
    GhostLanded {
        /// Path index.
        path: usize,
        /// The abandoned attempt's tag.
        tag: u64,
    },
    /// A path's ground truth changed (`healthy`, `error`, `hang`, ...).
    PathMode {
        /// Path index.
        path: usize,
        /// The new mode.
        mode: String,
    },
    /// The storage began refusing a block range.
    TargetFault {
        /// First block.
        block: u64,
        /// Blocks covered.
        blocks: u64,
        /// The error's name.
        error: &'static str,
        /// How long, in ns.
        duration_ns: u64,
    },
    /// A control message, in dm's words.
    Message(String),
    /// A path's ALUA/ANA access state changed.
    Access {
        /// Path index.
        path: usize,
        /// The new state.
        state: &'static str,
    },
    /// The path checker reinstated a path whose probe succeeded.
    Reinstate {
        /// Path index.
        path: usize,
    },
    /// The map failed a path (seen through its fail count).
    PathFailed {
        /// Path index.
        path: usize,
    },
}

/// The name of an I/O result, for the trace.
pub(crate) fn result_word(result: &Result<(), IoError>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(IoError::Target(_)) => "target-error",
        Err(IoError::NoPath) => "no-path",
        Err(IoError::NoPathTimeout) => "no-path-timeout",
        Err(IoError::RetryLimit) => "retry-limit",
        Err(IoError::Unfenced) => "unfenced",
        Err(IoError::Invalid(_)) => "invalid",
    }
}

/// The name of an attempt's outcome, for the trace.
pub(crate) fn outcome_word(outcome: PathOutcome) -> &'static str {
    use mpio_core::io::{PathError, TargetError};
    match outcome {
        PathOutcome::Ok => "ok",
        PathOutcome::Path(PathError::Transport) => "transport-error",
        PathOutcome::Path(PathError::Timeout) => "timeout",
        PathOutcome::Path(PathError::ConnectionLost) => "connection-lost",
        PathOutcome::Path(PathError::Unknown) => "unknown-error",
        PathOutcome::Target(TargetError::OutOfRange) => "out-of-range",
        PathOutcome::Target(TargetError::NoSpace) => "no-space",
        PathOutcome::Target(TargetError::Medium) => "medium-error",
        PathOutcome::Target(TargetError::Protection) => "protection-error",
        PathOutcome::Target(TargetError::NotSupported) => "not-supported",
        PathOutcome::Target(TargetError::Invalid) => "invalid",
        PathOutcome::Target(TargetError::ReservationConflict) => "reservation-conflict",
        PathOutcome::Busy => "busy",
    }
}

/// A recorded event with its simulated time.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Stamped {
    /// Simulated time, ns.
    pub now_ns: u64,
    /// What happened.
    pub event: TraceEvent,
}

impl fmt::Display for Stamped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let micros = self.now_ns / 1_000;
        let fraction = self.now_ns % 1_000;
        write!(f, "{micros:>8}.{fraction:03}us  ")?;
        match &self.event {
            TraceEvent::Phase(name) => write!(f, "== {name}"),
            TraceEvent::Submit {
                queue,
                io,
                op,
                block,
                blocks,
            } => write!(f, "q{queue} submit io{io} {op:?} blocks {block}+{blocks}"),
            TraceEvent::Complete { queue, io, result } => {
                write!(f, "q{queue} complete io{io} {result}")
            }
            TraceEvent::Attempt {
                queue,
                path,
                tag,
                abortable,
            } => {
                let stuck = if *abortable { "" } else { " (cannot abort)" };
                write!(f, "{} p{path} attempt {tag:#x}{stuck}", Owner(*queue))
            }
            TraceEvent::AttemptEnd {
                queue,
                path,
                tag,
                outcome,
                landed,
            } => {
                let landed = if *landed { " landed" } else { "" };
                write!(
                    f,
                    "{} p{path} attempt {tag:#x} ends {outcome}{landed}",
                    Owner(*queue)
                )
            }
            TraceEvent::Abort {
                queue,
                path,
                tag,
                given_back,
            } => {
                let answer = if *given_back { "given back" } else { "refused" };
                write!(f, "{} p{path} abort {tag:#x}: {answer}", Owner(*queue))
            }
            TraceEvent::Abandon { queue, path, tag } => {
                write!(f, "q{queue} p{path} abandon {tag:#x}")
            }
            TraceEvent::GhostLanded { path, tag } => {
                write!(f, "p{path} ghost of {tag:#x} landed")
            }
            TraceEvent::PathMode { path, mode } => write!(f, "p{path} becomes {mode}"),
            TraceEvent::TargetFault {
                block,
                blocks,
                error,
                duration_ns,
            } => write!(
                f,
                "target fails blocks {block}+{blocks} with {error} for {duration_ns}ns"
            ),
            TraceEvent::Message(text) => write!(f, "message {text}"),
            TraceEvent::Access { path, state } => write!(f, "p{path} access {state}"),
            TraceEvent::Reinstate { path } => write!(f, "checker reinstates p{path}"),
            TraceEvent::PathFailed { path } => write!(f, "map fails p{path}"),
        }
    }
}

/// A 64-bit FNV-1a-style hasher fed whole words: deterministic across
/// runs, machines and Rust versions, unlike `DefaultHasher`'s keys.
#[derive(Debug)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(0x0000_0100_0000_01B3);
        self.0 ^= self.0 >> 29;
    }
}

/// The trace of one run: its hash, its tail and, on replay, all of it.
#[derive(Debug)]
pub struct Trace {
    hasher: WordHasher,
    count: u64,
    tail: VecDeque<Stamped>,
    full: Option<Vec<Stamped>>,
}

impl Trace {
    /// An empty trace; `keep_all` keeps every event (for replay).
    pub fn new(keep_all: bool) -> Self {
        Trace {
            hasher: WordHasher(0xCBF2_9CE4_8422_2325),
            count: 0,
            tail: VecDeque::with_capacity(TAIL_EVENTS + 1),
            full: keep_all.then(Vec::new),
        }
    }

    /// Records `event` at `now_ns`.
    pub fn record(&mut self, now_ns: u64, event: TraceEvent) {
        let stamped = Stamped { now_ns, event };
        stamped.hash(&mut self.hasher);
        self.count += 1;
        if let Some(full) = &mut self.full {
            full.push(stamped.clone());
        }
        if self.tail.len() == TAIL_EVENTS {
            self.tail.pop_front();
        }
        self.tail.push_back(stamped);
    }

    /// Hash of every event so far.
    pub fn hash(&self) -> u64 {
        self.hasher.finish()
    }

    /// Events recorded so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The last `TAIL_EVENTS` events, printed.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().map(ToString::to_string).collect()
    }

    /// Every event, printed, if the trace keeps them all.
    pub fn full(&self) -> Option<Vec<String>> {
        self.full
            .as_ref()
            .map(|events| events.iter().map(ToString::to_string).collect())
    }
}
