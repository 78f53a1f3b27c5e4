//! A loop one engine makes and another engine's thread runs beside its
//! own work ([`HostedLoop`]), so that a daemon with both kinds of export
//! runs one I/O thread per CPU.
//!
//! # The contract
//! The host owns the loop once it is handed over, on one thread running
//! on the loop's [`HostedLoop::cpu`]. It watches the loop's descriptor
//! ([`AsRawFd`], readable while something waits for the loop) beside its
//! own work, and never sleeps longer than the loop's
//! [`HostedLoop::wait_hint`]. It takes a turn ([`HostedLoop::step`]),
//! without waiting (its own wait was the loop's), whenever the descriptor
//! was readable or the hint has passed. The maker tells the loop to quit
//! through the loop's own channel; the next turn then says
//! [`Step::Ends`], and the host calls [`HostedLoop::quit`] (as it does,
//! at any time, when the host itself ends) and takes no more turns.

use std::os::fd::AsRawFd;
use std::time::Duration;

/// Whether a loop goes on after a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// It has more turns to take.
    Goes,
    /// It was told to quit (or cannot go on): call [`HostedLoop::quit`].
    Ends,
}

/// A loop a host thread runs. See the module docs for the contract.
pub trait HostedLoop: AsRawFd + Send + std::fmt::Debug {
    /// The CPU the loop was made for (its queues are told it): its host
    /// runs there.
    fn cpu(&self) -> u32;

    /// How long the loop's next turn may wait for its descriptor: `None`
    /// for as long as it takes, zero while it has work to poll.
    fn wait_hint(&mut self) -> Option<Duration>;

    /// One turn: waits at most `timeout` (`None`: for as long as it
    /// takes) for the loop's events, then does what they and its queues
    /// ask. Says whether the loop goes on.
    fn step(&mut self, timeout: Option<Duration>) -> Step;

    /// Ends the loop: lets go of what it serves, waiting a bounded time
    /// for the work it started. Returns once it is done.
    fn quit(self: Box<Self>);
}
